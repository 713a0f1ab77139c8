"""The kafka-segments data source: schema, exact contents, offset/time ranges, pushdown,
planning, torn tails, checkpoints and reading while a writer appends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from spark_jobs.datasource import SCHEMA, SCHEMA_WITH_HEADERS, arrow_schema, plan_slices
from spark_jobs.logdir import list_partitions, read_records_python, read_slice
from spark_jobs.synth import write_checkpoint
from tests.spark.helpers import T0, df_rows, strip, write_partition


def load(spark, log_dir: str, **opts: str):
    r = spark.read.format("kafka-segments").option("log.dirs", log_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def direct_offsets(log_dir: str, **opts: str) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) read without Spark: planning + decode, for fast sweeps."""
    schema = arrow_schema(SCHEMA)
    out = []
    for s in plan_slices({"log.dirs": log_dir, **opts}):
        for b in read_slice(s, schema):
            out += [(s.topic, s.partition, o) for o in b.column("offset").to_pylist()]
    return sorted(out)


def test_schema_is_the_kafka_sources(spark, rich_log_dir):
    d, _ = rich_log_dir
    assert load(spark, d).schema == SCHEMA
    assert load(spark, d, includeHeaders="true").schema == SCHEMA_WITH_HEADERS
    assert [f.name for f in SCHEMA_WITH_HEADERS] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def test_reads_exactly_what_was_written(spark, rich_log_dir):
    d, expected = rich_log_dir
    assert df_rows(load(spark, d, includeHeaders="true")) == expected
    assert df_rows(load(spark, d)) == strip(expected, headers=False)
    # the slow record-by-record reference reader agrees (tests over broker data can use it)
    ref = read_records_python([d])
    assert sorted(ref, key=lambda r: (r["topic"], r["partition"], r["offset"])) == expected


def test_subscribe_pattern_assign(spark, rich_log_dir):
    d, expected = rich_log_dir
    assert {r["topic"] for r in df_rows(load(spark, d, subscribe="other"))} == {"other"}
    assert {r["topic"] for r in df_rows(load(spark, d, subscribePattern="mix.*"))} == {"mixed"}
    got = df_rows(load(spark, d, assign=json.dumps({"mixed": [2], "other": [0]})))
    assert got == strip([r for r in expected if (r["topic"], r["partition"]) in {("mixed", 2), ("other", 0)}], False)
    with pytest.raises(Exception, match="not found"):
        load(spark, d, assign=json.dumps({"mixed": [9]})).collect()


def test_min_partitions_splits_segments_at_index_entries(spark, rich_log_dir):
    d, expected = rich_log_dir
    base = load(spark, d)
    split = load(spark, d, minPartitions="40")
    assert split.rdd.getNumPartitions() > base.rdd.getNumPartitions()
    assert df_rows(split) == strip(expected, False)


def _boundaries(log_dir: str, topic: str, partition: int) -> list[int]:
    """Segment bases and the first/last offsets of every batch, +-1."""
    from protocol.records import iter_headers

    plog = next(p for p in list_partitions([log_dir]) if (p.topic, p.partition) == (topic, partition))
    points = set()
    for seg in plog.segments:
        with open(seg.path, "rb") as f:
            data = f.read()
        for _, h in iter_headers(data):
            points |= {h.base_offset - 1, h.base_offset, h.base_offset + 1, h.last_offset, h.last_offset + 1}
    return sorted(p for p in points if p >= 0)


def test_offset_ranges_exact_at_segment_and_batch_boundaries(spark, rich_log_dir):
    d, expected = rich_log_dir
    offsets = [r["offset"] for r in expected if (r["topic"], r["partition"]) == ("mixed", 0)]
    points = _boundaries(d, "mixed", 0)
    assert len(list_partitions([d])[1].segments) > 3  # mixed-0 really has several segments
    for lo in points[::3]:
        for hi in points[::7]:
            got = direct_offsets(d, assign='{"mixed":[0]}', startingOffsets=json.dumps({"mixed": {"0": lo}}),
                                 endingOffsets=json.dumps({"mixed": {"0": hi}}))
            assert [o for _, _, o in got] == [o for o in offsets if lo <= o < hi], (lo, hi)
    # and end to end through Spark at a few of them (segment starts included)
    for lo, hi in [(points[5], points[40]), (0, points[-3]), (points[20], 10**9)]:
        df = load(spark, d, assign='{"mixed":[0]}', startingOffsets=json.dumps({"mixed": {"0": lo}}),
                  endingOffsets=json.dumps({"mixed": {"0": hi}}))
        assert [r["offset"] for r in df_rows(df)] == [o for o in offsets if lo <= o < hi]
    # -2 / -1 and "latest"
    assert load(spark, d, startingOffsets="latest").count() == 0
    df = load(spark, d, assign='{"mixed":[0]}', startingOffsets='{"mixed":{"0":-2}}', endingOffsets='{"mixed":{"0":-1}}')
    assert df.count() == len(offsets)


def _first_offset_at(rows: list[dict], ts: int) -> int | None:
    """Kafka's ListOffsets: the earliest offset whose timestamp >= ts."""
    return next((r["offset"] for r in rows if r["timestamp_ms"] >= ts), None)


def test_timestamp_ranges_exact(spark, rich_log_dir):
    d, expected = rich_log_dir
    rows = [r for r in expected if (r["topic"], r["partition"]) == ("mixed", 0)]
    stamps = sorted({r["timestamp_ms"] for r in rows})
    candidates = sorted({t + dt for t in stamps[::4] for dt in (-1, 0, 1)} | {T0 - 10_000, stamps[-1] + 1})
    for start in candidates[::2]:
        for end in candidates[::9]:
            lo = _first_offset_at(rows, start)
            hi = _first_offset_at(rows, end)
            want = [r["offset"] for r in rows if lo is not None and r["offset"] >= lo and (hi is None or r["offset"] < hi)]
            got = direct_offsets(d, assign='{"mixed":[0]}', startingTimestamp=str(start), endingTimestamp=str(end))
            assert [o for _, _, o in got] == want, (start, end)
    start, end = stamps[30], stamps[200]
    lo, hi = _first_offset_at(rows, start), _first_offset_at(rows, end)
    df = load(spark, d, assign='{"mixed":[0]}', startingTimestamp=str(start), endingTimestamp=str(end))
    assert [r["offset"] for r in df_rows(df)] == [r["offset"] for r in rows if lo <= r["offset"] < hi]
    by_ts = load(spark, d, assign='{"mixed":[0]}', startingOffsetsByTimestamp=json.dumps({"mixed": {"0": start}}))
    assert [r["offset"] for r in df_rows(by_ts)] == [r["offset"] for r in rows if r["offset"] >= lo]


@pytest.mark.parametrize("where", [
    "partition = 1",
    "partition IN (0, 2) AND offset >= 37",
    "topic = 'other' OR offset < 5",
    "offset > 50 AND offset <= 120",
    "timestamp >= timestamp'2023-11-14 22:14:00'",
    "timestamp > timestamp'2023-11-14 22:14:00' AND partition = 0 AND offset < 300",
    "timestamp < timestamp'2023-11-14 22:14:00'",
    "topic IN ('mixed') AND partition >= 1",
    "key IS NULL AND offset >= 10",
])
def test_filter_pushdown_is_exact(spark, rich_log_dir, where):
    d, expected = rich_log_dir
    got = df_rows(load(spark, d).where(where))
    # the predicate evaluated by Spark on a DataFrame built from the records we wrote
    local = spark.createDataFrame(
        [(r["topic"], r["partition"], r["offset"], r["key"], r["timestamp_ms"]) for r in expected],
        "topic string, partition int, offset long, key binary, ts long").selectExpr("*", "timestamp_millis(ts) AS timestamp")
    want = {(r.topic, r.partition, r.offset) for r in local.where(where).collect()}
    assert want  # every predicate here matches something
    assert got == [r for r in strip(expected, False) if (r["topic"], r["partition"], r["offset"]) in want]


def test_pushdown_skips_work(rich_log_dir):
    """pushFilters narrows planning (fewer segments, later start) yet hands every filter back."""
    import datetime as dt

    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    from spark_jobs.datasource import KafkaSegmentsDataSource

    d, _ = rich_log_dir

    def plan(*filters):
        reader = KafkaSegmentsDataSource({"log.dirs": d, "pushFilters": "true"}).reader(SCHEMA)
        returned = list(reader.pushFilters(list(filters)))
        assert returned == list(filters)
        return [s for p in reader.partitions() if p.value is not None for s in p.value]

    everything = plan()
    only_p2 = plan(EqualTo(("partition",), 2))
    assert {(s.topic, s.partition) for s in only_p2} == {("mixed", 2)}
    assert plan(In(("topic",), ("other",))) and {s.topic for s in plan(In(("topic",), ("other",)))} == {"other"}
    late = plan(EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), 400))
    assert len(late) < len([s for s in everything if s.partition == 0]) and all(s.offset_lo == 400 for s in late)
    assert plan(LessThan(("offset",), 0)) == []
    cutoff = dt.datetime.fromtimestamp((T0 + 60_000) / 1000, tz=dt.UTC)
    by_time = plan(GreaterThanOrEqual(("timestamp",), cutoff))
    assert len(by_time) < len(everything) and all(s.ts_lo == T0 + 60_000 for s in by_time)


def test_pushdown_conf_off_still_works(spark, rich_log_dir):
    d, expected = rich_log_dir
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        assert load(spark, d).where("partition = 2").count() == sum(
            1 for r in expected if (r["topic"], r["partition"]) == ("mixed", 2))
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_high_watermark_and_log_start_checkpoints(spark, tmp_path):
    d = str(tmp_path)
    rows = write_partition(d, "t", 0, 30, seed=9, segment_bytes=3000)
    offsets = [r["offset"] for r in rows]
    hw, start = offsets[len(offsets) * 2 // 3], offsets[len(offsets) // 5]
    write_checkpoint(os.path.join(d, "replication-offset-checkpoint"), {("t", 0): hw})
    write_checkpoint(os.path.join(d, "log-start-offset-checkpoint"), {("t", 0): start})
    got = [r["offset"] for r in df_rows(load(spark, d))]
    assert got == [o for o in offsets if start <= o < hw]
    got = [r["offset"] for r in df_rows(load(spark, d, highWatermark="ignore"))]
    assert got == [o for o in offsets if o >= start]


def test_torn_tail_and_preallocated_index_are_not_errors(rich_log_dir):
    d, expected = rich_log_dir
    plog = next(p for p in list_partitions([d]) if (p.topic, p.partition) == ("mixed", 1))
    want = [r["offset"] for r in expected if (r["topic"], r["partition"]) == ("mixed", 1)]
    assert plog.log_end()[0] == want[-1] + 1
    assert [o for _, _, o in direct_offsets(d, assign='{"mixed":[1]}')] == want


WRITER = r"""
import sys, time
from spark_jobs.synth import PartitionWriter
w = PartitionWriter(sys.argv[1], "live", 0, segment_bytes=20000, preallocate_index=100)
i = 0
end = time.time() + float(sys.argv[2])
while time.time() < end:
    w.append([(b"k", b"%d" % (w.next_offset + j)) for j in range(5)], timestamp=1000 + i, compression=i % 5)
    i += 1
    time.sleep(0.002)
w.close()
print(w.next_offset)
"""


def test_reading_while_a_writer_appends(spark, tmp_path):
    d = str(tmp_path)
    os.makedirs(d, exist_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, d, "8"], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        time.sleep(1.0)
        last = 0
        reads = 0
        while writer.poll() is None and reads < 6:
            rows = df_rows(load(spark, d, minPartitions="3").select("value", "topic", "partition", "offset", "timestamp"))
            offsets = [r["offset"] for r in rows]
            # a consistent prefix: no gaps, no torn records, values match their offsets
            assert offsets == list(range(len(offsets)))
            assert all(r["value"] == b"%d" % r["offset"] for r in rows)
            assert len(offsets) >= last
            last = len(offsets)
            reads += 1
        assert reads >= 2 and last > 0
    finally:
        out, _ = writer.communicate(timeout=30)
    total = int(out.strip())
    assert load(spark, d).count() == total
