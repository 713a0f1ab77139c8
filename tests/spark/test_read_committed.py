"""``isolation.level=read_committed`` in the kafka-segments source: each partition read up
to its last stable offset, without the records of aborted transactions, from the files
alone (``.txnindex``, producer snapshots, replication-offset-checkpoint). The logs are
written with the storage API, markers included, as the broker writes them."""

from __future__ import annotations

import glob
import os
import random

import pytest

from protocol.compression import Codec
from protocol.records import build_batch, validate_batches
from spark_jobs.datasource import SCHEMA, arrow_schema, plan_slices
from spark_jobs.logdir import list_partitions, read_slice, split_slices
from spark_jobs.synth import write_checkpoint
from spark_jobs.transactions import last_stable_offset, read_snapshot
from storage.config import LogConfig
from storage.manager import LogManager
from tests.spark.helpers import df_rows
from tests.txn_log import value_of, write_transactions


def _offsets(log_dir: str, split: int = 0, **opts: str) -> list[int]:
    """Offsets read by planning + decoding without Spark (fast, for sweeps); ``split``:
    into that many slices at index entries, as minPartitions does."""
    out = []
    for s in split_slices(plan_slices({"log.dirs": log_dir, **opts}), split):
        for b in read_slice(s, arrow_schema(SCHEMA)):
            out += b.column("offset").to_pylist()
    return sorted(out)


def _write(log_dir: str, topic: str, write):
    # small segments, so that markers land in other segments than their data, and an index
    # entry per batch, so that minPartitions can split them
    m = LogManager([log_dir], LogConfig(segment_bytes=300, index_interval_bytes=1))
    m.load()
    try:
        return write(m.create(topic, 0))
    finally:
        m.shutdown()  # writes replication-offset-checkpoint (the HW) and a last snapshot


@pytest.fixture(scope="module")
def txn_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rc-logs"))
    return d, _write(d, "txn", write_transactions)


def _load(spark, log_dir: str, **opts: str):
    r = spark.read.format("kafka-segments").option("log.dirs", log_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_spark_read_committed_vs_read_uncommitted(spark, txn_dir):
    d, written = txn_dir
    committed = df_rows(_load(spark, d, **{"isolation.level": "read_committed"}))
    assert [r["offset"] for r in committed] == written.read_committed() == [0, 1, 2, 3, 4, 5, 10, 14, 15]
    for r in committed:
        kind = r["value"].split(b"-")[0]
        assert r["value"] == value_of(r["offset"], None if kind == b"plain" else int(kind[3:]))
    uncommitted = df_rows(_load(spark, d))
    assert [r["offset"] for r in uncommitted] == written.read_uncommitted()  # markers never are rows
    assert _load(spark, d, **{"isolation.level": "read_committed"}).count() == 9
    assert _load(spark, d, **{"isolation.level": "read_uncommitted"}).count() == 16
    # Spark's Kafka-source spelling; "latest" ends at the LSO, and explicit ends are capped there
    assert _load(spark, d, **{"kafka.isolation.level": "read_committed"}).count() == 9
    assert _load(spark, d, **{"isolation.level": "read_committed", "minPartitions": "12"}).count() == 9
    assert _load(spark, d, **{"isolation.level": "read_committed", "endingOffsets": '{"txn": {"0": 19}}'}).count() == 9
    with pytest.raises(Exception, match="isolation.level"):
        _load(spark, d, **{"isolation.level": "serializable"}).count()


def test_high_watermark_bounds_which_markers_count(txn_dir):
    """Below the HW checkpoint only: a transaction whose marker is at or above it is still
    open for a read_committed reader, and holds the LSO at its first offset."""
    d, written = txn_dir
    ck = os.path.join(d, "replication-offset-checkpoint")
    original = open(ck).read()
    try:
        # HW 16: producer 2000's COMMIT at 16 is not below it: its transaction (14-15) holds the LSO
        for hw, want in [(16, [0, 1, 2, 3, 4, 5, 10]), (9, [0, 1, 2, 3, 4, 5]), (8, [0, 1]), (2, [0, 1]),
                         (14, [0, 1, 2, 3, 4, 5, 10]), (20, written.read_committed())]:
            write_checkpoint(ck, {("txn", 0): hw})
            assert _offsets(d, **{"isolation.level": "read_committed"}) == want, hw
            assert _offsets(d) == [o for o in written.read_uncommitted() if o < hw]
        assert _offsets(d, **{"isolation.level": "read_committed", "highWatermark": "ignore"}) == \
            written.read_committed()
    finally:
        with open(ck, "w") as f:
            f.write(original)


def _random_txn_log(plog, rng: random.Random, steps: int) -> list[tuple[int, int | None, str]]:
    """Random interleaving of plain batches and transactions of several producers, some
    compressed, some transactions left open; returns (offset, producer id or None, txn id)
    of every data record and each marker as (offset, pid, "C<txn>"/"A<txn>")."""
    records: list[tuple[int, int | None, str]] = []
    seq: dict[int, int] = {}
    txn_no: dict[int, int] = {}
    open_txn: set[int] = set()
    for _ in range(steps):
        base = plog.log_end_offset
        roll = rng.random()
        pid = rng.choice([11, 22, 33, 44])
        if roll < 0.25 and pid in open_txn:
            commit = rng.random() < 0.5
            plog.append_control_batch(pid, 0, 0, commit)
            records.append((base, pid, ("C" if commit else "A") + f"{pid}.{txn_no[pid]}"))
            open_txn.discard(pid)
            continue
        n = rng.randint(1, 3)
        codec = rng.choice([Codec.NONE, Codec.GZIP, Codec.LZ4])
        if roll < 0.45:
            buf = bytearray(build_batch([(b"k", b"p%d" % (base + i)) for i in range(n)], compression=codec))
            records += [(base + i, None, "") for i in range(n)]
        else:
            if pid not in open_txn:
                open_txn.add(pid)
                txn_no[pid] = txn_no.get(pid, 0) + 1
            buf = bytearray(build_batch([(b"k", b"t%d" % (base + i)) for i in range(n)], compression=codec,
                                        producer_id=pid, producer_epoch=0, base_sequence=seq.get(pid, 0),
                                        transactional=True))
            seq[pid] = seq.get(pid, 0) + n
            records += [(base + i, pid, f"{pid}.{txn_no[pid]}") for i in range(n)]
        plog.append(buf, validate_batches(buf))
    return records


def _expected(records: list[tuple[int, int | None, str]], bound: int) -> tuple[list[int], int]:
    """What a read_committed consumer reads below ``bound``, and the LSO (the model)."""
    ends = {t[1:]: (o, t[0]) for o, _, t in records if t[:1] in ("C", "A")}
    firsts: dict[str, int] = {}
    for o, pid, t in records:
        if pid is not None and t[:1] not in ("C", "A"):
            firsts.setdefault(t, o)
    undecided = [f for t, f in firsts.items() if f < bound and not (t in ends and ends[t][0] < bound)]
    lso = min(undecided, default=bound)
    out = [o for o, pid, t in records if o < lso and t[:1] not in ("C", "A")
           and (pid is None or ends[t][1] == "C")]
    return out, lso


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_transactions_match_the_model_at_every_high_watermark(tmp_path, seed):
    d = str(tmp_path)
    records = _write(d, "r", lambda plog: _random_txn_log(plog, random.Random(seed), 120))
    leo = records[-1][0] + 1
    ck = os.path.join(d, "replication-offset-checkpoint")
    for with_snapshots in (True, False):
        if not with_snapshots:
            for f in glob.glob(os.path.join(d, "r-0", "*.snapshot")):
                os.unlink(f)  # the LSO then comes from walking the log from its start
        for hw in range(0, leo + 1):
            write_checkpoint(ck, {("r", 0): hw})
            want, lso = _expected(records, hw)
            [plog] = list_partitions([d])
            assert last_stable_offset(plog, hw) == lso, (hw, with_snapshots)
            # an earlier LSO (what a table's offset is) as where the search starts: the same LSO
            for earlier in {_expected(records, b)[1] for b in range(0, hw + 1, 7)}:
                assert last_stable_offset(plog, hw, stable_from=earlier) == lso, (hw, earlier, with_snapshots)
            assert _offsets(d, **{"isolation.level": "read_committed"}) == want, (hw, with_snapshots)
        assert _offsets(d, split=150, **{"isolation.level": "read_committed"}) == want  # slices keep their aborts


def test_a_corrupt_snapshot_falls_back_to_an_older_one_or_the_log(tmp_path):
    d = str(tmp_path)
    written = _write(d, "txn", write_transactions)
    snaps = sorted(glob.glob(os.path.join(d, "txn-0", "*.snapshot")))
    assert read_snapshot(snaps[-1]) == {4000: 17}  # Kafka's layout: the open transaction's first offset
    with open(snaps[-1], "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    assert read_snapshot(snaps[-1]) is None
    assert _offsets(d, **{"isolation.level": "read_committed"}) == written.read_committed()
