"""topic_stats: volume per topic/partition, codec mix, offset/time ranges, records/minute.

    spark-submit spark_jobs/topic_stats.py --log-dirs DIR --output OUT [--topics a,b]

Writes OUT/topic_stats.json (per partition and per topic), OUT/records_per_minute.csv and
OUT/records_per_minute.png (records per minute over time, one line per topic). Batch-level
figures (codecs, bytes on disk) come from a header-only pass over the segments; record
figures (key/value bytes, per-minute counts) from the kafka-segments DataFrame, or for a topic
kept as an Iceberg table (``krait.iceberg.mode``) from its table plus the log's tail
(:func:`spark_jobs.tables.read_topic`: committed records only).
"""

from __future__ import annotations

import os
import sys

if not __package__:  # run as a script (spark-submit spark_jobs/topic_stats.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.jobcommon import (
    base_parser,
    iso,
    log,
    print_table,
    progress,
    pyplot,
    records,
    session,
    time_axis,
    utc,
    write_json,
)


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--bucket", default="1 minute", help="time bucket for the over-time series")
    args = ap.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    spark = session("krait-topic-stats", args.master)
    from pyspark.sql import functions as F

    from spark_jobs.logdir import batch_stats, whole_partition_slices

    topics = args.topics.split(",") if args.topics else None
    slices = whole_partition_slices(args.log_dirs.split(","), topics)
    if not slices:
        log("no data found")
    with progress(spark, f"batch headers of {len(slices)} segments"):
        batch_rows = spark.sparkContext.parallelize(slices, max(1, len(slices))).flatMap(batch_stats).collect() \
            if slices else []

    df = records(spark, args)  # a topic kept as an Iceberg table: its table + the log's tail
    with progress(spark, "record volume per partition"):
        rec = (df.groupBy("topic", "partition")
               .agg(F.count(F.lit(1)).alias("records"),
                    F.sum(F.coalesce(F.length("key"), F.lit(0))).alias("key_bytes"),
                    F.sum(F.coalesce(F.length("value"), F.lit(0))).alias("value_bytes"),
                    F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
                    # epoch ms, not datetimes: collect() would turn those into naive local times
                    F.min(F.unix_millis("timestamp")).alias("min_ts"), F.max(F.unix_millis("timestamp")).alias("max_ts"))
               .collect())
    with progress(spark, f"records per {args.bucket}"):
        per_minute = (df.groupBy("topic", F.unix_millis(F.window("timestamp", args.bucket).start).alias("minute"))
                      .count().orderBy("minute", "topic").collect())

    # merge batch-level and record-level figures per partition
    parts: dict[tuple[str, int], dict] = {}
    for r in rec:
        parts[(r.topic, r.partition)] = {
            "topic": r.topic, "partition": r.partition, "records": r.records,
            "key_bytes": r.key_bytes, "value_bytes": r.value_bytes,
            "min_offset": r.min_offset, "max_offset": r.max_offset,
            "min_timestamp": iso(r.min_ts), "max_timestamp": iso(r.max_ts),
            "batches": 0, "disk_bytes": 0, "codecs": {},
        }
    for b in batch_rows:
        p = parts.setdefault((b["topic"], b["partition"]), {
            "topic": b["topic"], "partition": b["partition"], "records": 0, "key_bytes": 0, "value_bytes": 0,
            "min_offset": None, "max_offset": None, "min_timestamp": None, "max_timestamp": None,
            "batches": 0, "disk_bytes": 0, "codecs": {}})
        p["batches"] += b["batches"]
        p["disk_bytes"] += b["bytes"]
        c = p["codecs"].setdefault(b["codec"], {"batches": 0, "records": 0, "bytes": 0})
        c["batches"] += b["batches"]
        c["records"] += b["records"]
        c["bytes"] += b["bytes"]
    partitions = [parts[k] for k in sorted(parts)]
    topics_out: dict[str, dict] = {}
    for p in partitions:
        t = topics_out.setdefault(p["topic"], {"topic": p["topic"], "partitions": 0, "records": 0, "disk_bytes": 0,
                                                "value_bytes": 0, "codecs": {}})
        t["partitions"] += 1
        t["records"] += p["records"]
        t["disk_bytes"] += p["disk_bytes"]
        t["value_bytes"] += p["value_bytes"]
        for name, c in p["codecs"].items():
            t["codecs"][name] = t["codecs"].get(name, 0) + c["records"]
    write_json(os.path.join(args.output, "topic_stats.json"),
               {"topics": list(topics_out.values()), "partitions": partitions})

    series = [{"topic": r.topic, "minute": iso(r.minute), "records": r["count"]} for r in per_minute]
    with open(os.path.join(args.output, "records_per_minute.csv"), "w", encoding="utf-8") as f:
        f.write("topic,minute,records\n")
        for s in series:
            f.write(f"{s['topic']},{s['minute']},{s['records']}\n")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for topic in sorted({s["topic"] for s in series}):
        pts = [(utc(r.minute), r["count"]) for r in per_minute if r.topic == topic]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=topic)
    ax.set_title(f"Records per {args.bucket}")
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("records")
    if series:
        ax.legend(loc="best", fontsize="small")
    time_axis(ax)
    fig.tight_layout()
    fig.savefig(os.path.join(args.output, "records_per_minute.png"), dpi=110)

    rows = [{**p, "codecs": ",".join(f"{k}:{v['records']}" for k, v in sorted(p["codecs"].items()))}
            for p in partitions]
    print_table(rows, ["topic", "partition", "records", "batches", "disk_bytes", "value_bytes", "codecs",
                       "min_offset", "max_offset", "min_timestamp", "max_timestamp"])
    log(f"wrote {args.output}/topic_stats.json, records_per_minute.csv, records_per_minute.png")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
