"""kafka-segments plans input partitions by size (spark_jobs.splits), as Spark's file
sources plan files: many small segments are packed into few partitions, a segment larger
than the target split is cut at index entries, and every offset is read exactly once with
the same rows as one partition per segment gave."""

from __future__ import annotations

import os

import pytest

from spark_jobs.datasource import SCHEMA, KafkaSegmentsDataSource, arrow_schema, plan_slices, with_session_options
from spark_jobs.logdir import Slice, read_slice, split_slices
from spark_jobs.splits import SplitConf, max_split_bytes, pack, parse_bytes, plan_splits
from storage.config import LogConfig
from storage.manager import LogManager
from tests.spark.helpers import df_rows, strip, write_partition
from tests.txn_log import write_transactions

#: options that make the tiny test logs pack: no open cost, a small target, one core
PACK = {"openCostInBytes": "0", "maxPartitionBytes": "20000", "minPartitionNum": "1"}


@pytest.fixture(scope="module")
def small_segments(tmp_path_factory) -> tuple[str, list[dict]]:
    """Two topics, four partitions of many ~3 KB segments, and one of a single segment."""
    d = str(tmp_path_factory.mktemp("small-segments"))
    rows = []
    for p in range(3):
        rows += write_partition(d, "many", p, 120, seed=10 + p, segment_bytes=3000, index_interval=200)
    rows += write_partition(d, "few", 0, 40, seed=20, segment_bytes=1 << 20, index_interval=200)
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return d, rows


def splits_of(log_dir: str, **opts: str) -> list[tuple[Slice, ...]]:
    reader = KafkaSegmentsDataSource({"log.dirs": log_dir, **opts}).reader(SCHEMA)
    return [p.value for p in reader.partitions() if p.value is not None]


def offsets_of(splits: list[tuple[Slice, ...]]) -> list[tuple[str, int, int]]:
    schema = arrow_schema(SCHEMA)
    return [(s.topic, s.partition, o) for split in splits for s in split for b in read_slice(s, schema)
            for o in b.column("offset").to_pylist()]


def load(spark, log_dir: str, **opts: str):
    r = spark.read.format("kafka-segments").option("log.dirs", log_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_small_segments_pack_into_few_partitions(small_segments):
    d, rows = small_segments
    slices = plan_slices({"log.dirs": d})
    assert len(slices) > 30  # one slice per segment
    splits = splits_of(d, **PACK)
    target = 20000
    assert len(splits) < len(slices) / 4
    # packed in plan order: the slices, concatenated, are exactly the per-segment plan
    assert [s for split in splits for s in split] == slices
    sizes = [sum(s.size_hint for s in split) for split in splits]
    assert all(size <= target for size in sizes)
    # next fit: a partition was closed only because the next slice would not fit
    for split, nxt in zip(splits, splits[1:], strict=False):
        assert sum(s.size_hint for s in split) + nxt[0].size_hint > target
    # every offset exactly once, in order within each topic-partition
    got = offsets_of(splits)
    assert got == [(r["topic"], r["partition"], r["offset"]) for r in rows]


def test_open_cost_and_parallelism_decide_the_target(small_segments):
    d, _ = small_segments
    slices = plan_slices({"log.dirs": d})
    total = sum(s.size_hint for s in slices)
    # Spark's defaults: tiny slices cost 4 MiB each, the target is total / parallelism
    assert len(splits_of(d, minPartitionNum="2")) == 2
    assert len(splits_of(d, minPartitionNum="1")) == 2  # 128 MiB hold 31 slices of 4 MiB + a few KB
    # an open cost as large as the target: one slice per partition
    assert len(splits_of(d, openCostInBytes="1g", maxPartitionBytes="1g")) == len(slices)
    conf = SplitConf(max_partition_bytes=1 << 30, open_cost=100, min_partition_num=4)
    assert max_split_bytes(slices, conf) == (total + 100 * len(slices)) // 4
    assert max_split_bytes(slices, SplitConf(max_partition_bytes=5000, open_cost=0, min_partition_num=1)) == 5000
    assert max_split_bytes(slices, SplitConf(open_cost=1 << 30, min_partition_num=1)) == 128 << 20
    # a cost per slice packs fewer slices per partition
    assert len(splits_of(d, **{**PACK, "openCostInBytes": "2000"})) > len(splits_of(d, **PACK))
    # minPartitionNum divides the total: 4 -> about 4 partitions, without a byte limit
    four = splits_of(d, openCostInBytes="0", maxPartitionBytes="1g", minPartitionNum="4")
    assert 4 <= len(four) <= 6


def test_large_segment_is_split_at_index_entries(tmp_path):
    d = str(tmp_path)
    rows = write_partition(d, "big", 0, 400, seed=5, segment_bytes=1 << 30, index_interval=100)
    (whole,) = plan_slices({"log.dirs": d})
    target = whole.size_hint // 7
    splits = splits_of(d, openCostInBytes="0", maxPartitionBytes=str(target), minPartitionNum="1")
    pieces = [s for split in splits for s in split]
    assert len(pieces) >= 7 and all(len(split) <= 2 for split in splits)
    # contiguous byte ranges of the one segment, each near the target
    assert pieces[0].start == whole.start and pieces[-1].end == whole.end
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
    assert all(s.path == whole.path for s in pieces)
    assert max(s.size_hint for s in pieces) <= target * 1.2
    assert [o for *_, o in offsets_of(splits)] == [r["offset"] for r in rows]


def test_spark_reads_the_same_rows_packed_split_or_per_segment(spark, small_segments, rich_log_dir):
    d, rows = small_segments
    per_segment = load(spark, d, openCostInBytes="1g", maxPartitionBytes="1g")  # one partition per segment
    packed = load(spark, d, **PACK)
    split = load(spark, d, openCostInBytes="0", maxPartitionBytes="1500", minPartitionNum="1")
    n_slices = len(plan_slices({"log.dirs": d}))
    assert per_segment.rdd.getNumPartitions() == n_slices
    assert packed.rdd.getNumPartitions() < n_slices / 4
    assert split.rdd.getNumPartitions() > n_slices
    want = strip(rows, headers=False)
    for df in (per_segment, packed, split):
        assert df_rows(df) == want
    # the rich log dir (codecs, control batches, torn tail, LogAppendTime, an empty
    # partition), packed across topics and partitions, with pushdown
    rd, expected = rich_log_dir
    assert df_rows(load(spark, rd, includeHeaders="true", **PACK)) == expected
    got = df_rows(load(spark, rd, **PACK).where("partition = 0 and offset >= 100"))
    assert got == [r for r in strip(expected, False) if r["partition"] == 0 and r["offset"] >= 100]


def test_min_partitions_still_gives_at_least_that_many(spark, small_segments):
    d, rows = small_segments
    packed = len(splits_of(d, **PACK))
    for n in (packed + 3, 40, 80):
        splits = splits_of(d, minPartitions=str(n), **PACK)
        # at least n, or as many as the index entries allow (as before: split_slices)
        assert len(splits) >= min(n, len(split_slices(plan_slices({"log.dirs": d}), n)))
        assert len(splits) >= n or n == 80
        assert sorted(offsets_of(splits)) == [(r["topic"], r["partition"], r["offset"]) for r in rows]
    assert load(spark, d, minPartitions="40", **PACK).rdd.getNumPartitions() >= 40
    assert df_rows(load(spark, d, minPartitions="40", **PACK)) == strip(rows, headers=False)


def test_read_committed_packed(spark, tmp_path):
    d = str(tmp_path)
    m = LogManager([d], LogConfig(segment_bytes=300, index_interval_bytes=1))
    m.load()
    try:
        write_transactions(m.create("txn", 0))
    finally:
        m.shutdown()
    opts = {"isolation.level": "read_committed"}
    per_segment = df_rows(load(spark, d, **opts))
    assert per_segment
    df = load(spark, d, **opts, **PACK)
    assert df.rdd.getNumPartitions() < len(plan_slices({"log.dirs": d, **opts}))
    assert df_rows(df) == per_segment
    assert df_rows(load(spark, d, **opts, minPartitions="7", **PACK)) == per_segment


def test_options_and_session_defaults(spark, small_segments):
    assert parse_bytes("134217728", "x") == 128 << 20
    assert parse_bytes("128m", "x") == parse_bytes("128MB", "x") == 128 << 20
    assert parse_bytes(" 1g", "x") == 1 << 30 and parse_bytes("4kb", "x") == 4096
    for bad in ("1.5g", "-3", "12 parsecs", ""):
        with pytest.raises(ValueError, match="maxPartitionBytes"):
            parse_bytes(bad, "maxPartitionBytes")
    d, _ = small_segments
    with pytest.raises(ValueError, match="maxPartitionBytes"):
        splits_of(d, maxPartitionBytes="lots")
    with pytest.raises(ValueError, match="maxPartitionBytes"):
        splits_of(d, maxPartitionBytes="0")
    # the session's spark.sql.files.* confs become the defaults when the source is registered
    spark.conf.set("spark.sql.files.maxPartitionBytes", "20000b")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        cls = with_session_options(spark)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert cls.session_options["maxpartitionbytes"] == "20000b"
    assert cls.session_options["minpartitionnum"] == str(spark.sparkContext.defaultParallelism)
    session = [p.value for p in cls({"log.dirs": d, "minPartitionNum": "1"}).reader(SCHEMA).partitions()]
    assert session == splits_of(d, **PACK)
    # the read's own option wins over the session's
    own = [p.value for p in cls({"log.dirs": d, "maxPartitionBytes": "1g", "minPartitionNum": "1"})
           .reader(SCHEMA).partitions()]
    assert len(own) == 1


def test_pack_and_plan_splits_units():
    def sl(i: int, size: int) -> Slice:
        return Slice("t", 0, f"/x/{i:020d}.log", 0, size, 0, 10, size_hint=size)

    slices = [sl(i, size) for i, size in enumerate([50, 50, 50, 10, 90, 5])]
    assert [[s.size_hint for s in b] for b in pack(slices, 100, 0)] == [[50, 50], [50, 10], [90, 5]]
    assert [[s.size_hint for s in b] for b in pack(slices, 100, 20)] == [[50], [50], [50, 10], [90], [5]]
    assert plan_splits([], SplitConf()) == []
    # a slice without index entries to cut at stays whole (no such file: no entries)
    assert plan_splits([sl(0, 1000)], SplitConf(max_partition_bytes=100, open_cost=0, min_partition_num=1)) == [
        (sl(0, 1000),)]
    assert not os.path.exists(sl(0, 1).path)
