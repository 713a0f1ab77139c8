"""``kafka-segments``: a PySpark data source over Krait's (Kafka's) log segment files.

    from spark_jobs.datasource import KafkaSegmentsDataSource
    spark.dataSource.register(KafkaSegmentsDataSource)
    df = (spark.read.format("kafka-segments").option("log.dirs", "/var/lib/krait")
          .option("subscribe", "orders").load())

The DataFrame has exactly the columns of Spark's Kafka source, or the subset a schema
given with ``.schema("partition int, offset long")`` names: Spark gives Python data
sources no column pruning (PythonScanBuilder only takes filters), so a narrow schema is
how a query says what it reads, and only those columns are decoded (no key, value or
headers: batch headers only, nothing decompressed). Planning (driver side)
resolves offset and time ranges through ``.index`` / ``.timeindex`` into slices (one per
segment overlapping the range) and packs them into input partitions by size, as Spark's
file sources pack files (:mod:`spark_jobs.splits`: several small segments per task, a
segment larger than the target split cut at index entries); executors decode whole batches with numba kernels (:mod:`spark_jobs.decode`) and yield
Arrow record batches. The log dirs must be readable at the same path by the driver and
the executors (local mode, or a shared filesystem).

Options (named like Spark's Kafka source):

``log.dirs``            comma-separated log dirs (required): one broker's, or several
                        brokers' (each partition read once, from one replica: below)
``subscribe``           comma-separated topics; ``subscribePattern`` a regex; ``assign``
                        JSON ``{"t": [0, 1]}``. None of them: every topic not starting "__".
``startingOffsets``     ``earliest`` (default), ``latest`` or JSON ``{"t": {"0": 23}}``
                        (-2 = earliest, -1 = latest)
``endingOffsets``       ``latest`` (default) or JSON (-1 = latest); exclusive
``startingTimestamp`` / ``endingTimestamp``   ms, every partition: the earliest offset
                        whose timestamp >= it (Kafka's ListOffsets); overrides the offsets.
                        ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` JSON
                        per partition. No such record: the partition's end.
``includeHeaders``      ``true`` adds ``headers array<struct<key:string,value:binary>>``
``minPartitions``       at least this many tasks (slices cut at index entries as needed)
``maxPartitionBytes`` / ``openCostInBytes`` / ``minPartitionNum``  the size of the input
                        partitions, as Spark's ``spark.sql.files.*`` confs of those names
                        (their session values when :func:`register` ran are the defaults;
                        else 128 MiB, 4 MiB, the CPU count): see :mod:`spark_jobs.splits`
``highWatermark``       ``checkpoint`` (default: stop at the high watermark in
                        replication-offset-checkpoint when it lists the partition) or
                        ``ignore`` (read up to the last whole batch)
``isolation.level``     ``read_uncommitted`` (default: every data record up to the bound
                        above) or ``read_committed``: what a read_committed consumer
                        reads, each partition up to its last stable offset and without
                        the records of aborted transactions (``kafka.isolation.level``, as
                        Spark's Kafka source spells it, works too). From the files alone:
                        see :mod:`spark_jobs.transactions`. Control batches (transaction
                        markers) are never rows.
``stableFrom``          JSON ``{"topic": {"0": 1200}}``: with read_committed, offsets below
                        which no transaction still open at the read's bound starts (an
                        earlier last stable offset, as an Iceberg table's offsets are:
                        ``read_topic`` passes them); the LSO search walks the log from
                        there instead of from the newest producer-state snapshot
``pushFilters``         ``auto`` (default), ``true``, ``false``: see below
``readChunkBytes``      bytes of .log decoded into one Arrow batch (default 4 MiB)
``valueFormat`` / ``keyFormat``  ``raw`` (default), ``avro`` or ``json``: decode the values
                        (keys) written by Confluent's serializers into a typed column, with
                        ``schema.registry.url``; see :mod:`spark_jobs.typed_values`

Several brokers' log dirs (cluster mode): partition directories are grouped by (topic,
partition) across all the dirs and each partition is read once, from one replica: the one
whose log dir's ``replication-offset-checkpoint`` gives the highest high watermark
(min(HW, its log end)), up to that HW, since records above a replica's HW are uncommitted
and may be truncated later. Ties go to the larger log end, then to the first in
``log.dirs`` order; a replica without a checkpoint entry ranks below any with one, and
when none has one, the replica with the largest log end is read to its end as for one
broker. ``highWatermark=ignore`` reads the same replica to its end. A partition found in
one dir only (one broker, one or several log dirs) is read as before. Details:
:mod:`spark_jobs.replicas`.

Filters on ``topic``, ``partition``, ``offset`` and ``timestamp`` (=, <, <=, >, >=, IN)
are pushed down when ``spark.sql.python.filterPushdown.enabled`` is true: they narrow
the topics, partitions, offset ranges (through .index) and skip batches whose
maxTimestamp is below a lower timestamp bound (through .timeindex). They are all handed
back to Spark too, so Spark re-checks each row and the result is exact whatever we skip.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from .logdir import READ_CHUNK, read_slice
from .planning import MAX_BOUND, MIN_BOUND, Hints, bool_option, plan_slices, read_committed
from .schema import SCHEMA, SCHEMA_WITH_HEADERS, arrow_schema, check_schema
from .splits import SplitConf, plan_splits
from .splits import session_options as split_session_options
from .streaming import KafkaSegmentsStreamReader
from .typed_values import TypedRead, TypedStreamReader, typed_read

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The schema's and the planner's public names are the data source's API too (the jobs,
# tests and benchmarks import them from here); they live in spark_jobs.schema and
# spark_jobs.planning, which the streaming reader shares.
__all__ = [
    "KafkaSegmentsDataSource",
    "SCHEMA",
    "SCHEMA_WITH_HEADERS",
    "WORKER_MODULES",
    "arrow_schema",
    "check_schema",
    "check_workers_python",
    "plan_slices",
    "register",
    "with_session_options",
]


def register(spark: SparkSession) -> None:
    """Register the data source and enable Python filter pushdown for this session.

    Checks first that Spark's Python workers can import what the source needs (see
    :func:`check_workers_python`)."""
    check_workers_python(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(with_session_options(spark))


def with_session_options(spark: SparkSession) -> type[KafkaSegmentsDataSource]:
    """The data source class carrying this session's ``spark.sql.files.*`` split confs as
    default options (:func:`spark_jobs.splits.session_options`).

    Spark plans a Python data source's read in a Python worker that sees none of the
    session's confs; the class is pickled to that worker, and a class made here (not
    importable by its name) is pickled by value, with its ``session_options``."""
    return type(KafkaSegmentsDataSource.__name__, (KafkaSegmentsDataSource,),
                {"__module__": __name__, "session_options": split_session_options(spark)})


#: what the planning and reading workers import (numba for the decode kernels)
WORKER_MODULES = ("pyarrow", "numpy", "numba", "spark_jobs")


def check_workers_python(spark: SparkSession) -> None:
    """Fail early, naming PYSPARK_PYTHON, when the workers' Python lacks our modules.

    Spark starts its Python workers with PYSPARK_PYTHON, or plain ``python3`` when it is
    unset; that is rarely the venv that has pyarrow and numba, and the worker would then
    die inside Spark with a bare ModuleNotFoundError. With PYSPARK_PYTHON unset and a
    local master, the workers get this driver's own interpreter instead (it has
    everything, since it is running this). The data source is pickled with the
    interpreter of the moment, so this must run before it is registered."""
    sc = spark.sparkContext
    if not (sc.master or "").startswith("local"):
        return  # the executors' Python lives on other machines: nothing to check here
    exe = sc.pythonExec
    if exe != sys.executable:
        probe = ("import importlib.util as u, sys; "
                 "print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))")
        try:
            r = subprocess.run([exe, "-c", probe, *WORKER_MODULES], capture_output=True, text=True, timeout=60)
            missing = r.stdout.split() if r.returncode == 0 else list(WORKER_MODULES)
        except (OSError, subprocess.TimeoutExpired):
            missing = list(WORKER_MODULES)
        if not missing:
            return
        if not os.environ.get("PYSPARK_PYTHON"):
            sc.pythonExec = sys.executable
            return
        raise RuntimeError(
            f"kafka-segments: Spark's Python workers run PYSPARK_PYTHON={exe!r}, which cannot import "
            f"{', '.join(missing)}. Set PYSPARK_PYTHON={sys.executable} (this driver's Python, which has them), "
            "or run the job with `krait spark JOB`, which sets it.")


class KafkaSegmentsDataSource(DataSource):
    """Spark's Kafka source schema, read from segment files instead of a broker."""

    #: default options under the read's own (lower-cased keys): see :func:`with_session_options`
    session_options: dict[str, str] = {}

    @classmethod
    def name(cls) -> str:
        return "kafka-segments"

    def schema(self) -> StructType:
        base = SCHEMA_WITH_HEADERS if bool_option(self.options.get("includeHeaders")) else SCHEMA
        # keyFormat / valueFormat: the reader schemas are fetched here, once, and kept (Spark
        # pickles this object after schema() and plans the read with it)
        self._typed = typed_read(dict(self.options), base)
        return base if self._typed is None else self._typed.schema

    def _typed_read(self, schema: StructType) -> TypedRead | None:
        if not hasattr(self, "_typed"):  # a schema given with .schema(...): schema() was not called
            self._typed = typed_read(dict(self.options), SCHEMA_WITH_HEADERS)
        if self._typed is not None:
            self._typed.check(schema)
        return self._typed

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        typed = self._typed_read(schema)
        if typed is not None:
            return TypedStreamReader(dict(self.options), schema, typed)
        return KafkaSegmentsStreamReader(dict(self.options), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        mode = (self.options.get("pushFilters") or "auto").lower()
        if mode == "auto":
            mode = "true" if _pushdown_enabled() else "false"
        cls = _PushdownReader if mode == "true" else _SegmentsReader
        typed = self._typed_read(schema)
        opts = {**self.session_options, **{k.lower(): v for k, v in self.options.items()}}
        return cls(opts, schema if typed else check_schema(schema), typed)


def _pushdown_enabled() -> bool:
    """Is spark.sql.python.filterPushdown.enabled on for the query being planned?

    Spark refuses to plan a reader that overrides pushFilters when the conf is off
    (DATA_SOURCE_PUSHDOWN_DISABLED) and gives reader() no way to see the conf. When the
    conf is off, Spark's plan worker has read it into the local ``enable_pushdown`` of
    its caller frame; when it is on, reader() is called from the pushdown worker. We
    look for that local and default to pushdown (the pushdown worker has no such local).
    """
    try:
        frame = sys._getframe(2)
    except ValueError:  # called from a shallow stack: not Spark's planner
        return True
    for _ in range(4):
        if frame is None:
            break
        if "enable_pushdown" in frame.f_locals:
            return bool(frame.f_locals["enable_pushdown"])
        frame = frame.f_back
    return True


class _SegmentsReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType, typed: TypedRead | None = None) -> None:
        self.options = {k.lower(): v for k, v in options.items()}
        self.schema = schema
        self.typed = typed  # decoded keys / values: read the raw columns, then decode
        self.raw_schema = typed.raw_schema(schema) if typed else schema
        self.hints = Hints()
        read_committed(self.options)  # a bad value fails at planning, not in the executors
        self.split_conf = SplitConf.from_options(self.options)
        if "log.dirs" not in self.options:
            raise ValueError("the kafka-segments source needs option log.dirs")

    # --- planning ------------------------------------------------------------------
    def partitions(self) -> Sequence[InputPartition]:
        splits = plan_splits(plan_slices(self.options, self.hints), self.split_conf)
        if not splits:
            return [InputPartition(None)]
        return [InputPartition(s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator:
        """The rows of one input partition: its slices (a tuple), read one after the other."""
        if partition.value is None:
            return iter(())
        chunk = int(self.options.get("readchunkbytes") or READ_CHUNK)
        schema = arrow_schema(self.raw_schema)
        batches = (b for s in partition.value for b in read_slice(s, schema, chunk=chunk))
        return self.typed.decode(batches, arrow_schema(self.schema)) if self.typed else batches


class _PushdownReader(_SegmentsReader):
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        h = self.hints
        for f in filters:
            col = f.attribute[0] if len(f.attribute) == 1 else None
            if col == "topic":
                values = _equal_values(f)
                if values is not None:
                    vs = frozenset(values)
                    h = replace(h, topics=vs if h.topics is None else h.topics & vs)
            elif col == "partition":
                lo, hi = _int_bounds(f)
                h = replace(h, partition_lo=max(h.partition_lo, lo if lo is not None else MIN_BOUND),
                            partition_hi=min(h.partition_hi, hi if hi is not None else MAX_BOUND))
                values = _equal_values(f)
                if values is not None:
                    vs = frozenset(values)
                    h = replace(h, partitions=vs if h.partitions is None else h.partitions & vs)
            elif col == "offset":
                lo, hi = _int_bounds(f)
                h = replace(h, offset_lo=max(h.offset_lo, lo if lo is not None else MIN_BOUND),
                            offset_hi=min(h.offset_hi, hi if hi is not None else MAX_BOUND))
            elif col == "timestamp":
                lo = _ts_lower_bound(f)
                if lo is not None:
                    h = replace(h, ts_lo=max(lo, h.ts_lo if h.ts_lo is not None else MIN_BOUND))
            # Every filter goes back to Spark: what we did is skipping, Spark stays exact.
            yield f
        self.hints = h


def _equal_values(f: Filter) -> list | None:
    if isinstance(f, EqualTo):
        return [f.value]
    if isinstance(f, In):
        return list(f.value)
    return None


def _int_bounds(f: Filter) -> tuple[int | None, int | None]:
    """[lo, hi) implied by a comparison on an integer column."""
    v = getattr(f, "value", None)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(f, In) and f.value and all(isinstance(x, int) and not isinstance(x, bool) for x in f.value):
            return min(f.value), max(f.value) + 1
        return None, None
    if isinstance(f, EqualTo):
        return v, v + 1
    if isinstance(f, GreaterThan):
        return v + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return v, None
    if isinstance(f, LessThan):
        return None, v
    if isinstance(f, LessThanOrEqual):
        return None, v + 1
    return None, None


def _ts_lower_bound(f: Filter) -> int | None:
    """Inclusive lower bound in ms of a timestamp comparison, if it is one we trust.

    Only tz-aware datetimes are used: a naive value's zone is ambiguous, and a wrong
    guess here would skip rows Spark should see."""
    v = getattr(f, "value", None)
    if not isinstance(v, dt.datetime) or v.tzinfo is None:
        return None
    us = (v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    if isinstance(f, GreaterThan | GreaterThanOrEqual | EqualTo):
        return us // 1000  # ms floor: records are ms, so ts_ms*1000 >= us means ts_ms >= floor
    return None
