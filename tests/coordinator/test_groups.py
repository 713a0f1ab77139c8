"""Join / sync / heartbeat / leave cycles of the classic protocol, in fake time."""

from __future__ import annotations

import time

import pytest

from coordinator import GroupState

from .harness import Box, Client, E, Harness, subscription


def clients(n: int, **kw) -> list[Client]:
    return [Client(f"c{i}", **kw) for i in range(n)]


def join_all(h: Harness, group: str, cls: list[Client], v: int = 9) -> list:
    """Join members of a new group together and wait out the initial delay."""
    boxes = [h.join_until_parked(group, c, v) for c in cls]
    while not all(b.done for b in boxes):
        h.advance(1000)
    return [h.absorb_join(c, b) for c, b in zip(cls, boxes, strict=True)]


@pytest.mark.parametrize("n", range(1, 11))
def test_full_cycle_n_members(n: int) -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    cls = clients(n)
    boxes = [h.join_until_parked("g", c) for c in cls]
    assert not any(b.done for b in boxes)  # initial delay runs its course
    h.advance(2999)
    assert not any(b.done for b in boxes)
    h.advance(1)
    if n > 1:
        # Kafka's InitialDelayedJoin: members that arrived during the delay extend it once more.
        assert not any(b.done for b in boxes)
        h.advance(3000)
    joins = [h.absorb_join(c, b) for c, b in zip(cls, boxes, strict=True)]
    leader = joins[0].leader
    assert leader == cls[0].member_id  # the first member to join leads
    for j in joins:
        assert j.generation_id == 1 and j.protocol_name == "range" and j.protocol_type == "consumer"
        assert len(j.members) == (n if j.member_id == leader else 0)
    assert h.c.group("g").state is GroupState.COMPLETING_REBALANCE
    syncs = h.sync_all("g", cls, joins)
    assert all(s.error_code == E.none for s in syncs.values())
    assert {m: s.assignment for m, s in syncs.items()} == {c.member_id: c.member_id.encode() for c in cls}
    assert h.c.group("g").state is GroupState.STABLE
    for c in cls:
        assert h.heartbeat("g", c) == E.none
    h.advance(9000)
    for c in cls:
        assert h.heartbeat("g", c) == E.none
    assert len(h.c.group("g").members) == n


def test_member_id_required_then_join_v4_plus_and_direct_join_v3() -> None:
    h = Harness()
    c = Client("app")
    b = h.join("g", c, v=4)
    r = b.value
    assert r.error_code == E.member_id_required and r.member_id.startswith("app-") and r.generation_id == -1
    c3 = Client("old")
    b3 = h.join("g3", c3, v=3)  # before v4 the member is admitted straight away
    h.advance(3000)
    assert b3.value.error_code == E.none and b3.value.member_id.startswith("old-")


def test_pending_member_expires_and_does_not_block_rebalance() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a])
    # b gets a member id but never comes back with it
    r = h.join("g", b).value
    assert r.error_code == E.member_id_required
    assert h.c.group("g").state is GroupState.STABLE
    h.advance(b.session)
    assert not h.c.group("g").pending_members


def test_rebalance_completes_immediately_when_all_rejoin_and_wall_time() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    cls = clients(10)
    h.form_group("g", cls)
    newcomer = Client("new")
    t_fake = h.clock.t
    nb = h.join_until_parked("g", newcomer)
    assert h.c.group("g").state is GroupState.PREPARING_REBALANCE
    for c in cls:
        assert h.heartbeat("g", c) == E.rebalance_in_progress
    boxes = [h.join("g", c) for c in cls[:-1]]
    assert not any(b.done for b in boxes)
    start = time.perf_counter()
    last = h.join("g", cls[-1])  # the last member rejoins: everything completes now
    everyone = [*cls, newcomer]
    joins = [h.absorb_join(c, bx) for c, bx in zip(everyone, [*boxes, last, nb], strict=True)]
    syncs = h.sync_all("g", everyone, joins)
    elapsed = time.perf_counter() - start
    assert h.clock.t == t_fake  # no fake time passed
    assert h.c.group("g").state is GroupState.STABLE and h.c.group("g").generation == 2
    assert all(s.error_code == E.none for s in syncs.values())
    print(f"\n11-member rejoin (last JoinGroup -> Stable incl. 11 SyncGroups): {elapsed * 1e3:.3f} ms")
    assert elapsed < 0.5


def test_wall_time_10_member_group_from_last_join_to_stable() -> None:
    """The number the issue asks for: a 10-member group, time from the last member's
    JoinGroup to the group being Stable (all SyncGroups answered), real wall clock."""
    samples = []
    for _ in range(50):
        h = Harness()
        cls = clients(10)
        h.form_group("g", cls)
        # every member rejoins (e.g. a new topic matched): rebalance to generation 2
        boxes = [h.join("g", c) for c in cls[:-1]]
        t0 = time.perf_counter()
        boxes.append(h.join("g", cls[-1]))
        joins = [h.absorb_join(c, b) for c, b in zip(cls, boxes, strict=True)]
        h.sync_all("g", cls, joins)
        samples.append(time.perf_counter() - t0)
        assert h.c.group("g").state is GroupState.STABLE
    samples.sort()
    print(f"\n10-member last JoinGroup -> Stable: median {samples[25] * 1e3:.3f} ms, max {samples[-1] * 1e3:.3f} ms")


def test_protocol_election_by_vote() -> None:
    h = Harness()
    s = subscription(["t"])
    a = Client("a", protocols=[("range", s), ("roundrobin", s)])
    b = Client("b", protocols=[("roundrobin", s), ("range", s)])
    c = Client("c", protocols=[("roundrobin", s), ("range", s), ("sticky", s)])
    h.form_group("g", [a, b, c])
    assert h.c.group("g").protocol_name == "roundrobin"  # 2 votes to 1
    h2 = Harness()
    h2.form_group("g", [Client("a", protocols=[("range", s), ("roundrobin", s)])])
    assert h2.c.group("g").protocol_name == "range"


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    s = subscription(["t"])
    h.form_group("g", [Client("a", protocols=[("range", s)])])
    r = h.join("g", Client("b", protocols=[("sticky", s)])).value
    assert r.error_code == E.inconsistent_group_protocol
    r = h.join("g", Client("c"), protocol_type="connect").value
    assert r.error_code == E.inconsistent_group_protocol
    r = h.join("new", Client("d", protocols=[])).value  # nothing offered
    assert r.error_code == E.inconsistent_group_protocol
    assert h.c.group("new") is None  # a failed first join leaves no group behind


def test_sync_v5_protocol_checks() -> None:
    h = Harness()
    a = Client("a")
    join_all(h, "g", [a])
    r = h.sync("g", a, {a.member_id: b"x"}, protocol_type="consumer", protocol_name="roundrobin").value
    assert r.error_code == E.inconsistent_group_protocol
    r = h.sync("g", a, {a.member_id: b"x"}, protocol_type="consumer", protocol_name="range").value
    assert r.error_code == E.none and r.protocol_name == "range" and r.assignment == b"x"


def test_leader_leaves_and_a_new_leader_is_chosen() -> None:
    h = Harness()
    a, b, c = clients(3)
    h.form_group("g", [a, b, c])
    assert h.c.group("g").leader_id == a.member_id
    resp = h.leave("g", a)
    assert resp.error_code == E.none and resp.members[0].error_code == E.none
    g = h.c.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE and g.leader_id != a.member_id
    assert h.heartbeat("g", b) == E.rebalance_in_progress
    bb, bc = h.join("g", b), h.join("g", c)
    jb, jc = h.absorb_join(b, bb), h.absorb_join(c, bc)
    assert jb.leader == jc.leader == b.member_id
    assert len(jb.members) == 2 and jc.members == ()
    h.sync_all("g", [b, c], [jb, jc])
    assert g.state is GroupState.STABLE and g.generation == 2


def test_leader_not_rejoining_loses_leadership() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    # b rejoins with new metadata: rebalance; a (leader) never rejoins
    b.protocols = [("range", subscription(["t", "u"]))]
    bb = h.join("g", b)
    for _ in range(9):
        h.advance(3000)
        assert h.heartbeat("g", a) == E.rebalance_in_progress  # a is alive but not rejoining
    h.advance(a.rebalance - 27001)
    assert not bb.done
    h.advance(1)
    jb = h.absorb_join(b, bb)
    assert jb.leader == b.member_id and [m.member_id for m in jb.members] == [b.member_id]
    assert h.heartbeat("g", a) == E.unknown_member_id


def test_rebalance_timeout_evicts_and_late_commit_fails() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    assert h.commit("g", {("t", 0): 5}, b) == {("t", 0): E.none}
    old_b = Client(b.client_id, member_id=b.member_id, generation=b.generation)
    # a new member triggers a rebalance; b keeps heartbeating but is stuck in poll()
    n = Client("n")
    nb = h.join_until_parked("g", n)
    ab = h.join("g", a)
    for _ in range(9):
        h.advance(3000)
        assert h.heartbeat("g", b) == E.rebalance_in_progress
        # commits of the current generation are still accepted during PreparingRebalance
    assert h.commit("g", {("t", 0): 6}, b) == {("t", 0): E.none}
    h.advance(a.rebalance - 27000)
    ja, jn = h.absorb_join(a, ab), h.absorb_join(n, nb)
    assert ja.generation_id == 2 and {m.member_id for m in ja.members} == {a.member_id, n.member_id}
    # b's late commit: it is no longer a member
    assert h.commit("g", {("t", 0): 7}, old_b) == {("t", 0): E.unknown_member_id}
    assert h.heartbeat("g", old_b) == E.unknown_member_id
    h.sync_all("g", [a, n], [ja, jn])
    # and a member of the previous generation that is still in the group gets ILLEGAL_GENERATION
    stale_a = Client("a", member_id=a.member_id, generation=1)
    assert h.commit("g", {("t", 0): 8}, stale_a) == {("t", 0): E.illegal_generation}
    assert h.heartbeat("g", stale_a) == E.illegal_generation


def test_session_timeout_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat("g", a) == E.none  # b is silent
    h.advance(2000)  # b's session (10 s) is over
    g = h.c.group("g")
    assert b.member_id not in g.members
    assert g.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a) == E.rebalance_in_progress
    ja = h.absorb_join(a, h.join("g", a))  # completes at once: a is the only member left
    assert ja.generation_id == 2 and len(ja.members) == 1


def test_followers_wait_for_leader_sync_and_sync_timeout() -> None:
    h = Harness()
    a, b, c = clients(3)
    joins = join_all(h, "g", [a, b, c])
    sb = h.sync("g", b)
    assert not sb.done
    assert h.heartbeat("g", b) == E.none  # CompletingRebalance heartbeats are fine
    assert h.commit("g", {("t", 0): 1}, b) == {("t", 0): E.rebalance_in_progress}
    # c never syncs: after the rebalance timeout it is dropped and the group rebalances
    sa = h.sync("g", a, {a.member_id: b"A", b.member_id: b"B"})
    assert sa.value.assignment == b"A" and sb.value.assignment == b"B"
    for _ in range(9):
        h.advance(3000)
        # c heartbeats (so its session stays alive) but never sends SyncGroup
        assert h.heartbeat("g", a) == h.heartbeat("g", b) == h.heartbeat("g", c) == E.none
    h.advance(c.rebalance - 27000)
    g = h.c.group("g")
    assert c.member_id not in g.members and g.state is GroupState.PREPARING_REBALANCE
    del joins


def test_joining_member_during_completing_rebalance_resets_pending_syncs() -> None:
    h = Harness()
    a, b = clients(2)
    join_all(h, "g", [a, b])
    sb = h.sync("g", b)
    nb = h.join_until_parked("g", Client("late"))
    assert sb.value.error_code == E.rebalance_in_progress
    assert not nb.done


def test_static_membership_restart_without_rebalance_and_fencing() -> None:
    h = Harness()
    a = Client("a", instance_id="ia")
    b = Client("b", instance_id="ib")
    r = h.join("g", a, v=5)
    assert not r.done  # static members skip MEMBER_ID_REQUIRED; parked in the rebalance
    ja, jb = join_all(h, "g", [a, b], v=5)
    assert ja.member_id.startswith("ia-")
    h.sync_all("g", [a, b], [ja, jb])
    g = h.c.group("g")
    # b restarts: joins with no member id and the same instance id
    old_b = Client("b", member_id=b.member_id, generation=b.generation, instance_id="ib")
    b2 = Client("b", instance_id="ib")
    j = h.join("g", b2, v=5).value
    assert j.error_code == E.none and j.member_id != old_b.member_id and j.generation_id == 1
    assert g.state is GroupState.STABLE and g.generation == 1  # no rebalance
    assert j.leader == a.member_id and j.members == ()
    b2.member_id, b2.generation = j.member_id, j.generation_id
    assert h.sync("g", b2).value.assignment == old_b.member_id.encode()  # keeps its assignment
    assert h.heartbeat("g", old_b) == E.fenced_instance_id
    assert h.commit("g", {("t", 0): 1}, old_b) == {("t", 0): E.fenced_instance_id}
    assert h.join("g", old_b, v=5).value.error_code == E.fenced_instance_id
    # the static leader restarting on v9 is told it leads but must skip the assignment
    a2 = Client("a", instance_id="ia")
    j = h.join("g", a2, v=9).value
    assert j.skip_assignment is True and j.leader == j.member_id and len(j.members) == 2
    # the group metadata (new member ids) was persisted
    assert h.log.appends >= 3


def test_static_member_not_evicted_by_rebalance_timeout() -> None:
    h = Harness()
    a = Client("a", instance_id="ia")
    d = Client("d")
    ja, jd = join_all(h, "g", [a, d], v=5)
    h.sync_all("g", [a, d], [ja, jd])
    # d rejoins with changed metadata; static a does not rejoin within the rebalance timeout
    d.protocols = [("range", subscription(["x"]))]
    bd = h.join("g", d)
    for _ in range(10):
        h.advance(3000)
        assert bd.done or h.heartbeat("g", a) == E.rebalance_in_progress
    assert h.c.group("g").has(a.member_id)  # static members survive the rebalance timeout
    assert h.absorb_join(d, bd).generation_id == 2


def test_leave_group_batched_v3_and_single_v0() -> None:
    h = Harness()
    a, b, c = clients(3)
    h.form_group("g", [a, b, c])
    ghost = Client("ghost", member_id="ghost-1")
    r = h.leave("g", b, ghost, v=3)
    assert r.error_code == E.none
    assert [(m.member_id, m.error_code) for m in r.members] == [(b.member_id, E.none), ("ghost-1", E.unknown_member_id)]
    assert h.leave("g", ghost, v=0).error_code == E.unknown_member_id
    assert h.leave("nope", a, v=1).error_code == E.unknown_member_id
    r = h.leave("g", a, v=2)
    assert r.error_code == E.none


def test_static_member_leaves_by_instance_id() -> None:
    h = Harness()
    a = Client("a", instance_id="ia")
    (ja,) = join_all(h, "g", [a], v=5)
    h.sync_all("g", [a], [ja])
    r = h.leave("g", Client("a", instance_id="ia"), v=4)
    assert r.members[0].error_code == E.none
    assert h.c.group("g").state is GroupState.EMPTY
    r = h.leave("g", Client("x", member_id="wrong", instance_id="ia"), v=4)
    assert r.members[0].error_code == E.unknown_member_id


def test_last_member_leaving_empties_group_and_writes_metadata() -> None:
    h = Harness()
    a = Client("a")
    h.form_group("g", [a])
    h.leave("g", a)
    g = h.c.group("g")
    assert g.state is GroupState.EMPTY and g.generation == 2 and g.protocol_name is None
    # next join of an Empty group waits the initial delay again (config 0 here: immediate)
    b = Client("b")
    (jb,) = join_all(h, "g", [b])
    assert jb.generation_id == 3


def test_initial_delay_extends_while_members_keep_joining() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    cls = clients(4)
    boxes = [h.join_until_parked("g", cls[0])]
    for c in cls[1:]:
        h.advance(2000)
        boxes.append(h.join_until_parked("g", c))
    # joins at t=0,2000,4000,6000: each delay that saw a new member is extended
    # t=6000 now; the delay was extended at 3000 and 6000 (new members seen), ends at 12000
    h.advance(5999)
    assert not any(b.done for b in boxes)
    h.advance(1)
    assert all(b.done for b in boxes)
    assert {b.value.generation_id for b in boxes} == {1}


def test_initial_delay_bounded_by_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    first = Client("c0", rebalance=5000)
    boxes = [h.join_until_parked("g", first)]
    for i in range(1, 10):
        h.advance(1000)
        boxes.append(h.join_until_parked("g", Client(f"c{i}", rebalance=5000)))
        if boxes[0].done:
            break
    assert boxes[0].done and h.clock.t - FakeStart <= 6000


FakeStart = 1_700_000_000_000


def test_validation_errors() -> None:
    h = Harness()
    assert h.join("", Client("a")).value.error_code == E.invalid_group_id
    assert h.join("g", Client("a", session=5999)).value.error_code == E.invalid_session_timeout
    assert h.join("g", Client("a", session=1_800_001)).value.error_code == E.invalid_session_timeout
    assert h.join("g", Client("a", member_id="made-up")).value.error_code == E.unknown_member_id
    assert h.sync("nope", Client("a", member_id="x", generation=1)).value.error_code == E.unknown_member_id
    assert h.heartbeat("nope", Client("a", member_id="x", generation=1)) == E.unknown_member_id
    assert h.heartbeat("", Client("a", member_id="x", generation=1)) == E.invalid_group_id
    assert h.c.groups() == []


def test_group_max_size() -> None:
    h = Harness(group_max_size=2)
    a, b, c = clients(3)
    h.form_group("g", [a, b])
    r = h.join("g", c)
    if r.value.error_code == E.member_id_required:
        c.member_id = r.value.member_id
        r = h.join("g", c)
    assert r.value.error_code == E.group_max_size_reached


def test_retried_join_answers_the_superseded_request() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    first = h.join("g", a)
    second = h.join("g", a)
    assert first.value.error_code == E.rebalance_in_progress
    assert not second.done
    h.join("g", b)
    assert second.value.error_code == E.none


def test_follower_rejoin_in_stable_with_same_metadata_gets_current_generation() -> None:
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    r = h.join("g", b).value
    assert r.error_code == E.none and r.generation_id == 1 and r.members == ()
    assert h.c.group("g").state is GroupState.STABLE


def test_respond_called_exactly_once_everywhere() -> None:
    """Members removed while parked get an answer too."""
    h = Harness()
    a, b = clients(2)
    h.form_group("g", [a, b])
    pb = h.join("g", b)  # b parked in the rebalance
    h.advance(a.rebalance)  # a never rejoins -> evicted; b completes alone
    assert len(pb.responses) == 1
    box = Box()
    assert not box.done


def test_timer_heap_stays_small_under_heartbeats() -> None:
    h = Harness()
    cls = clients(10)
    h.form_group("g", cls)
    for i in range(5000):
        if i % 100 == 0:
            h.advance(500)
        assert h.heartbeat("g", cls[i % 10]) == E.none
    assert len(h.c._state.timers) < 60
    assert len(h.c.group("g").members) == 10
