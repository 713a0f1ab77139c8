"""consumer_lag: committed offsets from __consumer_offsets against log end offsets, now and
over time.

    spark-submit spark_jobs/consumer_lag.py --log-dirs DIR --output OUT [--groups g1,g2]
                 [--bucket "1 minute"]

Reads ``__consumer_offsets`` with the kafka-segments source and decodes Kafka's
OffsetCommitKey/OffsetCommitValue records (``coordinator/records.py``, the broker's own
codecs). "Now" is the latest commit per (group, topic, partition) in log order (a
tombstone deletes it; a group Krait's former placement put in another partition has its
older records there, so the records of its own partition, by Kafka's placement, come last) against the partition's log end offset (the high watermark when the
checkpoint has one). History: the last commit in each time bucket against the log end
offset at the end of that bucket, found through the partition's .timeindex (first offset
whose timestamp is later, at batch granularity) — the topics themselves are not scanned.

Writes OUT/consumer_lag.json (now), OUT/consumer_lag_history.csv and OUT/consumer_lag.png
(total lag per group and topic over time), and prints a kafka-consumer-groups-style table.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import os
import sys
from collections.abc import Iterable, Iterator

if not __package__:  # run as a script (spark-submit spark_jobs/consumer_lag.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pyarrow as pa

from spark_jobs.jobcommon import (
    base_parser,
    log,
    print_table,
    progress,
    pyplot,
    records,
    session,
    time_axis,
    write_json,
)

COMMITS_SCHEMA = ("group string, topic string, partition int, committed long, metadata string, "
                  "commit_ts long, log_offset long, log_ts long, tombstone boolean, home boolean")


def decode_commits(batches: Iterator[pa.RecordBatch], offsets_partitions: int = 0) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: __consumer_offsets rows -> offset commits (other record types and
    undecodable records are dropped: a malformed record must not fail the job). ``home``:
    the record is in its group's partition among ``offsets_partitions`` (rows with a
    ``partition`` column; always true without): those are newer than the group's records
    elsewhere, which Krait's former placement wrote (coordinator/placement.py)."""
    from coordinator.placement import partition_for_key
    from coordinator.records import OffsetCommitKey, RecordDecodeError, decode_key, decode_offset_commit_value

    for b in batches:
        cols: dict[str, list] = {n: [] for n in ("group", "topic", "partition", "committed", "metadata",
                                                 "commit_ts", "log_offset", "log_ts", "tombstone", "home")}
        keys = b.column("key").to_pylist()
        values = b.column("value").to_pylist()
        offsets = b.column("offset").to_pylist()
        ts = b.column("log_ts").to_pylist()
        where = (b.column("partition").to_pylist() if offsets_partitions and "partition" in b.schema.names
                 else [None] * len(keys))
        for k, v, off, t, log_p in zip(keys, values, offsets, ts, where, strict=True):
            try:
                key = decode_key(k)
                if not isinstance(key, OffsetCommitKey):
                    continue
                val = None if v is None else decode_offset_commit_value(v)
            except RecordDecodeError:
                continue
            cols["group"].append(key.group)
            cols["topic"].append(key.topic)
            cols["partition"].append(key.partition)
            cols["committed"].append(None if val is None else val.offset)
            cols["metadata"].append(None if val is None else val.metadata)
            cols["commit_ts"].append(t if val is None else val.commit_timestamp)
            cols["log_offset"].append(off)
            cols["log_ts"].append(t)
            cols["tombstone"].append(val is None)
            cols["home"].append(log_p is None or partition_for_key(key.group, offsets_partitions) == log_p)
        yield pa.RecordBatch.from_pydict(cols, schema=pa.schema([
            ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("committed", pa.int64()),
            ("metadata", pa.string()), ("commit_ts", pa.int64()), ("log_offset", pa.int64()),
            ("log_ts", pa.int64()), ("tombstone", pa.bool_()), ("home", pa.bool_())]))


def offsets_partitions(partitions: Iterable[tuple[str, int]]) -> int:
    """How many partitions __consumer_offsets has, from those in the log dirs (all of them
    when every broker's log dirs are given)."""
    return 1 + max((p for t, p in partitions if t == "__consumer_offsets"), default=-1)


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--groups", help="comma-separated groups (default: all)")
    ap.add_argument("--bucket", default="1 minute", help="time bucket of the lag history")
    args = ap.parse_args(argv)
    args.topics = None  # the commits say which topics matter
    os.makedirs(args.output, exist_ok=True)
    spark = session("krait-consumer-lag", args.master)
    from pyspark.sql import functions as F

    from spark_jobs.logdir import list_partitions, offset_for_timestamp

    log_dirs = args.log_dirs.split(",")
    plogs = {(p.topic, p.partition): p for p in list_partitions(log_dirs)}
    if not any(t == "__consumer_offsets" for t, _ in plogs):
        log("no __consumer_offsets partitions in the log dirs: no committed offsets")
        commits = None
    else:
        # through its Iceberg table if __consumer_offsets has one (krait.iceberg.mode)
        raw = records(spark, args, subscribe="__consumer_offsets") \
            .select("key", "value", "partition", "offset", F.unix_millis("timestamp").alias("log_ts"))
        commits = raw.mapInArrow(functools.partial(decode_commits, offsets_partitions=offsets_partitions(plogs)),
                                 COMMITS_SCHEMA)
        if args.groups:
            commits = commits.where(F.col("group").isin(args.groups.split(",")))
        commits = commits.cache()

    now_rows: list[dict] = []
    history: list[dict] = []
    if commits is not None:
        # the log offset orders a partition's commits; the group's own partition's come last
        order = F.struct("home", "log_offset")
        with progress(spark, "latest commit per group/topic/partition"):
            latest = (commits.groupBy("group", "topic", "partition")
                      .agg(F.max_by(F.struct("committed", "metadata", "commit_ts", "tombstone"), order).alias("c"))
                      .select("group", "topic", "partition", "c.*").collect())
        with progress(spark, f"commits per {args.bucket}"):
            bucketed = (commits.where(~F.col("tombstone"))
                        .withColumn("bucket", F.unix_millis(F.window(F.timestamp_millis("commit_ts"), args.bucket).end))
                        .groupBy("group", "topic", "partition", "bucket")
                        .agg(F.max_by("committed", order).alias("committed"))
                        .orderBy("group", "topic", "partition", "bucket").collect())
        commits.unpersist()

        for r in sorted(latest, key=lambda r: (r.group, r.topic, r.partition)):
            if r.tombstone:
                continue
            plog = plogs.get((r.topic, r.partition))
            end = plog.end_offset() if plog else None
            now_rows.append({
                "group": r.group, "topic": r.topic, "partition": r.partition, "committed_offset": r.committed,
                "log_end_offset": end, "lag": None if end is None else max(0, end - r.committed),
                "commit_time": iso(r.commit_ts), "metadata": r.metadata,
            })

        memo: dict[tuple[str, int, int], int] = {}

        def end_at(topic: str, partition: int, t_ms: int) -> int | None:
            """Log end offset at time t: the first offset with a later timestamp."""
            plog = plogs.get((topic, partition))
            if plog is None:
                return None
            k = (topic, partition, t_ms)
            if k not in memo:
                memo[k] = offset_for_timestamp(plog, t_ms, plog.earliest, plog.end_offset(), exact=False)
            return memo[k]

        with progress(spark, f"log end offsets at {len(bucketed)} points (from .timeindex)"):
            for r in bucketed:
                end = end_at(r.topic, r.partition, r.bucket)
                history.append({"group": r.group, "topic": r.topic, "partition": r.partition, "time_ms": r.bucket,
                                "committed": r.committed, "log_end_offset": end,
                                "lag": None if end is None else max(0, end - r.committed)})

    write_json(os.path.join(args.output, "consumer_lag.json"), {"now": now_rows})
    with open(os.path.join(args.output, "consumer_lag_history.csv"), "w", encoding="utf-8") as f:
        f.write("group,topic,partition,time,committed,log_end_offset,lag\n")
        for h in history:
            f.write(f"{h['group']},{h['topic']},{h['partition']},{iso(h['time_ms'])},{h['committed']},"
                    f"{h['log_end_offset']},{h['lag']}\n")

    # total lag per group/topic over time: each partition's latest commit carried forward
    series: dict[tuple[str, str], dict[int, list[tuple[int, int]]]] = {}
    for h in history:
        if h["lag"] is not None:
            series.setdefault((h["group"], h["topic"]), {}).setdefault(h["partition"], []).append((h["time_ms"], h["lag"]))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for (group, topic), parts in sorted(series.items()):
        times = sorted({t for pts in parts.values() for t, _ in pts})
        totals = []
        for t in times:
            s = 0
            for pts in parts.values():
                i = bisect.bisect_right([p[0] for p in pts], t) - 1
                if i >= 0:
                    s += pts[i][1]
            totals.append(s)
        ax.plot([dt.datetime.fromtimestamp(t / 1000, tz=dt.UTC) for t in times], totals, marker=".",
                label=f"{group} / {topic}")
    ax.set_title("Consumer lag over time (records)")
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("lag")
    if series:
        ax.legend(loc="best", fontsize="small")
    time_axis(ax)
    fig.tight_layout()
    fig.savefig(os.path.join(args.output, "consumer_lag.png"), dpi=110)

    print_table([{"GROUP": r["group"], "TOPIC": r["topic"], "PARTITION": r["partition"],
                  "CURRENT-OFFSET": r["committed_offset"], "LOG-END-OFFSET": r["log_end_offset"], "LAG": r["lag"]}
                 for r in now_rows], ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"])
    log(f"wrote {args.output}/consumer_lag.json, consumer_lag_history.csv, consumer_lag.png")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
