"""``spark.readStream.format("kafka-segments")``: offsets, admission control, data loss, and
a checkpointed query over a running broker that is stopped and restarted.

The reader's planning is plain Python (Spark calls it in a driver-side process), so most
cases drive :class:`KafkaSegmentsStreamReader` directly on log dirs written here; the last
tests run real queries in the session's Spark with a real broker and a producer process.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_jobs.datasource import SCHEMA
from spark_jobs.streaming import DataLossError, KafkaSegmentsStreamReader, duration_ms, rate_limit
from spark_jobs.synth import PartitionWriter
from tests.krait_harness import BrokerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_log(log_dir: str, topic: str, counts: dict[int, int], *, segment_bytes: int = 1 << 20,
              start: dict[int, int] | None = None) -> None:
    """``counts[p]`` one-record batches per partition, values "p:i"."""
    for p, n in counts.items():
        w = PartitionWriter(log_dir, topic, p, segment_bytes=segment_bytes, start_offset=(start or {}).get(p, 0))
        for i in range(n):
            w.append([(None, f"{p}:{w.next_offset}".encode())], timestamp=1_700_000_000_000 + i)
        w.close()


def reader(log_dir: str, **opts: str) -> KafkaSegmentsStreamReader:
    return KafkaSegmentsStreamReader({"log.dirs": log_dir, "subscribe": "t", **opts}, SCHEMA)


def read_values(r: KafkaSegmentsStreamReader, start: dict, end: dict) -> list[bytes]:
    out = []
    for part in r.partitions(start, end):
        for batch in r.read(part):
            out.extend(batch.column("value").to_pylist())
    return out


# --- offsets and options --------------------------------------------------------------------


def test_initial_offsets_follow_starting_offsets(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 10, 1: 4})
    assert reader(d).initialOffset() == {"t": {"0": 10, "1": 4}}  # streams start at latest, as Spark's
    assert reader(d, startingOffsets="earliest").initialOffset() == {"t": {"0": 0, "1": 0}}
    assert reader(d, startingOffsets='{"t": {"0": 3, "1": -2}}').initialOffset() == {"t": {"0": 3, "1": 0}}
    assert reader(d, startingTimestamp=str(1_700_000_000_002)).initialOffset() == {"t": {"0": 2, "1": 2}}


def test_options_are_checked_when_the_query_starts(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 1})
    with pytest.raises(ValueError, match="exactly one of the options"):
        KafkaSegmentsStreamReader({"log.dirs": d}, SCHEMA)
    with pytest.raises(ValueError, match="exactly one of the options"):
        KafkaSegmentsStreamReader({"log.dirs": d, "subscribe": "t", "subscribePattern": "t.*"}, SCHEMA)
    with pytest.raises(ValueError, match="not valid in streaming"):
        reader(d, endingOffsets="latest")
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger must be a positive integer"):
        reader(d, maxOffsetsPerTrigger="0")
    assert duration_ms("15m") == 900_000 and duration_ms("250ms") == 250 and duration_ms("2") == 2


def test_a_batch_reads_exactly_its_offset_range(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 300, 1: 50}, segment_bytes=2048)  # many segments
    r = reader(d, startingOffsets="earliest")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 300, "1": 50}}
    mid = {"t": {"0": 137, "1": 20}}
    first, second = read_values(r, start, mid), read_values(r, mid, end)
    assert sorted(first + second) == sorted(f"{p}:{i}".encode() for p, n in ((0, 300), (1, 50)) for i in range(n))
    assert len(first) == 137 + 20 and not set(first) & set(second)
    assert r.partitions(end, end) == []


def test_max_offsets_per_trigger_shares_the_limit_by_backlog(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 300, 1: 100, 2: 1})
    r = reader(d, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    assert r.getDefaultReadLimit() == ReadMaxRows(40)
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    # Spark's prorating: 40 * 300/401 -> 29, 40 * 100/401 -> 9, 40 * 1/401 < 1 -> 1
    assert end == {"t": {"0": 29, "1": 9, "2": 1}}
    total = 0
    while end != start:  # the whole backlog, in batches of at most 40 (+1 for the starved partition)
        n = len(read_values(r, start, end))
        assert n <= 41
        total += n
        start, end = end, r.latestOffset(end, r.getDefaultReadLimit())
    assert total == 401
    # the engine's ReadAllAvailable (Trigger.Once / AvailableNow) overrides the option
    assert r.latestOffset({"t": {"0": 0, "1": 0, "2": 0}}, ReadAllAvailable()) == {"t": {"0": 300, "1": 100, "2": 1}}
    assert rate_limit(10, {"t": {"0": 5}}, {"t": {"0": 5}}) == {"t": {"0": 5}}


def test_min_offsets_per_trigger_waits_until_max_trigger_delay(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 30})
    r = reader(d, startingOffsets="earliest", minOffsetsPerTrigger="50", maxTriggerDelay="400ms")
    limit = r.getDefaultReadLimit()
    start = r.initialOffset()
    first = r.latestOffset(start, limit)  # the first trigger runs (no batch before it to wait on)
    assert first == {"t": {"0": 30}}
    w = PartitionWriter(d, "t", 0, start_offset=30)
    w.append([(None, b"x")] * 10)
    w.close()
    assert r.latestOffset(first, limit) == first  # 10 < 50 waiting: skipped
    time.sleep(0.5)
    assert r.latestOffset(first, limit) == {"t": {"0": 40}}  # maxTriggerDelay passed


def test_available_now_reads_what_was_there_when_it_started(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 10})
    r = reader(d, startingOffsets="earliest")
    r.prepareForTriggerAvailableNow()
    w = PartitionWriter(d, "t", 0, start_offset=10)
    w.append([(None, b"late")])
    w.close()
    assert r.latestOffset(r.initialOffset(), ReadAllAvailable()) == {"t": {"0": 10}}
    assert r.reportLatestOffset() == {"t": {"0": 11}}


def test_partitions_added_later_are_read_from_their_earliest_offset(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 5})
    r = reader(d, startingOffsets="latest")
    start = r.initialOffset()
    write_log(d, "t", {1: 3})
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5, "1": 3}}
    assert sorted(read_values(r, start, end)) == [b"1:0", b"1:1", b"1:2"]


# --- data loss ------------------------------------------------------------------------------


def delete_first_segments(log_dir: str, topic: str, partition: int, keep: int) -> int:
    """What retention does: remove all but the newest ``keep`` segments; returns the new
    first offset."""
    logs = sorted(glob.glob(os.path.join(log_dir, f"{topic}-{partition}", "*.log")))
    for path in logs[:-keep]:
        for suffix in (".log", ".index", ".timeindex"):
            os.remove(path[:-4] + suffix)
    return int(os.path.basename(logs[-keep])[:20])


def test_deleted_segments_fail_the_query_or_are_skipped_and_reported(tmp_path, capsys):
    d = str(tmp_path)
    write_log(d, "t", {0: 200}, segment_bytes=2048)
    start = {"t": {"0": 10}}
    new_first = delete_first_segments(d, "t", 0, keep=2)
    assert new_first > 10

    strict = reader(d, startingOffsets="earliest")
    end = strict.latestOffset(start, ReadAllAvailable())
    with pytest.raises(DataLossError, match=rf"cannot read offsets 10 to {new_first} of t-0.*failOnDataLoss"):
        strict.partitions(start, end)

    lenient = reader(d, startingOffsets="earliest", failOnDataLoss="false")
    got = read_values(lenient, start, lenient.latestOffset(start, ReadAllAvailable()))
    assert got == [f"0:{i}".encode() for i in range(new_first, 200)]
    assert f"cannot read offsets 10 to {new_first} of t-0" in capsys.readouterr().err


def test_a_segment_deleted_after_planning(tmp_path, capsys):
    d = str(tmp_path)
    write_log(d, "t", {0: 100}, segment_bytes=2048)
    for fail, expect in (("true", DataLossError), ("false", None)):
        r = reader(d, startingOffsets="earliest", failOnDataLoss=fail)
        parts = r.partitions({"t": {"0": 0}}, {"t": {"0": 100}})
        victim = parts[0].value.path
        saved = open(victim, "rb").read()
        os.remove(victim)
        try:
            if expect:
                with pytest.raises(expect, match="was deleted before offsets 0 to 100"):
                    list(r.read(parts[0]))
            else:
                assert list(r.read(parts[0])) == []
                assert "was deleted before offsets" in capsys.readouterr().err
        finally:
            open(victim, "wb").write(saved)


def test_a_deleted_topic_is_data_loss(tmp_path):
    d = str(tmp_path)
    write_log(d, "t", {0: 5, 1: 5})
    start = {"t": {"0": 5, "1": 2}}
    for f in glob.glob(os.path.join(d, "t-1", "*")):
        os.remove(f)
    os.rmdir(os.path.join(d, "t-1"))
    r = reader(d)
    with pytest.raises(DataLossError, match="t-1 is gone"):
        r.partitions(start, r.latestOffset(start, ReadAllAvailable()))
    lenient = reader(d, failOnDataLoss="false")
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 5}}


# --- real queries -----------------------------------------------------------------------------


def start_query(spark, log_dir: str, out: str, ck: str, *, trigger: str | None = "1 second",
                available_now: bool = False, **opts: str):
    r = spark.readStream.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", "t")
    for k, v in opts.items():
        r = r.option(k, v)
    w = (r.load().selectExpr("CAST(value AS STRING) AS v", "partition", "offset", "timestamp",
                             "current_timestamp() AS batch_time")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck))
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime=trigger)
    return w.start()


PRODUCER = textwrap.dedent("""
    import sys, time
    import confluent_kafka as ck
    bootstrap, first, n, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    t0 = time.monotonic()
    for i in range(n):
        p.produce("t", value=str(first + i).encode(), partition=i % 2)
        p.poll(0)
        delay = t0 + (i + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    assert p.flush(30) == 0
    print("done", flush=True)
""")


def sink_rows(spark, out: str) -> list:
    if not glob.glob(os.path.join(out, "*.parquet")):
        return []
    # the sink's own log (_spark_metadata) says which files are committed: read through it
    return spark.read.schema("v string, partition int, offset long, timestamp timestamp, batch_time timestamp") \
        .parquet(out).collect()


def test_checkpointed_query_over_a_running_broker_reads_every_record_exactly_once(spark, tmp_path):
    """A producer writes 3,000 records over 20 s while a checkpointed query (1 s trigger)
    reads them; the query is stopped mid-stream and restarted from its checkpoint with
    maxOffsetsPerTrigger; the file sink ends with every record exactly once, and while the
    query runs a record waits for a micro-batch about one trigger plus one high-watermark
    checkpoint."""
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    producer = None
    broker = BrokerProcess(str(tmp_path / "logs"), overrides={
        "replica.high.watermark.checkpoint.interval.ms": "500", "log.segment.bytes": "65536"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("t", 2, 1)]).values():
            f.result(15)
        out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
        warm, n = 20, 3000
        # a first micro-batch pays for starting the query's workers: let it run before the clock
        subprocess.run([sys.executable, "-c", PRODUCER, broker.bootstrap, "0", str(warm), "1000"], check=True,
                       capture_output=True)
        q = start_query(spark, broker.log_dir, out, ck, startingOffsets="earliest")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(sink_rows(spark, out)) < warm:
            time.sleep(0.5)
        producer = subprocess.Popen([sys.executable, "-c", PRODUCER, broker.bootstrap, str(warm), str(n), "150"],
                                    stdout=subprocess.PIPE, text=True)
        time.sleep(8)
        q.stop()
        first = sink_rows(spark, out)
        assert warm < len(first) < warm + n, len(first)
        assert producer.poll() is None  # still producing while the query is down
        # latency while the query ran: from the producer's timestamp to the micro-batch reading it
        lat = sorted((r.batch_time - r.timestamp).total_seconds() for r in first if int(r.v) >= warm)
        print(f"latency s over {len(lat)} records: median {lat[len(lat) // 2]:.2f}, "
              f"p95 {lat[int(len(lat) * 0.95)]:.2f}, max {lat[-1]:.2f}")
        # one 1 s trigger + one 0.5 s HW checkpoint + a micro-batch's own run (~1 s on a busy 2-core box)
        assert lat[len(lat) // 2] <= 1.0 + 0.5 + 1.5, lat
        assert lat[-1] <= 1.0 + 0.5 + 4.0, lat

        q = start_query(spark, broker.log_dir, out, ck, maxOffsetsPerTrigger="300")
        assert producer.wait(60) == 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(sink_rows(spark, out)) < warm + n:
            time.sleep(1)
        time.sleep(2)  # a batch more: anything beyond would be a duplicate
        progress = list(q.recentProgress)
        q.stop()
        assert q.exception() is None

        rows = sink_rows(spark, out)
        values = sorted(int(r.v) for r in rows)
        assert values == list(range(warm + n)), f"{len(values)} rows, {len(set(values))} distinct"
        assert len({(r.partition, r.offset) for r in rows}) == warm + n
        assert max(p["numInputRows"] for p in progress) <= 300 + 2  # + a starved partition's 1
        assert sum(p["numInputRows"] for p in progress) == warm + n - len(first)
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
        broker.kill()


def test_query_skips_deleted_segments_with_fail_on_data_loss_false(spark, tmp_path):
    d, out, ck = str(tmp_path / "logs"), str(tmp_path / "out"), str(tmp_path / "ck")
    os.makedirs(d)
    write_log(d, "t", {0: 200}, segment_bytes=2048)
    q = start_query(spark, d, out, ck, available_now=True, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    q.awaitTermination(120)
    assert len(sink_rows(spark, out)) == 200
    # 200 more, then retention takes all but the newest two segments before the query runs again
    w = PartitionWriter(d, "t", 0, segment_bytes=2048, start_offset=200)
    for i in range(200, 400):
        w.append([(None, f"0:{i}".encode())], timestamp=1_700_000_000_000 + i)
    w.close()
    new_first = delete_first_segments(d, "t", 0, keep=2)
    assert new_first > 200
    q = start_query(spark, d, out, ck, available_now=True)
    with pytest.raises(StreamingQueryException, match=rf"cannot read offsets 200 to {new_first} of t-0"):
        q.awaitTermination(120)
    q = start_query(spark, d, out, ck, available_now=True, failOnDataLoss="false")
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted(int(r.v.split(":")[1]) for r in sink_rows(spark, out))
    assert got == list(range(200)) + list(range(new_first, 400))
    offsets = json.loads(open(sorted(glob.glob(os.path.join(ck, "offsets", "[0-9]*")), key=lambda p: int(os.path.basename(p)))[-1]).read().splitlines()[-1])
    assert offsets == {"t": {"0": 400}}


@pytest.mark.parametrize("seed", [1, 2])
def test_read_committed_stream_in_small_batches_matches_the_model(tmp_path, seed):
    """Micro-batches of 7 offsets cut transactions whose markers lie in later batches: each
    batch still drops the aborted ones and stops at the last stable offset."""
    import random

    from tests.spark.test_read_committed import _expected, _random_txn_log, _write

    d = str(tmp_path)
    records = _write(d, "t", lambda plog: _random_txn_log(plog, random.Random(seed), 150))
    want, lso = _expected(records, records[-1][0] + 1)
    r = reader(d, startingOffsets="earliest", maxOffsetsPerTrigger="7", **{"isolation.level": "read_committed"})
    got, start = [], r.initialOffset()
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end == start:
            break
        for part in r.partitions(start, end):
            for batch in r.read(part):
                got += batch.column("offset").to_pylist()
        start = end
    assert start == {"t": {"0": lso}}
    assert sorted(got) == want
