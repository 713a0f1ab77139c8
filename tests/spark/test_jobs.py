"""Each job run under spark-submit (started together by conftest.job_runs), outputs checked;
plus verify's checks on damaged segments, called directly."""

from __future__ import annotations

import csv
import json
import os
import shutil

from tests.spark.conftest import wait_job
from tests.spark.helpers import HOT_KEY, ORDERS_BATCHES, ORDERS_PARTITIONS, write_partition

PNG = b"\x89PNG\r\n\x1a\n"


def _ok(job_runs: dict, job: str) -> tuple[str, str, str]:
    rc, text, out, log_dir = wait_job(job_runs, job)
    assert rc == 0, f"{job} exited {rc}:\n{text[-4000:]}"
    return text, out, log_dir


def _png(path: str) -> None:
    with open(path, "rb") as f:
        assert f.read(8) == PNG, path


def test_topic_stats(job_runs):
    text, out, _ = _ok(job_runs, "topic_stats")
    with open(os.path.join(out, "topic_stats.json")) as f:
        stats = json.load(f)
    (orders,) = [t for t in stats["topics"] if t["topic"] == "orders"]
    assert orders["records"] == ORDERS_PARTITIONS * ORDERS_BATCHES * 10
    assert orders["partitions"] == ORDERS_PARTITIONS
    assert set(orders["codecs"]) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert all(v == ORDERS_PARTITIONS * ORDERS_BATCHES * 10 // 5 for v in orders["codecs"].values())
    assert not any(t["topic"].startswith("__") for t in stats["topics"])
    p0 = next(p for p in stats["partitions"] if p["partition"] == 0)
    assert (p0["min_offset"], p0["max_offset"]) == (0, ORDERS_BATCHES * 10 - 1)
    assert p0["batches"] == ORDERS_BATCHES and p0["value_bytes"] == ORDERS_BATCHES * 10 * 50
    assert p0["min_timestamp"].startswith("2023-11-14T22:13:20")
    with open(os.path.join(out, "records_per_minute.csv")) as f:
        series = list(csv.DictReader(f))
    # one batch every 3 s for 6 minutes: 20 batches x 10 records x 3 partitions per full minute
    assert sum(int(r["records"]) for r in series) == orders["records"]
    assert max(int(r["records"]) for r in series) == 20 * 10 * ORDERS_PARTITIONS
    _png(os.path.join(out, "records_per_minute.png"))
    assert "stage" in text or "done in" in text  # progress lines were printed


def test_key_skew(job_runs):
    _, out, _ = _ok(job_runs, "key_skew")
    with open(os.path.join(out, "key_skew.json")) as f:
        (orders,) = json.load(f)["topics"]
    assert orders["records"] == ORDERS_PARTITIONS * ORDERS_BATCHES * 10
    assert orders["hottest_keys"][0]["key"] == HOT_KEY.decode()
    assert 0.25 < orders["hottest_keys"][0]["share"] < 0.35
    assert 90 <= orders["distinct_keys"] <= 101 and orders["null_keys"] == 0
    assert [p["records"] for p in orders["partitions"]] == [ORDERS_BATCHES * 10] * ORDERS_PARTITIONS
    assert orders["partition_skew"] == 1.0
    _png(os.path.join(out, "key_skew.png"))


def test_consumer_lag(job_runs):
    text, out, _ = _ok(job_runs, "consumer_lag")
    with open(os.path.join(out, "consumer_lag.json")) as f:
        now = json.load(f)["now"]
    last_i = (ORDERS_BATCHES - 1) // 5 * 5
    committed = max(0, 10 * last_i - 40)
    assert [(r["group"], r["topic"], r["partition"]) for r in now] == [("billing", "orders", p) for p in range(3)]
    for r in now:
        assert r["committed_offset"] == committed
        assert r["log_end_offset"] == ORDERS_BATCHES * 10
        assert r["lag"] == ORDERS_BATCHES * 10 - committed
    assert "gone" not in {r["group"] for r in now}  # its offsets were deleted by a tombstone
    with open(os.path.join(out, "consumer_lag_history.csv")) as f:
        hist = list(csv.DictReader(f))
    assert len(hist) >= 3 * 5
    for h in hist:
        # lag at a bucket end = records written before it - the last commit in the bucket
        assert int(h["lag"]) == int(h["log_end_offset"]) - int(h["committed"]) >= 0
    _png(os.path.join(out, "consumer_lag.png"))
    assert "LOG-END-OFFSET" in text


def test_consumer_lag_orders_a_moved_groups_commits_by_its_own_partition():
    # Krait's former placement put "connect-file-sink" in partition 27 of 50, Kafka's in 21:
    # after the move, 27 ends with tombstones at higher offsets than the copies in 21
    import pyarrow as pa

    from coordinator.records import OffsetCommitValue, encode_offset_commit_key, encode_offset_commit_value
    from spark_jobs.consumer_lag import decode_commits, offsets_partitions

    key = encode_offset_commit_key("connect-file-sink", "t", 0)
    value = encode_offset_commit_value(OffsetCommitValue(42, "", 1))
    batch = pa.RecordBatch.from_pydict({"key": [key, key, key], "value": [value, None, value],
                                        "partition": [27, 27, 21], "offset": [500, 501, 7], "log_ts": [1, 2, 2]})
    (out,) = decode_commits(iter([batch]), offsets_partitions([("__consumer_offsets", p) for p in range(50)]))
    rows = out.to_pylist()
    assert [(r["log_offset"], r["tombstone"], r["home"]) for r in rows] == [(500, False, False), (501, True, False),
                                                                            (7, False, True)]
    latest = max(rows, key=lambda r: (r["home"], r["log_offset"]))  # the job's max_by(struct(home, log_offset))
    assert (latest["committed"], latest["tombstone"]) == (42, False)
    (plain,) = decode_commits(iter([batch]))  # no partition count: every record is taken as its group's own
    assert all(plain.column("home").to_pylist())


def test_export(job_runs, spark):
    _, out, _ = _ok(job_runs, "export")
    df = spark.read.parquet(out)
    assert df.count() == ORDERS_PARTITIONS * ORDERS_BATCHES * 10
    assert sorted(os.listdir(os.path.join(out, "topic=orders"))) == [f"partition={p}" for p in range(3)]
    row = df.where("partition = 1 AND offset = 7").collect()[0]
    assert bytes(row.value) == b"x" * 50 and row.timestamp is not None
    with open(os.path.join(out, "_export.json")) as f:
        assert json.load(f)["total_rows"] == ORDERS_PARTITIONS * ORDERS_BATCHES * 10


def test_verify_clean_dir(job_runs):
    text, out, _ = _ok(job_runs, "verify")
    with open(os.path.join(out, "verify.json")) as f:
        report = json.load(f)
    assert report["summary"]["ok"] and report["summary"]["errors"] == 0
    assert report["summary"]["records"] == ORDERS_PARTITIONS * ORDERS_BATCHES * 10 + 4 * 24 + 3
    assert "0 errors" in text


def test_verify_finds_damage(tmp_path):
    from spark_jobs.verify import verify_segment

    d = str(tmp_path)
    write_partition(d, "t", 0, 40, seed=3, segment_bytes=1 << 20, close=False, torn_tail=True)
    seg = os.path.join(d, "t-0", f"{0:020d}.log")
    clean = verify_segment(("t", seg, 0, 0, True))
    assert clean["errors"] == [] and "torn tail" in clean["warnings"][0]["warning"]

    bad = str(tmp_path / "bad.log")
    shutil.copy(seg, bad)
    for ext in (".index", ".timeindex"):
        shutil.copy(seg[:-4] + ext, bad[:-4] + ext)
    with open(bad, "r+b") as f:
        f.seek(2000)
        b = f.read(1)
        f.seek(2000)
        f.write(bytes([b[0] ^ 0x55]))
    res = verify_segment(("t", bad, 0, 0, False))
    assert any("CRC mismatch" in e["error"] for e in res["errors"])
    # not the active segment: the torn tail counts as an error there
    assert any("unreadable data" in e["error"] for e in res["errors"])
    assert all(e["position"] is None or e["position"] <= os.path.getsize(bad) for e in res["errors"])
