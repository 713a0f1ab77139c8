"""Transactional offset commits in the pure coordinator: TxnOffsetCommit v0-4 (Kafka's checks
and their precedence, the verification errors), pending offsets until the transaction's
marker (commit, abort, the later record winning), OffsetFetch's UNSTABLE_OFFSET_COMMIT,
replay of transactional batches and markers, and how pending offsets keep a group alive
through expiry, OffsetDelete and DeleteGroups."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import GroupCoordinator, GroupState
from coordinator.loader import TxnMarker
from coordinator.records import decode_key, decode_offset_commit_value, encode_offset_commit_key
from coordinator.txn_offsets import verification_error

from .harness import Box, Client, E, FakeClock, Harness, request, subscription

PID, EPOCH = 4000, 3


class TxnLog:
    """An OffsetsLog that keeps each record's producer (transactional batches) and markers,
    and replays them the way the broker's driver does."""

    def __init__(self) -> None:
        #: per partition: (key, value, producer id, transactional) or TxnMarker-like ("marker", pid, commit)
        self.partitions: dict[int, list[tuple[Any, ...]]] = {}
        self.batches: list[tuple[int, int, int, int]] = []  # (partition, records, producer id, epoch)
        self.fail: BaseException | None = None

    def append(self, partition: int, records: list, *, producer_id: int = -1, producer_epoch: int = -1) -> int:
        if self.fail is not None:
            raise self.fail
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        log.extend((k, v, producer_id, producer_id >= 0) for k, v in records)
        self.batches.append((partition, len(records), producer_id, producer_epoch))
        return base

    def marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.partitions.setdefault(partition, []).append(("marker", producer_id, commit))

    def replay(self, partition: int) -> list:
        out: list = []
        for i, rec in enumerate(self.partitions.get(partition, [])):
            if rec[0] == "marker":
                out.append(TxnMarker(i, rec[1], rec[2]))
            else:
                out.append((i, *rec))
        return out


class Failure(Exception):
    def __init__(self, code: E) -> None:
        super().__init__(code.name)
        self.error_code = code


def harness(**cfg: Any) -> Harness:
    h = Harness(**cfg)
    h.log = TxnLog()  # type: ignore[assignment]
    h.c = GroupCoordinator(h.config, h.clock, h.log, partition_exists=lambda t, p: t != "missing")
    return h


def txn_commit(
    h: Harness, group: str, offsets: dict[tuple[str, int], int], *, v: int = 4, pid: int = PID, epoch: int = EPOCH,
    cl: Client | None = None, metadata: str | None = "", verification: E | None = None, **extra: Any,
) -> dict[tuple[str, int], E]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_metadata": metadata})
    fields: dict[str, Any] = dict(
        transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=epoch,
        topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
    )
    if v >= 3:
        fields.update(generation_id=cl.generation if cl else -1, member_id=cl.member_id if cl else "",
                      group_instance_id=cl.instance_id if cl else None)
    fields.update(extra)
    box = Box()
    h.c.txn_offset_commit(request("txn_offset_commit", v, **fields), box, verification=verification)
    return {(t.name, p.partition_index): p.error_code for t in box.value.topics for p in t.partitions}


def fetched(h: Harness, group: str, parts: list[tuple[str, int]] | None, *, stable: bool = False, v: int = 7) -> dict:
    """{(topic, partition): (committed offset, error)} of an OffsetFetch."""
    topics = None
    if parts is not None:
        by: dict[str, list[int]] = {}
        for t, p in parts:
            by.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by.items()]
    box = Box()
    if v >= 8:
        req = request("offset_fetch", v, groups=[{"group_id": group, "topics": topics}], require_stable=stable)
        h.c.offset_fetch(req, box)
        resp_topics = box.value.groups[0].topics
    else:
        req = request("offset_fetch", v, group_id=group, topics=topics, require_stable=stable)
        h.c.offset_fetch(req, box)
        resp_topics = box.value.topics
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in resp_topics for p in t.partitions}


def reload(h: Harness, log: Any = None) -> GroupCoordinator:
    """A restarted coordinator replaying h's log (transactional batches and markers)."""
    c = GroupCoordinator(h.config, FakeClock(h.clock.t), log or TxnLog())
    parts = set(h.log.partitions)
    c.start_loading(parts)
    for p in sorted(parts):
        c.load_partition(p, h.log.replay(p))
        c.finished_loading(p)
    return c


def end_txn(h: Harness, group: str, commit: bool, pid: int = PID) -> int:
    """What the broker does: the marker goes into the log, then the coordinator completes."""
    p = h.c.partition_for(group)
    h.log.marker(p, pid, commit)
    return h.c.complete_transaction(p, pid, commit)


def stable_group(h: Harness, group: str = "g", n: int = 2) -> list[Client]:
    cls = [Client(f"c{i}", protocols=[("range", subscription(["t"]))]) for i in range(n)]
    h.form_group(group, cls)
    return cls


# --- pending until the marker ---------------------------------------------------------------------


def test_offsets_are_pending_until_the_transaction_commits() -> None:
    h = harness()
    h.commit("g", {("t", 0): 5})
    assert txn_commit(h, "g", {("t", 0): 10, ("t", 1): 20}, metadata="m") == {("t", 0): E.none, ("t", 1): E.none}
    # written as one transactional batch of the producer
    p = h.c.partition_for("g")
    assert h.log.batches[-1] == (p, 2, PID, EPOCH)
    value = decode_offset_commit_value(h.log.partitions[p][-1][1])
    assert value.offset == 20 and value.metadata == "m" and value.expire_timestamp == -1
    # invisible to OffsetFetch: the committed offset, or UNSTABLE_OFFSET_COMMIT when asked for stable ones
    assert fetched(h, "g", [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (5, E.none), ("t", 1): (-1, E.none), ("t", 2): (-1, E.none)}
    for v in (7, 8, 9):
        assert fetched(h, "g", [("t", 0), ("t", 1), ("t", 2)], stable=True, v=v) == {
            ("t", 0): (-1, E.unstable_offset_commit), ("t", 1): (-1, E.unstable_offset_commit), ("t", 2): (-1, E.none)}
    # all offsets (null topics): committed ones only, the pending one marked unstable
    assert fetched(h, "g", None, stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    assert fetched(h, "g", None) == {("t", 0): (5, E.none)}
    assert end_txn(h, "g", commit=True) == 1
    assert fetched(h, "g", [("t", 0), ("t", 1)], stable=True) == {("t", 0): (10, E.none), ("t", 1): (20, E.none)}
    assert h.c.group("g").pending_txn_offsets == {}
    # a second marker for the same producer finds nothing
    assert end_txn(h, "g", commit=True) == 0


def test_abort_drops_the_pending_offsets() -> None:
    h = harness()
    h.commit("g", {("t", 0): 5})
    txn_commit(h, "g", {("t", 0): 10, ("u", 0): 1})
    assert end_txn(h, "g", commit=False) == 1
    assert fetched(h, "g", [("t", 0), ("u", 0)], stable=True) == {("t", 0): (5, E.none), ("u", 0): (-1, E.none)}


def test_the_later_record_wins_when_a_plain_commit_races_the_transaction() -> None:
    h = harness()
    h.commit("g", {("t", 0): 1, ("t", 1): 1})
    txn_commit(h, "g", {("t", 0): 100, ("t", 1): 100})
    h.commit("g", {("t", 1): 7})  # written after the transactional record: it stays
    assert fetched(h, "g", [("t", 0), ("t", 1)]) == {("t", 0): (1, E.none), ("t", 1): (7, E.none)}
    end_txn(h, "g", commit=True)
    assert fetched(h, "g", [("t", 0), ("t", 1)]) == {("t", 0): (100, E.none), ("t", 1): (7, E.none)}
    # the replayed log agrees
    assert fetched_c(reload(h), "g", [("t", 0), ("t", 1)]) == {("t", 0): 100, ("t", 1): 7}


def fetched_c(c: GroupCoordinator, group: str, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    h = Harness()
    h.c = c
    return {k: off for k, (off, _) in fetched(h, group, parts).items()}


def test_completion_is_per_partition_and_per_producer() -> None:
    h = harness()
    other = next(g for g in (f"x{i}" for i in range(200)) if h.c.partition_for(g) != h.c.partition_for("g"))
    txn_commit(h, "g", {("t", 0): 1})
    txn_commit(h, "g2", {("t", 0): 2}, pid=PID + 1)
    txn_commit(h, other, {("t", 0): 3})
    # same producer, other partition: untouched until its own marker
    assert end_txn(h, "g", commit=True) == 1  # g2 is another producer's
    assert fetched(h, "g", [("t", 0)]) == {("t", 0): (1, E.none)}
    assert fetched(h, other, [("t", 0)], stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    assert fetched(h, "g2", [("t", 0)], stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    assert end_txn(h, other, commit=True) == 1
    assert fetched(h, other, [("t", 0)]) == {("t", 0): (3, E.none)}


def test_several_commits_in_one_transaction_and_two_producers_on_one_group() -> None:
    h = harness()
    txn_commit(h, "g", {("t", 0): 1})
    txn_commit(h, "g", {("t", 0): 2, ("t", 1): 2})
    txn_commit(h, "g", {("t", 2): 9}, pid=PID + 1)
    end_txn(h, "g", commit=False, pid=PID + 1)
    assert fetched(h, "g", [("t", 2)], stable=True) == {("t", 2): (-1, E.none)}
    assert fetched(h, "g", [("t", 0)], stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    end_txn(h, "g", commit=True)
    assert fetched(h, "g", [("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (2, E.none), ("t", 1): (2, E.none), ("t", 2): (-1, E.none)}


# --- checks and errors ----------------------------------------------------------------------------


def test_group_and_partition_checks() -> None:
    h = harness()
    # unknown partitions are answered first and go no further
    assert txn_commit(h, "", {("missing", 0): 1}) == {("missing", 0): E.unknown_topic_or_partition}
    assert txn_commit(h, "", {("missing", 0): 1, ("t", 0): 1}) == {
        ("missing", 0): E.unknown_topic_or_partition, ("t", 0): E.invalid_group_id}
    assert txn_commit(h, "g", {("missing", 0): 1, ("t", 0): 1}) == {
        ("missing", 0): E.unknown_topic_or_partition, ("t", 0): E.none}
    # a generation for a group nobody knows
    assert txn_commit(h, "new", {("t", 0): 1}, v=3, generation_id=4) == {("t", 0): E.illegal_generation}
    assert h.c.group("new") is None
    # metadata too large, per partition
    h2 = harness(offset_metadata_max_bytes=3)
    assert txn_commit(h2, "g", {("t", 0): 1}, metadata="long") == {("t", 0): E.offset_metadata_too_large}
    assert h2.log.batches == [] and h2.c.group("g") is None
    assert txn_commit(h2, "g", {("t", 0): 1}, metadata=None) == {("t", 0): E.none}


def test_member_checks_v3() -> None:
    h = harness()
    a, b = stable_group(h)
    assert txn_commit(h, "g", {("t", 0): 1}, cl=a) == {("t", 0): E.none}
    assert txn_commit(h, "g", {("t", 0): 1}, cl=Client("x", member_id="nobody", generation=a.generation)) == {
        ("t", 0): E.unknown_member_id}
    assert txn_commit(h, "g", {("t", 0): 1}, cl=Client("x", member_id=a.member_id, generation=a.generation + 1)) == {
        ("t", 0): E.illegal_generation}
    # a member id with generation -1 is still checked against the generation
    assert txn_commit(h, "g", {("t", 0): 1}, cl=Client("x", member_id=a.member_id, generation=-1)) == {
        ("t", 0): E.illegal_generation}
    # no generation and no member (v0-2, or a producer outside the group): accepted
    assert txn_commit(h, "g", {("t", 0): 2}) == {("t", 0): E.none}
    assert txn_commit(h, "g", {("t", 0): 2}, v=2) == {("t", 0): E.none}
    # unlike OffsetCommit, a rebalance in progress does not matter
    c = Client("c2", protocols=[("range", subscription(["t"]))])
    h.join_until_parked("g", c)
    for cl in (a, b):
        h.join("g", cl)
    g = h.c.group("g")
    assert g.state is GroupState.COMPLETING_REBALANCE, g.state
    a.generation = b.generation = g.generation
    assert txn_commit(h, "g", {("t", 0): 3}, cl=a) == {("t", 0): E.none}
    assert h.commit("g", {("t", 0): 3}, a) == {("t", 0): E.rebalance_in_progress}


def test_static_member_checks() -> None:
    h = harness()
    a = Client("a", instance_id="inst", protocols=[("range", subscription(["t"]))])
    h.form_group("g", [a])
    assert txn_commit(h, "g", {("t", 0): 1}, cl=a) == {("t", 0): E.none}
    fenced = Client("a2", member_id="old-id", generation=a.generation, instance_id="inst")
    assert txn_commit(h, "g", {("t", 0): 1}, cl=fenced) == {("t", 0): E.fenced_instance_id}
    unknown = Client("a3", member_id=a.member_id, generation=a.generation, instance_id="other")
    assert txn_commit(h, "g", {("t", 0): 1}, cl=unknown) == {("t", 0): E.unknown_member_id}


def test_not_coordinator_and_loading() -> None:
    h = harness()
    p = h.c.partition_for("g")
    h.c.serve_only([p + 1])
    assert txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): E.not_coordinator}
    assert h.c.txn_offset_commit_partition(request(
        "txn_offset_commit", 3, transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}],
    )) is None
    h.c.serve_only([p])
    h.c.start_loading([p])
    for v in (2, 3, 4):
        assert txn_commit(h, "g", {("t", 0): 1}, v=v) == {("t", 0): E.coordinator_load_in_progress}
    for v in (0, 1):  # v0-1 clients cannot handle COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296)
        assert txn_commit(h, "g", {("t", 0): 1}, v=v) == {("t", 0): E.coordinator_not_available}
    h.c.finished_loading(p)
    assert txn_commit(h, "g", {("t", 0): 1}, v=0) == {("t", 0): E.none}


def test_write_partition() -> None:
    h = harness()

    def req(group: str, topic: str = "t") -> Any:
        return request("txn_offset_commit", 4, transactional_id="tx", group_id=group, producer_id=1, producer_epoch=0,
                       topics=[{"name": topic, "partitions": [
                           {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}])

    assert h.c.txn_offset_commit_partition(req("g")) == h.c.partition_for("g")
    assert h.c.txn_offset_commit_partition(req("")) is None
    assert h.c.txn_offset_commit_partition(req("g", "missing")) is None


@pytest.mark.parametrize(("code", "version", "expected"), [
    (E.producer_fenced, 4, E.invalid_producer_epoch),
    (E.transaction_abortable, 4, E.transaction_abortable),
    (E.transaction_abortable, 3, E.invalid_txn_state),
    (E.cluster_authorization_failed, 4, E.invalid_txn_state),
    (E.invalid_txn_state, 4, E.invalid_txn_state),
    (E.network_exception, 4, E.coordinator_load_in_progress),
    (E.coordinator_not_available, 4, E.coordinator_not_available),
    (E.not_coordinator, 2, E.not_coordinator),
    (E.concurrent_transactions, 4, E.concurrent_transactions),
    (E.invalid_producer_id_mapping, 4, E.invalid_producer_id_mapping),
    (E.request_timed_out, 4, E.coordinator_not_available),
    (E.not_leader_or_follower, 4, E.not_coordinator),
])
def test_verification_errors(code: E, version: int, expected: E) -> None:
    assert verification_error(code, version) == expected
    assert verification_error(int(code), version) == expected


def test_verification_failure_comes_after_the_coordinator_and_before_the_member() -> None:
    h = harness()
    assert txn_commit(h, "g", {("t", 0): 1}, verification=E.producer_fenced) == {("t", 0): E.invalid_producer_epoch}
    assert txn_commit(h, "g", {("t", 0): 1}, v=1, verification=E.network_exception) == {
        ("t", 0): E.coordinator_not_available}
    assert txn_commit(h, "g", {("t", 0): 1, ("missing", 1): 1}, verification=E.invalid_txn_state) == {
        ("t", 0): E.invalid_txn_state, ("missing", 1): E.unknown_topic_or_partition}
    # even a member check that would fail is not reached
    assert txn_commit(h, "g", {("t", 0): 1}, v=3, generation_id=7, verification=E.invalid_txn_state) == {
        ("t", 0): E.invalid_txn_state}
    assert h.log.batches == [] and h.c.group("g") is None
    h.c.serve_only([h.c.partition_for("g") + 1])
    assert txn_commit(h, "g", {("t", 0): 1}, verification=E.invalid_txn_state) == {("t", 0): E.not_coordinator}
    # NONE: verified
    h2 = harness()
    assert txn_commit(h2, "g", {("t", 0): 1}, verification=E.none) == {("t", 0): E.none}


@pytest.mark.parametrize(("raised", "answered"), [
    (E.not_leader_or_follower, E.not_coordinator),
    (E.kafka_storage_error, E.not_coordinator),
    (E.not_enough_replicas, E.coordinator_not_available),
    (E.message_too_large, E.unknown_server_error),
    (E.record_list_too_large, E.unknown_server_error),
    (E.invalid_producer_epoch, E.invalid_producer_epoch),
    (E.invalid_txn_state, E.invalid_txn_state),
])
def test_append_failures(raised: E, answered: E) -> None:
    h = harness()
    h.log.fail = Failure(raised)
    assert txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): answered}
    assert h.c.group("g") is None  # the group made for the commit is forgotten again
    h.log.fail = RuntimeError("boom")
    assert txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): E.unknown_server_error}


def test_response_versions() -> None:
    h = harness()
    for v in range(5):
        assert txn_commit(h, f"g{v}", {("t", 0): v, ("t", 1): v, ("u", 3): v}, v=v) == {
            ("t", 0): E.none, ("t", 1): E.none, ("u", 3): E.none}


# --- loading ----------------------------------------------------------------------------------------


def test_replay_keeps_open_transactions_pending() -> None:
    h = harness()
    h.commit("g", {("t", 0): 5})
    txn_commit(h, "g", {("t", 0): 10})
    txn_commit(h, "only-txn", {("t", 0): 1})
    c = reload(h)
    hc = Harness()
    hc.c = c
    assert fetched(hc, "g", [("t", 0)], stable=True) == {("t", 0): (-1, E.unstable_offset_commit)}
    assert fetched(hc, "g", [("t", 0)]) == {("t", 0): (5, E.none)}
    assert c.group("only-txn") is not None and c.group("only-txn").offsets == {}
    # the markers the transaction coordinator writes later complete them
    assert sum(c.complete_transaction(p, PID, True) for p in {c.partition_for("g"), c.partition_for("only-txn")}) == 2
    assert fetched(hc, "g", [("t", 0)], stable=True) == {("t", 0): (10, E.none)}
    assert fetched(hc, "only-txn", [("t", 0)]) == {("t", 0): (1, E.none)}


def test_replay_applies_markers_in_log_order() -> None:
    h = harness()
    h.commit("g", {("a", 0): 1, ("b", 0): 1, ("c", 0): 1})
    txn_commit(h, "g", {("a", 0): 10, ("b", 0): 10, ("c", 0): 10})
    h.commit("g", {("b", 0): 2})  # later than the transactional record: wins
    offset_delete(h, "g", [("c", 0)])  # a tombstone drops the pending offset too
    end_txn(h, "g", commit=True)
    txn_commit(h, "g", {("a", 0): 99})
    end_txn(h, "g", commit=False)
    txn_commit(h, "g", {("d", 0): 4}, pid=PID + 1)
    end_txn(h, "g", commit=True, pid=PID + 1)
    live = {k: off for k, (off, _) in fetched(h, "g", [("a", 0), ("b", 0), ("c", 0), ("d", 0)]).items()}
    assert live == {("a", 0): 10, ("b", 0): 2, ("c", 0): -1, ("d", 0): 4}
    c = reload(h)
    assert fetched_c(c, "g", [("a", 0), ("b", 0), ("c", 0), ("d", 0)]) == live
    assert c.group("g").pending_txn_offsets == {}


def test_replay_chunked_and_with_three_tuples() -> None:
    h = harness()
    txn_commit(h, "g", {("t", 0): 10})
    end_txn(h, "g", commit=True)
    p = h.c.partition_for("g")
    items = h.log.replay(p)
    c = GroupCoordinator(h.config, FakeClock(h.clock.t), TxnLog())
    c.start_loading([p])
    c.load_partition(p, items[:1])
    c.load_partition(p, items[1:])
    c.finished_loading(p)
    assert fetched_c(c, "g", [("t", 0)]) == {("t", 0): 10}
    # plain (offset, key, value) records are non-transactional, as before
    c2 = GroupCoordinator(h.config, FakeClock(h.clock.t), TxnLog())
    c2.load_partition(p, [(0, items[0][1], items[0][2])])
    c2.finished_loading(p)
    assert fetched_c(c2, "g", [("t", 0)]) == {("t", 0): 10}


def test_commits_after_a_reload_are_ordered_after_the_loaded_records() -> None:
    h = harness()
    h.commit("g", {("x", 0): 1})
    h.commit("g", {("y", 0): 1})
    txn_commit(h, "g", {("t", 0): 10})  # at offset 2
    # a log that does not report offsets: the coordinator numbers records on from the load
    c = reload(h, _Silent())
    hc = Harness()
    hc.c = c
    hc.commit("g", {("t", 0): 3})
    c.complete_transaction(c.partition_for("g"), PID, True)
    assert fetched_c(c, "g", [("t", 0)]) == {("t", 0): 3}


class _Silent:
    def append(self, partition: int, records: list, **_: Any) -> None:
        return None


# --- expiry, deletion, unloading ------------------------------------------------------------------------


def offset_delete(h: Harness, group: str, parts: list[tuple[str, int]]) -> Any:
    by: dict[str, list[int]] = {}
    for t, p in parts:
        by.setdefault(t, []).append(p)
    box = Box()
    h.c.offset_delete(request("offset_delete", 0, group_id=group, topics=[
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by.items()]), box)
    return box.value


def test_pending_offsets_keep_a_group_alive_and_its_offsets_from_expiring() -> None:
    h = harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    h.commit("g", {("t", 0): 1, ("t", 1): 1})
    txn_commit(h, "g", {("t", 0): 5})
    txn_commit(h, "only", {("t", 0): 5})
    h.advance(120_000)
    h.advance(10_000)
    # t-1 expired; t-0 has a pending offset and stays, and so do both groups
    assert fetched(h, "g", [("t", 0), ("t", 1)]) == {("t", 0): (1, E.none), ("t", 1): (-1, E.none)}
    assert h.c.group("only") is not None
    for p in {h.c.partition_for("g"), h.c.partition_for("only")}:
        h.log.marker(p, PID, False)
        h.c.complete_transaction(p, PID, False)
    h.advance(120_000)
    h.advance(10_000)
    assert h.c.group("only") is None and h.c.group("g") is None


def test_offset_delete_and_delete_groups_remove_pending_offsets() -> None:
    h = harness()
    txn_commit(h, "g", {("t", 0): 5, ("t", 1): 6})
    h.commit("g", {("t", 1): 1})
    r = offset_delete(h, "g", [("t", 0)])
    assert r.error_code == E.none
    p = h.c.partition_for("g")
    assert h.log.partitions[p][-1][:2] == (encode_offset_commit_key("g", "t", 0), None)
    assert fetched(h, "g", [("t", 0)], stable=True) == {("t", 0): (-1, E.none)}
    # the producer's transaction is still open: the group stays
    assert h.c.group("g").pending_txn_offsets == {PID: {("t", 1): h.c.group("g").pending_txn_offsets[PID][("t", 1)]}}
    box = Box()
    txn_commit(h, "g", {("u", 0): 1})
    h.c.delete_groups(request("delete_groups", 2, groups_names=["g"]), box)
    assert box.value.results[0].error_code == E.none
    tombstones = {decode_key(k).topic + str(decode_key(k).partition) for k, v, *_ in h.log.partitions[p][-3:]
                  if v is None and hasattr(decode_key(k), "topic")}
    assert tombstones == {"t1", "u0"}
    assert h.c.group("g") is None
    assert reload(h).group("g") is None  # replayed before the marker: gone too
    # the marker finds nothing to do; the group stays gone
    assert end_txn(h, "g", commit=True) == 0
    assert h.c.group("g") is None
    assert reload(h).group("g") is None


def test_an_emptied_offsets_only_group_dies_only_without_pending_offsets() -> None:
    h = harness()
    h.commit("solo", {("t", 0): 1})
    txn_commit(h, "solo", {("u", 0): 1})
    offset_delete(h, "solo", [("t", 0)])
    assert h.c.group("solo") is not None
    assert offset_delete(h, "solo", [("u", 0)]).error_code == E.none
    # still an open transaction (now without offsets in the group): kept until its marker
    assert h.c.group("solo") is not None
    end_txn(h, "solo", commit=True)
    assert fetched(h, "solo", [("u", 0)]) == {("u", 0): (-1, E.none)}


def test_unload_drops_pending_offsets() -> None:
    h = harness()
    txn_commit(h, "g", {("t", 0): 5})
    p = h.c.partition_for("g")
    assert h.c.unload_partition(p) == 1
    assert h.c._state.txn_groups == {}
    assert h.c.complete_transaction(p, PID, True) == 0


def test_a_txn_only_group_is_listed_as_empty() -> None:
    h = harness()
    txn_commit(h, "g", {("t", 0): 5})
    box = Box()
    h.c.list_groups(request("list_groups", 4), box)
    assert [(g.group_id, g.group_state) for g in box.value.groups] == [("g", "Empty")]

