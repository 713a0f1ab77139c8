"""Consumer groups through the other APIs: ConsumerGroupDescribe, ListGroups, DescribeGroups,
DeleteGroups, OffsetCommit/OffsetFetch/OffsetDelete/TxnOffsetCommit with member epochs,
offset expiry, the classic membership APIs against a consumer group, and the config."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import CoordinatorConfig
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import ConsumerGroupKey, decode_any_key
from coordinator.group import Group
from coordinator.records import GroupMetadataKey, OffsetCommitKey

from ..harness import Box, Client, Harness, request, subscription
from .cg import CG, Consumer, E


def classic(cg: CG) -> Harness:
    h = Harness()
    h.c, h.clock, h.log, h.config = cg.c, cg.clock, cg.log, cg.config
    return h


def describe(h: CG, *gids: str, v: int = 1, ops: bool = False, **kw: Any) -> Any:
    box = Box()
    h.c.consumer_group_describe(
        request("consumer_group_describe", v, group_ids=list(gids), include_authorized_operations=ops), box, **kw
    )
    return box.value.groups


def commit(h: CG, gid: str, member: str, epoch: int, v: int = 9, partitions: tuple[int, ...] = (0,)) -> list:
    box = Box()
    fields: dict[str, Any] = dict(
        group_id=gid, generation_id_or_member_epoch=epoch, member_id=member,
        topics=[{"name": "t", "partitions": [{"partition_index": p, "committed_offset": 10 + p} for p in partitions]}],
    )
    h.c.offset_commit(request("offset_commit", v, **fields), box)
    return [p.error_code for t in box.value.topics for p in t.partitions]


def fetch(h: CG, gid: str, member: str | None = None, epoch: int = -1, v: int = 9) -> Any:
    box = Box()
    group: dict[str, Any] = {"group_id": gid, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    if v >= 9:
        group.update(member_id=member, member_epoch=epoch)
    h.c.offset_fetch(request("offset_fetch", v, groups=[group]), box)
    return box.value.groups[0]


def test_consumer_group_describe() -> None:
    h = CG(topics={"t": 4})
    a, b = Consumer("a", instance_id="ia", rack_id="r1", assignor="range"), Consumer("b")
    h.settle([a, b])
    classic(h).form_group("old", [Client("x")])
    d, unknown, old, empty = describe(h, "g", "nope", "old", "", ops=True)
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        E.none, "Stable", 2, 2, "range")
    assert d.authorized_operations == 3400
    members = {m.member_id: m for m in d.members}
    ma = members["a"]
    assert (ma.instance_id, ma.rack_id, ma.member_epoch, ma.client_id, ma.client_host, ma.member_type) == (
        "ia", "r1", 2, "cid", "/10.0.0.1", 1)
    assert ma.subscribed_topic_names == ("t",) and ma.subscribed_topic_regex is None
    tp = ma.assignment.topic_partitions[0]
    assert (tp.topic_id, tp.topic_name) == (h.tid("t"), "t") and ma.target_assignment == ma.assignment
    assert (unknown.error_code, unknown.error_message) == (E.group_id_not_found, "Group nope not found.")
    assert (old.error_code, old.error_message) == (E.group_id_not_found, "Group old is not a consumer group")
    assert empty.error_code == E.invalid_group_id
    assert describe(h, "g")[0].authorized_operations == -(2**31)  # not asked for
    assert describe(h, "g", ops=True, authorized_operations=lambda gid: 8)[0].authorized_operations == 8
    (d0,) = describe(h, "g", v=0)
    assert d0.group_state == "Stable" and not hasattr(d0.members[0], "member_type")
    # a member mid-reconciliation shows its current and target assignments apart
    h.heartbeat(Consumer("c"))
    mc = {m.member_id: m for m in describe(h, "g")[0].members}["c"]
    assert mc.assignment.topic_partitions == () and mc.target_assignment.topic_partitions != ()
    # partitions of deleted topics are left out
    del h.topics["t"]
    assert describe(h, "g")[0].members[0].assignment.topic_partitions == ()


def test_list_describe_and_delete_through_the_classic_admin_apis() -> None:
    h = CG()
    ch = classic(h)
    h.heartbeat(Consumer("a"))
    h.heartbeat(Consumer("x", group="empty"))
    h.leave(Consumer("x", group="empty"))
    ch.form_group("old", [Client("c1")])

    def listed(v: int = 5, **kw: Any) -> set:
        box = Box()
        h.c.list_groups(request("list_groups", v, **kw), box)
        return {(g.group_id, g.group_state, g.protocol_type, getattr(g, "group_type", "")) for g in box.value.groups}

    assert listed() == {("g", "Stable", "consumer", "consumer"), ("empty", "Empty", "consumer", "consumer"),
                        ("old", "Stable", "consumer", "classic")}
    assert {g[0] for g in listed(types_filter=["consumer"])} == {"g", "empty"}
    assert {g[0] for g in listed(types_filter=["Classic"])} == {"old"}
    assert {g[0] for g in listed(states_filter=["empty"])} == {"empty"}
    assert {g[0] for g in listed(v=4, states_filter=["stable"])} == {"g", "old"}
    # DescribeGroups (classic API): a consumer group is described as Kafka does, Dead
    box = Box()
    h.c.describe_groups(request("describe_groups", 5, groups=["g", "old"]), box)
    g, old = box.value.groups
    assert (g.error_code, g.group_state, g.members) == (E.none, "Dead", ())
    assert old.group_state == "Stable"
    # DeleteGroups: only empty consumer groups, with all their records and offsets
    assert commit(h, "empty", "", -1) == [E.none]

    def delete(*gids: str) -> dict:
        box = Box()
        h.c.delete_groups(request("delete_groups", 2, groups_names=list(gids)), box)
        return {r.group_id: r.error_code for r in box.value.results}

    log = h.log.partitions[h.c.partition_for("empty")]
    n = len(log)
    assert delete("g", "empty") == {"g": E.non_empty_group, "empty": E.none}
    assert h.c.group("empty") is None
    written = log[n:]
    assert all(v is None for _, v in written)
    keys = [decode_any_key(k) for k, _ in written]
    assert keys[0] == OffsetCommitKey("empty", "t", 0)
    assert [k.type for k in keys[1:] if isinstance(k, ConsumerGroupKey)] == [6, 4, 3]
    assert fetch(h, "empty").topics[0].partitions[0].committed_offset == -1


def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    h = CG()
    a = Consumer("a")
    h.heartbeat(a)
    assert commit(h, "g", "a", a.epoch) == [E.none]
    assert commit(h, "g", "a", a.epoch + 1) == [E.stale_member_epoch]
    assert commit(h, "g", "zz", a.epoch) == [E.unknown_member_id]
    assert commit(h, "g", "", -1) == [E.unknown_member_id]  # admin commits need an empty group
    assert commit(h, "g", "a", a.epoch, v=8) == [E.unsupported_version]
    assert commit(h, "g", "zz", a.epoch, v=8) == [E.unknown_member_id]
    f = fetch(h, "g", "a", a.epoch)
    assert f.error_code == E.none and f.topics[0].partitions[0].committed_offset == 10
    assert fetch(h, "g", "a", a.epoch - 1).error_code == E.stale_member_epoch
    assert fetch(h, "g", "zz", a.epoch).error_code == E.unknown_member_id
    assert fetch(h, "g").error_code == E.none  # no member: the admin client
    assert fetch(h, "g", v=8).topics[0].partitions[0].committed_offset == 10
    # a commit after the member left: the group is empty, admin commits are fine again
    h.leave(a)
    assert commit(h, "g", "a", 1) == [E.unknown_member_id]
    assert commit(h, "g", "", -1) == [E.none]


def test_offset_delete_and_expiry() -> None:
    h = CG(topics={"t": 2, "u": 1}, offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    a = Consumer("a")
    h.heartbeat(a)
    commit(h, "g", "a", a.epoch, partitions=(0, 1))
    box = Box()
    h.c.offset_commit(request("offset_commit", 9, group_id="g", generation_id_or_member_epoch=a.epoch, member_id="a",
                              topics=[{"name": "u", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]),
                      box)
    box = Box()
    h.c.offset_delete(request("offset_delete", 0, group_id="g", topics=[
        {"name": "t", "partitions": [{"partition_index": 0}]}, {"name": "u", "partitions": [{"partition_index": 0}]}]),
        box)
    errors = {(t.name, p.partition_index): p.error_code for t in box.value.topics for p in t.partitions}
    assert errors == {("t", 0): E.group_subscribed_to_topic, ("u", 0): E.none}
    # offsets of subscribed topics do not expire while the group consumes them
    for _ in range(4):
        h.advance(30_000)
        h.heartbeat(a)
    assert set(h.group().offsets) == {("t", 0), ("t", 1)}
    # an empty group's offsets age from their commit; then the group goes
    h.leave(a)
    h.advance(2_000)
    assert h.c.group("g") is None
    assert isinstance(decode_any_key(h.log.all_records()[-1][0]), ConsumerGroupKey)


def test_txn_offset_commit_to_a_consumer_group() -> None:
    h = CG()
    a = Consumer("a")
    h.heartbeat(a)

    def txn(member: str, generation: int, v: int = 4) -> Any:
        box = Box()
        fields: dict[str, Any] = dict(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
                                      topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}])
        if v >= 3:
            fields.update(generation_id=generation, member_id=member)
        h.c.txn_offset_commit(request("txn_offset_commit", v, **fields), box)
        return box.value.topics[0].partitions[0].error_code

    assert txn("a", a.epoch) == E.none
    assert txn("a", a.epoch + 1) == E.illegal_generation
    assert txn("zz", a.epoch) == E.unknown_member_id
    assert txn("", -1, v=2) == E.unknown_member_id
    assert h.group().pending_txn_offsets[7][("t", 0)].value.offset == 1
    h.c.complete_transaction(h.c.partition_for("g"), 7, True)
    assert h.group().offsets[("t", 0)].offset == 1


def test_classic_membership_apis_against_a_consumer_group() -> None:
    h = CG()
    ch = classic(h)
    a = Consumer("a", instance_id="ia")
    h.heartbeat(a)
    # classic members may join (coordinator/consumer/classic_members.py; tests in
    # test_migration.py), with the consumer protocol type only
    assert ch.join("g", Client("x"), protocol_type="other").value.error_code == E.inconsistent_group_protocol
    assert ch.join("g", Client("x")).value.error_code == E.member_id_required
    # the classic APIs refuse members using the consumer protocol
    assert ch.heartbeat("g", Client("x", member_id="a", generation=1)) == E.unknown_member_id
    assert ch.heartbeat("g", Client("x", member_id="b", generation=1, instance_id="ia")) == E.fenced_instance_id
    assert ch.sync("g", Client("x", member_id="a", generation=1)).value.error_code == E.unknown_member_id
    r = ch.leave("g", Client("x", member_id="a"), Client("y", member_id="", instance_id="ia"),
                 Client("z", member_id="q", instance_id="ia"))
    assert r.error_code == E.none
    assert [m.error_code for m in r.members] == [E.unknown_member_id, E.unknown_member_id, E.fenced_instance_id]
    assert "a" in h.group().members
    # an empty consumer group gives way to a classic one, offsets included
    h.leave(a)
    assert commit(h, "g", "", -1) == [E.none]
    assert ch.sync("g", Client("x", member_id="a", generation=1)).value.error_code == E.unknown_member_id
    log = h.log.partitions[h.c.partition_for("g")]
    n = len(log)
    c = Client("c1", protocols=[("range", subscription(["t"]))])
    ch.form_group("g", [c])
    g = h.c.group("g")
    assert isinstance(g, Group) and g.offsets[("t", 0)].offset == 10
    tombstones = [decode_any_key(k) for k, v in log[n:] if v is None]
    assert ConsumerGroupKey(3, "g") in tombstones
    # and the classic group, once empty, can become a consumer group again
    ch.leave("g", c)
    assert h.heartbeat(Consumer("b")).error_code == E.none
    assert isinstance(h.c.group("g"), ConsumerGroup) and h.group().offsets[("t", 0)].offset == 10
    assert GroupMetadataKey("g") in [decode_any_key(k) for k, v in h.log.all_records() if v is None]


def test_config() -> None:
    c = CoordinatorConfig.from_properties({
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
        "group.coordinator.rebalance.protocols": ["classic"],
        "group.consumer.session.timeout.ms": "50000",
    })
    assert c.group_consumer_assignors == ("range", "uniform") and not c.consumer_protocol_enabled
    assert c.group_consumer_session_timeout_ms == 50_000
    d = CoordinatorConfig()
    assert (d.group_consumer_session_timeout_ms, d.group_consumer_heartbeat_interval_ms, d.group_consumer_max_size,
            d.group_consumer_assignors, d.consumer_protocol_enabled) == (45_000, 5000, 2**31 - 1, ("uniform", "range"), True)
    bad = [
        ({"group.consumer.heartbeat.interval.ms": 45_000, "group.consumer.max.heartbeat.interval.ms": 60_000},
         "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
        ({"group.consumer.session.timeout.ms": 70_000}, "group.consumer.session.timeout.ms must be less than or equal"),
        ({"group.consumer.session.timeout.ms": 40_000}, "group.consumer.session.timeout.ms must be greater than"),
        ({"group.consumer.heartbeat.interval.ms": 1000}, "group.consumer.heartbeat.interval.ms must be greater than"),
        ({"group.consumer.max.size": 0}, "group.consumer.max.size must be at least 1"),
        ({"group.coordinator.rebalance.protocols": "consumer"}, "Disabling the 'classic' protocol is not supported"),
        ({"group.coordinator.rebalance.protocols": "classic,fancy"}, "group.coordinator.rebalance.protocols"),
        ({"group.consumer.assignors": ""}, "group.consumer.assignors"),
        ({"group.consumer.max.size": "many"}, "group.consumer.max.size"),
    ]
    for props, message in bad:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("'", ".")):
            CoordinatorConfig.from_properties(props)
    with pytest.raises(ValueError, match="group.consumer.assignors"):
        CG(group_consumer_assignors=("uniform", "sticky"))
