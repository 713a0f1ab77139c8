"""key_skew: key cardinality, hottest keys and records per partition.

    spark-submit spark_jobs/key_skew.py --log-dirs DIR --output OUT [--topics a,b] [--top 20]

Writes OUT/key_skew.json (per topic: records, null keys, distinct keys, the --top hottest
keys with their share, records per partition with each partition's share and the
max/mean skew ratio) and OUT/key_skew.png (records per partition and hottest keys).
Keys are shown as UTF-8 when they decode, else as hex. A topic kept as an Iceberg table is
read through :func:`spark_jobs.tables.read_topic` (committed records only).
"""

from __future__ import annotations

import os
import sys

if not __package__:  # run as a script (spark-submit spark_jobs/key_skew.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.jobcommon import base_parser, log, print_table, progress, pyplot, records, session, write_json


def show_key(k: bytes | bytearray | None) -> str:
    if k is None:
        return "<null>"
    try:
        s = bytes(k).decode()
        if s.isprintable():
            return s
    except UnicodeDecodeError:
        pass
    return "0x" + bytes(k).hex()


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="how many hottest keys to list")
    args = ap.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    spark = session("krait-key-skew", args.master)
    from pyspark.sql import functions as F

    # values are never decoded: the narrow schema is the source's only column pruning
    # (a topic kept as an Iceberg table: its table + the log's tail, only these columns read)
    df = records(spark, args, columns="topic string, partition int, key binary").cache()
    with progress(spark, "records and distinct keys per topic"):
        totals = {r.topic: r for r in df.groupBy("topic").agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("null_keys"),
            F.countDistinct("key").alias("distinct_keys")).collect()}
    with progress(spark, "records per partition"):
        per_part = df.groupBy("topic", "partition").count().orderBy("topic", "partition").collect()
    with progress(spark, f"top {args.top} keys per topic"):
        from pyspark.sql.window import Window

        counts = df.where(F.col("key").isNotNull()).groupBy("topic", "key").count()
        ranked = counts.withColumn("rank", F.row_number().over(
            Window.partitionBy("topic").orderBy(F.desc("count"), F.asc("key"))))
        top = ranked.where(F.col("rank") <= args.top).orderBy("topic", "rank").collect()
    df.unpersist()

    report = []
    for topic in sorted(totals):
        t = totals[topic]
        parts = [{"partition": r.partition, "records": r["count"], "share": r["count"] / t.records}
                 for r in per_part if r.topic == topic]
        mean = t.records / len(parts) if parts else 0
        hot = [{"key": show_key(r.key), "records": r["count"], "share": r["count"] / t.records}
               for r in top if r.topic == topic]
        report.append({
            "topic": topic, "records": t.records, "null_keys": t.null_keys, "distinct_keys": t.distinct_keys,
            "partitions": parts,
            "partition_skew": max(p["records"] for p in parts) / mean if mean else None,
            "hottest_keys": hot,
        })
    write_json(os.path.join(args.output, "key_skew.json"), {"topics": report})

    plt = pyplot()
    n = max(1, len(report))
    fig, axes = plt.subplots(n, 2, figsize=(12, 3.8 * n), squeeze=False)
    for row, t in zip(axes, report, strict=False):
        row[0].bar([str(p["partition"]) for p in t["partitions"]], [p["records"] for p in t["partitions"]])
        row[0].set_title(f"{t['topic']}: records per partition (max/mean {t['partition_skew']:.2f})")
        row[0].set_xlabel("partition")
        keys = t["hottest_keys"][:15]
        row[1].barh([k["key"][:30] for k in keys][::-1], [k["records"] for k in keys][::-1])
        row[1].set_title(f"{t['topic']}: hottest keys ({t['distinct_keys']} distinct)")
    fig.tight_layout()
    fig.savefig(os.path.join(args.output, "key_skew.png"), dpi=110)

    print_table([{k: v for k, v in t.items() if k not in ("partitions", "hottest_keys")} for t in report],
                ["topic", "records", "null_keys", "distinct_keys", "partition_skew"])
    for t in report:
        print(f"\n{t['topic']} hottest keys:")
        print_table([{**k, "share": f"{k['share']:.1%}"} for k in t["hottest_keys"]], ["key", "records", "share"])
    log(f"wrote {args.output}/key_skew.json, key_skew.png")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
