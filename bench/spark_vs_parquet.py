"""kafka-segments vs Parquet on the same records, in one run.

    .venv/bin/python bench/spark_vs_parquet.py [--records 2000000] [--runs 3] [--first-runs 3]

Writes ``--records`` records of 100 B (null keys, ~16 KiB batches, 4 partitions: the
``write_topic`` of bench/spark_scan_bench.py; random values, 4096 x 150 distinct ones, as
real payloads are: with one constant value Parquet's dictionary encoding stores the value
column as almost nothing, which no real topic gives it) in Kafka's layout, exports the same rows
once to Parquet (Spark's writer, defaults: snappy; columns key, value, topic, partition,
offset, timestamp, timestampType), then on local[2], median of the runs:

1. **first query**: a new Python process starts a SparkSession (not timed), then the
   timer runs around ``spark.read...load()`` + the aggregate query's ``collect()``: what a
   user feels for the first query of a session (Python worker start, imports, kernel
   loading, plus the JVM's first-query costs, which Parquet pays as well). One process
   per run and source; the numba cache on disk is whatever earlier runs left (warm after
   the first ever run, as for a user).
2. **warm aggregate**: the same query repeated in one long-lived session.
3. **count()**: kafka-segments with its full schema, with a narrow user-given schema
   (``partition int, offset long``: header-only), and Parquet.

Warm and count() also run a Python data source that yields prebuilt Arrow batches of the
full schema and the same row count (bench/spark_scan_bench.py's ceiling): what Spark's
Python data source API itself costs for these rows, with no decoding at all. It bounds
what any reader behind that API can reach.

The aggregate query: ``groupBy(partition).agg(count, min/max offset,
sum(length(value)), count of null keys)``. kafka-segments is read with its default (full)
schema, and with a user-given schema of just the columns used (``key binary, value
binary, partition int, offset long``): Spark gives Python data sources no column pruning,
so the narrow schema is how a query says what it needs.

Prints a markdown table (rows/s, ratios to Parquet). Nothing is asserted.
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

AGG_SCHEMA = "key binary, value binary, partition int, offset long"
COUNT_SCHEMA = "partition int, offset long"


def session(app: str):
    from pyspark.sql import SparkSession

    from spark_jobs.datasource import register

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def load(spark, source: str, path: str, schema: str | None = None):
    if source == "parquet":
        return spark.read.parquet(path)
    r = spark.read.format("kafka-segments").option("log.dirs", path).option("subscribe", "bench")
    if schema:
        r = r.schema(schema)
    return r.load()


def aggregate(df) -> list:
    from pyspark.sql import functions as F

    return (df.groupBy("partition")
            .agg(F.count(F.lit(1)).alias("n"), F.min("offset"), F.max("offset"),
                 F.sum(F.length("value")).alias("bytes"),
                 F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("null_keys"))
            .orderBy("partition").collect())


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def child_first(source: str, path: str, schema: str | None) -> None:
    """One first query in this fresh process; prints {"secs": ..., "rows": ...} as JSON."""
    spark = session("first-query")
    load_secs, df = timed(lambda: load(spark, source, path, schema))
    secs, rows = timed(lambda: aggregate(df))
    print(json.dumps({"load": load_secs, "secs": load_secs + secs, "rows": sum(r["n"] for r in rows)}))
    spark.stop()


def first_query(source: str, path: str, schema: str | None) -> tuple[float, float, int]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", source, "--path", path]
    if schema:
        cmd += ["--schema", schema]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return res["secs"], res["load"], res["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="warm runs (median)")
    ap.add_argument("--first-runs", type=int, default=3, help="new processes per source for the first query")
    ap.add_argument("--distinct-batches", type=int, default=4096,
                    help="random-valued batch templates cycled (x150 distinct values); 0: one constant value, "
                         "which Parquet's dictionary encoding stores as nearly nothing")
    ap.add_argument("--keep", help="write the data here and keep it (reused when present)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--schema", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_first(args.child, args.path, args.schema)
        return

    from bench.spark_scan_bench import make_ceiling_source, write_topic

    root = args.keep or tempfile.mkdtemp(prefix="krait-vs-parquet-")
    log_dir, pq_dir = os.path.join(root, "logs"), os.path.join(root, "parquet")
    try:
        if not os.path.isdir(log_dir):
            os.makedirs(log_dir)
            t = time.perf_counter()
            n = write_topic(log_dir, "bench", args.partitions, args.records, distinct=args.distinct_batches)
            print(f"wrote {n:,} records in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        spark = session("spark_vs_parquet")
        if not os.path.isdir(pq_dir):
            load(spark, "kafka", log_dir).write.parquet(pq_dir)
        n = load(spark, "parquet", pq_dir).count()
        spark.stop()

        # 1. first query, each in a new process, alternating the sources
        first: dict[str, list[float]] = {"kafka": [], "kafka_narrow": [], "parquet": []}
        first_load: dict[str, list[float]] = {k: [] for k in first}
        for _ in range(args.first_runs):
            for key, source, path, schema in (("kafka", "kafka", log_dir, None),
                                              ("kafka_narrow", "kafka", log_dir, AGG_SCHEMA),
                                              ("parquet", "parquet", pq_dir, None)):
                secs, load_secs, rows = first_query(source, path, schema)
                assert rows == n, (key, rows, n)
                first[key].append(secs)
                first_load[key].append(load_secs)

        # 2. + 3. warm, one session, interleaved
        spark = session("spark_vs_parquet")
        dfs = {"kafka": load(spark, "kafka", log_dir), "kafka_narrow": load(spark, "kafka", log_dir, AGG_SCHEMA),
               "parquet": load(spark, "parquet", pq_dir)}
        cdfs = {"kafka": dfs["kafka"], "kafka_narrow": load(spark, "kafka", log_dir, COUNT_SCHEMA),
                "parquet": dfs["parquet"]}
        expect = aggregate(dfs["parquet"])
        for k, df in dfs.items():  # warm-up and check
            assert aggregate(df) == expect, k
            assert cdfs[k].count() == n, k
        # what any Python data source costs Spark for these rows: prebuilt Arrow batches
        spark.dataSource.register(make_ceiling_source())
        per_task = -(-n // args.partitions)
        dfs["ceiling"] = cdfs["ceiling"] = (spark.read.format("arrow-ceiling").option("tasks", args.partitions)
                                            .option("rows_per_task", per_task).option("batch_rows", 32768).load())
        aggregate(dfs["ceiling"])
        warm: dict[str, list[float]] = {k: [] for k in dfs}
        count: dict[str, list[float]] = {k: [] for k in dfs}
        for _ in range(args.runs):
            for k in dfs:
                warm[k].append(timed(lambda k=k: aggregate(dfs[k]))[0])
                count[k].append(timed(cdfs[k].count)[0])
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    med = {f"{what}:{k}": statistics.median(v) for what, d in (("first", first), ("warm", warm), ("count", count))
           for k, v in d.items()}
    names = {"kafka": "kafka-segments (full schema)", "kafka_narrow": "kafka-segments (narrow schema)",
             "parquet": "Parquet",
             "ceiling": "ceiling of a Python data source (prebuilt Arrow batches, full schema, same row count)"}
    print(f"\n{n:,} records of 100 B ({args.distinct_batches * 150:,} distinct values), local[2], {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; "
          f"median of {args.first_runs} new processes (first query) / {args.runs} runs (warm, count)\n")
    print("| measure | source | seconds | M rows/s | vs Parquet (rows/s ratio) | runs |")
    print("|---|---|---:|---:|---:|---|")
    load_part = {k: statistics.median(v) for k, v in first_load.items()}
    for what, d, label in (("first", first, "first aggregate query (load + collect, new session)"),
                           ("warm", warm, "aggregate query, warm"), ("count", count, "count()")):
        for k in d:
            secs = med[f"{what}:{k}"]
            ratio = med[f"{what}:parquet"] / secs
            name = names[k] if not (what == "count" and k == "kafka_narrow") else \
                f"kafka-segments (schema \"{COUNT_SCHEMA}\")"
            if what != "count" and k == "kafka_narrow":
                name = f"kafka-segments (schema \"{AGG_SCHEMA}\")"
            runs = ", ".join(f"{x:.2f}" for x in d[k])
            if what == "first":
                runs += f" (of which load(): {load_part[k]:.2f})"
            print(f"| {label} | {name} | {secs:.2f} | {n / secs / 1e6:.2f} | {ratio:.2f}x | {runs} |")


if __name__ == "__main__":
    main()
