"""``read_topic`` (a topic's Iceberg table + the log's tail) vs plain Parquet of the same rows,
in one run (issue 27, "Done when").

    .venv/bin/python bench/spark_read_topic_bench.py [--records 2000000] [--runs 5] [--first-runs 3]
        [--commit-records 100000] [--keep DIR]

Data: ``--records`` records of 100 B (null keys, random values, 4 partitions: the
``write_topic`` of bench/spark_scan_bench.py) in Kafka's layout, then the topic's table is
written **with tables.writer.TableWriter directly from the segments** (no broker: producing
2 M records through a broker and waiting for its table takes minutes on this machine), in
the broker's way: each commit converts, per partition, the next batches of the log with
``tables.records.region_to_arrow`` and appends all partitions in one snapshot
(``TableWriter.append``, offsets in the summary), as broker/tables/driver.py does every
``krait.iceberg.commit.interval.ms``. Three copies of the topic:

* **small files**: one commit per ``--commit-records`` records (default 100,000: what a
  broker taking 10,000 records/s writes with the default 10 s commit interval), so one
  Parquet file per partition and commit (the timestamps are all in one hour);
* **compacted**: one commit of everything, one file per partition: what compaction of the
  small files gives;
* **tail**: the small-files table one commit behind the log: the last ``--commit-records``
  records come from the log (read_topic decodes a tail this small on the driver; the
  previous read_topic read it through ``kafka-segments``);
* **upkept** (and **upkept_half** / **upkept_tail**, half a commit / one commit behind the
  log: a live topic's tail is between none and one commit interval of records): the table
  as the broker leaves it, its upkeep (tables.upkeep.compact, default settings) run after
  every 6 commits, as ``krait.iceberg.upkeep.interval.ms`` (1 min) does over commits of 10 s.

Plain Parquet: the same rows exported once with Spark's writer (defaults: snappy), columns
key, value, topic, partition, offset, timestamp, timestampType.

Measures, on local[2]:

1. **first query**: a new Python process starts a SparkSession (not timed), then the timer
   runs around the load (``read_topic(...)`` / ``spark.read.parquet(dir)``) and the first
   aggregate's ``collect()``; one process per run and source, sources alternating;
2. **warm**: in one session, every run builds the DataFrame again (``read_topic`` /
   ``spark.read.parquet``: what a query does) and runs the aggregate; sources interleaved
   in each round, median of ``--runs``.

The aggregate is bench/spark_vs_parquet.py's: ``groupBy(partition)``: count, min/max
offset, sum of value lengths, null keys. Each source's result is checked against
Parquet's. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

TOPIC = "bench"
SOURCES = ("parquet", "compacted", "small", "tail", "upkept", "upkept_half", "upkept_tail")
NAMES = {"parquet": "Parquet (Spark's writer, one directory)",
         "compacted": "read_topic, compacted table (1 file per partition), empty tail",
         "small": "read_topic, small files (1 per partition and commit), empty tail",
         "tail": "read_topic, small files, table 1 commit behind (a 100k-record tail from the log)",
         "upkept": "read_topic, as the broker leaves it (upkeep every 6 commits), empty tail",
         "upkept_half": "read_topic, as the broker leaves it, table half a commit behind (50k-record tail)",
         "upkept_tail": "read_topic, as the broker leaves it, table 1 commit behind (100k-record tail)"}
#: commits between two upkeep runs: krait.iceberg.upkeep.interval.ms / commit.interval.ms
UPKEEP_EVERY = 60_000 // 10_000


def write_table(log_dir: str, partitions: int, commit_records: int, lag_records: int = 0,
                upkeep_every: int = 0) -> tuple[int, int]:
    """Append the topic's log to its table (embedded catalog under ``log_dir``) in commits of
    about ``commit_records`` records, all partitions in each, as the broker's driver does;
    the last ``lag_records`` records stay out of the table. ``upkeep_every``: after every so
    many commits, compact as the broker's upkeep does with the default settings. Returns
    (commits, rows)."""
    from protocol.records import iter_headers
    from spark_jobs.logdir import list_partitions
    from tables.catalog import open_catalog
    from tables.records import region_to_arrow
    from tables.writer import TableWriter

    writer = TableWriter(open_catalog(log_dir), TOPIC)
    per_commit = max(1, commit_records // partitions)
    per_lag = lag_records // partitions
    # per partition: the batches of its log as (bytes, first offset, records), in order
    chunks: dict[int, list[tuple[bytes, int]]] = {}
    for plog in list_partitions([log_dir]):
        if plog.topic != TOPIC:
            continue
        data = b"".join(open(s.path, "rb").read() for s in plog.segments)
        leo = plog.log_end()[0]
        stop = leo - per_lag
        out, start, pos0, n = [], 0, 0, 0
        for pos, h in iter_headers(data):
            if h.base_offset >= stop:
                break
            n += h.record_count
            end = pos + h.size
            if n >= per_commit:
                out.append((data[pos0:end], start))
                pos0, start, n = end, h.next_offset, 0
        if n:
            out.append((data[pos0:end], start))
        chunks[plog.partition] = out
    commits = rows = 0
    for k in range(max(len(c) for c in chunks.values())):
        batches = {}
        for p, c in chunks.items():
            if k < len(c):
                buf, start = c[k]
                r = region_to_arrow(buf, p, start_offset=start)
                batches[p] = (r.table, r.next_offset)
                rows += r.table.num_rows
        writer.append(batches)
        commits += 1
        if upkeep_every and commits % upkeep_every == 0:
            from tables.upkeep import UpkeepSettings, compact

            compact(writer.refresh(), int(time.time() * 1000), UpkeepSettings())
    return commits, rows


def read_topic_before(spark, topic: str, log_dir: str):
    """read_topic as it was before this bench (commit 115409b), kept to measure it side by
    side: the table's files through pyiceberg's catalog and scan planning, the Parquet read
    with schema inference, and a ``kafka-segments`` tail unioned in always (planned in a
    Python worker at every query, even when empty)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError
    from pyspark.sql import functions as F

    from spark_jobs.logdir import list_partitions
    from spark_jobs.tables import table_offsets

    partitions = sorted({p.partition for p in list_partitions([log_dir]) if p.topic == topic})
    offsets: dict[int, int] = {}
    files: list[str] = []
    base = os.path.join(log_dir, "krait-iceberg")
    try:
        table = SqlCatalog("krait", uri="sqlite:///" + os.path.join(base, "catalog.db"),
                           warehouse="file://" + os.path.join(base, "warehouse")).load_table(("krait", topic))
        offsets = table_offsets(table)
        files = [task.file.file_path for task in table.scan().plan_files()] if offsets else []
    except NoSuchTableError:
        pass
    tail = (spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", topic)
            .option("isolation.level", "read_committed")
            .option("startingOffsets", json.dumps({topic: {str(p): offsets.get(p, -2) for p in partitions}}))).load()
    if not files:
        return tail
    columns = [F.col("key"), F.col("value"), F.lit(topic).alias("topic"), F.col("partition"), F.col("offset"),
               F.col("timestamp"), F.col("timestamp_type").alias("timestampType")]
    return spark.read.parquet(*files).select(*columns).unionByName(tail)


def load(spark, source: str, path: str):
    if source == "parquet":
        return spark.read.parquet(path)
    if source.endswith(":before"):
        return read_topic_before(spark, TOPIC, path)
    from spark_jobs.tables import read_topic

    return read_topic(spark, TOPIC, path)


def child_first(source: str, path: str) -> None:
    """One first query in this fresh process; prints {"secs", "load", "rows"} as JSON."""
    from bench.spark_vs_parquet import aggregate, session, timed

    spark = session("first-query")
    load_secs, df = timed(lambda: load(spark, source, path))
    secs, rows = timed(lambda: aggregate(df))
    print(json.dumps({"load": load_secs, "secs": load_secs + secs, "rows": sum(r["n"] for r in rows)}))
    spark.stop()


def first_query(source: str, path: str) -> tuple[float, float, int]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", source, "--path", path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return res["secs"], res["load"], res["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="warm runs (median)")
    ap.add_argument("--first-runs", type=int, default=3, help="new processes per source for the first query")
    ap.add_argument("--commit-records", type=int, default=100_000,
                    help="records per table commit (100,000: 10 s of 10,000 records/s)")
    ap.add_argument("--sources", default=",".join(SOURCES), help="which of " + ",".join(SOURCES))
    ap.add_argument("--before", default="compacted,small,tail",
                    help="also read these tables with read_topic as it was before (read_topic_before)")
    ap.add_argument("--keep", help="write the data here and keep it (reused when present)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_first(args.child, args.path)
        return

    from bench.spark_scan_bench import write_topic
    from bench.spark_vs_parquet import aggregate, session

    data = [s for s in args.sources.split(",") if s]
    if "parquet" not in data:
        data.insert(0, "parquet")
    sources = data + [f"{s}:before" for s in args.before.split(",") if s in data and s != "parquet"]
    root = args.keep or tempfile.mkdtemp(prefix="krait-read-topic-")
    dirs = {"parquet": os.path.join(root, "parquet"), **{s: os.path.join(root, s) for s in SOURCES[1:]}}
    paths = {s: dirs[s.split(":")[0]] for s in sources}
    files: dict[str, int] = {}
    try:
        for s in data[1:]:
            d = paths[s]
            if not os.path.isdir(d):
                os.makedirs(d)
                t = time.perf_counter()
                n = write_topic(d, TOPIC, args.partitions, args.records, distinct=4096)
                commit = args.records if s == "compacted" else args.commit_records
                lag = {"tail": args.commit_records, "upkept_tail": args.commit_records,
                       "upkept_half": args.commit_records // 2}.get(s, 0)
                commits, rows = write_table(d, args.partitions, commit, lag,
                                            UPKEEP_EVERY if s.startswith("upkept") else 0)
                print(f"{s}: {n:,} records, table of {rows:,} rows in {commits} commits, "
                      f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
            from spark_jobs.tables import load_snapshot

            # the files the table's current snapshot holds (compacted-away files stay on disk
            # until their snapshots expire)
            files[s] = len(load_snapshot(d, TOPIC).files)
        spark = session("spark_read_topic_bench")
        if not os.path.isdir(paths["parquet"]):
            log_dir = paths[data[1]] if len(data) > 1 else None
            if log_dir is None:
                raise SystemExit("nothing to compare Parquet with")
            (spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", TOPIC).load()
             .write.parquet(paths["parquet"]))
        files["parquet"] = sum(1 for f in os.listdir(paths["parquet"]) if f.endswith(".parquet"))
        expect = aggregate(load(spark, "parquet", paths["parquet"]))
        n = sum(r["n"] for r in expect)
        for s in sources:  # warm-up and check
            assert aggregate(load(spark, s, paths[s])) == expect, s
        spark.stop()

        # 1. first query, each in a new process, alternating the sources
        first: dict[str, list[float]] = {s: [] for s in sources}
        first_load: dict[str, list[float]] = {s: [] for s in sources}
        for _ in range(args.first_runs):
            for s in sources:
                secs, load_secs, rows = first_query(s, paths[s])
                assert rows == n, (s, rows, n)
                first[s].append(secs)
                first_load[s].append(load_secs)

        # 2. warm, one session, interleaved; each run loads again (what a new query does)
        spark = session("spark_read_topic_bench")
        for s in sources:
            aggregate(load(spark, s, paths[s]))
        warm: dict[str, list[float]] = {s: [] for s in sources}
        warm_load: dict[str, list[float]] = {s: [] for s in sources}
        for _ in range(args.runs):
            for s in sources:
                t = time.perf_counter()
                df = load(spark, s, paths[s])
                warm_load[s].append(time.perf_counter() - t)
                aggregate(df)
                warm[s].append(time.perf_counter() - t)
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    print(f"\n{n:,} records of 100 B, {args.partitions} partitions, table commits of {args.commit_records:,} "
          f"records, local[2], {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; median of "
          f"{args.first_runs} new processes (first query) / {args.runs} interleaved runs (warm)\n")
    print("| measure | source | data files | seconds | of which load | vs Parquet (time ratio, Parquet/x) | runs |")
    print("|---|---|---:|---:|---:|---:|---|")
    for what, d, dl in (("first query (new session)", first, first_load), ("warm aggregate", warm, warm_load)):
        base = statistics.median(d["parquet"])
        for s in sources:
            med = statistics.median(d[s])
            runs = ", ".join(f"{x:.2f}" for x in d[s])
            name = NAMES[s.split(":")[0]] + (" — **before** (read_topic_before)" if s.endswith(":before") else "")
            print(f"| {what} | {name} | {files.get(s.split(':')[0], '-')} | {med:.2f} | {statistics.median(dl[s]):.2f} | "
                  f"{base / med:.2f}x | {runs} |")


if __name__ == "__main__":
    main()
