"""ConsumerGroupHeartbeat (KIP-848): joins and epochs, reconciliation, leaving, static
members, timers and the request validation, against Kafka's GroupMetadataManager."""

from __future__ import annotations

import pytest

from coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupState, MemberState

from ..harness import Client, Harness
from .cg import CG, Consumer, E, owners_disjoint


def classic_harness(cg: CG) -> Harness:
    """The classic-protocol test client, on ``cg``'s coordinator."""
    h = Harness()
    h.c, h.clock, h.log, h.config = cg.c, cg.clock, cg.log, cg.config
    return h


def test_first_join_creates_the_group_and_assigns_everything() -> None:
    h = CG()
    a = Consumer("a")
    r = h.heartbeat(a)
    assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "a", 1)
    assert r.heartbeat_interval.total_seconds() == 5  # group.consumer.heartbeat.interval.ms
    assert a.owned == h.tps("t", *range(6))
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    m = g.members["a"]
    assert (m.member_epoch, m.previous_member_epoch, m.state, m.client_id, m.client_host) == (
        1, 0, MemberState.STABLE, "cid", "/10.0.0.1")
    # a plain heartbeat changes nothing and carries no assignment
    appends = h.log.appends
    r = h.heartbeat(a)
    assert (r.error_code, r.member_epoch, r.assignment) == (E.none, 1, None)
    assert h.log.appends == appends
    # a full request gets the assignment again
    assert h.heartbeat(a, full=True).assignment is not None


def test_three_members_share_six_partitions_without_double_ownership() -> None:
    h = CG()
    cs = [Consumer(m) for m in ("a", "b", "c")]
    h.heartbeat(cs[0])
    for cl in cs[1:]:
        h.heartbeat(cl)  # joins: the group epoch moves on, nothing is free yet
        owners_disjoint(cs)
        h.check_owners()
    g = h.group()
    assert g.group_epoch == 3 and g.state is ConsumerGroupState.RECONCILING
    assert cs[0].epoch == 1 and cs[1].owned == set() and cs[2].owned == set()
    h.settle(cs)
    assert sorted(len(c.owned) for c in cs) == [2, 2, 2]
    assert set().union(*(c.owned for c in cs)) == h.tps("t", *range(6))
    assert {c.epoch for c in cs} == {3}
    # one leaves: its partitions go to the others, again without overlap
    h.leave(cs[2])
    assert h.group().group_epoch == 4
    h.settle(cs[:2])
    assert sorted(len(c.owned) for c in cs[:2]) == [3, 3]


def test_revocation_first_then_assignment() -> None:
    h = CG()
    a, b = Consumer("a"), Consumer("b")
    h.heartbeat(a)
    h.heartbeat(b)
    r = h.heartbeat(a)  # a must give up half, at its current epoch
    g = h.group()
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS and r.member_epoch == 1
    assert len(a.owned) == 3
    r = h.heartbeat(b)  # b waits: a has not confirmed the revocation
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS and b.owned == set()
    h.heartbeat(a)  # a reports it no longer owns them: epoch 2
    assert g.members["a"].state is MemberState.STABLE and a.epoch == 2
    h.heartbeat(b)
    assert len(b.owned) == 3 and g.state is ConsumerGroupState.STABLE


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    h = CG()
    a = Consumer("a", revokes=False, rebalance_timeout=10_000)
    b = Consumer("b")
    h.heartbeat(a)
    h.heartbeat(b)
    h.heartbeat(a)
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(5_000)
    h.heartbeat(a)  # still owns them: no progress, the timer keeps running
    h.heartbeat(b)
    assert "a" in h.group().members
    h.advance(5_000)
    g = h.group()
    assert "a" not in g.members and g.group_epoch == 3
    r = h.heartbeat(a)
    assert r.error_code == E.unknown_member_id
    h.heartbeat(b)
    h.heartbeat(b)
    assert b.owned == h.tps("t", *range(6))


def test_session_timeout_fences_silent_members() -> None:
    h = CG(group_consumer_session_timeout_ms=45_000)
    a, b = Consumer("a"), Consumer("b")
    h.settle([a, b])
    h.advance(30_000)
    h.heartbeat(a)
    h.advance(20_000)  # b silent for 50 s
    g = h.group()
    assert list(g.members) == ["a"] and g.state is ConsumerGroupState.ASSIGNING
    h.heartbeat(a)
    h.heartbeat(a)
    assert a.owned == h.tps("t", *range(6))
    h.advance(45_000)
    assert not h.group().members and h.group().state is ConsumerGroupState.EMPTY


def test_leave_and_unknown_members() -> None:
    h = CG()
    a = Consumer("a")
    h.heartbeat(a)
    r = h.leave(a)
    assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "a", -1)
    g = h.group()
    assert not g.members and g.state is ConsumerGroupState.EMPTY and g.group_epoch == 2
    assert h.leave(Consumer("zz")).error_code == E.unknown_member_id
    r = h.raw(member_id="zz", member_epoch=3)
    assert r.error_code == E.unknown_member_id and r.member_id is None
    r = h.raw(group_id="nope", member_id="zz", member_epoch=3)
    assert (r.error_code, r.error_message) == (E.group_id_not_found, "Consumer group nope not found.")
    assert h.raw(group_id="nope", member_id="zz", member_epoch=-1).error_code == E.group_id_not_found


def test_stale_and_future_epochs_are_fenced() -> None:
    h = CG()
    a, b = Consumer("a"), Consumer("b")
    h.settle([a, b])
    epoch = a.epoch
    r = h.raw(member_id="a", member_epoch=epoch + 1)
    assert r.error_code == E.fenced_member_epoch and "greater member epoch" in r.error_message
    r = h.raw(member_id="a", member_epoch=epoch - 1, topic_partitions=None)
    assert r.error_code == E.fenced_member_epoch and "smaller member epoch" in r.error_message
    # the previous epoch is accepted when the member owns no more than its assignment
    # (the response that bumped its epoch may have been lost)
    prev = h.group().members["a"].previous_member_epoch
    owned = [{"topic_id": t, "partitions": [p]} for t, p in sorted(a.owned, key=lambda x: x[1])[:1]]
    assert h.raw(member_id="a", member_epoch=prev, topic_partitions=owned).error_code == E.none
    assert h.raw(member_id="a", member_epoch=prev, topic_partitions=None).error_code == E.fenced_member_epoch
    # a fenced client rejoins under its id with epoch 0, having dropped its partitions; it
    # gets them back at the current epoch (KAFKA-19233)
    mine = set(b.owned)
    b.epoch, b.owned = 0, set()
    r = h.heartbeat(b)
    assert r.error_code == E.none and r.member_epoch == epoch and b.owned == mine
    h.check_owners()


def test_static_member_leaves_temporarily_and_comes_back_with_its_assignment() -> None:
    h = CG(group_consumer_session_timeout_ms=45_000)
    a = Consumer("a1", instance_id="ia")
    b = Consumer("b", instance_id="ib")
    h.settle([a, b])
    mine = set(a.owned)
    epoch = h.group().group_epoch
    r = h.leave(a, epoch=-2)
    assert (r.error_code, r.member_id, r.member_epoch) == (E.none, "a1", -2)
    g = h.group()
    assert g.members["a1"].member_epoch == -2 and g.group_epoch == epoch  # no rebalance
    # the partitions stay reserved: b does not get them
    h.advance(10_000)
    h.heartbeat(b)
    assert not b.owned & mine
    # another process with the same instance id takes over, with a new member id
    a2 = Consumer("a2", instance_id="ia")
    r = h.heartbeat(a2)
    assert r.error_code == E.none and a2.owned == mine and r.member_epoch == epoch
    g = h.group()
    assert "a1" not in g.members and g.static_members["ia"] == "a2" and g.group_epoch == epoch
    # while a2 is active, a third one cannot take the instance id
    r = h.heartbeat(Consumer("a3", instance_id="ia"))
    assert r.error_code == E.unreleased_instance_id
    # the old incarnation is fenced
    r = h.raw(member_id="a1", member_epoch=epoch, instance_id="ia")
    assert r.error_code == E.fenced_instance_id
    assert h.raw(member_id="x", member_epoch=epoch, instance_id="iz").error_code == E.unknown_member_id


def test_static_member_that_does_not_come_back_is_removed_after_its_session() -> None:
    h = CG(group_consumer_session_timeout_ms=45_000)
    a, b = Consumer("a", instance_id="ia"), Consumer("b")
    h.settle([a, b])
    h.leave(a, epoch=-2)
    for _ in range(5):
        h.advance(10_000)
        h.heartbeat(b)
    g = h.group()
    assert "a" not in g.members and "ia" not in g.static_members
    h.heartbeat(b)
    h.heartbeat(b)
    assert b.owned == h.tps("t", *range(6))


def test_static_member_leaving_for_good() -> None:
    h = CG()
    a = Consumer("a", instance_id="ia")
    h.heartbeat(a)
    r = h.leave(a, epoch=-1)
    assert r.error_code == E.none and not h.group().members
    assert h.heartbeat(Consumer("a2", instance_id="ia")).error_code == E.none


def test_group_max_size() -> None:
    h = CG(group_consumer_max_size=2)
    a, b, c = Consumer("a"), Consumer("b"), Consumer("c")
    h.heartbeat(a)
    h.heartbeat(b)
    r = h.heartbeat(c)
    assert r.error_code == E.group_max_size_reached and "maximum capacity of 2" in r.error_message
    assert h.heartbeat(a).error_code == E.none  # members already in are fine


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(member_id=""), "MemberId can't be empty."),
        (dict(group_id=""), "GroupId can't be empty."),
        (dict(instance_id=" "), "InstanceId can't be empty."),
        (dict(rack_id=""), "RackId can't be empty."),
        (dict(rebalance_timeout=-1), "RebalanceTimeoutMs must be provided in first request."),
        (dict(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
        (dict(topic_partitions=[{"topic_id": None, "partitions": [0]}]), "TopicPartitions must be empty when (re-)joining."),
        (dict(subscribed_topic_names=None),
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (dict(member_epoch=-2), "InstanceId can't be null."),
        (dict(member_epoch=-3), "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(fields: dict, message: str) -> None:
    h = CG()
    base = dict(member_id="m", member_epoch=0, rebalance_timeout=30_000, subscribed_topic_names=["t"],
                topic_partitions=[])
    base.update(fields)
    r = h.raw(**base)
    assert (r.error_code, r.error_message) == (E.invalid_request, message)
    assert h.c.group("g") is None and not h.log.appends


def test_v0_member_ids_are_given_by_the_coordinator() -> None:
    h = CG()
    r = h.raw(v=0, member_id="", member_epoch=0, rebalance_timeout=30_000, subscribed_topic_names=["t"],
              topic_partitions=[])
    assert r.error_code == E.none and len(r.member_id) == 22  # Kafka's Uuid.toString()
    assert r.member_id in h.group().members
    # from v1 the client names itself
    assert h.raw(member_id="", member_epoch=0, rebalance_timeout=30_000, subscribed_topic_names=["t"],
                 topic_partitions=[]).error_code == E.invalid_request


def test_server_assignors() -> None:
    h = CG()
    r = h.heartbeat(Consumer("a", assignor="sticky"))
    assert r.error_code == E.unsupported_assignor
    assert r.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    h.heartbeat(Consumer("a", assignor="range"))
    h.heartbeat(Consumer("b", assignor="range"))
    h.heartbeat(Consumer("c"))
    assert h.group().preferred_assignor() == "range"
    h2 = CG(group_consumer_assignors="range")
    assert h2.heartbeat(Consumer("a", assignor="uniform")).error_code == E.unsupported_assignor
    assert h2.heartbeat(Consumer("a")).error_code == E.none


def test_subscription_changes_bump_the_epoch() -> None:
    h = CG(topics={"t": 4, "u": 2})
    a = Consumer("a")
    h.heartbeat(a)
    assert h.group().group_epoch == 1
    r = h.raw(member_id="a", member_epoch=1, subscribed_topic_names=["t", "u"])
    assert r.error_code == E.none and h.group().group_epoch == 2
    assert {t for t, _ in h.assignment(a)} == {h.tid("t"), h.tid("u")}
    # an unknown topic in the subscription changes the member, not the metadata: still a bump
    h.raw(member_id="a", member_epoch=2, subscribed_topic_names=["t", "u", "missing"])
    assert h.group().group_epoch == 3 and "missing" not in h.group().subscription_metadata
    # fields that are not the subscription do not bump it
    h.raw(member_id="a", member_epoch=3, rack_id="r1")
    assert h.group().group_epoch == 3 and h.group().members["a"].rack_id == "r1"


def test_new_partitions_and_topics_are_assigned_without_a_restart() -> None:
    h = CG(topics={"t": 2})
    a = Consumer("a", topics=["t", "later"])
    h.heartbeat(a)
    assert a.owned == h.tps("t", 0, 1)
    h.add_topic("t", 4)  # CreatePartitions
    h.heartbeat(a)
    assert a.owned == h.tps("t", 0, 1, 2, 3) and h.group().group_epoch == 2
    h.add_topic("later", 1)  # a subscribed topic is created
    h.heartbeat(a)
    assert a.owned == h.tps("t", 0, 1, 2, 3) | h.tps("later", 0)
    del h.topics["later"]  # and deleted
    h.heartbeat(a)
    assert a.owned == h.tps("t", 0, 1, 2, 3) and h.group().group_epoch == 4


def test_regex_subscriptions() -> None:
    h = CG(topics={"orders-eu": 2, "payments": 1})
    a = Consumer("a", topics=None, regex="orders-.*")
    r = h.heartbeat(a)
    assert r.error_code == E.none and a.owned == h.tps("orders-eu", 0, 1)
    assert h.group().is_subscribed_to("orders-eu") and not h.group().is_subscribed_to("payments")
    h.add_topic("orders-us", 1)  # a new topic matching the regex is picked up
    h.heartbeat(a)
    assert a.owned == h.tps("orders-eu", 0, 1) | h.tps("orders-us", 0)
    # the regex must match the whole name, as Java's Matcher.matches()
    h.add_topic("old-orders-x", 1)
    h.heartbeat(a)
    assert not a.owned & h.tps("old-orders-x", 0)
    # a malformed regex is refused, and nothing changes
    epoch = h.group().group_epoch
    r = h.raw(member_id="a", member_epoch=a.epoch, subscribed_topic_regex="orders-(")
    assert r.error_code == E.invalid_regular_expression and "orders-(" in r.error_message
    assert h.group().group_epoch == epoch and h.group().members["a"].subscribed_topic_regex == "orders-.*"
    r = h.heartbeat(Consumer("b", topics=None, regex="[unclosed"))
    assert r.error_code == E.invalid_regular_expression and "b" not in h.group().members


def test_classic_groups_and_consumer_groups_share_ids_carefully() -> None:
    cg = CG()
    h = classic_harness(cg)
    h.form_group("classic", [Client("x")])
    # a classic group with members is converted (test_migration.py), unless its members'
    # assignments are not the consumer protocol's (this harness's leader assigns member ids)
    r = cg.heartbeat(Consumer("a", group="classic"))
    assert r.error_code == E.group_id_not_found and "embedded consumer protocol is malformed" in r.error_message
    assert not isinstance(cg.c.group("classic"), ConsumerGroup)
    # an empty classic group (only offsets) becomes a consumer group and keeps its offsets
    h.commit("simple", {("t", 0): 42})
    r = cg.heartbeat(Consumer("a", group="simple"))
    assert r.error_code == E.none and cg.group("simple").offsets[("t", 0)].offset == 42


def test_consumer_protocol_can_be_disabled() -> None:
    h = CG(group_coordinator_rebalance_protocols="classic")
    assert not h.c.consumer_protocol_enabled
    assert h.heartbeat(Consumer("a")).error_code == E.unsupported_version
    assert CG().c.consumer_protocol_enabled


def test_coordinator_errors() -> None:
    h = CG()
    h.c.serve_only([])
    assert h.heartbeat(Consumer("a")).error_code == E.not_coordinator
    h2 = CG()
    h2.c.start_loading([h2.c.partition_for("g")])
    assert h2.heartbeat(Consumer("a")).error_code == E.coordinator_load_in_progress


def test_write_failures_change_nothing() -> None:
    h = CG()
    a = Consumer("a")
    h.log.fail = OSError("disk")
    r = h.heartbeat(a)
    assert r.error_code == E.unknown_server_error and h.c.group("g") is None

    class NotLeader(Exception):
        error_code = E.not_leader_or_follower

    h.log.fail = NotLeader()
    assert h.heartbeat(a).error_code == E.not_coordinator
    h.log.fail = None
    assert h.heartbeat(a).error_code == E.none
    # a session expiry that cannot be written is tried again
    h.log.fail = OSError("disk")
    h.advance(46_000)
    assert "a" in h.group().members
    h.log.fail = None
    h.advance(1_000)
    assert "a" not in h.group().members


def test_a_member_rejoining_mid_revocation_under_its_id() -> None:
    # KAFKA-19233: a client fenced by its epoch drops everything and rejoins with epoch 0
    h = CG()
    a, b = Consumer("a"), Consumer("b")
    h.heartbeat(a)
    h.heartbeat(b)
    h.heartbeat(a)
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    a.epoch, a.owned = 0, set()
    r = h.heartbeat(a)
    assert r.error_code == E.none and r.member_epoch == 2 and len(a.owned) == 3
    h.heartbeat(b)
    owners_disjoint([a, b])
    assert len(b.owned) == 3 and h.group().state is ConsumerGroupState.STABLE


def test_custom_and_failing_assignors() -> None:
    class Everything:
        """Gives every partition to the first member by id."""

        name = "first"

        def assign(self, spec):
            first = min(spec.members)
            return {mid: ({t.topic_id: frozenset(range(t.num_partitions)) for t in spec.topics.values()}
                          if mid == first else {}) for mid in spec.members}

    class Broken:
        name = "broken"

        def assign(self, spec):
            raise RuntimeError("boom")

    h = CG()
    h.config = CoordinatorConfig(group_consumer_assignors=("first", "broken"))
    h.c = GroupCoordinator(h.config, h.clock, h.log, topics=lambda: h.topics,
                           assignors={"first": Everything(), "broken": Broken()})
    a, b = Consumer("a"), Consumer("b")
    h.settle([a, b])
    assert a.owned == h.tps("t", *range(6)) and b.owned == set()
    r = h.heartbeat(Consumer("c", assignor="broken"))
    assert r.error_code == E.unknown_server_error and "Failed to compute a new target assignment" in r.error_message
    assert "c" not in h.group().members
