"""``read_topic`` over a table written with ``tables.writer.TableWriter`` straight from the
segments (no broker): the table + the tail give the log's records exactly, whichever way the
tail is read (decoded on the driver or by ``kafka-segments``); an empty tail is not read; the
direct reading of the metadata files names what pyiceberg names; and the bundled jobs give the
same results over a table-backed topic as over the log alone."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from protocol.records import iter_headers
from spark_jobs import tables as tables_mod
from spark_jobs.logdir import list_partitions
from spark_jobs.tables import _pyiceberg_table, _snapshot_from_pyiceberg, load_snapshot, read_topic
from tables.catalog import open_catalog
from tables.records import region_to_arrow
from tables.writer import TableWriter
from tests.spark.helpers import df_rows, strip, write_partition

TOPIC = "orders"


def _write_log(log_dir: str) -> list[dict]:
    expected = []
    # several segments, every codec, headers, null keys/values, LogAppendTime batches, control batches
    expected += write_partition(log_dir, TOPIC, 0, 80, seed=11, segment_bytes=4000, index_interval=600,
                                control_every=13)
    expected += write_partition(log_dir, TOPIC, 1, 50, seed=12, segment_bytes=1 << 20)
    expected += write_partition(log_dir, "other", 0, 10, seed=13, segment_bytes=1 << 20)
    return sorted(expected, key=lambda d: (d["topic"], d["partition"], d["offset"]))


def _write_table(log_dir: str, fractions: tuple[float, ...], specs: tuple[str, ...] = ()) -> dict[int, int]:
    """Append TOPIC's log to its table in commits ending at the given fractions of each
    partition's batches (the broker's driver's way: all partitions in each commit), commit i
    with the partition spec ``specs[i]`` if given; returns the table's offsets."""
    writer = TableWriter(open_catalog(log_dir), TOPIC)
    cuts: dict[int, list[tuple[bytes, int]]] = {}
    for plog in list_partitions([log_dir]):
        if plog.topic != TOPIC:
            continue
        data = b"".join(open(s.path, "rb").read() for s in plog.segments)
        batches = list(iter_headers(data))
        regions, pos0, start = [], 0, 0
        for f in fractions:
            k = int(len(batches) * f)
            if k == 0:
                continue
            end = batches[k - 1][0] + batches[k - 1][1].size
            regions.append((data[pos0:end], start))
            pos0, start = end, batches[k - 1][1].next_offset
        cuts[plog.partition] = regions
    offsets: dict[int, int] = {}
    for i in range(max(len(r) for r in cuts.values())):
        work = {}
        for p, regions in cuts.items():
            if i < len(regions):
                rows = region_to_arrow(regions[i][0], p, start_offset=regions[i][1])
                work[p] = (rows.table, rows.next_offset)
        if i < len(specs):
            writer.spec = specs[i]
        offsets = writer.append(work) or offsets
    return offsets


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda d: (d["topic"], d["partition"], d["offset"]))


def test_table_plus_tail_equals_the_log(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    expected = [r for r in _write_log(log_dir) if r["topic"] == TOPIC]
    offsets = _write_table(log_dir, (0.3, 0.6))
    ends = {p.partition: p.end_offset() for p in list_partitions([log_dir]) if p.topic == TOPIC}
    assert all(0 < offsets[p] < ends[p] for p in ends)  # a table and a tail in every partition

    snap = load_snapshot(log_dir, TOPIC)
    ref = _snapshot_from_pyiceberg(_pyiceberg_table(log_dir, None, None, "krait", TOPIC))
    assert sorted(snap.files) == sorted(ref.files) and snap.offsets == ref.offsets == offsets
    assert snap.schema == ref.schema

    on_driver = read_topic(spark, TOPIC, log_dir, include_headers=True)
    by_source = read_topic(spark, TOPIC, log_dir, include_headers=True, driver_tail_bytes=0)
    log_only = (spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", TOPIC)
                .option("isolation.level", "read_committed").option("includeHeaders", "true").load())
    assert on_driver.columns == log_only.columns
    want = _sorted(strip(expected))
    for df in (on_driver, by_source, log_only):
        assert _sorted(df_rows(df)) == want
    # narrow: the columns a query names, from both parts
    assert on_driver.select("partition", "offset").count() == len(expected)


def test_empty_tail_is_not_read(spark, tmp_path, monkeypatch):
    log_dir = str(tmp_path / "logs")
    expected = [r for r in _write_log(log_dir) if r["topic"] == TOPIC]
    _write_table(log_dir, (0.5, 1.0))

    def no_log(*a, **kw):
        raise AssertionError("the log was read for an empty tail")

    monkeypatch.setattr(tables_mod, "_log_read", no_log)
    monkeypatch.setattr(tables_mod, "_driver_tail", no_log)
    df = read_topic(spark, TOPIC, log_dir)
    assert _sorted(df_rows(df)) == _sorted(strip(expected, headers=False))


def test_a_table_of_two_partition_specs(spark, tmp_path):
    """A table whose spec changed (krait.iceberg.partition.spec) has files under directories
    of both layouts: they are read as one, each row once."""
    log_dir = str(tmp_path / "logs")
    expected = [r for r in _write_log(log_dir) if r["topic"] == TOPIC]
    _write_table(log_dir, (0.5, 0.8), specs=("(partition, hour(timestamp))", "(bucket(4, key))"))
    snap = load_snapshot(log_dir, TOPIC)
    assert any("/key_bucket_4=" in f for f in snap.files) and any("/timestamp_hour=" in f for f in snap.files)
    # no column from the directory names: the rows compare as dicts
    assert _sorted(df_rows(read_topic(spark, TOPIC, log_dir))) == _sorted(strip(expected, headers=False))


def test_no_table_reads_the_log(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    expected = [r for r in _write_log(log_dir) if r["topic"] == "other"]
    assert load_snapshot(log_dir, "other") is None
    assert not os.path.exists(os.path.join(log_dir, "krait-iceberg"))  # reading made no catalog
    assert _sorted(df_rows(read_topic(spark, "other", log_dir))) == _sorted(strip(expected, headers=False))


@pytest.mark.parametrize("job", ["key_skew", "topic_stats"])
def test_job_over_a_table_topic_equals_the_log_alone(spark, tmp_path, monkeypatch, job):
    """The job over a topic kept as a table (+ a tail) writes what it writes over the log."""
    import importlib

    from pyspark.sql import SparkSession

    plain = str(tmp_path / "plain")
    _write_log(plain)
    tabled = str(tmp_path / "tabled")
    shutil.copytree(plain, tabled)
    _write_table(tabled, (0.4, 0.7))
    # the job's main() gets this session (getOrCreate) and must not stop it
    monkeypatch.setattr(SparkSession, "stop", lambda self: None)
    main = importlib.import_module(f"spark_jobs.{job}").main
    outputs = {}
    for name, d in (("plain", plain), ("tabled", tabled)):
        out = str(tmp_path / f"out-{name}")
        assert main(["--log-dirs", d, "--output", out]) == 0
        with open(os.path.join(out, f"{job}.json"), encoding="utf-8") as f:
            outputs[name] = json.load(f)
    assert outputs["tabled"] == outputs["plain"]
    assert outputs["plain"]["topics"]  # both topics (one with a table, one without) are in it
