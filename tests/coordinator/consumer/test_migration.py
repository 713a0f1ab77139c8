"""KIP-848's online migration between classic groups and consumer groups, as Kafka 4 does it:
the upgrade of a classic group by a member using the consumer protocol, members using the
classic protocol inside a consumer group, the downgrade when the last consumer-protocol
member leaves, group.consumer.migration.policy, and replay of all of it after a restart."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.consumer.describe import MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER
from coordinator.consumer.group import ConsumerGroup, MemberState
from coordinator.consumer.records import ConsumerGroupKey, decode_any_key, decode_record
from coordinator.group import Group, GroupState
from coordinator.records import GroupMetadataKey, decode_group_metadata_value

from ..harness import Box, request, subscription
from .cg import CG, Consumer, E
from .classic_client import Classic, ClassicConsumer, check_owners


def classic_group(policy: str = "bidirectional", cooperative: bool = False, n: int = 2, **cfg: Any):
    """A Stable classic group "g" of ``n`` classic consumers over topic t (6 partitions)."""
    h = CG(topics={"t": 6}, group_consumer_migration_policy=policy, **cfg)
    k = Classic(h)
    cls = [ClassicConsumer(f"c{i}", cooperative=cooperative) for i in range(1, n + 1)]
    k.form(cls)
    assert isinstance(h.c.group("g"), Group) and h.c.group("g").is_(GroupState.STABLE)
    return h, k, cls


def settle(h: CG, k: Classic, cls: list[ClassicConsumer], consumers: list[Consumer], rounds: int = 10) -> None:
    """Everybody polls in turn until the consumer group is Stable, checking ownership at every
    step."""
    for _ in range(rounds):
        for cl in cls:
            k.poll(cl)
            check_owners(h, cls, consumers)
        for c in consumers:
            h.heartbeat(c)
            check_owners(h, cls, consumers)
        g = h.group()
        if g.state.value == "Stable" and all(m.member_epoch == g.group_epoch for m in g.members.values()):
            return
    raise AssertionError(f"group did not settle: {h.group().state}")


def batch_keys(h: CG, start: int) -> list[Any]:
    """The keys written to g's partition from ``start`` on, tombstones marked."""
    log = h.log.partitions[h.c.partition_for("g")]
    out = []
    for key, value in log[start:]:
        k = decode_any_key(key)
        t = "GM" if isinstance(k, GroupMetadataKey) else k.type
        out.append((t, value is None))
    return out


def log_size(h: CG) -> int:
    return len(h.log.partitions.get(h.c.partition_for("g"), []))


# --- upgrade ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cooperative", [False, True])
def test_a_consumer_member_upgrades_a_stable_classic_group(cooperative: bool) -> None:
    h, k, (c1, c2) = classic_group(cooperative=cooperative)
    assert k.commit(c1, 42) == E.none
    mine = {c1.member_id: set(c1.owned), c2.member_id: set(c2.owned)}
    start = log_size(h)
    a = Consumer("a")
    r = h.heartbeat(a)
    assert (r.error_code, r.member_epoch) == (E.none, 2)
    g = h.group()
    assert isinstance(g, ConsumerGroup) and g.group_epoch == 2 and g.assignment_epoch == 2
    assert g.offsets[("t", 0)].offset == 42  # offsets move with the group
    # the classic members are members using the classic protocol, with their partitions
    for cl in (c1, c2):
        m = g.members[cl.member_id]
        assert m.uses_classic_protocol and m.member_epoch == 1 and m.subscribed_topic_names == {"t"}
        assert m.classic is not None and m.classic.session_timeout_ms == cl.session
        assert {("t", p) for ps in m.assigned.values() for p in ps} == mine[cl.member_id]
    # a waits for partitions the classic members still own
    assert g.members["a"].state is MemberState.UNRELEASED_PARTITIONS and not a.owned
    # Kafka's records, in Kafka's order: the classic group's tombstone, the consumer group's
    # members, epoch, target assignment, its epoch, current assignments; then the heartbeat's
    keys = batch_keys(h, start)
    assert keys[:9] == [("GM", True), (5, False), (5, False), (3, False), (7, False), (7, False), (6, False),
                        (8, False), (8, False)]
    assert keys[9:] == [(5, False), (4, False), (3, False), (7, False), (7, False), (7, False), (6, False),
                        (8, False)]
    # the classic members are told to rejoin, revoke, and everybody ends with two partitions
    assert k.heartbeat(c1) == E.rebalance_in_progress
    settle(h, k, [c1, c2], [a])
    assert len(c1.owned) == len(c2.owned) == len(a.owned) == 2
    # a classic member commits with its generation, which is its member epoch
    assert c1.generation == h.group().members[c1.member_id].member_epoch
    assert k.commit(c1, 43) == E.none
    c1.generation -= 1
    assert k.commit(c1, 44) == E.illegal_generation


def test_an_upgrade_during_a_rebalance_sends_the_parked_members_back() -> None:
    h, k, (c1, c2) = classic_group()
    box = k.join(c1)  # c1 rejoins: the group prepares a rebalance, c1's JoinGroup waits
    assert not box.done and h.c.group("g").is_(GroupState.PREPARING_REBALANCE)
    a = Consumer("a")
    assert h.heartbeat(a).error_code == E.none
    assert box.value.error_code == E.rebalance_in_progress
    settle(h, k, [c1, c2], [a])


def test_a_static_consumer_member_replaces_a_static_classic_member() -> None:
    h = CG(topics={"t": 6})
    k = Classic(h)
    c1, c2 = ClassicConsumer("c1", instance_id="i1"), ClassicConsumer("c2", instance_id="i2")
    k.form([c1, c2])
    # instance i1 restarts with the new consumer: it takes over c1's partitions (no need to
    # have left: the member it replaces used the classic protocol)
    a = Consumer("a", instance_id="i1")
    assert h.heartbeat(a).error_code == E.none
    assert c1.member_id not in h.group().members and h.group().static_members["i1"] == "a"
    assert {p for _, p in a.owned} == {p for _, p in c1.owned}
    c1.owned = set()  # the old process is gone
    settle(h, k, [c2], [a])


# --- classic members in a consumer group ---------------------------------------------------


def test_classic_members_join_a_consumer_group() -> None:
    h = CG(topics={"t": 6})
    k = Classic(h)
    a, b = Consumer("a"), Consumer("b")
    h.settle([a, b])
    epoch = h.group().group_epoch
    c = ClassicConsumer("c", cooperative=True)
    box = k.join(c)  # MEMBER_ID_REQUIRED first, then admitted at once
    r = box.value
    assert (r.error_code, r.generation_id, r.protocol_type, r.protocol_name, r.leader, r.members) == (
        E.none, epoch + 1, "consumer", "cooperative-sticky", "", ())
    k.absorb_join(c, r)
    g = h.group()
    assert g.members[c.member_id].uses_classic_protocol and g.classic_members == 1
    assert g.classic_protocols == {"cooperative-sticky": 1}
    # its partitions are still owned by a and b: it gets them once they are released
    s = k.sync(c).value
    assert s.error_code == E.none and not k.absorb_sync(c, s) and not c.owned
    assert (s.protocol_type, s.protocol_name) == ("consumer", "cooperative-sticky")
    assert k.heartbeat(c) == E.none  # waiting on partitions still owned by others
    settle(h, k, [c], [a, b])
    assert len(c.owned) == 2
    # ConsumerGroupDescribe tells the protocols apart
    box = Box()
    h.c.consumer_group_describe(request("consumer_group_describe", 1, group_ids=["g"],
                                        include_authorized_operations=False), box)
    types = {m.member_id: m.member_type for m in box.value.groups[0].members}
    assert types == {"a": MEMBER_TYPE_CONSUMER, "b": MEMBER_TYPE_CONSUMER, c.member_id: MEMBER_TYPE_CLASSIC}
    # other classic members must share a protocol with it; and use the consumer protocol type
    d = ClassicConsumer("d", names=["range"])
    assert k.join(d).value.error_code == E.inconsistent_group_protocol
    assert k.join(ClassicConsumer("e"), protocol_type="other").value.error_code == E.inconsistent_group_protocol
    d.names = ["range", "cooperative-sticky"]
    assert k.join(d).value.error_code == E.none
    # the classic APIs' checks
    assert k.heartbeat(ClassicConsumer("x", member_id="a", generation=a.epoch)) == E.unknown_member_id
    assert k.heartbeat(ClassicConsumer("x", member_id=c.member_id, generation=c.generation - 1)) == \
        E.illegal_generation
    wrong = ClassicConsumer("x", member_id=c.member_id, generation=c.generation, protocol="range")
    assert k.sync(wrong).value.error_code == E.inconsistent_group_protocol
    # LeaveGroup removes it and bumps the group epoch
    epoch = h.group().group_epoch
    r = k.leave(c)
    assert r.error_code == E.none and [m.error_code for m in r.members] == [E.none]
    assert c.member_id not in h.group().members and h.group().group_epoch == epoch + 1


def test_the_classic_apis_errors_in_a_consumer_group() -> None:
    h = CG(topics={"t": 6}, group_consumer_max_size=4)
    k = Classic(h)
    a = Consumer("a")
    h.heartbeat(a)
    c, s = ClassicConsumer("c"), ClassicConsumer("s", instance_id="is")
    k.rejoin(c)
    k.rejoin(s)
    # SyncGroup: a stale generation; a newer group epoch (the member must rejoin first)
    stale = ClassicConsumer("x", member_id=c.member_id, generation=c.generation - 1, protocol="range")
    assert k.sync(stale).value.error_code == E.illegal_generation
    assert h.heartbeat(Consumer("b")).error_code == E.none  # the group is full now
    assert k.sync(c).value.error_code == E.rebalance_in_progress
    assert k.join(ClassicConsumer("d")).value.error_code == E.group_max_size_reached
    k.rejoin(c)  # a member of the group may rejoin
    assert h.leave(Consumer("b")).error_code == E.none
    # a static member: rejoining under its id, a wrong id, an unknown instance
    r = k.join(s).value
    assert (r.error_code, r.member_id) == (E.none, s.member_id)
    assert k.join(ClassicConsumer("y", member_id="zz", instance_id="is")).value.error_code == E.fenced_instance_id
    assert k.join(ClassicConsumer("y", member_id="zz", instance_id="nope")).value.error_code == E.unknown_member_id
    assert k.heartbeat(ClassicConsumer("y", member_id="zz", instance_id="is", generation=s.generation)) == \
        E.fenced_instance_id
    # metadata that is not a subscription
    bad = k.join(ClassicConsumer("m", member_id="m"), protocols=[{"name": "range", "metadata": b"\x00"}])
    assert bad.value.error_code == E.unknown_server_error
    # LeaveGroup: an unknown instance, a consumer-protocol member, then the static member by
    # its instance id alone (answered with its member id)
    r = k.leave(ClassicConsumer("q", instance_id="nope"), ClassicConsumer("q", member_id="a"),
                ClassicConsumer("q", instance_id="is"))
    assert [(m.member_id, m.error_code) for m in r.members] == [
        ("", E.unknown_member_id), ("a", E.unknown_member_id), (s.member_id, E.none)]
    assert s.member_id not in h.group().members


def test_what_cannot_be_upgraded() -> None:
    # a classic group of another protocol type (Kafka Connect, say)
    h = CG(topics={"t": 6})
    k = Classic(h)
    w = ClassicConsumer("w")
    box = k.join(w, protocol_type="connect")
    h.advance(3000)
    assert box.value.error_code == E.none
    assert h.heartbeat(Consumer("a")).error_code == E.group_id_not_found
    # an upgrade while members wait for their assignment: they are sent back to rejoin
    h, k, (c1, c2) = classic_group()
    boxes = [k.join(c1), k.join(c2)]
    for cl, b in zip((c1, c2), boxes, strict=True):
        k.absorb_join(cl, b.value)
    follower = c2 if boxes[0].value.leader == c1.member_id else c1
    sync = k.sync(follower)
    assert not sync.done
    assert h.heartbeat(Consumer("a")).error_code == E.none
    assert sync.value.error_code == E.rebalance_in_progress


def test_classic_members_time_out_like_classic_members() -> None:
    h = CG(topics={"t": 6})
    k = Classic(h)
    a = Consumer("a")
    h.heartbeat(a)
    c, d, e = ClassicConsumer("c"), ClassicConsumer("d"), ClassicConsumer("e")
    for cl in (c, d, e):
        k.rejoin(cl)
    # c is silent: fenced after its own session timeout (10 s), not the consumer protocol's
    for _ in range(3):
        h.advance(4000)
        h.heartbeat(a)
        k.poll(d)
        k.poll(e)
    assert c.member_id not in h.group().members and d.member_id in h.group().members
    # d is told to rejoin (b joins) but keeps heartbeating instead: fenced after its
    # rebalance timeout
    h.heartbeat(Consumer("b"))
    assert k.heartbeat(d) == E.rebalance_in_progress
    for _ in range(8):
        h.advance(4000)
        h.heartbeat(a)
        k.heartbeat(d)
        k.poll(e)
    assert d.member_id not in h.group().members
    # e joins but never syncs: fenced after its rebalance timeout too
    r = k.join(e).value
    assert r.error_code == E.none
    for _ in range(8):
        h.advance(4000)
        h.heartbeat(a)
        k.heartbeat(e)
    assert e.member_id not in h.group().members


def test_partitions_never_have_two_owners_whoever_comes_and_goes() -> None:
    rng = random.Random(848)
    h = CG(topics={"t": 12, "u": 5})
    k = Classic(h)
    base = Consumer("base", topics=["t", "u"])
    h.heartbeat(base)
    # eager clients as the Java consumer's default assignors (range, cooperative-sticky) make
    # them; cooperative ones with cooperative-sticky alone: the protocol all support
    classics = [ClassicConsumer(f"c{i}", topics=["t", "u"], cooperative=i % 2 == 0,
                                names=None if i % 2 == 0 else ["range", "cooperative-sticky"]) for i in range(4)]
    consumers = [base]
    n = 0
    for _ in range(300):
        roll = rng.random()
        if roll < 0.08 and len(consumers) < 4:
            n += 1
            consumers.append(Consumer(f"x{n}", topics=["t", "u"]))
            h.heartbeat(consumers[-1])
        elif roll < 0.14 and len(consumers) > 1:
            h.leave(consumers.pop(rng.randrange(1, len(consumers))))
        elif roll < 0.2:
            cl = rng.choice(classics)
            if cl.member_id:
                k.leave(cl)
            else:
                k.rejoin(cl)
        elif roll < 0.6:
            cl = rng.choice(classics)
            if cl.member_id:
                before = set(cl.owned)
                err = k.heartbeat(cl)
                assert cl.owned == before  # a heartbeat never moves partitions
                if err != E.none:
                    k.rejoin(cl)
        else:
            h.heartbeat(rng.choice(consumers))
        check_owners(h, classics, consumers)
        h.check_owners()
    active = [cl for cl in classics if cl.member_id]
    settle(h, k, active, consumers, rounds=20)
    owned = sum(len(cl.owned) for cl in active) + sum(len(c.owned) for c in consumers)
    assert owned == 17


# --- downgrade -------------------------------------------------------------------------------


def upgraded(policy: str = "bidirectional", cooperative: bool = False):
    h, k, cls = classic_group(policy, cooperative)
    a = Consumer("a")
    assert h.heartbeat(a).error_code == E.none
    settle(h, k, cls, [a])
    return h, k, cls, a


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    h, k, (c1, c2), a = upgraded()
    k.commit(c1, 7)
    epoch = h.group().group_epoch
    start = log_size(h)
    assert h.leave(a).error_code == E.none
    g = h.c.group("g")
    assert isinstance(g, Group) and g.is_(GroupState.PREPARING_REBALANCE)
    assert g.generation == epoch and g.protocol_type == "consumer" and g.protocol_name == "range"
    assert set(g.members) == {c1.member_id, c2.member_id} and g.offsets[("t", 0)].offset == 7
    # the consumer group's tombstones (a's included), then the classic group's metadata, which
    # carries each member's target assignment
    keys = batch_keys(h, start)
    assert keys == [(8, True)] * 3 + [(7, True)] * 3 + [(6, True)] + [(5, True)] * 3 + [(4, True), (3, True), ("GM", False)]
    value = decode_group_metadata_value(h.log.partitions[h.c.partition_for("g")][-1][1])
    assert value.generation == epoch and [m.member_id for m in value.members] == [c1.member_id, c2.member_id]
    # the classic members rebalance as a classic group
    assert k.heartbeat(c1) == E.rebalance_in_progress
    k.form([c1, c2])
    assert h.c.group("g").is_(GroupState.STABLE) and len(c1.owned) == len(c2.owned) == 3
    check_owners(h, [c1, c2])


def test_a_consumer_member_timing_out_downgrades_the_group_too() -> None:
    h, k, (c1, c2), a = upgraded(cooperative=True)
    t0 = h.clock.t
    for _ in range(13):  # a is silent; c1 and c2 heartbeat
        h.advance(4000)
        if isinstance(h.c.group("g"), Group):
            break
        k.poll(c1)
        k.poll(c2)
    assert h.clock.t - t0 >= 45_000  # group.consumer.session.timeout.ms
    g = h.c.group("g")
    assert isinstance(g, Group) and set(g.members) == {c1.member_id, c2.member_id}
    k.form([c1, c2])
    assert len(c1.owned | c2.owned) == 6


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades() -> None:
    h = CG(topics={"t": 6})
    k = Classic(h)
    a = Consumer("a", instance_id="ia")
    h.heartbeat(a)
    c = ClassicConsumer("c")
    k.rejoin(c)
    settle(h, k, [c], [a])
    # instance ia comes back with a classic consumer: the group becomes classic, Stable, and
    # the new member takes a's target
    target = {p for _, p in a.owned}
    b = ClassicConsumer("b", instance_id="ia")
    r = k.join(b).value
    assert r.error_code == E.none
    k.absorb_join(b, r)
    g = h.c.group("g")
    assert isinstance(g, Group) and g.is_(GroupState.STABLE) and set(g.members) == {c.member_id, b.member_id}
    k.absorb_sync(b, k.sync(b).value)
    assert {p for _, p in b.owned} == target
    assert snapshot(reloaded(h)) == snapshot(h.c)


# --- the policy --------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade", "downgrade", "disabled"])
def test_the_migration_policy(policy: str) -> None:
    upgrade, downgrade = policy in ("bidirectional", "upgrade"), policy in ("bidirectional", "downgrade")
    h, k, cls = classic_group(policy)
    r = h.heartbeat(Consumer("a"))
    if upgrade:
        assert r.error_code == E.none and isinstance(h.c.group("g"), ConsumerGroup)
    else:
        assert (r.error_code, r.error_message) == (E.group_id_not_found, "Group g is not a consumer group")
        assert isinstance(h.c.group("g"), Group) and h.c.group("g").is_(GroupState.STABLE)
    # classic members may always join a consumer group; the downgrade needs the policy
    h = CG(topics={"t": 6}, group_consumer_migration_policy=policy.upper())
    k = Classic(h)
    a = Consumer("a")
    h.heartbeat(a)
    c = ClassicConsumer("c")
    k.rejoin(c)
    h.leave(a)
    assert isinstance(h.c.group("g"), Group if downgrade else ConsumerGroup)


def test_the_size_limits_of_the_migration() -> None:
    h, k, cls = classic_group(n=3, group_consumer_max_size=2)
    assert h.heartbeat(Consumer("a")).error_code == E.group_id_not_found
    h = CG(topics={"t": 6}, group_max_size=1)
    k = Classic(h)
    a = Consumer("a")
    h.heartbeat(a)
    c, d = ClassicConsumer("c"), ClassicConsumer("d")
    k.rejoin(c)
    k.rejoin(d)
    h.leave(a)
    assert isinstance(h.c.group("g"), ConsumerGroup)


def test_the_policy_setting() -> None:
    assert CoordinatorConfig().group_consumer_migration_policy == "bidirectional"
    c = CoordinatorConfig.from_properties({"group.consumer.migration.policy": "Upgrade"})
    assert c.group_consumer_migration_policy == "upgrade" and c.online_upgrade_enabled and not c.online_downgrade_enabled
    with pytest.raises(ValueError, match="group.consumer.migration.policy"):
        CoordinatorConfig.from_properties({"group.consumer.migration.policy": "sideways"})


# --- replay after a restart --------------------------------------------------------------


def reloaded(h: CG) -> GroupCoordinator:
    """A restarted coordinator, loaded from ``h``'s log and writing on to it."""
    c = GroupCoordinator(h.config, h.clock, h.log, topics=lambda: h.topics)
    parts = set(h.log.partitions)
    c.start_loading(parts)
    for p in sorted(parts):
        c.load_partition(p, h.log.replay(p))
        c.finished_loading(p)
    return c


def snapshot(c: GroupCoordinator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in c.groups():
        if isinstance(g, ConsumerGroup):
            out[g.group_id] = (
                "consumer", g.state, g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.target_assignment),
                dict(g.static_members), {t: dict(ps) for t, ps in g.partition_epochs.items()},
                dict(g.subscription_metadata), g.classic_members, dict(g.classic_protocols), dict(g.offsets),
            )
        else:
            out[g.group_id] = (
                "classic", g.generation, g.protocol_type, g.protocol_name, g.leader_id, dict(g.offsets),
                [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                  m.rebalance_timeout_ms, m.metadata(g.protocol_name), m.assignment) for m in g.members.values()],
            )
    return out


def test_replay_after_a_restart_at_each_stage() -> None:
    h, k, (c1, c2) = classic_group(cooperative=True)
    k.commit(c1, 5)
    a = Consumer("a")
    h.heartbeat(a)  # just upgraded: the classic members have not rejoined yet
    assert snapshot(reloaded(h)) == snapshot(h.c)
    k.poll(c1)  # c1 rejoined, revoked, rejoined
    h.heartbeat(a)
    assert snapshot(reloaded(h)) == snapshot(h.c)
    # the restarted coordinator carries on with the same members
    h.c = reloaded(h)
    settle(h, k, [c1, c2], [a])
    member = h.group().members[c1.member_id]
    assert member.classic is not None and member.classic.protocols[0][0] == "cooperative-sticky"
    assert snapshot(reloaded(h)) == snapshot(h.c)
    # downgraded
    h.leave(a)
    assert isinstance(h.c.group("g"), Group)
    before = snapshot(h.c)
    c2_ = reloaded(h)
    assert snapshot(c2_) == before
    # rebalanced as a classic group, then upgraded again, then restarted
    k.form([c1, c2])
    assert snapshot(reloaded(h)) == snapshot(h.c)
    b = Consumer("b")
    assert h.heartbeat(b).error_code == E.none
    settle(h, k, [c1, c2], [b])
    h.c = reloaded(h)
    assert isinstance(h.c.group("g"), ConsumerGroup) and h.c.group("g").offsets[("t", 0)].offset == 5
    settle(h, k, [c1, c2], [b])


def test_classic_member_metadata_is_in_the_records() -> None:
    h, k, (c1, _) = classic_group()
    h.heartbeat(Consumer("a"))
    log = h.log.partitions[h.c.partition_for("g")]
    values = [decode_record(key, v)[1] for key, v in
              ((decode_any_key(kb), vb) for kb, vb in log) if isinstance(key, ConsumerGroupKey) and key.type == 5]
    classic = [v.classic for v in values if v is not None and v.classic is not None]
    assert classic and classic[0].session_timeout_ms == c1.session
    assert classic[0].protocols == (("range", subscription(["t"])),)
