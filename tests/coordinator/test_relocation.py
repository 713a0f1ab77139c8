"""Groups that Krait's former placement (``hashCode & 0x7fffffff``) wrote into another
``__consumer_offsets`` partition: a restarted coordinator finds them in that legacy
partition, serves them from Kafka's partition with everything they had, copies their
state there and asks for tombstones in the legacy partition (coordinator/relocation.py)."""

from __future__ import annotations

import logging
from typing import Any

from coordinator import GroupCoordinator, GroupState
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import decode_any_key, encode_record, group_epoch_record
from coordinator.placement import legacy_partition_for_key
from coordinator.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)

from .harness import Client, E, FakeClock, Harness
from .test_txn_offsets import PID, TxnLog, fetched, txn_commit

N = 50
MOVED = "connect-file-sink"  # Kafka: 21, formerly 27
MOVED2 = "my-group"  # Kafka: 12, formerly 36
STAYS = "g"  # hash >= 0: 3 either way


class FormerPlacementLog(TxnLog):
    """An OffsetsLog laid out as Krait did before: each group's records in the partition of
    ``hashCode & 0x7fffffff``, whatever partition the coordinator names."""

    def append(self, partition: int, records: list, **kw: Any) -> int:
        group = decode_any_key(records[0][0]).group
        return super().append(legacy_partition_for_key(group, N), records, **kw)


def former_broker() -> Harness:
    h = Harness()
    h.log = FormerPlacementLog()  # type: ignore[assignment]
    h.c = GroupCoordinator(h.config, h.clock, h.log)
    return h


def restart(log: TxnLog, t: int, *, fail_copy_into: int | None = None) -> tuple[GroupCoordinator, dict[int, list[bytes]]]:
    """What the broker's driver does at start-up: load each partition after the records of
    its legacy partition, then write the tombstones the load asks for. Returns the
    coordinator and the tombstones written per legacy partition."""
    log = plain(log)
    c = GroupCoordinator(Harness().config, FakeClock(t), log)
    on_disk = {p: log.replay(p) for p in range(N)}
    c.start_loading(range(N))
    tombstones: dict[int, list[bytes]] = {}
    for p in range(N):
        q = c.legacy_partition(p)
        if q != p:
            c.load_legacy_partition(p, on_disk[q])
        c.load_partition(p, on_disk[p])
        log.fail = RuntimeError("disk full") if p == fail_copy_into else None
        moved = c.finished_loading(p)
        log.fail = None
        if moved is not None:
            assert moved.source == q
            log.append(q, [(k, None) for k in moved.tombstones])
            tombstones[q] = moved.tombstones
    return c, tombstones


def plain(log: TxnLog) -> TxnLog:
    """The same partitions, written where the coordinator says (a broker with Kafka's placement)."""
    disk = TxnLog()
    disk.partitions, disk.batches = log.partitions, log.batches
    return disk


def on(c: GroupCoordinator) -> Harness:
    h = Harness()
    h.c, h.clock = c, c._state.clock
    return h


def offsets_in(log: TxnLog, partition: int, group: str) -> dict[tuple[str, int], int | None]:
    """The last offset record per (topic, partition) of a group in a partition (None: tombstone)."""
    out: dict[tuple[str, int], int | None] = {}
    for rec in log.partitions.get(partition, []):
        if rec[0] == "marker":
            continue
        k = decode_any_key(rec[0])
        if isinstance(k, OffsetCommitKey) and k.group == group:
            out[(k.topic, k.partition)] = None if rec[1] is None else decode_offset_commit_value(rec[1]).offset
    return out


def test_groups_written_by_the_former_placement_are_moved_to_kafkas_partition(caplog) -> None:
    old = former_broker()
    cls = [Client("a"), Client("b")]
    old.form_group(MOVED, cls)
    old.commit(MOVED, {("t", 0): 10, ("t", 1): 20}, cls[0], metadata="m")
    old.commit(MOVED, {("t", 0): 11}, cls[1])
    old.commit(MOVED2, {("u", 0): 5})  # an offsets-only group
    old.commit(STAYS, {("t", 0): 1})
    old.log.append(0, [encode_record(group_epoch_record("cg-moved", 7))])  # a KIP-848 group
    cg_p, cg_q = GroupCoordinator(old.config, old.clock, TxnLog()).partition_for("cg-moved"), \
        legacy_partition_for_key("cg-moved", N)
    assert cg_p != cg_q
    assert not old.log.partitions.get(21) and offsets_in(old.log, 27, MOVED) == {("t", 0): 11, ("t", 1): 20}
    generation = old.c.group(MOVED).generation

    with caplog.at_level(logging.WARNING, logger="coordinator"):
        c, tombstones = restart(old.log, old.clock.t)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # strays are no malformed records
    h = on(c)
    assert c.partition_for(MOVED) == 21 and c.partition_for(MOVED2) == 12
    g = c.group(MOVED)
    assert g.partition == 21 and g.state is GroupState.STABLE and g.generation == generation and len(g.members) == 2
    assert fetched(h, MOVED, [("t", 0), ("t", 1)]) == {("t", 0): (11, E.none), ("t", 1): (20, E.none)}
    assert fetched(h, MOVED2, [("u", 0)]) == {("u", 0): (5, E.none)}
    assert fetched(h, STAYS, [("t", 0)]) == {("t", 0): (1, E.none)}
    cg = c.group("cg-moved")
    assert isinstance(cg, ConsumerGroup) and cg.group_epoch == 7 and cg.partition == cg_p
    # the members keep their generation: no rebalance for a moved group
    for cl in cls:
        assert h.heartbeat(MOVED, cl) == E.none
    # copied into Kafka's partition, deleted from the former one
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 11, ("t", 1): 20}
    assert offsets_in(old.log, 27, MOVED) == {("t", 0): None, ("t", 1): None}
    assert offsets_in(old.log, 12, MOVED2) == {("u", 0): 5}
    assert set(tombstones) == {27, 36, cg_q}
    assert STAYS not in {decode_any_key(k).group for ks in tombstones.values() for k in ks}

    # the next restart finds everything in place, and nothing left to move
    before = {p: len(recs) for p, recs in old.log.partitions.items()}
    c2, again = restart(old.log, old.clock.t)
    assert again == {}
    assert {p: len(recs) for p, recs in old.log.partitions.items()} == before
    h2 = on(c2)
    assert fetched(h2, MOVED, [("t", 0), ("t", 1)]) == {("t", 0): (11, E.none), ("t", 1): (20, E.none)}
    assert c2.group(MOVED).generation == generation and c2.group("cg-moved").group_epoch == 7


def test_what_kafkas_partition_holds_wins_over_the_legacy_records() -> None:
    old = former_broker()
    old.commit(MOVED, {("t", 0): 5, ("t", 1): 6, ("t", 2): 7})
    # written later into Kafka's partition (by a broker with the new placement)
    nine = OffsetCommitValue(offset=9, metadata="", commit_timestamp=old.clock.t, leader_epoch=-1, expire_timestamp=-1)
    TxnLog.append(old.log, 21, [(encode_offset_commit_key(MOVED, "t", 0), encode_offset_commit_value(nine))])
    TxnLog.append(old.log, 21, [(encode_offset_commit_key(MOVED, "t", 2), None)])  # deleted since
    c, tombstones = restart(old.log, old.clock.t)
    assert fetched(on(c), MOVED, [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (9, E.none), ("t", 1): (6, E.none), ("t", 2): (-1, E.none)}
    # only what Kafka's partition lacked is copied; every live legacy key is deleted
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 9, ("t", 1): 6, ("t", 2): None}
    assert offsets_in(old.log, 27, MOVED) == {("t", 0): None, ("t", 1): None, ("t", 2): None}
    assert len(tombstones[27]) == 3


def test_a_stop_before_the_tombstones_loses_nothing_and_copies_nothing_twice() -> None:
    old = former_broker()
    old.commit(MOVED, {("t", 0): 5})
    snapshot = {p: list(r) for p, r in old.log.partitions.items()}
    c = GroupCoordinator(old.config, FakeClock(old.clock.t), plain(old.log))
    c.start_loading([21])
    c.load_legacy_partition(21, old.log.replay(27))
    c.load_partition(21, [])
    assert c.finished_loading(21) is not None  # the broker stops before writing the tombstones
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 5} and old.log.partitions[27] == snapshot[27]
    n21 = len(old.log.partitions[21])
    c2, tombstones = restart(old.log, old.clock.t)
    assert fetched(on(c2), MOVED, [("t", 0)]) == {("t", 0): (5, E.none)}
    assert len(old.log.partitions[21]) == n21 and len(tombstones[27]) == 1


def test_a_failed_copy_keeps_the_legacy_records() -> None:
    old = former_broker()
    old.commit(MOVED, {("t", 0): 5})
    c, tombstones = restart(old.log, old.clock.t, fail_copy_into=21)
    assert tombstones == {}  # nothing deleted: the copy is not there
    assert fetched(on(c), MOVED, [("t", 0)]) == {("t", 0): (5, E.none)}  # served all the same
    c2, tombstones = restart(old.log, old.clock.t)
    assert fetched(on(c2), MOVED, [("t", 0)]) == {("t", 0): (5, E.none)}
    assert len(tombstones[27]) == 1 and offsets_in(old.log, 21, MOVED) == {("t", 0): 5}


def test_a_group_with_an_open_transaction_moves_once_it_is_resolved() -> None:
    old = former_broker()
    old.commit(MOVED, {("t", 0): 5, ("t", 1): 1})
    txn_commit(old, MOVED, {("t", 0): 10})  # its marker will go to partition 27 (recorded there)
    c, tombstones = restart(old.log, old.clock.t)
    h = on(c)
    assert tombstones == {} and not old.log.partitions.get(21)
    assert fetched(h, MOVED, [("t", 0)], stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    assert fetched(h, MOVED, [("t", 0), ("t", 1)]) == {("t", 0): (5, E.none), ("t", 1): (1, E.none)}
    # the marker lands in the legacy partition: the commit is written into Kafka's partition
    old.log.marker(27, PID, True)
    assert c.complete_transaction(27, PID, True) == 1
    assert fetched(h, MOVED, [("t", 0)], stable=True) == {("t", 0): (10, E.none)}
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 10}
    # the next load moves the rest and deletes the legacy records
    c2, tombstones = restart(old.log, old.clock.t)
    assert fetched(on(c2), MOVED, [("t", 0), ("t", 1)]) == {("t", 0): (10, E.none), ("t", 1): (1, E.none)}
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 10, ("t", 1): 1}
    assert offsets_in(old.log, 27, MOVED) == {("t", 0): None, ("t", 1): None}


def test_an_aborted_legacy_transaction_leaves_the_committed_offsets() -> None:
    old = former_broker()
    old.commit(MOVED, {("t", 0): 5})
    txn_commit(old, MOVED, {("t", 0): 10})
    old.log.marker(27, PID, False)
    c, tombstones = restart(old.log, old.clock.t)
    assert fetched(on(c), MOVED, [("t", 0)], stable=True) == {("t", 0): (5, E.none)}
    assert offsets_in(old.log, 21, MOVED) == {("t", 0): 5} and len(tombstones[27]) == 1
