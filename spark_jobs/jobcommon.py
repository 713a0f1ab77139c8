"""What every spark-submit job shares: arguments, the session, progress lines, charts.

Each job is a script (``spark-submit spark_jobs/<job>.py --log-dirs DIR --output OUT``);
this module gives them the same ``--log-dirs``/``--output``/``--topics`` arguments, a
session with the ``kafka-segments`` source registered, the topics' records
(:func:`records`: a topic kept as an Iceberg table through
:func:`spark_jobs.tables.read_topic`, the others through ``kafka-segments``), a progress printer (stage task
counts on stderr every couple of seconds: jobs can run for minutes on big log dirs) and
matplotlib set to the Agg backend (no display on servers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

__all__ = ["base_parser", "session", "progress", "log", "write_json", "reader", "records", "pyplot", "print_table",
           "time_axis", "utc", "iso"]


def log(msg: str) -> None:
    """Progress/status line on stderr (stdout is kept for results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def base_parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--log-dirs", required=True, help="comma-separated Krait/Kafka log dirs")
    ap.add_argument("--output", required=True, help="directory for results (created)")
    ap.add_argument("--topics", help="comma-separated topics (default: every topic not starting with __)")
    ap.add_argument("--master", help="Spark master when not given by spark-submit (default local[*])")
    ap.add_argument("--min-partitions", type=int, default=0, help="minPartitions for the scan")
    ap.add_argument("--iceberg-catalog-uri", help="the Iceberg catalog of table topics (default: the broker's "
                    "embedded one under the first log dir), as the broker's krait.iceberg.catalog.uri")
    ap.add_argument("--iceberg-warehouse", help="the Iceberg warehouse, as the broker's krait.iceberg.warehouse")
    return ap


def session(app: str, master: str | None = None) -> SparkSession:
    """The SparkSession (spark-submit's, or a local one), with kafka-segments registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .datasource import register

    builder = (SparkSession.builder.appName(app).config("spark.sql.session.timeZone", "UTC")
               .config("spark.log.level", os.environ.get("KRAIT_SPARK_LOG_LEVEL", "WARN")))
    if master:  # under spark-submit the master comes from its --master; plain python gets local[*]
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KRAIT_SPARK_LOG_LEVEL", "WARN"))
    register(spark)
    return spark


def reader(spark: SparkSession, args: argparse.Namespace, *, columns: str | None = None,
           **options: str) -> DataFrameReader:
    """spark.read.format("kafka-segments") with the common options applied.

    ``columns``: a narrow schema, e.g. ``"topic string, partition int, offset long"``
    (columns of the source, any order). Spark gives Python data sources no column pruning,
    so a job that does not need key/value/headers should say so here: those are then
    never decoded (a header-only schema reads batch headers only)."""
    r = spark.read.format("kafka-segments").option("log.dirs", args.log_dirs)
    if columns:
        r = r.schema(columns)
    if getattr(args, "topics", None):
        r = r.option("subscribe", args.topics)
    if getattr(args, "min_partitions", 0):
        r = r.option("minPartitions", str(args.min_partitions))
    for k, v in options.items():
        if v is not None:
            r = r.option(k, v)
    return r


#: kafka-segments options that select a range of the log: a job given one reads the log
#: (read_topic reads whole topics)
_RANGE_OPTIONS = ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
                  "startingOffsetsByTimestamp", "endingOffsetsByTimestamp")


def records(spark: SparkSession, args: argparse.Namespace, *, columns: str | None = None,
            **options: str | None) -> DataFrame:
    """The records of the job's topics (``--topics``, or a ``subscribe`` option, or every
    topic not starting with "__"): each topic kept as an Iceberg table
    (``krait.iceberg.mode``) through :func:`spark_jobs.tables.read_topic` (its table's
    Parquet files, plus the log's tail), the others through ``kafka-segments``
    (:func:`reader`), in one DataFrame.

    ``columns`` is :func:`reader`'s narrow schema; a table-backed topic gives the same
    columns (Spark prunes the table's Parquet columns itself). A table holds committed
    records only, so a table-backed topic is read read_committed (aborted transactions
    left out) where the log alone is read read_uncommitted by default. With a range option
    (``startingOffsets``, ``endingTimestamp``, ...) every topic is read from the log."""
    from .logdir import list_partitions
    from .tables import load_snapshot

    dirs = [d.strip() for d in args.log_dirs.split(",") if d.strip()]
    subscribe = options.get("subscribe") or getattr(args, "topics", None)
    if subscribe:
        wanted = {t.strip() for t in subscribe.split(",") if t.strip()}
        topics = sorted({p.topic for p in list_partitions(dirs) if p.topic in wanted})
    else:
        topics = sorted({p.topic for p in list_partitions(dirs) if not p.topic.startswith("__")})
    catalog_uri = getattr(args, "iceberg_catalog_uri", None)
    warehouse = getattr(args, "iceberg_warehouse", None)
    ranged = any(options.get(k) is not None for k in _RANGE_OPTIONS)
    tables = [] if ranged or not topics else \
        [t for t in topics if load_snapshot(dirs[0], t, catalog_uri=catalog_uri, warehouse=warehouse) is not None]
    if not tables:
        return reader(spark, args, columns=columns, **options).load()
    from .tables import read_topic

    names = [c.strip().split()[0] for c in columns.split(",")] if columns else None
    headers = (options.get("includeHeaders") or "").lower() == "true" or bool(names and "headers" in names)
    extra = {"minPartitions": str(args.min_partitions)} if getattr(args, "min_partitions", 0) else None
    parts = []
    for t in tables:
        df = read_topic(spark, t, dirs, catalog_uri=catalog_uri, warehouse=warehouse, include_headers=headers,
                        options=extra)
        parts.append(df.select(*names) if names else df)
    others = [t for t in topics if t not in tables]
    if others:
        parts.append(reader(spark, args, columns=columns, **{**options, "subscribe": ",".join(others)}).load())
    df = parts[0]
    for other in parts[1:]:
        df = df.unionByName(other)
    return df


@contextmanager
def progress(spark: SparkSession, what: str, interval: float = 2.0) -> Iterator[None]:
    """Print "<what>: stage S tasks done/total" lines while the block runs Spark jobs."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    t0 = time.time()

    def loop() -> None:
        last = None
        while not stop.wait(interval):
            parts = []
            for sid in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(sid)
                if info:
                    parts.append(f"stage {sid} {info.numCompletedTasks}/{info.numTasks} tasks")
            line = ", ".join(parts)
            if line and line != last:
                log(f"{what}: {line} ({time.time() - t0:.0f}s)")
                last = line

    th = threading.Thread(target=loop, daemon=True)
    log(f"{what} ...")
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        log(f"{what}: done in {time.time() - t0:.1f}s")


def utc(ms: int) -> dt.datetime:
    """Epoch milliseconds (Kafka's timestamps) as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds, None for None."""
    return None if ms is None else utc(ms).isoformat(timespec="milliseconds")


def write_json(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend (files only, works without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def print_table(rows: list[dict], columns: list[str]) -> None:
    """A plain aligned table on stdout."""
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) if rows else len(c) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns))


def time_axis(ax: Any) -> None:
    """Readable UTC date-time ticks on a matplotlib x axis."""
    import matplotlib.dates as mdates

    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=mdates.UTC))
    ax.figure.autofmt_xdate()
