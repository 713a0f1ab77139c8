"""Several brokers' log dirs: each partition is read once, from one replica, up to its high
watermark (spark_jobs.replicas), and one broker's dirs read as before.

The log dirs are written by the broker's own storage code (LogManager / PartitionLog, the
followers through append_as_follower), so they are real Kafka-format files with the
broker's indexes and leader-epoch-checkpoint; replication-offset-checkpoint is written with
storage.checkpoints.write_checkpoint to give each replica the high watermark a test wants.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from protocol.compression import Codec
from protocol.records import build_batch, validate_batches
from spark_jobs.datasource import SCHEMA, arrow_schema, plan_slices
from spark_jobs.logdir import list_partitions, read_records_python, read_slice, whole_partition_slices
from spark_jobs.replicas import choose_replicas
from storage import checkpoints as ck
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.manager import LogManager
from tests.spark.helpers import T0, df_rows

CFG = LogConfig(segment_bytes=2500, index_interval_bytes=400)  # several segments per replica
TOPIC = "orders"


def append_batch(plog: PartitionLog, i: int, *, tag: bytes = b"v", epoch: int = 1) -> list[dict]:
    """Batch number ``i`` (1-4 records, codecs cycling) appended as a leader; its rows."""
    base = plog.log_end_offset
    n = 1 + i % 4
    recs = [(None if (base + j) % 5 == 0 else b"k%d" % ((base + j) % 7), tag + b"-%d" % (base + j) + b"." * 40)
            for j in range(n)]
    ts = [T0 + 1000 * i + j for j in range(n)]
    buf = bytearray(build_batch(recs, timestamp=ts, compression=Codec(i % 5)))
    plog.append(buf, validate_batches(buf), leader_epoch=epoch)
    return [{"topic": plog.topic, "partition": plog.partition, "offset": base + j, "key": k, "value": v,
             "timestamp_ms": ts[j], "timestampType": 0} for j, (k, v) in enumerate(recs)]


def replicate(leader: PartitionLog, follower: PartitionLog, upto: int) -> None:
    """The follower fetches the leader's batches (as they are on disk) up to offset ``upto``."""
    while follower.log_end_offset < upto:
        region = leader.read(follower.log_end_offset, 3000, max_offset=upto)
        assert region is not None
        follower.append_as_follower(region.read())
    assert follower.log_end_offset == upto  # ``upto`` is a batch boundary


@dataclass
class Cluster:
    dirs: list[str]  # every log dir of every broker, broker 0 has two
    written: dict[tuple[str, int], list[dict]]  # the leader's records of each partition
    committed: dict[tuple[str, int], int]  # where the reader must stop
    chosen: dict[tuple[str, int], str]  # log dir of the replica that must be read
    log_ends: dict[tuple[str, int], int] = field(default_factory=dict)  # of the chosen replica

    def expected(self) -> list[dict]:
        return [r for tp, rows in sorted(self.written.items()) for r in rows if r["offset"] < self.committed[tp]]


def build_cluster(root: str) -> Cluster:
    """Three brokers (broker 0 with two log dirs), replicated=True like cluster mode.

    orders-0  replicas on brokers 0 (leader: 40 batches), 1 (34) and 2 (20 copied, then 6
              batches of its own that were never replicated: uncommitted, divergent).
              Checkpointed HWs: 28 batches on 0 (its last checkpoint is older), 32 on 1,
              18 on 2, so broker 1's replica is read up to its HW, never its batches 33-34.
    orders-1  replicas on brokers 1 (leader: 10 batches) and 2 (6), no checkpoint entry
              for either: the larger log end, read to its end, as for one broker.
    orders-2  one replica (broker 0, 8 batches), HW at 5 batches: as before.
    """
    dirs = [os.path.join(root, "broker-0", "data-a"), os.path.join(root, "broker-0", "data-b"),
            os.path.join(root, "broker-1", "data"), os.path.join(root, "broker-2", "data")]
    brokers = [LogManager(dirs[:2], CFG, replicated=True), LogManager(dirs[2:3], CFG, replicated=True),
               LogManager(dirs[3:], CFG, replicated=True)]
    for m in brokers:
        m.load()
    b0, b1, b2 = brokers
    written: dict[tuple[str, int], list[dict]] = {}
    hws: dict[tuple[int, tuple[str, int]], int] = {}  # (broker, partition) -> HW to checkpoint

    # orders-0
    lead, f1, f2 = b0.create(TOPIC, 0), b1.create(TOPIC, 0), b2.create(TOPIC, 0)
    rows, bounds = [], [0]
    for i in range(40):
        rows += append_batch(lead, i)
        bounds.append(lead.log_end_offset)
    written[(TOPIC, 0)] = rows
    replicate(lead, f1, bounds[34])
    replicate(lead, f2, bounds[20])
    for i in range(6):
        append_batch(f2, 20 + i, tag=b"lost", epoch=0)
    assert f2.log_end_offset > bounds[18]
    hws.update({(0, (TOPIC, 0)): bounds[28], (1, (TOPIC, 0)): bounds[32], (2, (TOPIC, 0)): bounds[18]})

    # orders-1: no checkpoint entries
    lead1, f21 = b1.create(TOPIC, 1), b2.create(TOPIC, 1)
    rows, bounds1 = [], [0]
    for i in range(10):
        rows += append_batch(lead1, i)
        bounds1.append(lead1.log_end_offset)
    written[(TOPIC, 1)] = rows
    replicate(lead1, f21, bounds1[6])

    # orders-2: a single replica
    only = b0.create(TOPIC, 2)
    rows, bounds2 = [], [0]
    for i in range(8):
        rows += append_batch(only, i)
        bounds2.append(only.log_end_offset)
    written[(TOPIC, 2)] = rows
    hws[(0, (TOPIC, 2))] = bounds2[5]

    assert b0.log_dir_of(TOPIC, 0) != b0.log_dir_of(TOPIC, 2)  # broker 0 spread them over its dirs
    chosen = {(TOPIC, 0): b1.log_dir_of(TOPIC, 0), (TOPIC, 1): b1.log_dir_of(TOPIC, 1),
              (TOPIC, 2): b0.log_dir_of(TOPIC, 2)}
    log_ends = {(TOPIC, 0): bounds[34], (TOPIC, 1): bounds1[10], (TOPIC, 2): bounds2[8]}
    where_0 = {m: m.log_dir_of(TOPIC, 0) for m in brokers}
    for n, m in enumerate(brokers):
        where = {tp: m.log_dir_of(*tp) for (b, tp) in hws if b == n}
        m.shutdown()  # flush, indexes trimmed, leader-epoch-checkpoint, the four checkpoints
        for d in m.log_dirs:
            entries = {tp: hw for (b, tp), hw in hws.items() if b == n and where[tp] == d}
            ck.write_checkpoint(os.path.join(d, ck.REPLICATION_OFFSET), entries)
    for m in brokers:  # real replicas: each has the broker's leader-epoch-checkpoint
        assert os.path.exists(os.path.join(where_0[m], f"{TOPIC}-0", "leader-epoch-checkpoint"))
    committed = {(TOPIC, 0): hws[(1, (TOPIC, 0))], (TOPIC, 1): bounds1[10], (TOPIC, 2): bounds2[5]}
    return Cluster(dirs, written, committed, chosen, log_ends)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    return build_cluster(str(tmp_path_factory.mktemp("cluster")))


def direct_rows(dirs: list[str], **opts: str) -> tuple[list[tuple], set[str]]:
    """(topic, partition, offset, key, value) of every row read without Spark, and the
    partition directories the slices read."""
    schema = arrow_schema(SCHEMA)
    rows, paths = [], set()
    for s in plan_slices({"log.dirs": ",".join(dirs), **opts}):
        paths.add(os.path.dirname(s.path))
        for b in read_slice(s, schema):
            d = b.to_pydict()
            rows += list(zip(d["topic"], d["partition"], d["offset"], d["key"], d["value"], strict=True))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return rows, paths


def _key(rows: list[dict]) -> list[tuple]:
    return [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in rows]


def test_each_partition_read_once_from_the_replica_with_the_highest_hw(cluster):
    want = _key(cluster.expected())
    for dirs in (cluster.dirs, cluster.dirs[::-1]):  # the order of log.dirs does not matter here
        rows, paths = direct_rows(dirs)
        assert rows == want
        offsets = [(t, p, o) for t, p, o, _, _ in rows]
        assert len(offsets) == len(set(offsets))  # every record once
        assert paths == {os.path.join(d, f"{t}-{p}") for (t, p), d in cluster.chosen.items()}
    # every committed record of orders-0 is there, nothing from its uncommitted tails
    got0 = [r for r in rows if r[1] == 0]
    assert [r[2] for r in got0] == list(range(cluster.committed[(TOPIC, 0)]))
    assert not any(r[4].startswith(b"lost") for r in rows)
    assert cluster.committed[(TOPIC, 0)] < cluster.log_ends[(TOPIC, 0)]  # the chosen replica had more
    # the reference reader and the partition listing agree
    ref = read_records_python(cluster.dirs, ignore_high_watermark=False)
    assert sorted(_key(ref)) == want
    assert [(p.topic, p.partition, os.path.dirname(p.path)) for p in list_partitions(cluster.dirs)] == \
        [(t, p, cluster.chosen[(t, p)]) for t, p in sorted(cluster.chosen)]
    assert len(list_partitions(cluster.dirs, all_replicas=True)) == 3 + 2 + 1
    # batch-level jobs (topic_stats) plan over the same replicas
    assert {os.path.dirname(s.path) for s in whole_partition_slices(cluster.dirs)} == paths


def test_offset_ranges_and_ignore_apply_to_the_chosen_replica(cluster):
    rows, _ = direct_rows(cluster.dirs, assign='{"orders":[0]}', startingOffsets='{"orders":{"0":10}}')
    assert [r[2] for r in rows] == list(range(10, cluster.committed[(TOPIC, 0)]))
    rows, _ = direct_rows(cluster.dirs, assign='{"orders":[0]}', startingOffsets="latest")
    assert rows == []
    # highWatermark=ignore: the same replica (broker 1's), up to its last batch, never broker 0's longer log
    rows, paths = direct_rows(cluster.dirs, assign='{"orders":[0]}', highWatermark="ignore")
    assert paths == {os.path.join(cluster.chosen[(TOPIC, 0)], f"{TOPIC}-0")}
    assert _key([{"topic": t, "partition": p, "offset": o, "key": k, "value": v} for t, p, o, k, v in rows]) == \
        _key([r for r in cluster.written[(TOPIC, 0)] if r["offset"] < cluster.log_ends[(TOPIC, 0)]])


def test_spark_reads_a_cluster_once(spark, cluster):
    for dirs in (cluster.dirs, cluster.dirs[::-1]):
        df = spark.read.format("kafka-segments").option("log.dirs", ",".join(dirs)).load()
        assert df_rows(df) == cluster.expected()


def _replica(log_dir: str, batches: int) -> PartitionLog:
    plog = PartitionLog(os.path.join(log_dir, "t-0"), "t", 0, CFG, replicated=True)
    for i in range(batches):
        append_batch(plog, i)
    plog.close()
    return plog


def _hw(log_dir: str, hw: int | None) -> None:
    ck.write_checkpoint(os.path.join(log_dir, ck.REPLICATION_OFFSET), {} if hw is None else {("t", 0): hw})


def _chosen(dirs: list[str]) -> str:
    (plog,) = list_partitions(dirs)
    return os.path.dirname(plog.path)


def test_ties_missing_entries_and_a_hw_above_the_log_end(tmp_path):
    x, y = str(tmp_path / "x"), str(tmp_path / "y")
    ends = {x: _replica(x, 6).log_end_offset, y: _replica(y, 6).log_end_offset}
    assert ends[x] == ends[y]
    # same HW, same log end: the first in log.dirs order
    _hw(x, 5)
    _hw(y, 5)
    assert _chosen([x, y]) == x and _chosen([y, x]) == y
    # no entries at all: the same rule, read to the end
    _hw(x, None)
    _hw(y, None)
    assert _chosen([x, y]) == x and _chosen([y, x]) == y
    rows, _ = direct_rows([y, x])
    assert [r[2] for r in rows] == list(range(ends[y]))
    # same HW, a longer log: the longer one, whatever the order
    z = str(tmp_path / "z")
    _replica(z, 9)
    _hw(x, 5)
    _hw(z, 5)
    assert _chosen([x, z]) == z and _chosen([z, x]) == z
    # a replica with an entry beats one without, even a longer one
    _hw(z, None)
    assert _chosen([z, x]) == x
    # the HW counts as the broker loads it: min(checkpoint, log end)
    _hw(x, 10**6)
    _hw(z, ends[x] + 1)
    assert _chosen([x, z]) == z
    rows, _ = direct_rows([x, z])
    assert [r[2] for r in rows] == list(range(ends[x] + 1))
    # the same choice from the function itself, on what list_partitions lists
    every = list_partitions([x, y, z], all_replicas=True)
    assert [os.path.dirname(p.path) for p in every] == [x, y, z]
    assert [os.path.dirname(p.path) for p in choose_replicas(every)] == [z]


def test_one_broker_with_several_log_dirs_reads_as_before(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, CFG)  # a single broker: HW = log end, checkpointed at shutdown
    m.load()
    written = []
    for p in range(4):
        plog = m.create(TOPIC, p)
        for i in range(3 + 2 * p):
            written += append_batch(plog, i)
    assert {m.log_dir_of(TOPIC, p) for p in range(4)} == {os.path.abspath(d) for d in dirs}
    m.shutdown()
    assert [p.path for p in list_partitions(dirs)] == [p.path for p in list_partitions(dirs, all_replicas=True)]
    rows, _ = direct_rows(dirs)
    assert rows == sorted(_key(written))
