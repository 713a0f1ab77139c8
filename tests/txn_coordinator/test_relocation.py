"""Transactional ids that Krait's former placement (``hashCode & 0x7fffffff``) wrote into
another ``__transaction_state`` partition: a restarted coordinator finds them in that
legacy partition, keeps their producer ids and states, copies their last record into
Kafka's partition and asks for tombstones in the legacy one."""

from __future__ import annotations

import logging

from coordinator.placement import legacy_partition_for_key
from txn_coordinator import TransactionCoordinator, TransactionState
from txn_coordinator.records import decode_key, decode_value

from .harness import TP, E, MemoryLog, TxnHarness

S = TransactionState
N = 50
MOVED = "my-txn"  # Kafka: 45, formerly 3
MOVED2 = "connect-file-sink"  # Kafka: 21, formerly 27
STAYS = "txn-1"  # hash >= 0: 10 either way


class FormerPlacementLog(MemoryLog):
    """__transaction_state laid out as Krait did before: each id in its legacy partition."""

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        super().append(legacy_partition_for_key(decode_key(records[0][0]), N), records)


def former_broker() -> TxnHarness:
    h = TxnHarness(load=False)
    h.log = FormerPlacementLog()
    h.c = h.new_coordinator()
    for p in range(N):
        h.c.start_loading(p, 0)
        h.c.finished_loading(p)
    return h


def restart(h: TxnHarness, epoch: int = 1) -> dict[int, list[bytes]]:
    """The broker's start-up: each partition after its legacy partition's records, then the
    tombstones the load asks for. Returns them per legacy partition."""
    disk = MemoryLog()
    disk.partitions = h.log.partitions
    h.log = disk
    h.markers.sent.clear()
    c = h.c = h.new_coordinator()
    on_disk = {p: disk.replay(p) for p in range(N)}
    tombstones: dict[int, list[bytes]] = {}
    for p in range(N):
        c.start_loading(p, epoch)
        if c.legacy_partition(p) != p:
            c.load_legacy_partition(p, on_disk[c.legacy_partition(p)])
        c.load_partition(p, on_disk[p])
        moved = c.finished_loading(p)
        if moved is not None:
            disk.append(moved.source, [(k, None) for k in moved.tombstones])
            tombstones[moved.source] = moved.tombstones
    return tombstones


def last_records(log: MemoryLog, partition: int) -> dict[str, S | None]:
    out: dict[str, S | None] = {}
    for k, v in log.partitions.get(partition, []):
        out[decode_key(k)] = None if v is None else S(decode_value(v).transaction_status)
    return out


def test_ids_written_by_the_former_placement_keep_their_producer(caplog) -> None:
    h = former_broker()
    assert h.c.partition_for(MOVED) == 45 and legacy_partition_for_key(MOVED, N) == 3
    first = h.init(MOVED)
    h.init(STAYS)
    pid, epoch = h.begin(MOVED2, parts=(TP("t", 0),))
    assert last_records(h.log, 3) == {MOVED: S.EMPTY} and not h.log.partitions.get(45)

    with caplog.at_level(logging.WARNING, logger="txn_coordinator"):
        tombstones = restart(h)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    c: TransactionCoordinator = h.c
    assert c.partition_for(MOVED) == 45 and c.partition_for(MOVED2) == 21
    m = h.meta(MOVED)
    assert (m.producer_id, m.producer_epoch, m.state) == (first.producer_id, first.producer_epoch, S.EMPTY)
    ongoing = h.meta(MOVED2)
    assert (ongoing.producer_id, ongoing.state, set(ongoing.partitions)) == (pid, S.ONGOING, {TP("t", 0)})
    assert h.meta(STAYS).state is S.EMPTY
    # copied into Kafka's partitions, deleted from the former ones
    assert last_records(h.log, 45) == {MOVED: S.EMPTY} and last_records(h.log, 3) == {MOVED: None}
    assert last_records(h.log, 21) == {MOVED2: S.ONGOING} and last_records(h.log, 27) == {MOVED2: None}
    assert set(tombstones) == {3, 27}
    # the producer carries on: same id, next epoch; the transaction ends through partition 21
    again = h.init(MOVED)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.none, first.producer_id, first.producer_epoch + 1)
    assert h.end(MOVED2, pid, epoch).error_code == E.none
    h.markers.complete()
    assert last_records(h.log, 21) == {MOVED2: S.COMPLETE_COMMIT}

    # the next restart has nothing left to move
    assert restart(h) == {}
    assert h.meta(MOVED).producer_epoch == first.producer_epoch + 1
    assert h.meta(MOVED2).state is S.COMPLETE_COMMIT


def test_a_prepared_commit_resumes_from_kafkas_partition() -> None:
    h = former_broker()
    pid, epoch = h.begin(MOVED, parts=(TP("t", 0), TP("t", 1)))
    h.end(MOVED, pid, epoch)
    h.markers.complete(results={TP("t", 0): E.none})  # t-1 never reached; then the broker stopped
    restart(h, epoch=2)
    [(req, _)] = h.markers.sent
    assert (req.committed, req.producer_id, req.coordinator_epoch) == (True, pid, 2)
    h.markers.complete()
    # the copy comes first, its completion after it, in Kafka's partition
    assert [None if v is None else S(decode_value(v).transaction_status)
            for _, v in h.log.partitions[45]] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert last_records(h.log, 3) == {MOVED: None}


def test_records_in_kafkas_partition_win() -> None:
    h = former_broker()
    h.init(MOVED)
    later = h.init(MOVED)
    # the last record was written by a broker with Kafka's placement
    h.log.partitions[45] = [h.log.partitions[3].pop()]
    tombstones = restart(h)
    assert h.meta(MOVED).producer_epoch == later.producer_epoch
    # nothing copied (partition 45 has the id), the legacy record deleted
    assert len(h.log.partitions[45]) == 1 and last_records(h.log, 3) == {MOVED: None} and len(tombstones[3]) == 1
