"""Does a topic's segment size decide the speed of a kafka-segments read? (issue 27, item 6)

    .venv/bin/python bench/spark_segment_size_bench.py [--records 2000000] [--runs 5]
        [--segment-bytes 4m,1g] [--keep DIR]

Writes the same ``--records`` records of 100 B (4 partitions, random values: the
``write_topic`` of bench/spark_scan_bench.py) once per segment size, exports the rows once
to Parquet (Spark's writer, defaults), then in one local[2] session times the warm
aggregate of bench/spark_vs_parquet.py (groupBy partition: count, min/max offset, sum of
value lengths, null keys; kafka-segments with its full schema), median of ``--runs``
interleaved runs, for each segment size:

* **per segment**: one input partition per segment, the plan before kafka-segments
  planned by size. Obtained with ``maxPartitionBytes=1g`` and ``openCostInBytes=1g``: every
  slice then costs the whole target and sits alone, and no segment here exceeds 1 GiB
  (checked: the partition count equals the segment count);
* **by size**: the default plan (spark_jobs.splits: the session's
  spark.sql.files.maxPartitionBytes / openCostInBytes, the default parallelism);
* **Parquet** of the same rows.

Prints a markdown table (seconds, M rows/s, ratio to Parquet, input partitions).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

PER_SEGMENT = {"maxPartitionBytes": "1g", "openCostInBytes": "1g"}


def main() -> None:
    from bench.spark_scan_bench import write_topic
    from bench.spark_vs_parquet import aggregate, session
    from spark_jobs.splits import parse_bytes

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="warm runs (median)")
    ap.add_argument("--segment-bytes", default="4m,1g", help="comma-separated segment sizes (Spark size syntax)")
    ap.add_argument("--keep", help="write the data here and keep it (reused when present)")
    args = ap.parse_args()
    sizes = [s.strip() for s in args.segment_bytes.split(",") if s.strip()]

    root = args.keep or tempfile.mkdtemp(prefix="krait-segsize-")
    pq_dir = os.path.join(root, "parquet")
    log_dirs = {size: os.path.join(root, f"logs-{size}") for size in sizes}
    try:
        for size, d in log_dirs.items():
            if not os.path.isdir(d):
                os.makedirs(d)
                t = time.perf_counter()
                write_topic(d, "bench", args.partitions, args.records, distinct=4096,
                            segment_bytes=parse_bytes(size, "--segment-bytes"))
                print(f"wrote {size} segments in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        spark = session("spark_segment_size_bench")

        def load(size: str, opts: dict[str, str]):
            r = spark.read.format("kafka-segments").option("log.dirs", log_dirs[size]).option("subscribe", "bench")
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        if not os.path.isdir(pq_dir):
            load(sizes[0], {}).write.parquet(pq_dir)
        dfs = {"parquet": spark.read.parquet(pq_dir)}
        segments = {}
        for size in sizes:
            segments[size] = sum(1 for _, _, fs in os.walk(log_dirs[size]) for f in fs if f.endswith(".log"))
            dfs[f"{size}:per segment"] = load(size, PER_SEGMENT)
            dfs[f"{size}:by size"] = load(size, {})
            assert dfs[f"{size}:per segment"].rdd.getNumPartitions() == segments[size]
        n = dfs["parquet"].count()
        expect = aggregate(dfs["parquet"])
        for k, df in dfs.items():  # warm-up and check
            assert aggregate(df) == expect, k
        secs: dict[str, list[float]] = {k: [] for k in dfs}
        for _ in range(args.runs):
            for k, df in dfs.items():
                t = time.perf_counter()
                aggregate(df)
                secs[k].append(time.perf_counter() - t)
        parts = {k: df.rdd.getNumPartitions() for k, df in dfs.items()}
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in secs.items()}
    print(f"\n{n:,} records of 100 B, {args.partitions} partitions, local[2], {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}; warm aggregate, median of {args.runs} interleaved runs\n")
    print("| segment size | plan | input partitions | seconds | M rows/s | vs Parquet | runs |")
    print("|---|---|---:|---:|---:|---:|---|")
    for k in dfs:
        size, _, plan = k.partition(":")
        label = f"{size} ({segments[size]} segments)" if plan else "Parquet"
        runs = ", ".join(f"{x:.2f}" for x in secs[k])
        print(f"| {label} | {plan or '-'} | {parts[k]} | {med[k]:.2f} | {n / med[k] / 1e6:.2f} | "
              f"{med['parquet'] / med[k]:.2f}x | {runs} |")


if __name__ == "__main__":
    main()
