"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups / DescribeGroups / ListGroups,
storage failures, retention, and the exact bytes written to __consumer_offsets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator import GroupState
from coordinator.records import (
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_offset_commit_key,
)

from .harness import Box, Client, E, Harness, request, subscription

T0 = 1_700_000_000_000


def stable(h: Harness, group: str = "g", n: int = 2, topics: list[str] | None = None) -> list[Client]:
    cls = [Client(f"c{i}", protocols=[("range", subscription(topics or ["t"]))]) for i in range(n)]
    h.form_group(group, cls)
    return cls


def test_commit_and_fetch_every_version() -> None:
    h = Harness()
    a, _ = stable(h)
    assert h.commit("g", {("t", 0): 10, ("t", 1): 11, ("u", 0): 12}, a, metadata="meta") == {
        ("t", 0): E.none, ("t", 1): E.none, ("u", 0): E.none,
    }
    for v in range(1, 8):
        r = h.fetch("g", [("t", 0), ("t", 2)], v=v)
        parts = {p.partition_index: p for p in r.topics[0].partitions}
        assert parts[0].committed_offset == 10 and parts[0].metadata == "meta" and parts[0].error_code == E.none
        assert parts[2].committed_offset == -1 and parts[2].metadata == "" and parts[2].error_code == E.none
    for v in (8, 9):
        r = h.fetch("g", [("t", 1)], v=v)
        assert r.groups[0].group_id == "g" and r.groups[0].topics[0].partitions[0].committed_offset == 11
    # null topic list: every committed offset
    r = h.fetch("g", None, v=7)
    assert {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions} == {
        ("t", 0): 10, ("t", 1): 11, ("u", 0): 12,
    }
    # an unknown group has no offsets (and no error)
    r = h.fetch("nobody", [("t", 0)], v=5)
    assert r.error_code == E.none and r.topics[0].partitions[0].committed_offset == -1


def test_fetch_several_groups_v8() -> None:
    h = Harness()
    h.commit("g1", {("t", 0): 1})
    h.commit("g2", {("t", 0): 2})
    box = Box()
    req = request(
        "offset_fetch", 8, require_stable=True,
        groups=[{"group_id": g, "topics": [{"name": "t", "partition_indexes": [0]}]} for g in ("g1", "g2", "g3")],
    )
    h.c.offset_fetch(req, box)
    got = {g.group_id: g.topics[0].partitions[0].committed_offset for g in box.value.groups}
    assert got == {"g1": 1, "g2": 2, "g3": -1}


def test_leader_epoch_and_null_metadata() -> None:
    h = Harness()
    box = Box()
    req = request(
        "offset_commit", 8, group_id="s", generation_id_or_member_epoch=-1, member_id="",
        topics=[{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": 3, "committed_metadata": None},
        ]}],
    )
    h.c.offset_commit(req, box)
    assert box.value.topics[0].partitions[0].error_code == E.none
    p = h.fetch("s", [("t", 0)], v=7).topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (5, 3, "")


def test_simple_commits_and_generation_checks() -> None:
    h = Harness()
    # group-less consumer (assign()): generation -1, empty member id
    assert h.commit("solo", {("t", 0): 1}) == {("t", 0): E.none}
    g = h.c.group("solo")
    assert g.state is GroupState.EMPTY and g.protocol_type is None
    # a generation for a group that does not exist is an old generation
    ghost = Client("x", member_id="x-1", generation=3)
    assert h.commit("nope", {("t", 0): 1}, ghost) == {("t", 0): E.illegal_generation}
    assert h.c.group("nope") is None
    a, _ = stable(h)
    # a simple commit into an active group is refused
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.unknown_member_id}
    assert h.commit("g", {("t", 0): 1}, Client("z", member_id="z-1", generation=1)) == {("t", 0): E.unknown_member_id}


def test_offset_metadata_too_large() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    assert h.commit("s", {("t", 0): 1}, metadata="x" * 11) == {("t", 0): E.offset_metadata_too_large}
    assert h.commit("s", {("t", 0): 1}, metadata="x" * 10) == {("t", 0): E.none}


def test_unknown_partitions_when_the_broker_says_so() -> None:
    from coordinator import CoordinatorConfig, GroupCoordinator

    h = Harness()
    h.c = GroupCoordinator(CoordinatorConfig(), h.clock, h.log, partition_exists=lambda t, p: t == "t" and p < 2)
    assert h.commit("s", {("t", 0): 1, ("t", 5): 1, ("x", 0): 1}) == {
        ("t", 0): E.none, ("t", 5): E.unknown_topic_or_partition, ("x", 0): E.unknown_topic_or_partition,
    }


def test_committed_record_bytes_are_kafkas() -> None:
    h = Harness()
    h.commit("grp", {("tp", 7): 42}, metadata="m")
    p = h.c.partition_for("grp")
    (key, value), = h.log.partitions[p]
    assert key == bytes.fromhex("0001" "0003677270" "00027470" "00000007")
    # OffsetCommitValue v3: offset 42, leaderEpoch -1, metadata "m", commitTimestamp = clock
    assert value == bytes.fromhex("0003" "000000000000002a" "ffffffff" "00016d") + T0.to_bytes(8, "big")


def test_commit_v2_retention_time_writes_v1_value_with_expiry() -> None:
    h = Harness()
    h.commit("s", {("t", 0): 1}, v=2, retention_time=60_000)
    (_, value), = h.log.partitions[h.c.partition_for("s")]
    assert value[:2] == b"\x00\x01"
    assert decode_offset_commit_value(value) == OffsetCommitValue(1, "", T0, -1, T0 + 60_000)
    # it expires at its own expire timestamp, whatever the retention config says
    h.advance(h.config.offsets_retention_check_interval_ms)
    assert h.c.group("s") is None


def test_group_metadata_records() -> None:
    h = Harness()
    a, b = stable(h)
    recs = h.log.partitions[h.c.partition_for("g")]
    key, value = recs[-1]
    assert key == encode_group_metadata_key("g")
    gv = decode_group_metadata_value(value)
    assert value[:2] == b"\x00\x03"
    assert gv.protocol_type == "consumer" and gv.generation == 1 and gv.protocol == "range" and gv.leader == a.member_id
    assert [(m.member_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout, m.assignment)
            for m in gv.members] == [
        (c.member_id, c.client_id, "/127.0.0.1", 10_000, 30_000, c.member_id.encode()) for c in (a, b)
    ]
    assert gv.members[0].subscription == subscription(["t"])
    # both leave: the group becomes Empty at generation 2 and Kafka writes an empty group record
    h.leave("g", a, b)
    key, value = recs[-1]
    ts = h.c.group("g").state_timestamp
    assert value == bytes.fromhex("0003" "0008") + b"consumer" + bytes.fromhex("00000002" "ffff" "ffff") + ts.to_bytes(
        8, "big"
    ) + bytes.fromhex("00000000")


class StorageDown(Exception):
    pass


class NotLeader(Exception):
    error_code = ErrorCode.not_leader_or_follower


def test_storage_failures() -> None:
    h = Harness()
    a, b = stable(h)
    h.log.fail = StorageDown()
    assert h.commit("g", {("t", 0): 1}, a) == {("t", 0): E.coordinator_not_available}
    h.log.fail = NotLeader()
    assert h.commit("g", {("t", 0): 1}, a) == {("t", 0): E.not_coordinator}
    assert h.fetch("g", [("t", 0)]).topics[0].partitions[0].committed_offset == -1  # nothing applied
    # the leader's SyncGroup cannot be stored: everyone gets the error and the group rebalances
    h.log.fail = None
    ba, bb = h.join("g", a), h.join("g", b)
    ja, _ = h.absorb_join(a, ba), h.absorb_join(b, bb)
    leader, follower = (a, b) if ja.leader == a.member_id else (b, a)
    fb = h.sync("g", follower)
    h.log.fail = StorageDown()
    lb = h.sync("g", leader, {a.member_id: b"x", b.member_id: b"y"})
    assert lb.value.error_code == E.coordinator_not_available
    assert fb.value.error_code == E.coordinator_not_available
    assert h.c.group("g").state is GroupState.PREPARING_REBALANCE
    # deletion refused, group kept
    h.log.fail = None
    h.leave("g", a, b)
    h.log.fail = StorageDown()
    box = Box()
    h.c.delete_groups(request("delete_groups", 2, groups_names=["g"]), box)
    assert box.value.results[0].error_code == E.coordinator_not_available
    assert h.c.group("g") is not None


def describe(h: Harness, *groups: str, v: int = 5, ops: bool = False):
    box = Box()
    h.c.describe_groups(request("describe_groups", v, groups=list(groups), include_authorized_operations=ops), box)
    return box.value.groups


def list_groups(h: Harness, v: int = 5, **kw):
    box = Box()
    h.c.list_groups(request("list_groups", v, **kw), box)
    return box.value


def delete(h: Harness, *groups: str):
    box = Box()
    h.c.delete_groups(request("delete_groups", 2, groups_names=list(groups)), box)
    return {r.group_id: r.error_code for r in box.value.results}


def test_describe_list_delete() -> None:
    h = Harness()
    a, b = stable(h)
    h.commit("solo", {("t", 0): 1})
    (d,) = describe(h, "g", ops=True)
    assert d.group_state == "Stable" and d.protocol_type == "consumer" and d.protocol_data == "range"
    assert {m.member_id: m.member_assignment for m in d.members} == {c.member_id: c.member_id.encode() for c in (a, b)}
    assert d.members[0].client_host == "/127.0.0.1" and d.members[0].member_metadata == subscription(["t"])
    assert d.authorized_operations == 328 | (1 << 10) | (1 << 11)  # + DESCRIBE_CONFIGS, ALTER_CONFIGS
    (u,) = describe(h, "unknown")
    assert u.group_state == "Dead" and u.error_code == E.none
    assert describe(h, "g", v=0)[0].group_state == "Stable"
    lst = list_groups(h)
    assert {(g.group_id, g.group_state, g.protocol_type, g.group_type) for g in lst.groups} == {
        ("g", "Stable", "consumer", "classic"), ("solo", "Empty", "", "classic"),
    }
    assert [g.group_id for g in list_groups(h, v=4, states_filter=["empty"]).groups] == ["solo"]
    assert list_groups(h, types_filter=["consumer"]).groups == ()
    assert len(list_groups(h, v=0).groups) == 2
    assert delete(h, "g", "solo", "missing") == {
        "g": E.non_empty_group, "solo": E.none, "missing": E.group_id_not_found,
    }
    h.leave("g", a, b)
    h.commit("g", {("t", 0): 9})  # simple commit into the now-empty group
    assert delete(h, "g") == {"g": E.none}
    assert h.c.group("g") is None and h.fetch("g", [("t", 0)]).topics[0].partitions[0].committed_offset == -1
    tail = h.log.partitions[h.c.partition_for("g")][-2:]
    assert tail == [(encode_offset_commit_key("g", "t", 0), None), (encode_group_metadata_key("g"), None)]


def offset_delete(h: Harness, group: str, parts: list[tuple[str, int]]):
    by: dict[str, list[dict]] = {}
    for t, p in parts:
        by.setdefault(t, []).append({"partition_index": p})
    box = Box()
    h.c.offset_delete(request("offset_delete", 0, group_id=group, topics=[{"name": t, "partitions": ps} for t, ps in by.items()]), box)
    return box.value


def test_offset_delete() -> None:
    h = Harness()
    a, _ = stable(h, topics=["t"])
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, a)
    r = offset_delete(h, "g", [("t", 0), ("old", 0)])
    assert r.error_code == E.none
    errs = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errs == {("t", 0): E.group_subscribed_to_topic, ("old", 0): E.none}
    assert h.fetch("g", [("old", 0)]).topics[0].partitions[0].committed_offset == -1
    assert h.log.partitions[h.c.partition_for("g")][-1] == (encode_offset_commit_key("g", "old", 0), None)
    assert offset_delete(h, "missing", [("t", 0)]).error_code == E.group_id_not_found
    assert offset_delete(h, "", [("t", 0)]).error_code == E.invalid_group_id
    # an Empty offsets-only group loses its last offset and is gone
    h.commit("solo", {("t", 0): 1})
    assert offset_delete(h, "solo", [("t", 0)]).error_code == E.none
    assert h.c.group("solo") is None


def test_offsets_expire_after_the_group_is_empty_for_the_retention() -> None:
    h = Harness(offsets_retention_minutes=60, offsets_retention_check_interval_ms=60_000)
    a, b = stable(h)
    h.commit("g", {("t", 0): 5}, a)
    # stable and subscribed to t: never expires
    for _ in range(3):
        for _ in range(30):
            h.advance(2000)
            h.heartbeat("g", a)
            h.heartbeat("g", b)
    assert h.fetch("g", [("t", 0)]).topics[0].partitions[0].committed_offset == 5
    h.leave("g", a, b)
    emptied = h.clock.t
    h.advance(59 * 60_000)
    assert h.fetch("g", [("t", 0)]).topics[0].partitions[0].committed_offset == 5
    h.advance(2 * 60_000)
    assert h.clock.t - emptied >= 3_600_000
    assert h.c.group("g") is None
    recs = h.log.partitions[h.c.partition_for("g")][-2:]
    assert recs == [(encode_offset_commit_key("g", "t", 0), None), (encode_group_metadata_key("g"), None)]


def test_unsubscribed_topic_offsets_of_a_stable_group_expire_by_commit_time() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    a, b = stable(h, topics=["t"])
    h.commit("g", {("t", 0): 1, ("gone", 0): 2}, a)
    for _ in range(40):
        h.advance(2000)
        h.heartbeat("g", a)
        h.heartbeat("g", b)
    got = h.fetch("g", [("t", 0), ("gone", 0)]).topics
    assert [p.committed_offset for t in got for p in t.partitions] == [1, -1]


@pytest.mark.parametrize("v", [2, 3, 5, 7, 9])
def test_commit_response_versions(v: int) -> None:
    h = Harness()
    assert h.commit("s", {("t", 0): 1}, v=v) == {("t", 0): E.none}
    assert decode_key(h.log.partitions[h.c.partition_for("s")][0][0]).topic == "t"


def test_empty_group_id_is_allowed_for_offsets() -> None:
    h = Harness()
    assert h.commit("", {("t", 0): 3}) == {("t", 0): E.none}
    assert h.fetch("", [("t", 0)]).topics[0].partitions[0].committed_offset == 3
