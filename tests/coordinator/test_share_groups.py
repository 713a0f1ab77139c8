"""KIP-932 share groups in the pure group coordinator: ShareGroupHeartbeat (join, two
members, the simple assignor, leave, session expiry, fencing), the records and their replay
after a restart, ShareGroupDescribe, ListGroups/DescribeGroups/DeleteGroups, the classic
APIs against a share group id, and the hooks the broker shell gets."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.share.assignor import ShareAssignmentSpec, ShareMemberSpec, SimpleAssignor
from coordinator.share.group import ShareGroup, ShareGroupMember
from coordinator.share.membership import ShareGroupHooks
from coordinator.share.records import (
    STATE_PARTITION_METADATA,
    ShareGroupKey,
    decode_any_key,
    decode_record,
    encode_record,
    member_subscription_record,
    state_partition_metadata_record,
)

from .harness import Box, E, FakeClock, MemoryLog, request

SESSION = 45_000


class RecordingHooks(ShareGroupHooks):
    def __init__(self, initializes: bool = False) -> None:
        self.initializes_state = initializes
        self.events: list[tuple[Any, ...]] = []

    def initialize(self, group_id: str, group_epoch: int, partitions: Any) -> None:
        self.events.append(("initialize", group_id, group_epoch, dict(partitions)))

    def member_left(self, group_id: str, member_id: str) -> None:
        self.events.append(("left", group_id, member_id))

    def assignment_changed(self, group_id: str, member_id: str, assignment: Any) -> None:
        self.events.append(("assigned", group_id, member_id, dict(assignment)))

    def group_deleted(self, group_id: str, partitions: Any) -> None:
        self.events.append(("deleted", group_id, dict(partitions)))


class SG:
    """A coordinator with a fake clock, an in-memory log and a topic table."""

    def __init__(self, topics: dict[str, int] | None = None, hooks: ShareGroupHooks | None = None, **cfg: Any):
        self.clock = FakeClock()
        self.log = MemoryLog()
        self.topics = {name: (uuid.uuid4(), n) for name, n in (topics or {"t": 4}).items()}
        self.hooks = hooks
        self.config = CoordinatorConfig(**cfg)
        self.c = self._new()

    def _new(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, self.clock, self.log, topics=lambda: self.topics, share_hooks=self.hooks)

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name][0]

    def hb(self, member: str, epoch: int, topics: list[str] | None = None, group: str = "g", **extra: Any) -> Any:
        box = Box()
        req = request("share_group_heartbeat", 1, group_id=group, member_id=member, member_epoch=epoch,
                      subscribed_topic_names=topics, **extra)
        self.c.share_group_heartbeat(req, box, client_id="cli", client_host="/127.0.0.1")
        return box.value

    def join(self, member: str, topics: list[str] | None = None, group: str = "g") -> Any:
        resp = self.hb(member, 0, topics or ["t"], group)
        assert resp.error_code == E.none, resp
        return resp

    def describe(self, *groups: str) -> Any:
        box = Box()
        self.c.share_group_describe(request("share_group_describe", 1, group_ids=list(groups),
                                            include_authorized_operations=False), box)
        return box.value

    def list_groups(self, **fields: Any) -> Any:
        box = Box()
        self.c.list_groups(request("list_groups", 5, **fields), box)
        return box.value

    def delete(self, group: str) -> Any:
        box = Box()
        self.c.delete_groups(request("delete_groups", 2, groups_names=[group]), box)
        return box.value.results[0].error_code

    def advance(self, ms: int) -> None:
        self.clock.t += ms
        self.c.poll()

    def restart(self) -> None:
        """A new coordinator loading every partition of the log (failover, restart)."""
        self.c = self._new()
        for p in list(self.log.partitions):
            self.c.load_partition(p, self.log.replay(p))
            self.c.finished_loading(p)

    def group(self, gid: str = "g") -> ShareGroup:
        g = self.c.group(gid)
        assert isinstance(g, ShareGroup)
        return g


def partitions(resp: Any) -> dict[uuid.UUID, list[int]]:
    assert resp.assignment is not None
    return {tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions}


# --- joining and the simple assignor --------------------------------------------------------


def test_first_member_joins_and_gets_every_partition() -> None:
    sg = SG()
    resp = sg.join("m1")
    assert resp.member_id == "m1"
    assert resp.member_epoch == 1
    assert int(resp.heartbeat_interval.total_seconds() * 1000) == 5000
    assert partitions(resp) == {sg.tid("t"): [0, 1, 2, 3]}
    g = sg.group()
    assert g.state.value == "Stable" and g.group_epoch == 1 and g.assignment_epoch == 1
    # a heartbeat with nothing new answers without an assignment
    again = sg.hb("m1", 1)
    assert again.error_code == E.none and again.member_epoch == 1 and again.assignment is None


def test_two_members_balance_the_partitions() -> None:
    sg = SG()
    sg.join("m1")
    second = sg.join("m2")
    assert second.member_epoch == 2
    # the first member learns of the new epoch and its smaller share on its next heartbeat
    first = sg.hb("m1", 1)
    assert first.member_epoch == 2
    a1, a2 = set(partitions(first)[sg.tid("t")]), set(partitions(second)[sg.tid("t")])
    assert len(a1) == len(a2) == 2 and a1 | a2 == {0, 1, 2, 3} and not a1 & a2


def test_more_members_than_partitions_share_them() -> None:
    sg = SG({"t": 2})
    resps = [sg.join(f"m{i}") for i in range(5)]
    final = [sg.hb(f"m{i}", resps[i].member_epoch) for i in range(5)]
    owners: dict[int, int] = {}
    for resp in final:
        ps = partitions(resp)[sg.tid("t")] if resp.assignment is not None else \
            sorted(sg.group().members[resp.member_id].assigned[sg.tid("t")])
        assert len(ps) >= 1  # every member gets a partition
        for p in ps:
            owners[p] = owners.get(p, 0) + 1
    # ceil(5 / 2) = 3 members at most per partition, every partition used
    assert set(owners) == {0, 1} and max(owners.values()) <= 3 and sum(owners.values()) == 6


def test_simple_assignor_is_sticky_and_balanced() -> None:
    t = uuid.uuid4()
    a = SimpleAssignor()
    sub = frozenset({t})
    first = a.assign(ShareAssignmentSpec({"a": ShareMemberSpec(sub), "b": ShareMemberSpec(sub)},
                                         {t: frozenset(range(6))}))
    assert sorted(len(x[t]) for x in first.values()) == [3, 3]
    second = a.assign(ShareAssignmentSpec(
        {"a": ShareMemberSpec(sub, first["a"]), "b": ShareMemberSpec(sub, first["b"]), "c": ShareMemberSpec(sub)},
        {t: frozenset(range(6))}))
    assert sorted(len(x[t]) for x in second.values()) == [2, 2, 2]
    assert second["a"][t] <= first["a"][t] and second["b"][t] <= first["b"][t]  # nothing moved between a and b
    # only initialised (assignable) partitions are handed out
    partial = a.assign(ShareAssignmentSpec({"a": ShareMemberSpec(sub)}, {t: frozenset({1, 2})}))
    assert partial["a"] == {t: frozenset({1, 2})}


def test_heterogeneous_subscriptions_assign_each_topic_to_its_subscribers() -> None:
    sg = SG({"t": 2, "u": 2})
    sg.join("m1", ["t"])
    r2 = sg.join("m2", ["t", "u"])
    r1 = sg.hb("m1", 1)
    g = sg.group()
    assert g.members["m1"].assigned.keys() == {sg.tid("t")}
    assert g.members["m2"].assigned[sg.tid("u")] == frozenset({0, 1})
    assert r1.error_code == r2.error_code == E.none


def test_subscription_to_unknown_topic_assigns_nothing_until_it_exists() -> None:
    sg = SG()
    resp = sg.join("m1", ["later"])
    assert partitions(resp) == {}
    sg.topics["later"] = (uuid.uuid4(), 2)
    resp = sg.hb("m1", resp.member_epoch)
    assert partitions(resp) == {sg.tid("later"): [0, 1]}


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(member_id="", member_epoch=0, subscribed_topic_names=["t"]), "MemberId can't be empty."),
        (dict(member_id="m", member_epoch=0, subscribed_topic_names=None), "SubscribedTopicNames must be set in first request."),
        (dict(member_id="m", member_epoch=0, subscribed_topic_names=[]), "SubscribedTopicNames must be set in first request."),
        (dict(member_id="m", member_epoch=-2, subscribed_topic_names=None), "MemberEpoch is invalid."),
        (dict(member_id="m", member_epoch=0, subscribed_topic_names=["t"], rack_id=" "), "RackId can't be empty."),
    ],
)
def test_invalid_requests(fields: dict[str, Any], message: str) -> None:
    sg = SG()
    box = Box()
    sg.c.share_group_heartbeat(request("share_group_heartbeat", 1, group_id="g", **fields), box)
    assert box.value.error_code == E.invalid_request
    assert box.value.error_message == message


def test_unknown_member_and_group() -> None:
    sg = SG()
    assert sg.hb("m1", 3).error_code == E.group_id_not_found
    sg.join("m1")
    assert sg.hb("ghost", 1).error_code == E.unknown_member_id
    assert sg.hb("ghost", -1).error_code == E.unknown_member_id


def test_fenced_member_epoch_and_previous_epoch() -> None:
    sg = SG()
    sg.join("m1")
    sg.join("m2")
    assert sg.hb("m1", 1).member_epoch == 2  # m1 moves to epoch 2 (previous: 1)
    assert sg.hb("m1", 1).error_code == E.none  # the previous epoch: a lost response
    assert sg.hb("m1", 7).error_code == E.fenced_member_epoch
    sg.join("m3")
    assert sg.hb("m1", 2).member_epoch == 3
    resp = sg.hb("m1", 1)
    assert resp.error_code == E.fenced_member_epoch
    # the member rejoins with epoch 0 under its own id and gets its full assignment
    rejoin = sg.hb("m1", 0, ["t"])
    assert rejoin.error_code == E.none and rejoin.member_epoch == 3 and rejoin.assignment is not None


def test_group_max_size() -> None:
    sg = SG(group_share_max_size=2)
    sg.join("m1")
    sg.join("m2")
    resp = sg.hb("m3", 0, ["t"])
    assert resp.error_code == E.group_max_size_reached
    assert sg.hb("m2", 2).error_code == E.none  # members already in are fine


def test_group_id_of_another_type() -> None:
    sg = SG()
    box = Box()
    sg.c.consumer_group_heartbeat(request("consumer_group_heartbeat", 1, group_id="cg", member_id="c1", member_epoch=0,
                                          rebalance_timeout=30_000, subscribed_topic_names=["t"], topic_partitions=[]),
                                  box)
    assert box.value.error_code == E.none
    resp = sg.hb("m1", 0, ["t"], group="cg")
    assert resp.error_code == E.group_id_not_found
    sg.join("m1", group="sg")
    box = Box()
    sg.c.consumer_group_heartbeat(request("consumer_group_heartbeat", 1, group_id="sg", member_id="c1", member_epoch=0,
                                          rebalance_timeout=30_000, subscribed_topic_names=["t"], topic_partitions=[]),
                                  box)
    assert box.value.error_code == E.group_id_not_found
    # the classic protocol against a share group: Kafka's answers
    box = Box()
    sg.c.join_group(request("join_group", 9, group_id="sg", member_id="", session_timeout=10_000,
                            rebalance_timeout=30_000, protocol_type="consumer",
                            protocols=[{"name": "range", "metadata": b""}], reason=None),
                    box, client_id="c", client_host="/h")
    assert box.value.error_code == E.inconsistent_group_protocol
    box = Box()
    sg.c.heartbeat(request("heartbeat", 4, group_id="sg", generation_id=1, member_id="m1"), box)
    assert box.value.error_code == E.unknown_member_id
    box = Box()
    sg.c.offset_commit(request("offset_commit", 8, group_id="sg", generation_id_or_member_epoch=-1, member_id="",
                               topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]),
                       box)
    assert box.value.topics[0].partitions[0].error_code == E.group_id_not_found


# --- leaving, session expiry ----------------------------------------------------------------


def test_leave_gives_the_partitions_to_the_others() -> None:
    hooks = RecordingHooks()
    sg = SG(hooks=hooks)
    sg.join("m1")
    sg.join("m2")
    sg.hb("m1", 1)
    resp = sg.hb("m2", -1)
    assert resp.error_code == E.none and resp.member_epoch == -1
    assert ("left", "g", "m2") in hooks.events
    assert set(sg.group().members) == {"m1"}
    again = sg.hb("m1", 2)
    assert again.member_epoch == 3 and partitions(again) == {sg.tid("t"): [0, 1, 2, 3]}
    sg.hb("m1", -1)
    assert sg.group().state.value == "Empty"


def test_session_expiry_fences_the_member() -> None:
    hooks = RecordingHooks()
    sg = SG(hooks=hooks)
    sg.join("m1")
    sg.join("m2")
    for _ in range(3):
        sg.advance(SESSION // 3)
        sg.hb("m1", sg.group().members["m1"].member_epoch)
    assert set(sg.group().members) == {"m1"}
    assert ("left", "g", "m2") in hooks.events
    assert sg.hb("m2", 2).error_code == E.unknown_member_id
    sg.advance(SESSION + 1)
    assert not sg.group().members and sg.group().state.value == "Empty"


# --- records and replay -----------------------------------------------------------------------


def test_records_round_trip() -> None:
    member = ShareGroupMember("m", member_epoch=3, rack_id=None, client_id="c", client_host="/h",
                              subscribed_topic_names=frozenset({"b", "a"}))
    k, v = encode_record(member_subscription_record("g", member))
    assert k == b"\x00\x0a\x00\x01g\x00\x01m"  # type 10, group, member; never flexible
    # RackId null, ClientId "c", ClientHost "/h", SubscribedTopicNames ["a", "b"], no tags
    assert v == b"\x00\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x03\x02a\x02b" + b"\x00"
    key = decode_any_key(k)
    assert key == ShareGroupKey(10, "g", "m")
    assert decode_record(key, v)[1].subscribed_topic_names == ("a", "b")
    t = uuid.UUID(int=1)
    record = state_partition_metadata_record("g", {t: ("t", frozenset({0, 2}))}, {})
    k, v = encode_record(record)
    assert decode_any_key(k) == ShareGroupKey(STATE_PARTITION_METADATA, "g")
    assert decode_record(decode_any_key(k), v) == record


def test_replay_after_restart_keeps_the_group() -> None:
    sg = SG()
    sg.join("m1")
    sg.join("m2")
    sg.hb("m1", 1)
    before = sg.group()
    members = {mid: (m.member_epoch, m.assigned, m.client_host) for mid, m in before.members.items()}
    sg.restart()
    after = sg.group()
    assert {mid: (m.member_epoch, m.assigned, m.client_host) for mid, m in after.members.items()} == members
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.target_assignment == before.target_assignment
    assert after.initialized == before.initialized
    # the members carry on with their epochs, and get a full session after the load
    assert sg.hb("m1", 2).error_code == E.none
    sg.advance(SESSION + 1)
    assert not sg.group().members


def test_delete_only_when_empty_and_tombstones_replay() -> None:
    hooks = RecordingHooks()
    sg = SG(hooks=hooks)
    sg.join("m1")
    assert sg.delete("g") == E.non_empty_group
    sg.hb("m1", -1)
    assert sg.delete("g") == E.none
    assert sg.c.group("g") is None
    assert ("deleted", "g", {sg.tid("t"): frozenset(range(4))}) in hooks.events
    assert sg.delete("g") == E.group_id_not_found
    sg.restart()
    assert sg.c.group("g") is None


# --- admin views ------------------------------------------------------------------------------


def test_describe_list_and_describe_groups() -> None:
    sg = SG()
    sg.join("m1")
    d = sg.describe("g", "nope").groups
    assert d[0].error_code == E.none and d[0].group_state == "Stable" and d[0].assignor_name == "simple"
    assert d[0].members[0].member_id == "m1" and d[0].members[0].client_host == "/127.0.0.1"
    assert d[0].members[0].assignment.topic_partitions[0].topic_name == "t"
    assert d[1].error_code == E.group_id_not_found
    listed = sg.list_groups(states_filter=[], types_filter=[]).groups
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "share", "share", "Stable")
    ]
    assert sg.list_groups(states_filter=[], types_filter=["consumer"]).groups == ()
    assert len(sg.list_groups(states_filter=["stable"], types_filter=["Share"]).groups) == 1
    assert sg.list_groups(states_filter=["Empty"], types_filter=[]).groups == ()
    box = Box()
    sg.c.describe_groups(request("describe_groups", 5, groups=["g"], include_authorized_operations=False), box)
    assert box.value.groups[0].group_state == "Dead"


# --- share-partition initialisation through the shell -----------------------------------------


def test_partitions_are_assigned_once_the_shell_initialised_them() -> None:
    hooks = RecordingHooks(initializes=True)
    sg = SG(hooks=hooks)
    resp = sg.join("m1")
    assert partitions(resp) == {}  # nothing initialised yet
    assert hooks.events[0] == ("initialize", "g", 1, {sg.tid("t"): frozenset(range(4))})
    # a heartbeat meanwhile does not ask again
    sg.hb("m1", 1)
    assert [e for e in hooks.events if e[0] == "initialize"] == [hooks.events[0]]
    assert sg.c.share_partitions_initialized("g", {sg.tid("t"): frozenset({0, 1})}) == E.none
    resp = sg.hb("m1", 1)
    assert resp.member_epoch == 2 and partitions(resp) == {sg.tid("t"): [0, 1]}
    assert sg.c.share_assignment("g", "m1") == {sg.tid("t"): frozenset({0, 1})}
    assert ("assigned", "g", "m1", {sg.tid("t"): frozenset({0, 1})}) in hooks.events
    # a failure is asked again on the next heartbeat
    sg.c.share_partitions_initialization_failed("g", {sg.tid("t"): frozenset({2, 3})})
    sg.hb("m1", 2)
    assert hooks.events[-1] == ("initialize", "g", 2, {sg.tid("t"): frozenset({2, 3})})
    sg.restart()
    assert sg.group().initialized == {sg.tid("t"): ("t", frozenset({0, 1}))}
