"""Rebuilding groups and offsets by replaying __consumer_offsets, including tombstones and
garbage, and COORDINATOR_LOAD_IN_PROGRESS until a partition is loaded."""

from __future__ import annotations

import logging
import random

from coordinator import CoordinatorConfig, GroupCoordinator, GroupState
from coordinator.records import (
    GroupMetadataValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
)

from .harness import Box, Client, E, FakeClock, Harness, MemoryLog, request, subscription


def replayed(h: Harness, extra: dict[int, list[tuple[bytes | None, bytes | None]]] | None = None) -> GroupCoordinator:
    """A fresh coordinator (a restarted broker) loaded from h's log (+ extra records)."""
    clock = FakeClock(h.clock.t)
    c = GroupCoordinator(h.config, clock, MemoryLog())
    parts = set(h.log.partitions) | set(extra or {})
    c.start_loading(parts)
    for p in sorted(parts):
        recs = list(h.log.partitions.get(p, [])) + list((extra or {}).get(p, []))
        c.load_partition(p, [(i, k, v) for i, (k, v) in enumerate(recs)])
        c.finished_loading(p)
    return c


def snapshot(c: GroupCoordinator) -> dict:
    return {
        g.group_id: (
            g.state, g.generation, g.protocol_type, g.protocol_name, g.leader_id,
            [(m.member_id, m.client_id, m.assignment, m.session_timeout_ms) for m in g.members.values()],
            dict(g.offsets),
        )
        for g in c.groups()
    }


def test_replay_reproduces_groups_and_offsets() -> None:
    h = Harness()
    cls = [Client(f"c{i}") for i in range(3)]
    h.form_group("g", cls)
    h.commit("g", {("t", 0): 10, ("t", 1): 20}, cls[0], metadata="x")
    h.commit("g", {("t", 0): 11}, cls[1])  # later commit wins
    h.commit("solo", {("u", 3): 7})
    h.form_group("gone", [Client("z")])
    gone = h.c.group("gone")
    h.leave("gone", Client("z", member_id=next(iter(gone.members))))
    h.commit("gone", {("t", 0): 1})
    box = Box()
    h.c.delete_groups(request("delete_groups", 2, groups_names=["gone"]), box)
    assert box.value.results[0].error_code == E.none
    h.form_group("empty", [Client("e")])
    h.leave("empty", Client("e", member_id=next(iter(h.c.group("empty").members))))
    before = snapshot(h.c)
    c2 = replayed(h)
    after = snapshot(c2)
    assert after == before
    assert "gone" not in after
    assert after["g"][0] is GroupState.STABLE and after["empty"][0] is GroupState.EMPTY
    assert after["solo"][2] is None  # offsets-only group
    # the restored members keep working without a rebalance
    h2 = Harness()
    h2.c, h2.clock = c2, c2._state.clock
    for cl in cls:
        assert h2.heartbeat("g", cl) == E.none
    p = h2.fetch("g", [("t", 0), ("t", 1)]).topics[0].partitions
    assert [(x.committed_offset, x.metadata) for x in p] == [(11, ""), (20, "x")]
    # a member that never comes back is removed by its session timeout after the load
    h2.clock.t += 6_000
    assert h2.heartbeat("g", cls[0]) == h2.heartbeat("g", cls[1]) == E.none
    h2.clock.t += 4_000
    c2.poll()
    g = c2.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE and cls[2].member_id not in g.members


def test_load_in_progress() -> None:
    h = Harness()
    p = h.c.partition_for("g")
    h.c.start_loading([p])
    assert h.join("g", Client("a")).value.error_code == E.coordinator_load_in_progress
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.coordinator_load_in_progress}
    assert h.fetch("g", [("t", 0)], v=7).error_code == E.coordinator_load_in_progress
    assert h.fetch("g", [("t", 0)], v=1).topics[0].partitions[0].error_code == E.coordinator_load_in_progress
    assert h.fetch("g", None, v=8).groups[0].error_code == E.coordinator_load_in_progress
    box = Box()
    h.c.list_groups(request("list_groups", 3), box)
    assert box.value.error_code == E.coordinator_load_in_progress
    # other partitions are served
    other = next(g for g in (f"x{i}" for i in range(100)) if h.c.partition_for(g) != p)
    assert h.commit(other, {("t", 0): 1}) == {("t", 0): E.none}
    h.c.load_partition(p, [])
    h.c.finished_loading(p)
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.none}


def test_garbage_records_are_skipped(caplog) -> None:
    h = Harness()
    a = Client("a")
    h.form_group("g", [a])
    h.commit("g", {("t", 0): 10}, a)
    p = h.c.partition_for("g")
    rng = random.Random(3)
    good_value = h.log.partitions[p][-1][1]
    garbage: list[tuple[bytes | None, bytes | None]] = [
        (None, b"x"),  # null key
        (b"", b""),
        (b"\x00", None),
        (bytes.fromhex("0003000167"), b"whatever"),  # KIP-848 record type: skipped silently
        (bytes.fromhex("7fff"), None),  # unknown key version
        (encode_offset_commit_key("g", "t", 1), b"\x00\x09garbage"),  # unknown value version
        (encode_offset_commit_key("g", "t", 2), b"\x00\x03\x00"),  # truncated value
        (encode_group_metadata_key("g"), b"\x00\x03" + b"\xff" * 40),  # malformed group
        (encode_offset_commit_key("g", "t", 3) + b"junk", good_value),  # trailing bytes
        *[(rng.randbytes(rng.randint(0, 30)), rng.randbytes(rng.randint(0, 30))) for _ in range(300)],
    ]
    # a record for a group of another partition is refused, too
    other = next(g for g in (f"x{i}" for i in range(100)) if h.c.partition_for(g) != p)
    garbage.append((encode_offset_commit_key(other, "t", 0), good_value))
    with caplog.at_level(logging.WARNING, logger="coordinator"):
        c2 = replayed(h, {p: garbage})
    assert snapshot(c2)["g"] == snapshot(h.c)["g"]
    assert c2.group(other) is None
    assert any("malformed" in r.message for r in caplog.records)


def test_a_failing_record_iterator_does_not_escape() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 10})
    p = h.c.partition_for("g")

    def records():
        yield from h.log.replay(p)
        raise OSError("disk on fire")

    c = GroupCoordinator(CoordinatorConfig(), FakeClock(), MemoryLog())
    c.load_partition(p, records())
    c.finished_loading(p)
    assert c.group("g").offsets[("t", 0)].offset == 10


def test_group_tombstone_then_recreated_group() -> None:
    h = Harness()
    p = h.c.partition_for("g")
    v1 = GroupMetadataValue("consumer", 4, None, None, (), 1)
    recs = [
        (encode_group_metadata_key("g"), encode_group_metadata_value(v1)),
        (encode_group_metadata_key("g"), None),
        (encode_group_metadata_key("g"), encode_group_metadata_value(GroupMetadataValue("consumer", 1, None, None, (), 2))),
    ]
    c = GroupCoordinator(CoordinatorConfig(), FakeClock(), MemoryLog())
    c.load_partition(p, [(i, k, v) for i, (k, v) in enumerate(recs)])
    c.finished_loading(p)
    assert c.group("g").generation == 1 and c.group("g").state is GroupState.EMPTY
    c.load_partition(p, [(9, encode_group_metadata_key("g"), None)])
    c.finished_loading(p)
    assert c.group("g") is None


def test_loaded_group_from_v0_records_and_static_members() -> None:
    from coordinator.records import MemberMetadata

    h = Harness()
    p = h.c.partition_for("g")
    m = MemberMetadata("m-1", "cl", "/h", 10_000, subscription(["t"]), b"A", group_instance_id="inst", rebalance_timeout=5)
    recs = [(encode_group_metadata_key("g"), encode_group_metadata_value(GroupMetadataValue("consumer", 3, "range", "m-1", (m,), 9), v)) for v in (0, 3)]
    for rec in recs:
        c = GroupCoordinator(CoordinatorConfig(), FakeClock(), MemoryLog())
        c.load_partition(p, [(0, *rec)])
        c.finished_loading(p)
        g = c.group("g")
        assert g.state is GroupState.STABLE and g.leader_id == "m-1" and g.members["m-1"].assignment == b"A"
        assert g.subscribed_topics == {"t"}
    # v3 keeps the instance id: the static member can come back with a new member id
    assert g.static_members == {"inst": "m-1"}
