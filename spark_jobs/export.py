"""export: topics (optionally an offset or time range) to Parquet, partitioned by topic and
partition.

    spark-submit spark_jobs/export.py --log-dirs DIR --output OUT --topics orders
        [--starting-offsets JSON|earliest] [--ending-offsets JSON|latest]
        [--starting-timestamp MS] [--ending-timestamp MS] [--include-headers] [--mode overwrite]

Writes OUT/topic=<t>/partition=<p>/part-*.parquet with the Kafka source columns (key, value,
offset, timestamp, timestampType[, headers]; topic and partition live in the directory
names, as Spark's partitionBy does) and OUT/_export.json with the rows written per
partition and their offset ranges. A whole topic kept as an Iceberg table is read through
:func:`spark_jobs.tables.read_topic` (its table + the log's tail, committed records only); a
range is read from the log.
"""

from __future__ import annotations

import os
import sys

if not __package__:  # run as a script (spark-submit spark_jobs/export.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.jobcommon import base_parser, log, print_table, progress, records, session, write_json


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--starting-offsets", help="earliest (default), latest or JSON like Spark's Kafka source")
    ap.add_argument("--ending-offsets", help="latest (default) or JSON")
    ap.add_argument("--starting-timestamp", help="ms: from the first offset with timestamp >= it")
    ap.add_argument("--ending-timestamp", help="ms: up to the first offset with timestamp >= it (exclusive)")
    ap.add_argument("--include-headers", action="store_true")
    ap.add_argument("--mode", default="errorifexists", help="Spark save mode (overwrite, append, ...)")
    args = ap.parse_args(argv)
    spark = session("krait-export", args.master)
    from pyspark.sql import functions as F

    df = records(spark, args, startingOffsets=args.starting_offsets, endingOffsets=args.ending_offsets,
                 startingTimestamp=args.starting_timestamp, endingTimestamp=args.ending_timestamp,
                 includeHeaders="true" if args.include_headers else None)
    with progress(spark, f"export to {args.output}"):
        df.write.mode(args.mode).partitionBy("topic", "partition").parquet(args.output)
    with progress(spark, "summary of what was written"):
        written = spark.read.parquet(args.output)
        summary = (written.groupBy("topic", "partition")
                   .agg(F.count(F.lit(1)).alias("rows"), F.min("offset").alias("min_offset"),
                        F.max("offset").alias("max_offset"))
                   .orderBy("topic", "partition").collect())
    rows = [r.asDict() for r in summary]
    write_json(os.path.join(args.output, "_export.json"), {"partitions": rows, "total_rows": sum(r["rows"] for r in rows)})
    print_table(rows, ["topic", "partition", "rows", "min_offset", "max_offset"])
    log(f"exported {sum(r['rows'] for r in rows)} rows to {args.output}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
