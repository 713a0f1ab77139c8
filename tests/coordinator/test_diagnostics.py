"""coordinator/diagnostics.py: the views of slow rebalances and the lines the broker logs,
once per rebalance (classic) or epoch (consumer) and member."""

from __future__ import annotations

from coordinator.consumer.group import MemberState
from coordinator.diagnostics import (
    SLOW_REBALANCE_MS,
    SlowRebalanceWatch,
    classic_wait,
    consumer_member_views,
    pending_revocations,
)
from coordinator.group import Group, GroupState, Member, Pending

from .consumer.cg import CG, Consumer
from .harness import Client, Harness


def _member(mid: str, client: str, rebalance_ms: int = 30_000) -> Member:
    return Member(mid, None, client, "/10.0.0.9", rebalance_ms, 10_000, "consumer", [("range", b"")])


# --- classic ----------------------------------------------------------------------------------


def test_classic_wait_names_the_members_that_have_not_rejoined():
    g = Group("g", 0)
    g.add(_member("m1", "c1", 45_000), Pending(None, lambda r: None))  # rejoined
    g.add(_member("m2", "c2"), None)  # not yet
    g.generation = 4
    g.transition(GroupState.PREPARING_REBALANCE, 1_000)
    g.pending_members["m3"] = 99_999
    w = classic_wait(g, 7_500)
    assert w is not None
    assert [m.member_id for m in w.not_rejoined] == ["m2"] and w.pending_ids == ("m3",)
    assert (w.generation, w.waited_ms, w.rebalance_timeout_ms) == (5, 6_500, 45_000)

    watch = SlowRebalanceWatch()
    assert watch.check([g], 1_000 + SLOW_REBALANCE_MS - 1) == []  # not slow yet
    lines = watch.check([g], 7_500)
    assert lines == [
        "group g: rebalance (generation 5) waiting 6.5s for members [m2 (client-id c2, host /10.0.0.9), "
        "m3 (new member, not yet joined with its id)] to rejoin; max.poll.interval.ms=45000"
    ]
    assert watch.check([g], 9_000) == []  # once per rebalance and member
    # a member that stops rejoining in the same rebalance is logged again, with the others
    g.add(_member("m4", "c4"), None)
    assert len(watch.check([g], 9_500)) == 1
    assert watch.check([g], 12_000) == []


def test_classic_wait_none_when_not_rebalancing_or_everybody_rejoined():
    g = Group("g", 0)
    g.add(_member("m1", "c1"), None)
    assert classic_wait(g, 10_000) is None  # Empty
    g.transition(GroupState.PREPARING_REBALANCE, 0)
    g.set_awaiting_join(g.members["m1"], Pending(None, lambda r: None))
    assert classic_wait(g, 10_000) is None  # the initial delay running its course: nobody to wait for
    assert SlowRebalanceWatch().check([g], 10_000) == []


def test_classic_member_that_stops_polling_while_another_joins():
    """Through the coordinator: a Stable group of two; a third member joins, one of the two
    rejoins, the other does not (its poll loop is stuck)."""
    h = Harness()
    a, b = Client("a", rebalance=20_000), Client("b", rebalance=20_000)
    h.form_group("g", [a, b])
    t0 = h.clock.t
    c = Client("c", rebalance=20_000)
    h.join_until_parked("g", c)  # triggers the rebalance
    h.join_until_parked("g", a)  # a rejoins, b does not
    watch = SlowRebalanceWatch()
    h.advance(3_000)
    assert watch.check(h.c.groups(), h.clock.t) == []
    h.advance(2_500)
    lines = watch.check(h.c.groups(), h.clock.t)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("group g: rebalance (generation 2) waiting 5.5s for members [")
    assert f"{b.member_id} (client-id b, host /127.0.0.1)" in line
    assert a.member_id not in line and c.member_id not in line
    assert line.endswith("to rejoin; max.poll.interval.ms=20000")
    assert h.clock.t - t0 == 5_500
    h.advance(20_000)  # the rebalance timeout evicts b; the rebalance completes
    assert h.c.group("g").state is not GroupState.PREPARING_REBALANCE
    assert watch.check(h.c.groups(), h.clock.t) == []


# --- consumer (KIP-848) -----------------------------------------------------------------------


def test_consumer_member_that_does_not_revoke_is_logged_once_per_epoch():
    h = CG(topics={"t": 4})
    a = Consumer("a", rebalance_timeout=60_000)
    h.settle([a])
    assert len(h.assignment(a)) == 4
    a.revokes = False  # its poll loop is stuck: it keeps reporting all four partitions
    b = Consumer("b")
    h.heartbeat(b)  # joins: new target, a must give two partitions to b
    h.heartbeat(a)  # a learns its new target, keeps its partitions
    h.heartbeat(b)
    g = h.group()
    views = {v.member.member_id: v for v in consumer_member_views(g)}
    va, vb = views[a.member_id], views[b.member_id]
    assert va.state is MemberState.UNREVOKED_PARTITIONS and va.member_epoch < va.target_epoch
    assert len(va.pending_revocation) == 2 and set(va.pending_revocation).isdisjoint(va.assigned)
    assert vb.state is MemberState.UNRELEASED_PARTITIONS and set(vb.target) == set(va.pending_revocation)

    [r] = pending_revocations(g)
    assert r.member.member_id == a.member_id and r.partitions == va.pending_revocation
    assert r.since_ms is not None and r.since_ms <= h.clock.t  # from the revocation timer

    watch = SlowRebalanceWatch()
    assert watch.check(h.c.groups(), h.clock.t) == []
    h.clock.t += SLOW_REBALANCE_MS + 200
    h.heartbeat(a)
    h.heartbeat(b)
    lines = watch.check(h.c.groups(), h.clock.t)
    parts = ", ".join(f"{t}-{p}" for t, p in va.pending_revocation)
    assert lines == [
        f"group g: epoch {g.assignment_epoch} waiting 5.2s for member {a.member_id} (client-id cid, host /10.0.0.1) "
        f"to revoke [{parts}]; member epoch {va.member_epoch}, max.poll.interval.ms=60000"
    ]
    assert parts.startswith("t-")
    h.clock.t += 1_000
    assert watch.check(h.c.groups(), h.clock.t) == []  # once per epoch and member

    a.revokes = True  # the poll loop goes on: the partitions are revoked and handed over
    a.owned = h.assignment(a)
    h.settle([a, b])
    assert pending_revocations(h.group()) == []
    assert watch.check(h.c.groups(), h.clock.t) == []
