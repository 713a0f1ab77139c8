"""``read_topic``: a topic kept as an Iceberg table (``krait.iceberg.mode``) read as one
DataFrame: the table's Parquet files through Spark's native Parquet reader for everything up
to the table's per-partition offsets, plus the log's tail beyond them through
``kafka-segments`` (read_committed, as the table holds committed records only). The offsets
come from the table's current snapshot, which names exactly what its files hold, so the two
parts neither overlap nor leave a gap. Only files are read: no broker is needed.

    from spark_jobs.tables import read_topic
    df = read_topic(spark, "orders", log_dirs="/var/lib/krait")

The columns are Spark's Kafka source's: key, value, topic, partition, offset, timestamp,
timestampType (+ headers with ``include_headers``). A topic without a table reads whole
from the log. The catalog and warehouse default to the broker's embedded ones under the
first log dir (``krait-iceberg/catalog.db``, ``krait-iceberg/warehouse``); give
``catalog_uri`` / ``warehouse`` for a shared catalog.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .logdir import list_partitions

#: the broker's embedded catalog, relative to its first log dir (tables.catalog's layout)
EMBEDDED_DIR = "krait-iceberg"
OFFSET_PREFIX = "krait.offset."


def _catalog(first_log_dir: str, catalog_uri: str | None, warehouse: str | None) -> Any:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    base = os.path.join(first_log_dir, EMBEDDED_DIR)
    uri = catalog_uri or "sqlite:///" + os.path.join(base, "catalog.db")
    wh = warehouse or "file://" + os.path.abspath(os.path.join(base, "warehouse"))
    if uri.startswith(("http://", "https://")):
        return RestCatalog("krait", uri=uri, warehouse=wh)
    return SqlCatalog("krait", uri=uri, warehouse=wh)


def table_offsets(table: Any) -> dict[int, int]:
    """partition -> the next offset the table holds (its current snapshot's summary, or the
    nearest ancestor's that carries the offsets)."""
    snap = table.current_snapshot()
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        offsets = {int(k[len(OFFSET_PREFIX):]): int(v) for k, v in props.items() if k.startswith(OFFSET_PREFIX)}
        if offsets:
            return offsets
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {}


def read_topic(spark: Any, topic: str, log_dirs: str | list[str], catalog_uri: str | None = None,
               warehouse: str | None = None, namespace: str = "krait", include_headers: bool = False) -> Any:
    """The topic's records: the table's files up to its offsets, the log beyond them."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyspark.sql import functions as F

    dirs = [d.strip() for d in (log_dirs.split(",") if isinstance(log_dirs, str) else log_dirs) if d.strip()]
    partitions = sorted({p.partition for p in list_partitions(dirs) if p.topic == topic})
    offsets: dict[int, int] = {}
    files: list[str] = []
    try:
        table = _catalog(dirs[0], catalog_uri, warehouse).load_table((namespace, topic.replace(".", "_")))
        offsets = table_offsets(table)
        files = [task.file.file_path for task in table.scan().plan_files()] if offsets else []
    except NoSuchTableError:
        pass
    tail = (spark.read.format("kafka-segments").option("log.dirs", ",".join(dirs)).option("subscribe", topic)
            .option("isolation.level", "read_committed")
            .option("startingOffsets", json.dumps({topic: {str(p): offsets.get(p, -2) for p in partitions}})))
    if include_headers:
        tail = tail.option("includeHeaders", "true")
    tail_df = tail.load()
    if not files:
        return tail_df
    columns = [F.col("key"), F.col("value"), F.lit(topic).alias("topic"), F.col("partition"), F.col("offset"),
               F.col("timestamp"), F.col("timestamp_type").alias("timestampType")]
    if include_headers:
        columns.append(F.col("headers"))
    return spark.read.parquet(*files).select(*columns).unionByName(tail_df)
