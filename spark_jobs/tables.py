"""``read_topic``: a topic kept as an Iceberg table (``krait.iceberg.mode``) read as one
DataFrame: the table's Parquet files through Spark's native Parquet reader for everything up
to the table's per-partition offsets, plus the log's tail beyond them (read_committed, as
the table holds committed records only; decoded on the driver when small, else through
``kafka-segments``). The offsets
come from the table's current snapshot, which names exactly what its files hold, so the two
parts neither overlap nor leave a gap. Only files are read: no broker is needed.

    from spark_jobs.tables import read_topic
    df = read_topic(spark, "orders", log_dirs="/var/lib/krait")

The columns are Spark's Kafka source's: key, value, topic, partition, offset, timestamp,
timestampType (+ headers with ``include_headers``). A topic without a table reads whole
from the log. The catalog and warehouse default to the broker's embedded ones under the
first log dir (``krait-iceberg/catalog.db``, ``krait-iceberg/warehouse``); give
``catalog_uri`` / ``warehouse`` for a shared catalog.

The DataFrame is the topic as of the call: the table's snapshot then, and the log up to
each partition's end then (its high watermark; the last stable offset, read_committed), so
every action on it sees the same rows.

What makes it cost about what plain Parquet costs (bench/spark_read_topic_bench.py):

- **an empty tail is not read at all.** Whether a partition has records beyond the table
  is decided from the files: its log end (the last segment's ``.index`` and the few
  batches after its last entry: :meth:`spark_jobs.logdir.PartitionLog.log_end`) against
  the table's offset. Only partitions with a tail go to ``kafka-segments``, whose planning
  and reading run in Python workers (a worker round trip per query; seconds for the first
  query of a session, which starts the workers);
- **the table's file list is read without pyiceberg on the common path**: the embedded
  SQLite catalog is read with ``sqlite3`` (one row: the metadata file), the metadata JSON
  with ``json`` and the manifest list and manifests with ``fastavro``, and the result is
  kept per metadata file (immutable in Iceberg), so a query on an unchanged table reads
  one SQLite row. pyiceberg (0.5-0.9 s of imports, a SQLAlchemy engine) is the path for other
  catalogs, remote warehouses and tables with delete files;
- **the Parquet read is planned from that list**: the schema is given (no footer read to
  infer it), and the driver lists the files itself instead of starting a Spark job to
  list them (Spark does that above 32 paths:
  ``spark.sql.sources.parallelPartitionDiscovery.threshold``);
- **a small tail** (up to ``driver_tail_bytes`` of log, 64 MiB by default: seconds or
  minutes of a busy topic, which is what a table kept within a commit interval leaves)
  is decoded on the driver, with kafka-segments' own planning and decoding, into a
  DataFrame of Arrow batches: no Python worker at query time either. A larger tail, or a topic without a
  table, is read by ``kafka-segments`` in the executors;
- the table's columns are renamed and the topic added as a literal, no casts: Spark prunes
  the Parquet columns a query does not use.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from .logdir import list_partitions

__all__ = ["DRIVER_TAIL_BYTES", "EMBEDDED_DIR", "OFFSET_PREFIX", "TableSnapshot", "load_snapshot", "read_topic", "spark_type",
           "table_offsets"]

#: the broker's embedded catalog, relative to its first log dir (tables.catalog's layout)
EMBEDDED_DIR = "krait-iceberg"
OFFSET_PREFIX = "krait.offset."
#: pyiceberg's SQL catalog name for Krait's catalogs (tables.catalog.CATALOG_NAME)
CATALOG_NAME = "krait"
#: Spark lists up to this many paths on the driver; above, it starts a Spark job to list them
_LIST_ON_DRIVER_UP_TO = 100_000
#: read_topic's default driver_tail_bytes: a tail this small is decoded on the driver
DRIVER_TAIL_BYTES = 64 << 20


@dataclass(frozen=True)
class TableSnapshot:
    """What a read needs of a table's current snapshot."""

    metadata_location: str
    snapshot_id: int | None
    #: partition -> the next offset the table holds (Krait's ``krait.offset.<p>`` summary properties)
    offsets: dict[int, int]
    #: the data files (URIs or paths as the manifests name them)
    files: tuple[str, ...]
    #: the Iceberg schema of the snapshot, as the metadata JSON spells it
    schema: dict[str, Any]
    #: the table's properties (``krait.topic``, and the mode's once decoded modes name it)
    properties: dict[str, str] = field(default_factory=dict)


# --- the catalog -------------------------------------------------------------------------------


def _sqlite_path(first_log_dir: str, catalog_uri: str | None) -> str | None:
    """The SQLite file of the catalog, or None when the catalog is not a local SQLite file."""
    if catalog_uri is None:
        return os.path.join(first_log_dir, EMBEDDED_DIR, "catalog.db")
    if catalog_uri.startswith("sqlite:///"):
        return catalog_uri[len("sqlite:///"):]  # sqlite:////abs/path or sqlite:///relative/path
    return None


def _sqlite_metadata_location(db: str, namespace: str, name: str) -> str | None:
    """The metadata file of a table of pyiceberg's SQL catalog in SQLite, read-only (a
    reader must not create a catalog in somebody's log dir, nor lock it for the broker)."""
    if not os.path.exists(db):
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return None
    try:
        row = con.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
            "AND table_name = ? AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')",
            (CATALOG_NAME, namespace, name)).fetchone()
    except sqlite3.OperationalError:  # no catalog tables yet
        return None
    finally:
        con.close()
    return row[0] if row and row[0] else None


#: tables.catalog's mapping, repeated: spark_jobs may not import tables/ (tests/test_architecture.py)
_S3_ENV = {"s3.endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
           "s3.region": ("AWS_REGION", "AWS_DEFAULT_REGION")}


def _s3_properties_from_env() -> dict[str, str]:
    """``s3.endpoint`` and ``s3.region`` from the AWS environment variables that are set
    (pyiceberg's FileIO does not read them itself)."""
    out = {}
    for prop, names in _S3_ENV.items():
        value = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if value is not None:
            out[prop] = value
    return out


def _pyiceberg_table(first_log_dir: str, catalog_uri: str | None, warehouse: str | None, namespace: str,
                     name: str) -> Any:
    """The table through pyiceberg's catalog (None when there is no such table)."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    base = os.path.join(first_log_dir, EMBEDDED_DIR)
    uri = catalog_uri or "sqlite:///" + os.path.join(base, "catalog.db")
    wh = warehouse or "file://" + os.path.abspath(os.path.join(base, "warehouse"))
    # an s3:// warehouse: the endpoint and region from the environment, as the broker takes them
    props = _s3_properties_from_env()
    catalog = (RestCatalog(CATALOG_NAME, uri=uri, warehouse=wh, **props) if uri.startswith(("http://", "https://"))
               else SqlCatalog(CATALOG_NAME, uri=uri, warehouse=wh, **props))
    try:
        return catalog.load_table((namespace, name))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


# --- the snapshot, from the metadata files ----------------------------------------------------


class _NeedsPyIceberg(Exception):
    """The table uses something the direct reader leaves to pyiceberg (delete files, a
    remote warehouse)."""


def _local_path(uri: str) -> str:
    """A local filesystem path for a ``file:`` URI or a plain path; _NeedsPyIceberg else."""
    if uri.startswith("/"):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    raise _NeedsPyIceberg(uri)


def _offsets(snapshots: dict[int, dict], snapshot_id: int | None) -> dict[int, int]:
    """The offsets of the snapshot, or of its nearest ancestor that has them (a compaction's
    snapshot may not carry them: tables.writer)."""
    while snapshot_id is not None and snapshot_id in snapshots:
        snap = snapshots[snapshot_id]
        props = snap.get("summary") or {}
        found = {int(k[len(OFFSET_PREFIX):]): int(v) for k, v in props.items() if k.startswith(OFFSET_PREFIX)}
        if found:
            return found
        snapshot_id = snap.get("parent-snapshot-id")
    return {}


def _avro_records(uri: str) -> list[dict]:
    import fastavro

    with open(_local_path(uri), "rb") as f:
        return list(fastavro.reader(f))


def _snapshot_from_metadata(location: str) -> TableSnapshot:
    """The current snapshot of the table whose metadata file is ``location``, read with json
    and fastavro (Iceberg spec v1/v2: manifest list -> manifests -> live data files)."""
    path = _local_path(location)
    opener = gzip.open if path.endswith(".gz.metadata.json") or path.endswith(".metadata.json.gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        meta = json.load(f)
    snap_id = meta.get("current-snapshot-id")
    if snap_id is not None and snap_id < 0:  # v1 spells "no snapshot" -1
        snap_id = None
    snapshots = {s["snapshot-id"]: s for s in meta.get("snapshots") or []}
    schemas = {s.get("schema-id", 0): s for s in meta.get("schemas") or []} or {0: meta.get("schema", {})}
    schema_id = meta.get("current-schema-id", 0)
    files: list[str] = []
    if snap_id is not None:
        snap = snapshots[snap_id]
        manifests = ([{"manifest_path": p} for p in snap["manifests"]] if "manifest-list" not in snap
                     else _avro_records(snap["manifest-list"]))
        for m in manifests:
            if m.get("content", 0) != 0:
                raise _NeedsPyIceberg("delete manifests")
            for entry in _avro_records(m["manifest_path"]):
                if entry["status"] == 2:  # DELETED from the table in this snapshot
                    continue
                df = entry["data_file"]
                if df.get("content", 0) != 0:
                    raise _NeedsPyIceberg("delete files")
                if str(df.get("file_format", "PARQUET")).upper() != "PARQUET":
                    raise _NeedsPyIceberg(f"{df['file_format']} data files")
                files.append(df["file_path"])
        schema_id = snap.get("schema-id", schema_id)
    return TableSnapshot(location, snap_id, _offsets(snapshots, snap_id), tuple(files),
                         schemas.get(schema_id) or schemas[max(schemas)], dict(meta.get("properties") or {}))


def _snapshot_from_pyiceberg(table: Any) -> TableSnapshot:
    snap = table.current_snapshot()
    files = tuple(t.file.file_path for t in table.scan().plan_files()) if snap is not None else ()
    return TableSnapshot(table.metadata_location, snap.snapshot_id if snap is not None else None,
                         table_offsets(table), files, json.loads(table.schema().model_dump_json(by_alias=True)),
                         dict(table.properties))


def table_offsets(table: Any) -> dict[int, int]:
    """partition -> the next offset the (pyiceberg) table holds (its current snapshot's
    summary, or the nearest ancestor's that carries the offsets)."""
    snap = table.current_snapshot()
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        offsets = {int(k[len(OFFSET_PREFIX):]): int(v) for k, v in props.items() if k.startswith(OFFSET_PREFIX)}
        if offsets:
            return offsets
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {}


_CACHE: dict[str, TableSnapshot] = {}
_CACHE_LOCK = threading.Lock()


def load_snapshot(first_log_dir: str, topic: str, *, catalog_uri: str | None = None, warehouse: str | None = None,
                  namespace: str = "krait") -> TableSnapshot | None:
    """The current snapshot of ``topic``'s table, or None when the topic has no table.

    A metadata file never changes once written (a commit writes a new one), so what was
    read from one is kept: a query on an unchanged table costs one catalog lookup."""
    name = topic.replace(".", "_")  # tables.catalog.table_name
    db = _sqlite_path(first_log_dir, catalog_uri)
    table = None
    if db is not None:
        location = _sqlite_metadata_location(db, namespace, name)
    else:
        table = _pyiceberg_table(first_log_dir, catalog_uri, warehouse, namespace, name)
        location = table.metadata_location if table is not None else None
    if location is None:
        return None
    with _CACHE_LOCK:
        cached = _CACHE.get(location)
    if cached is not None:
        return cached
    try:
        snap = _snapshot_from_metadata(location)
    except _NeedsPyIceberg:
        if table is None:
            table = _pyiceberg_table(first_log_dir, catalog_uri, warehouse, namespace, name)
            if table is None:
                return None
        snap = _snapshot_from_pyiceberg(table)
    with _CACHE_LOCK:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[location] = snap
    return snap


# --- Spark ----------------------------------------------------------------------------------------


def spark_type(t: Any) -> Any:
    """The Spark SQL type of an Iceberg type as the metadata JSON spells it (what Spark's
    Parquet reader gives for the column Iceberg wrote)."""
    from pyspark.sql import types as T

    if isinstance(t, dict):
        kind = t["type"]
        if kind == "struct":
            return T.StructType([T.StructField(f["name"], spark_type(f["type"]), not f.get("required", False))
                                 for f in t["fields"]])
        if kind == "list":
            return T.ArrayType(spark_type(t["element"]), not t.get("element-required", False))
        if kind == "map":
            return T.MapType(spark_type(t["key"]), spark_type(t["value"]), not t.get("value-required", False))
        raise ValueError(f"unknown Iceberg type {t!r}")
    simple = {"boolean": T.BooleanType(), "int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(),
              "double": T.DoubleType(), "date": T.DateType(), "string": T.StringType(), "uuid": T.BinaryType(),
              "binary": T.BinaryType(), "timestamptz": T.TimestampType(), "timestamp": T.TimestampNTZType(),
              "time": T.LongType()}
    if t in simple:
        return simple[t]
    if t.startswith("decimal("):
        p, s = (int(x) for x in t[len("decimal("):-1].split(","))
        return T.DecimalType(p, s)
    if t.startswith("fixed["):
        return T.BinaryType()
    raise ValueError(f"unknown Iceberg type {t!r}")


def _read_files(spark: Any, snap: TableSnapshot) -> Any:
    """The snapshot's data files as one Parquet DataFrame, with the table's schema."""
    schema = spark_type(snap.schema)
    files = list(snap.files)
    if not all(f.startswith(("/", "file:")) for f in files):
        try:
            return spark.read.schema(schema).parquet(*files)
        except Exception as e:
            # Hadoop's UnsupportedFileSystemException, deep in a JVM trace: name the fix instead
            if "No FileSystem for scheme" not in str(e):
                raise
            remote = next(f for f in files if not f.startswith(("/", "file:")))
            raise ValueError(
                f"the table's files are not local ({remote}) and this Spark has no Hadoop filesystem for "
                f"{remote.split(':', 1)[0]}://; for s3:// put Hadoop's S3A connector on its classpath (hadoop-aws "
                "of Spark's Hadoop version and its AWS SDK bundle) and set spark.hadoop.fs.s3.impl="
                "org.apache.hadoop.fs.s3a.S3AFileSystem, or read the table with pyiceberg "
                "(read_topic is tested on local warehouses only)") from e
    # stat the files on the driver: a listing job costs a Spark job per read
    with _session_conf(spark, "spark.sql.sources.parallelPartitionDiscovery.threshold",
                       str(max(len(files), _LIST_ON_DRIVER_UP_TO))):
        return spark.read.schema(schema).parquet(*files)


@contextmanager
def _session_conf(spark: Any, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` in the session while the block builds a DataFrame (confs
    these readers read when the DataFrame is made, not when a query runs)."""
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


#: the ``key_value`` layout's columns (tables.layout); any other column of a table is a field
#: of the decoded value (the decoded modes, tables.decoded)
_LAYOUT_COLUMNS = ("partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")


def decoded_columns(snap: TableSnapshot) -> list[str]:
    """The decoded value's columns of a table written in a decoded mode (empty for
    ``key_value``), in the table's order."""
    return [f["name"] for f in snap.schema.get("fields", []) if f["name"] not in _LAYOUT_COLUMNS]


def _has_value(snap: TableSnapshot) -> bool:
    return any(f["name"] == "value" for f in snap.schema.get("fields", []))


def _table_columns(snap: TableSnapshot, topic: str, include_headers: bool) -> list[Any]:
    """The table's columns as the Kafka source's, then a decoded table's value columns.
    Renames and a literal only: Spark then reads just the Parquet columns a query uses. A
    table made in a decoded mode has no raw ``value`` column: none is output."""
    from pyspark.sql import functions as F

    cols = [F.col("key"), *([F.col("value")] if _has_value(snap) else []), F.lit(topic).alias("topic"),
            F.col("partition"), F.col("offset"), F.col("timestamp"), F.col("timestamp_type").alias("timestampType")]
    if include_headers:
        cols.append(F.col("headers"))
    return cols + [F.col(c) for c in decoded_columns(snap)]


def _decoded_tail(spark: Any, dirs: list[str], topic: str, ranges: dict[int, tuple[int, int]], snap: TableSnapshot,
                  include_headers: bool, registry_url: str, value_format: str | None) -> Any:
    """The log's tail of a decoded table, decoded as the table was: ``kafka-segments``'
    typed read (Confluent's wire format, the schemas from the registry) with the decoded
    fields as the table's columns, cast to the table's types (a field the tail lacks is
    null); records that do not decode are left out, as the table sends them to its DLQ."""
    from pyspark.sql import functions as F

    from .registry_client import RegistryClient

    if value_format is None:
        latest = RegistryClient(registry_url).version(f"{topic}-value")
        value_format = {"AVRO": "avro", "JSON": "json"}.get(latest.schema_type)
        if value_format is None:
            raise ValueError(f"the tail of {topic}'s table holds {latest.schema_type} values, which Spark does not "
                             "decode: read_topic(..., tail=False) reads the table alone")
    df = _log_read(spark, dirs, topic, ranges, include_headers,
                   {"valueFormat": value_format, "schema.registry.url": registry_url})
    types = {f["name"]: spark_type(f["type"]) for f in snap.schema.get("fields", [])}
    fields = set(df.schema["value"].dataType.fieldNames())
    cols = [F.col("key"), *([F.lit(None).cast("binary").alias("value")] if _has_value(snap) else []),
            F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp"), F.col("timestampType")]
    if include_headers:
        cols.append(F.col("headers"))
    cols += [(F.col("value").getField(c) if c in fields else F.lit(None)).cast(types[c]).alias(c)
             for c in decoded_columns(snap)]
    return df.where(F.col("valueError").isNull()).select(*cols)


def _log_read(spark: Any, dirs: list[str], topic: str, ranges: dict[int, tuple[int, int]], include_headers: bool,
              options: dict[str, str] | None) -> Any:
    """``kafka-segments`` over the given partitions' offset ranges [start, end) (start -2:
    the earliest), read_committed."""
    r = spark.read.format("kafka-segments")
    for k, v in _log_options(dirs, topic, ranges).items():
        r = r.option(k, v)
    if include_headers:
        r = r.option("includeHeaders", "true")
    for k, v in (options or {}).items():
        r = r.option(k, v)
    return r.load()


def _log_options(dirs: list[str], topic: str, ranges: dict[int, tuple[int, int]]) -> dict[str, str]:
    # stableFrom: a table's offset was a last stable offset of its partition when it was
    # written, so no transaction open now starts below it: the LSO search starts there
    # instead of walking the partition's log from its start
    return {"log.dirs": ",".join(dirs), "assign": json.dumps({topic: sorted(ranges)}),
            "isolation.level": "read_committed",
            "startingOffsets": json.dumps({topic: {str(p): lo for p, (lo, _) in ranges.items()}}),
            "endingOffsets": json.dumps({topic: {str(p): hi for p, (_, hi) in ranges.items()}}),
            "stableFrom": json.dumps({topic: {str(p): lo for p, (lo, _) in ranges.items() if lo >= 0}})}


def _driver_tail(spark: Any, dirs: list[str], topic: str, ranges: dict[int, tuple[int, int]],
                 include_headers: bool, max_bytes: int) -> Any | None:
    """A small tail decoded here, on the driver, into a local DataFrame; None when it is
    larger than ``max_bytes`` of log (then kafka-segments reads it in the executors).

    The same planning and decoding as kafka-segments (:func:`spark_jobs.planning.plan_slices`,
    :func:`spark_jobs.logdir.read_slice`: read_committed, aborted transactions left out),
    without its Python workers: a Python data source is planned in a worker at every query
    and read in workers, which costs more than decoding a few MiB (one commit interval of
    a topic) once, and the first query of a session would start them."""
    import pyarrow as pa

    from .logdir import read_slice
    from .planning import plan_slices
    from .schema import SCHEMA, SCHEMA_WITH_HEADERS, arrow_schema

    slices = plan_slices(_log_options(dirs, topic, ranges))
    if sum(s.size_hint for s in slices) > max_bytes:
        return None
    schema = SCHEMA_WITH_HEADERS if include_headers else SCHEMA
    arrow = arrow_schema(schema)
    batches = [b for s in slices for b in read_slice(s, arrow)]
    # not a LocalRelation (Spark's choice below 48 MiB): its rows would be serialized into
    # the tasks of every query; Arrow batches in an RDD cost a third of that per query
    with _session_conf(spark, "spark.sql.execution.arrow.localRelationThreshold", "0"):
        df = spark.createDataFrame(pa.Table.from_batches(batches, schema=arrow))
    # one RDD partition per Arrow batch of 10,000 rows: a task each, for a few MiB; the
    # default parallelism of tasks is enough
    return df.coalesce(spark.sparkContext.defaultParallelism)


def _empty(spark: Any, include_headers: bool) -> Any:
    from .schema import SCHEMA, SCHEMA_WITH_HEADERS

    return spark.createDataFrame([], SCHEMA_WITH_HEADERS if include_headers else SCHEMA)


def read_topic(spark: Any, topic: str, log_dirs: str | list[str], catalog_uri: str | None = None,
               warehouse: str | None = None, namespace: str = "krait", include_headers: bool = False,
               options: dict[str, str] | None = None, driver_tail_bytes: int = DRIVER_TAIL_BYTES, *,
               schema_registry_url: str | None = None, value_format: str | None = None,
               tail: bool = True) -> Any:
    """The topic's records: the table's files up to its offsets, the log beyond them.

    ``options``: extra ``kafka-segments`` options for the log's part (``minPartitions``,
    ``readChunkBytes``, ...). ``driver_tail_bytes``: a tail of up to this many bytes of log
    after a table is decoded on the driver into a local DataFrame (0: always through
    ``kafka-segments``); a topic without a table is always read by ``kafka-segments``.

    A table written in a decoded mode (``value_schema_id_prefix``, ``value_schema_latest``)
    gives its value columns after the Kafka source's, and no raw ``value`` (unless the table
    began as ``key_value``). The tail of a ``value_schema_id_prefix`` table is decoded the
    same way from Confluent's wire format with the registry at ``schema_registry_url``
    (a ``value_schema_latest`` table's bare values are not: read it with ``tail=False``;
    ``value_format`` ``avro`` or ``json``;
    default: the type of the subject's latest schema), its undecodable records left out as
    the table sends them to its DLQ; the only part of a read that needs a running broker.
    Without a registry URL a decoded table with a tail is refused, naming the fix;
    ``tail=False`` reads what the table holds alone (at most a commit interval behind)."""
    dirs = [d.strip() for d in (log_dirs.split(",") if isinstance(log_dirs, str) else log_dirs) if d.strip()]
    plogs = [p for p in list_partitions(dirs) if p.topic == topic]
    snap = load_snapshot(dirs[0], topic, catalog_uri=catalog_uri, warehouse=warehouse, namespace=namespace)
    offsets = snap.offsets if snap is not None else {}
    # the tail: each partition's records past the table's offset, up to its end now (the
    # high watermark when the checkpoint has it; kafka-segments stops at the LSO below it)
    rest: dict[int, tuple[int, int]] = {}
    for p in plogs if tail or snap is None else ():
        end = p.end_offset()
        start = offsets.get(p.partition)
        if start is None:
            if end > p.earliest:
                rest[p.partition] = (-2, end)
        elif start < end:
            rest[p.partition] = (start, end)
    parts = []
    if snap is not None and snap.files:
        parts.append(_read_files(spark, snap).select(*_table_columns(snap, topic, include_headers)))
    if rest and snap is not None and decoded_columns(snap):
        if schema_registry_url is None:
            behind = sum(hi - max(lo, 0) for lo, hi in rest.values())
            raise ValueError(f"the table of {topic} holds decoded values and the log has up to {behind} records "
                             "past it: give schema_registry_url to decode them too, or tail=False to read the "
                             "table alone")
        parts.append(_decoded_tail(spark, dirs, topic, rest, snap, include_headers, schema_registry_url,
                                   value_format))
    elif rest:
        local = None
        if parts and driver_tail_bytes > 0 and not options:
            local = _driver_tail(spark, dirs, topic, rest, include_headers, driver_tail_bytes)
        parts.append(local if local is not None else _log_read(spark, dirs, topic, rest, include_headers, options))
    if not parts:
        return _empty(spark, include_headers)
    df = parts[0]
    for other in parts[1:]:
        df = df.unionByName(other)
    return df
