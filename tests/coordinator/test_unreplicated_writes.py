"""Issue 23: what the coordinator writes to a replicated ``__consumer_offsets`` partition
shows only once the partition's high watermark passes it, as in Kafka (the classic
coordinator's pending offset commits, completed in the append's callback; Kafka 4's reads
at the last committed offset). A committed offset, a SyncGroup's assignment, a static
member's new id and a transaction's offsets wait for their record to be committed; a failed
write leaves what was there before."""

from __future__ import annotations

from typing import Any

from coordinator import GroupCoordinator, GroupState
from coordinator.loader import TxnMarker
from coordinator.records import OffsetCommitValue, decode_key, encode_offset_commit_key, encode_offset_commit_value
from coordinator.writes import UncommittedWrites

from .consumer.cg import CG, Consumer
from .harness import Box, Client, E, Harness, ReplicatedLog, replicate, request, subscription

PID, EPOCH = 4000, 3


def cluster(**cfg: Any) -> tuple[Harness, ReplicatedLog]:
    """A coordinator whose log is a cluster's: nothing is committed until replicated."""
    h = Harness(**cfg)
    log = ReplicatedLog()
    h.log = log
    h.c = GroupCoordinator(h.config, h.clock, log)
    return h, log


def fetched(h: Harness, group: str, *, stable: bool = False) -> tuple[int, E]:
    """OffsetFetch v7 of t-0: (committed offset, error)."""
    box = Box()
    h.c.offset_fetch(request("offset_fetch", 7, group_id=group, require_stable=stable,
                             topics=[{"name": "t", "partition_indexes": [0]}]), box)
    p = box.value.topics[0].partitions[0]
    return p.committed_offset, p.error_code


def fetched_all(h: Harness, group: str) -> dict[tuple[str, int], int]:
    r = h.fetch(group, None, v=7)
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def txn_commit(h: Harness, group: str, offset: int) -> E:
    box = Box()
    h.c.txn_offset_commit(request(
        "txn_offset_commit", 3, transactional_id="tx", group_id=group, producer_id=PID, producer_epoch=EPOCH,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                              "committed_metadata": ""}]}]), box)
    return box.value.topics[0].partitions[0].error_code


def marker(log: ReplicatedLog, partition: int) -> int:
    """The transaction coordinator's marker lands in the partition; the log offset after it."""
    log.partitions.setdefault(partition, []).append((b"marker", None))
    return log.end(partition)


# ---------------------------------------------------------------------------- the tracker
def test_writes_settle_in_log_order_and_fail_one_append_at_a_time() -> None:
    hw = {0: 5}
    w = UncommittedWrites(hw.get)
    seen: list[str] = []
    for end in (8, 6, 7):
        w.after(0, end, lambda end=end: seen.append(f"ok{end}"), lambda e, end=end: seen.append(f"{e.name}{end}"))
    w.after(0, 5, lambda: seen.append("ok5"), lambda e: seen.append("no"))  # below the HW: at once
    w.after(1, 1, lambda: seen.append("ok-p1"), lambda e: seen.append("no"))  # the log cannot tell: at once
    assert seen == ["ok5", "ok-p1"] and w.waiting(0) == 3
    w.failed(0, 7, E.request_timed_out)
    w.committed(0, 6)
    assert seen[2:] == ["request_timed_out7", "ok6"] and w.waiting(0) == 1
    w.fail_all(0, E.not_leader_or_follower)
    assert seen[4:] == ["not_leader_or_follower8"] and w.waiting(0) == 0


# ---------------------------------------------------------------------------- OffsetCommit
def test_a_commit_shows_only_once_replicated() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    assert h.commit("s", {("t", 0): 10}) == {("t", 0): E.none}
    assert fetched(h, "s") == (-1, E.none)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (10, E.none)
    # the broker holds this answer until the ISR has the record; meanwhile nobody sees it
    assert h.commit("s", {("t", 0): 20}) == {("t", 0): E.none}
    assert fetched(h, "s") == (10, E.none)
    assert fetched_all(h, "s") == {("t", 0): 10}
    assert h.c.group("s").offsets[("t", 0)].offset == 10
    # a stable read waits for it, as Kafka's hasPendingOffsetCommitsForTopicPartition
    assert fetched(h, "s", stable=True) == (-1, E.unstable_offset_commit)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (20, E.none)
    assert fetched(h, "s", stable=True) == (20, E.none)


def test_a_failed_write_leaves_the_previous_offset() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    h.commit("s", {("t", 0): 20})
    h.c.on_write_failed(p, log.end(p), E.request_timed_out)
    assert fetched(h, "s") == (10, E.none)
    assert fetched(h, "s", stable=True) == (10, E.none)
    # its record may still reach the ISR: Kafka dropped the pending commit, so does this
    replicate(h.c, log, p)
    assert fetched(h, "s") == (10, E.none)


def test_each_append_has_its_own_outcome() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    h.commit("s", {("t", 0): 20})
    first = log.end(p)
    h.commit("s", {("t", 0): 30})
    h.c.on_write_failed(p, first, E.request_timed_out)
    assert fetched(h, "s") == (10, E.none)
    assert fetched(h, "s", stable=True) == (-1, E.unstable_offset_commit)  # 30 still waits
    replicate(h.c, log, p)
    assert fetched(h, "s") == (30, E.none)
    # in log order, as the high watermark passes them
    h.commit("s", {("t", 0): 40})
    first = log.end(p)
    h.commit("s", {("t", 0): 50})
    replicate(h.c, log, p, upto=first)
    assert fetched(h, "s") == (40, E.none)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (50, E.none)


def test_a_commit_below_the_high_watermark_already_shows_at_once() -> None:
    """An ISR of one (or a single broker, whose high watermark is its log end) commits
    the record with the append."""
    h, log = cluster()
    p = h.c.partition_for("s")
    log.hw[p] = 1_000_000
    h.commit("s", {("t", 0): 10})
    assert fetched(h, "s") == (10, E.none)
    single = Harness()  # a log without a high watermark: every append is committed
    single.commit("s", {("t", 0): 7})
    assert fetched(single, "s") == (7, E.none)


def test_a_group_whose_only_commit_failed_is_forgotten() -> None:
    h, log = cluster()
    p = h.c.partition_for("new")
    h.commit("new", {("t", 0): 5})
    assert h.c.group("new") is not None  # Kafka's hasOffsets counts the pending commit
    h.c.on_write_failed(p, log.end(p), E.not_enough_replicas_after_append)
    assert h.c.group("new") is None


def test_a_pending_commit_keeps_its_partition_from_expiring() -> None:
    h, log = cluster(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    h.advance(50_000)
    h.commit("s", {("t", 0): 20})
    records = log.end(p)
    h.advance(20_000)  # the committed offset is past its retention, but a write may replace it
    assert h.c.group("s").offsets[("t", 0)].offset == 10
    assert log.end(p) == records
    replicate(h.c, log, p)
    h.advance(20_000)
    assert fetched(h, "s") == (20, E.none)


def test_offset_delete_removes_a_pending_commit() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    h.commit("s", {("t", 0): 20})
    box = Box()
    h.c.offset_delete(request("offset_delete", 0, group_id="s",
                              topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]), box)
    assert box.value.topics[0].partitions[0].error_code == E.none
    assert decode_key(log.partitions[p][-1][0]).topic == "t" and log.partitions[p][-1][1] is None
    # the commit's record lies before the tombstone: committed, it decides nothing
    replicate(h.c, log, p)
    assert fetched(h, "s") == (-1, E.none)


def test_consumer_protocol_commit_waits_for_its_record() -> None:
    """OffsetCommit v9 of a KIP-848 member goes the same way."""
    cg = CG()
    log = ReplicatedLog()
    cg.log = log
    cg.c = GroupCoordinator(cg.config, cg.clock, log, topics=lambda: cg.topics)
    a = Consumer("a")
    cg.heartbeat(a)
    p = cg.c.partition_for("g")
    replicate(cg.c, log, p)

    def committed() -> int:
        box = Box()
        cg.c.offset_fetch(request("offset_fetch", 9, groups=[{"group_id": "g", "member_id": "a", "member_epoch": a.epoch,
                                                             "topics": [{"name": "t", "partition_indexes": [0]}]}]), box)
        return box.value.groups[0].topics[0].partitions[0].committed_offset

    box = Box()
    cg.c.offset_commit(request("offset_commit", 9, group_id="g", generation_id_or_member_epoch=a.epoch, member_id="a",
                               topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 12}]}]),
                       box)
    assert box.value.topics[0].partitions[0].error_code == E.none
    assert committed() == -1
    replicate(cg.c, log, p)
    assert committed() == 12


# ---------------------------------------------------------------------------- a new leader's load
def _record(offset: int, committed: int, *txn: int) -> tuple:
    value = encode_offset_commit_value(OffsetCommitValue(committed, "", 1_700_000_000_000))
    return (offset, encode_offset_commit_key("s", "t", 0), value, *((txn[0], True) if txn else ()))


def _new_leader(records: list, hw: int) -> tuple[Harness, ReplicatedLog, int]:
    """A broker that becomes the partition's leader with ``records`` in its log, committed
    below ``hw`` only, and loads them."""
    h, log = cluster()
    p = h.c.partition_for("s")
    log.partitions[p] = [(b"", None)] * len(records)
    log.hw[p] = hw
    h.c.start_loading([p])
    h.c.load_partition(p, records, high_watermark=hw)
    h.c.finished_loading(p)
    return h, log, p


def test_a_new_leader_shows_what_its_log_holds_past_the_high_watermark_once_committed() -> None:
    """Kafka 4's coordinator loads its whole log but reads at the last committed offset: a
    commit the old leader had not replicated to every follower waits, the one before shows."""
    h, log, p = _new_leader([_record(0, 10), _record(1, 20)], hw=1)
    assert fetched(h, "s") == (10, E.none)
    assert fetched(h, "s", stable=True) == (-1, E.unstable_offset_commit)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (20, E.none)
    h, log, p = _new_leader([_record(0, 10), _record(1, 20)], hw=1)
    h.c.unload_partition(p)  # its leadership moved on before the followers caught up
    assert h.c.group("s") is None
    h, log, p = _new_leader([_record(0, 10), _record(1, 20)], hw=2)
    assert fetched(h, "s") == (20, E.none)


def test_a_leader_back_with_a_shorter_log_waits_for_its_own_end() -> None:
    """Leadership left and came back while the log was truncated: what the load stages
    waits for the new log's end, not for where the log ended before."""
    h, log = cluster()
    p = h.c.partition_for("s")
    for offset in (1, 2, 3, 4):
        h.commit("s", {("t", 0): offset})
    h.c.unload_partition(p)
    log.partitions[p] = [(b"", None)] * 2
    log.hw[p] = 1
    h.c.start_loading([p])
    h.c.load_partition(p, [_record(0, 10), _record(1, 20)], high_watermark=1)
    h.c.finished_loading(p)
    assert fetched(h, "s") == (10, E.none)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (20, E.none)


def test_a_new_leader_completes_a_transaction_past_its_high_watermark_once_committed() -> None:
    records = [_record(0, 10), _record(1, 30, PID), TxnMarker(2, PID, True)]
    h, log, p = _new_leader(records, hw=2)
    assert fetched(h, "s") == (10, E.none)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (30, E.none)
    h, log, p = _new_leader([*records, _record(3, 40)], hw=1)  # the later plain commit wins
    assert fetched(h, "s") == (10, E.none)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (40, E.none)


# ---------------------------------------------------------------------------- transactions
def test_transactional_offsets_show_once_the_marker_is_committed() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    assert txn_commit(h, "s", 30) == E.none
    replicate(h.c, log, p)
    end = marker(log, p)
    assert h.c.complete_transaction(p, PID, True, marker_end=end) == 1
    assert fetched(h, "s") == (10, E.none)
    assert fetched(h, "s", stable=True) == (-1, E.unstable_offset_commit)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (30, E.none)
    assert fetched(h, "s", stable=True) == (30, E.none)


def test_a_marker_that_fails_leaves_the_offsets_pending_for_the_next_one() -> None:
    h, log = cluster()
    p = h.c.partition_for("s")
    txn_commit(h, "s", 30)
    replicate(h.c, log, p)
    end = marker(log, p)
    h.c.complete_transaction(p, PID, True, marker_end=end)
    h.c.on_write_failed(p, end, E.request_timed_out)
    assert fetched(h, "s", stable=True) == (-1, E.unstable_offset_commit)
    end = marker(log, p)  # the transaction coordinator sends it again
    h.c.complete_transaction(p, PID, True, marker_end=end)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (30, E.none)


def test_a_transactional_write_that_fails_is_no_longer_pending() -> None:
    """Kafka's failPendingTxnOffsetCommit: the marker does not commit what never reached
    the ISR (the client was told, and writes it again)."""
    h, log = cluster()
    p = h.c.partition_for("s")
    h.commit("s", {("t", 0): 10})
    replicate(h.c, log, p)
    txn_commit(h, "s", 30)
    h.c.on_write_failed(p, log.end(p), E.request_timed_out)
    assert fetched(h, "s", stable=True) == (10, E.none)
    end = marker(log, p)
    h.c.complete_transaction(p, PID, True, marker_end=end)
    replicate(h.c, log, p)
    assert fetched(h, "s") == (10, E.none)


# ---------------------------------------------------------------------------- group metadata
def _describe_state(h: Harness, group: str) -> str:
    box = Box()
    h.c.describe_groups(request("describe_groups", 5, groups=[group], include_authorized_operations=False), box)
    return box.value.groups[0].group_state


def _sync_all(h: Harness, group: str, clients: list[Client]) -> dict[str, Box]:
    """Join every client and sync them, the leader last; the SyncGroup boxes (unanswered
    until the assignment's record is committed)."""
    boxes = [h.join_until_parked(group, cl) for cl in clients]
    while not all(b.done for b in boxes):
        h.advance(h.config.group_initial_rebalance_delay_ms)
    joins = [h.absorb_join(cl, b) for cl, b in zip(clients, boxes, strict=True)]
    leader = joins[0].leader
    lead = next(j for j in joins if j.member_id == leader)
    assignment = {m.member_id: m.member_id.encode() for m in lead.members}
    order = sorted(clients, key=lambda c: c.member_id == leader)
    return {c.member_id: h.sync(group, c, assignment if c.member_id == leader else None) for c in order}


def test_members_get_their_assignment_once_its_record_is_committed() -> None:
    h, log = cluster()
    p = h.c.partition_for("g")
    clients = [Client(f"c{i}", protocols=[("range", subscription(["t"]))]) for i in range(2)]
    boxes = _sync_all(h, "g", clients)
    assert not any(b.done for b in boxes.values())
    assert _describe_state(h, "g") == "CompletingRebalance"
    assert h.heartbeat("g", clients[0]) == E.none
    replicate(h.c, log, p)
    for member, b in boxes.items():
        assert (b.value.error_code, b.value.assignment) == (E.none, member.encode())
    assert h.c.group("g").state is GroupState.STABLE


def test_an_assignment_whose_record_fails_is_an_error_for_every_member() -> None:
    h, log = cluster()
    p = h.c.partition_for("g")
    clients = [Client(f"c{i}", protocols=[("range", subscription(["t"]))]) for i in range(2)]
    boxes = _sync_all(h, "g", clients)
    h.c.on_write_failed(p, log.end(p), E.request_timed_out)
    assert {b.value.error_code for b in boxes.values()} == {E.coordinator_not_available}
    assert h.c.group("g").state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.c.group("g").members.values())


def test_members_waiting_on_a_write_are_answered_when_the_partition_moves() -> None:
    h, log = cluster()
    p = h.c.partition_for("g")
    clients = [Client(f"c{i}", protocols=[("range", subscription(["t"]))]) for i in range(2)]
    boxes = _sync_all(h, "g", clients)
    h.c.unload_partition(p)
    assert {b.value.error_code for b in boxes.values()} == {E.not_coordinator}
    assert h.c.group("g") is None


def test_a_static_member_takes_its_new_id_once_its_record_is_committed() -> None:
    h, log = cluster()
    p = h.c.partition_for("g")
    clients = [Client(f"c{i}", instance_id=f"i{i}", protocols=[("range", subscription(["t"]))]) for i in range(2)]
    _sync_all(h, "g", clients)
    replicate(h.c, log, p)
    old_id = clients[0].member_id
    back = Client("c0", instance_id="i0", protocols=clients[0].protocols)
    box = h.join("g", back)
    assert not box.done
    h.c.on_write_failed(p, log.end(p), E.not_enough_replicas_after_append)
    assert box.value.error_code == E.coordinator_not_available
    assert h.c.group("g").static_members["i0"] == old_id  # the old incarnation goes on
    assert h.heartbeat("g", clients[0]) == E.none
    box = h.join("g", back)
    assert not box.done
    replicate(h.c, log, p)
    assert box.value.error_code == E.none and box.value.member_id != old_id
    assert h.c.group("g").static_members["i0"] == box.value.member_id
