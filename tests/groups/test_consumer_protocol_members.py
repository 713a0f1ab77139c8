"""KIP-848 consumer groups (group.protocol=consumer) with real librdkafka members, each its
own process (tests/groups/consumer_member.py) so that it can be SIGKILLed or SIGSTOPped:
sharing partitions, a frozen member that does not stop the others (and the classic
protocol's stop-the-world rebalance for comparison; the frozen member, thawed, is fenced
and rejoins), a killed member's partitions moving after its session timeout, the group
surviving a broker restart (SIGTERM or SIGKILL; a member dying while the broker is down is
timed out by the reloaded group), regex subscriptions with topics created and deleted, and
new partitions. Every member commits each batch synchronously, and the checks use what the
members printed: nothing produced is missed, and no record is delivered again once a
member committed it.

Measured on a 2-CPU machine (session 6 s, heartbeat 0.5 s): the healthy members' longest
pause while one member is frozen and another joins is ~0.1-0.2 s with the consumer
protocol (the fetch wait), ~5.5-6 s with the classic protocol's eager range assignor (the
frozen member's session timeout)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.krait_harness import BrokerProcess

from .members import (
    FAST_CONSUMER_GROUPS,
    Member,
    SteadyProducer,
    all_seen,
    committed_redeliveries,
    create_topic,
    duplicates,
    exact_cover,
    longest_pause,
    name,
    stop_all,
    wait_for,
)


def describe(broker: BrokerProcess, group: str):
    with WireClient("127.0.0.1", broker.port, timeout=10) as w:
        r = w.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group], include_authorized_operations=False)
    (g,) = r.groups
    return g


def test_three_members_share_six_partitions(kb, members):
    topic = create_topic(kb.bootstrap, name("cg-share"), 6)
    group = name("g-share")
    members += [Member(kb.bootstrap, group, f"m{i}", topics=[topic]) for i in range(3)]
    wait_for(lambda: exact_cover(members, 6, per_member=2), 30, "three members with two partitions each")
    steady_since = time.monotonic()
    producer = SteadyProducer(kb.bootstrap, topic, 6, interval=0.005).start()
    # a steady state: records flowing to a group that does not change
    wait_for(lambda: len(producer.acked) >= 300 and all(m.records() for m in members), 20, "records flowing")
    produced = producer.stop()
    assert len(produced) > 100
    wait_for(lambda: produced <= all_seen(members), 20, "every produced record consumed")
    assert duplicates(members, since=steady_since) == []
    # each member consumed exactly the partitions it was assigned, and they stayed put
    for m in members:
        assert {p for _, _, p, _, _, _ in m.records()} == m.partitions(), m
        assert all(ok for *_, ok in m.records()), m.errors
    g = describe(kb, group)
    assert g.error_code == 0 and g.group_state == "Stable"
    assert len(g.members) == 3
    assert all(m.member_epoch == g.group_epoch for m in g.members)
    assert sorted(p for m in g.members for tp in m.assignment.topic_partitions for p in tp.partitions) == list(range(6))
    assert committed_redeliveries(members) == []


def _frozen_member_and_a_joiner(broker: BrokerProcess, protocol: str, extra: list[str], members: list[Member]):
    """Three members consuming six partitions while a producer produces steadily; one is
    SIGSTOPped (no polls, no heartbeats) and at once a fourth member joins. Returns the
    longest pause of each healthy member's consumption from the freeze until the group
    settled without the frozen member, that settling time, and the topic. The frozen member
    is thawed before every produced record is looked for: a member prints a batch after
    committing it, so one frozen between the two holds records nobody else will be given
    (they are committed) until it prints them."""
    topic = create_topic(broker.bootstrap, name(f"cg-pause-{protocol}"), 6)
    group = name(f"g-pause-{protocol}")
    members += [Member(broker.bootstrap, group, f"m{i}", protocol, topics=[topic], extra=extra) for i in range(3)]
    wait_for(lambda: exact_cover(members, 6, per_member=2), 30, "three members with two partitions each")
    producer = SteadyProducer(broker.bootstrap, topic, 6, interval=0.01).start()
    try:
        wait_for(lambda: all(len(m.records()) > 20 for m in members), 20, "every member consuming")
        healthy, frozen = members[:2], members[2]
        joiner = Member(broker.bootstrap, group, "m3", protocol, topics=[topic], extra=[*extra, "--wait-stdin"])
        members.append(joiner)
        assert joiner.ready.wait(30)
        frozen.freeze()
        t0 = time.monotonic()
        joiner.go()
        live = [*healthy, joiner]
        # settled: the frozen member's partitions moved (after its session timeout) and
        # every live member consumes again
        wait_for(lambda: exact_cover(live, 6) and all(m.partitions() for m in live), 40,
                 "the live members to own all partitions")
        settled = time.monotonic()
        wait_for(lambda: all(m.consumption_times(settled, time.monotonic() + 1) for m in live), 20,
                 "the live members to consume after the rebalance")
        end = time.monotonic()
    finally:
        produced = producer.stop()
    frozen.thaw()
    wait_for(lambda: produced <= all_seen(members), 30, "every produced record consumed")
    assert committed_redeliveries(members, uncommitted_ok=True) == []
    return [longest_pause(m, t0, end) for m in healthy], settled - t0, topic


def test_frozen_member_does_not_stop_the_others(kb, members):
    pauses, settled, topic = _frozen_member_and_a_joiner(kb, "consumer", [], members)
    print(f"consumer protocol: healthy members' longest pauses {pauses}, settled after {settled:.1f}s")
    # the frozen member's partitions move only when its 6 s session expires ...
    assert settled > 4, settled
    # ... but the healthy members never stop consuming meanwhile
    assert max(pauses) < 2.0, pauses
    # thawed, the fenced member finds out (UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH), rejoins
    # and gets partitions again
    frozen = members[2]
    wait_for(lambda: exact_cover(members, 6) and all(m.partitions() for m in members), 30,
             "the thawed member back in the group")
    sent = SteadyProducer(kb.bootstrap, topic, 6).produce(60)
    wait_for(lambda: sent <= all_seen(members), 20, "records consumed by all four")
    # records the thawed member had fetched before it froze may be handed to it again
    # (librdkafka's prefetched queue), but its commit of them fails: nothing committed twice
    assert committed_redeliveries(members, uncommitted_ok=True) == []
    print(f"thawed member errors: {frozen.errors}")


def test_classic_protocol_pauses_everyone_for_a_frozen_member(kb, members):
    """The same scenario with the classic protocol (eager range assignor, session 6 s, long
    max.poll.interval.ms): the join of the new member makes the healthy members give up
    their partitions and wait in JoinGroup until the frozen member's session expires."""
    pauses, settled, _ = _frozen_member_and_a_joiner(kb, "classic", ["--session-ms", "6000"], members)
    print(f"classic protocol: healthy members' longest pauses {pauses}, settled after {settled:.1f}s")
    assert min(pauses) > 3.0, pauses


def test_killed_member_partitions_move_after_its_session_timeout(kb, members):
    topic = create_topic(kb.bootstrap, name("cg-kill"), 6)
    group = name("g-kill")
    members += [Member(kb.bootstrap, group, f"m{i}", topics=[topic]) for i in range(3)]
    wait_for(lambda: exact_cover(members, 6, per_member=2), 30, "three members with two partitions each")
    producer = SteadyProducer(kb.bootstrap, topic, 6, interval=0.01).start()
    try:
        wait_for(lambda: all(len(m.records()) > 10 for m in members), 20, "every member consuming")
        victim, live = members[2], members[:2]
        orphaned = victim.partitions()
        victim.kill()  # no leave: only the session timeout (6 s) tells the coordinator
        killed = time.monotonic()
        wait_for(lambda: exact_cover(live, 6, per_member=3), 30, "the survivors to take the orphaned partitions")
        moved = time.monotonic() - killed
        wait_for(lambda: {p for m in live for t, _, p, *_ in m.records() if t > killed} >= orphaned, 20,
                 "the orphaned partitions consumed")
    finally:
        produced = producer.stop()
    print(f"killed member's partitions moved after {moved:.1f}s")
    assert 4.5 < moved < 12, moved  # the session timeout, not earlier, not much later
    wait_for(lambda: produced <= all_seen(members), 30, "every produced record consumed")
    assert committed_redeliveries(members) == []
    g = describe(kb, group)
    assert sorted(m.client_id for m in g.members) == ["m0", "m1"]
    assert g.group_state == "Stable"


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_group_and_offsets_survive_broker_restart(tmp_path, members, hard):
    broker = BrokerProcess(str(tmp_path / "logs"), FAST_CONSUMER_GROUPS).start()
    try:
        topic = create_topic(broker.bootstrap, name("cg-restart"), 4)
        group = name("g-restart")
        members += [Member(broker.bootstrap, group, f"m{i}", topics=[topic]) for i in range(2)]
        wait_for(lambda: exact_cover(members, 4, per_member=2), 30, "two members with two partitions each")
        producer = SteadyProducer(broker.bootstrap, topic, 4)
        before = producer.produce(200)
        wait_for(lambda: before <= all_seen(members), 20, "the first records consumed")
        g = describe(broker, group)
        epoch = g.group_epoch
        assignment = {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                               for p in tp.partitions)) for m in g.members}
        assert len(assignment) == 2 and {e for e, _ in assignment.values()} == {epoch}

        broker.restart(hard=hard)
        restarted = time.monotonic()
        after = producer.produce(200)
        wait_for(lambda: after <= all_seen(members), 30, "the records produced after the restart consumed")
        g = describe(broker, group)
        # the group came back from __consumer_offsets: same epoch, same members, same assignment
        assert g.group_epoch == epoch
        assert {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                     for p in tp.partitions)) for m in g.members} == assignment
        assert {p for m in members for p in m.partitions()} == {0, 1, 2, 3}
        # and its offsets: nothing committed before the restart was consumed again after it
        assert committed_redeliveries(members) == []
        assert not [r for m in members for t, *r, _v, _ok in m.records() if t >= restarted
                    and tuple(r) in before]
        if not hard:
            # a member that dies while the broker is down: the reloaded group times its
            # session out (session timers start again when the group is loaded)
            broker.stop()
            members[1].kill()
            broker.start()
            started = time.monotonic()
            wait_for(lambda: exact_cover(members[:1], 4), 30, "the dead member's partitions moved")
            assert 4 < time.monotonic() - started < 15
            g = describe(broker, group)
            assert [m.client_id for m in g.members] == ["m0"] and g.group_epoch > epoch
            last = producer.produce(40)
            wait_for(lambda: last <= all_seen(members), 20, "the last records consumed")
            assert committed_redeliveries(members) == []
        producer.stop()
    finally:
        stop_all(members)
        broker.kill()


def test_regex_subscription_picks_up_new_topics_and_partitions(kb, members):
    prefix = name("re")
    a = create_topic(kb.bootstrap, f"{prefix}-a", 2)
    create_topic(kb.bootstrap, f"x{prefix}-other", 2)  # does not match
    group = name("g-regex")
    members += [Member(kb.bootstrap, group, f"m{i}", regex=f"^{prefix}-.*") for i in range(2)]
    owned = lambda: sorted((t, p) for m in members for t, p in m.parts)  # noqa: E731
    wait_for(lambda: owned() == [(a, 0), (a, 1)], 30, "the matching topic's partitions assigned")

    b = create_topic(kb.bootstrap, f"{prefix}-b", 2)
    wait_for(lambda: owned() == [(a, 0), (a, 1), (b, 0), (b, 1)], 30, "a new matching topic assigned")
    assert all(len(m.parts) == 2 for m in members)

    admin = AdminClient({"bootstrap.servers": kb.bootstrap})
    admin.create_partitions([NewPartitions(a, 4)])[a].result(15)
    wait_for(lambda: owned() == [(a, 0), (a, 1), (a, 2), (a, 3), (b, 0), (b, 1)], 30,
             "the new partitions assigned")
    assert all(len(m.parts) == 3 for m in members)
    # and consumed
    sent = set()
    for topic, parts in ((a, 4), (b, 2)):
        sent |= SteadyProducer(kb.bootstrap, topic, parts).produce(4 * parts)
    wait_for(lambda: sent <= all_seen(members), 20, "records of every partition consumed")
    g = describe(kb, group)
    # librdkafka sends its regexes joined as "(r1)|(r2)"
    assert {m.subscribed_topic_regex for m in g.members} == {f"(^{prefix}-.*)"}
    # a matching topic deleted: its partitions are taken away, the rest stays assigned
    admin.delete_topics([b])[b].result(15)
    wait_for(lambda: owned() == [(a, 0), (a, 1), (a, 2), (a, 3)], 30, "the deleted topic's partitions revoked")
    assert all(len(m.parts) == 2 for m in members)
    assert describe(kb, group).group_epoch > g.group_epoch
