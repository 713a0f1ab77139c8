"""The controller's pure rules (broker.cluster.election) against Kafka's: the rack-unaware
assignment of AdminRackAwareTest / AdminUtils' javadoc, PartitionLeaderElectionAlgorithms,
the ZK-mode controller's ISR shrink, and the state changes after broker changes,
controlled shutdown and preferred election."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.cluster.election import (
    NO_LEADER,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    PartitionState,
    assign_replicas,
    controlled_shutdown_leader,
    initial_partition_state,
    offline_leader,
    preferred_leader,
    reassignment_leader,
    remove_replica_from_isr,
    states_after_broker_change,
    states_after_controlled_shutdown,
    states_after_preferred_election,
)
from protocol.errors import ErrorCode, KafkaError


def st(leader: int, epoch: int, isr, cepoch: int = 1, zkv: int = 5) -> PartitionState:
    return PartitionState(leader, epoch, tuple(isr), cepoch, zkv)


# --- assignment -----------------------------------------------------------------------------------
def test_assignment_matches_kafkas_admin_rack_aware_test():
    # AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, fixedStartIndex 0
    expected = {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0) == expected


def test_assignment_matches_the_javadoc_example():
    # AdminUtils' table: broker-i holds p_i and p_(i+5) first; 2nd replicas shifted by one more
    # after the first round (start index 0, shift 0 as in the table)
    a = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, next_replica_shift=0)
    assert [a[p][0] for p in range(10)] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    # table row "2nd replica": broker-0 holds p4, broker-1 p0 ... i.e. p0's 2nd replica is 1
    assert [a[p][1] for p in range(5)] == [1, 2, 3, 4, 0]
    assert [a[p][1] for p in range(5, 10)] == [2, 3, 4, 0, 1]  # p5 -> broker 2 (shift grew by one)
    assert [a[p][2] for p in range(5)] == [2, 3, 4, 0, 1]


def test_assignment_uses_broker_ids_not_indexes():
    a = assign_replicas([101, 205, 309], 3, 2, start_index=1, next_replica_shift=0)
    assert a == {0: (205, 309), 1: (309, 101), 2: (101, 205)}


def test_assignment_spreads_evenly_and_never_repeats_a_broker():
    brokers = [1, 2, 3, 4, 5, 6]
    for seed in range(20):
        random.seed(seed)
        a = assign_replicas(brokers, 12, 3)
        assert sorted(a) == list(range(12))
        assert all(len(set(r)) == 3 for r in a.values())
        leaders = Counter(r[0] for r in a.values())
        assert set(leaders.values()) == {2}  # round-robin first replicas
        assert set(Counter(b for r in a.values() for b in r).values()) == {6}


def test_assignment_for_added_partitions_continues_the_round_robin():
    # AdminZkClient.createNewPartitionsAssignment: start index = partition 0's first replica,
    # start partition = the current count. First replicas continue the round-robin; the
    # shift grows only at the multiples of the broker count met from the start partition,
    # as in Kafka (so 6..9 are not what a 10-partition creation would have given).
    more = assign_replicas([0, 1, 2, 3, 4], 4, 3, start_index=0, start_partition=6)
    assert more == {6: (1, 2, 3), 7: (2, 3, 4), 8: (3, 4, 0), 9: (4, 0, 1)}
    assert assign_replicas([0, 1, 2, 3, 4], 2, 3, start_index=0, start_partition=9) == {9: (4, 0, 1), 10: (0, 2, 3)}


def test_single_broker_rf_one():
    assert assign_replicas([7], 3, 1) == {0: (7,), 1: (7,), 2: (7,)}


@pytest.mark.parametrize("brokers,n,rf,message,code", [
    ([1, 2], 3, 3, "Replication factor: 3 larger than available brokers: 2.", ErrorCode.invalid_replication_factor),
    ([], 1, 1, "Replication factor: 1 larger than available brokers: 0.", ErrorCode.invalid_replication_factor),
    ([1, 2], 3, 0, "Replication factor must be larger than 0.", ErrorCode.invalid_replication_factor),
    ([1, 2], 0, 1, "Number of partitions must be larger than 0.", ErrorCode.invalid_partitions),
])
def test_assignment_errors_are_kafkas(brokers, n, rf, message, code):
    with pytest.raises(ValueError) as info:
        assign_replicas(brokers, n, rf)
    assert str(info.value) == message
    assert isinstance(info.value, KafkaError) and info.value.error_code == code
    assert isinstance(info.value, InvalidReplicationFactorError | InvalidPartitionsError)


def test_initial_state_is_the_live_replicas_in_assignment_order():
    assert initial_partition_state((3, 1, 2), {1, 2, 3}, 4) == PartitionState(3, 0, (3, 1, 2), 4)
    assert initial_partition_state((3, 1, 2), {1, 2}, 4) == PartitionState(1, 0, (1, 2), 4)
    assert initial_partition_state((3, 1), {2}, 4) is None


# --- the election algorithms ----------------------------------------------------------------------
@pytest.mark.parametrize("assignment,isr,live,unclean,expected", [
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, 1),
    ((1, 2, 3), (2, 3), {1, 2, 3}, False, 2),        # 1 is live but not in the ISR
    ((1, 2, 3), (3, 2), {2, 3}, False, 2),           # assignment order, not ISR order
    ((1, 2, 3), (1,), {2, 3}, False, None),          # the only ISR member is dead
    ((1, 2, 3), (1,), {2, 3}, True, 2),              # unclean: first live replica
    ((1, 2, 3), (1, 3), {1, 2, 3}, True, 1),         # clean choice preferred even when unclean allowed
    ((1, 2, 3), (), {3}, True, 3),
    ((1, 2, 3), (1, 2), set(), True, None),
    ((1, 2), (1, 2, 9), {9}, False, None),           # never a replica outside the assignment
])
def test_offline_leader(assignment, isr, live, unclean, expected):
    assert offline_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize("assignment,isr,live,expected", [
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, 1),
    ((1, 2, 3), (2, 3), {1, 2, 3}, None),   # preferred replica out of the ISR
    ((1, 2, 3), (1, 2, 3), {2, 3}, None),   # preferred replica dead
    ((), (), set(), None),
])
def test_preferred_leader(assignment, isr, live, expected):
    assert preferred_leader(assignment, isr, live) == expected


@pytest.mark.parametrize("assignment,isr,live,down,expected", [
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, 2),
    ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, 3),
    ((1, 2, 3), (1,), {1, 2, 3}, {1}, None),
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, 3),
    ((1, 2, 3), (1, 2, 3), {1, 3}, {1}, 3),       # 2 is dead
])
def test_controlled_shutdown_leader(assignment, isr, live, down, expected):
    assert controlled_shutdown_leader(assignment, isr, live, down) == expected


def test_reassignment_leader():
    assert reassignment_leader((4, 5, 1), (1, 5), {1, 4, 5}) == 5
    assert reassignment_leader((4, 5), (1,), {1, 4, 5}) is None


# --- ISR shrink -----------------------------------------------------------------------------------
def test_remove_follower_from_isr():
    assert remove_replica_from_isr(st(1, 4, (1, 2, 3)), 2) == st(1, 5, (1, 3))


def test_remove_leader_from_isr_leaves_no_leader():
    assert remove_replica_from_isr(st(1, 4, (1, 2, 3)), 1, controller_epoch=7) == st(NO_LEADER, 5, (2, 3), 7)


def test_the_last_isr_member_stays():
    assert remove_replica_from_isr(st(1, 4, (1,)), 1) == st(NO_LEADER, 5, (1,))
    assert remove_replica_from_isr(st(NO_LEADER, 4, (3,)), 3) == st(NO_LEADER, 5, (3,))


def test_removing_a_replica_not_in_the_isr_changes_nothing():
    s = st(1, 4, (1, 2))
    assert remove_replica_from_isr(s, 3) is s


def test_state_keeps_its_zk_version_and_accepts_lists():
    s = PartitionState(1, 0, [1, 2], 3, 9)
    assert s.isr == (1, 2) and s.has_leader
    assert s.new_leader_and_isr(2, [2], 4) == PartitionState(2, 1, (2,), 4, 9)
    with pytest.raises(AttributeError):
        s.leader = 2  # frozen


# --- broker changes -------------------------------------------------------------------------------
A = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("t", 2): (3, 1, 2)}


def test_nothing_changes_when_every_replica_is_live():
    states = {tp: st(r[0], 2, r) for tp, r in A.items()}
    assert states_after_broker_change(A, states, {1, 2, 3}, 5, False) == {}


def test_dead_leader_moves_to_the_next_isr_replica_and_dead_followers_leave():
    states = {tp: st(r[0], 2, r) for tp, r in A.items()}
    out = states_after_broker_change(A, states, {2, 3}, 5, False)
    assert out == {
        ("t", 0): st(2, 3, (2, 3), 5),   # leader 1 died: 2 leads, ISR without 1
        ("t", 1): st(2, 3, (2, 3), 5),   # follower 1 died: leaves the ISR
        ("t", 2): st(3, 3, (3, 2), 5),
    }
    assert all(s.zk_version == 5 for s in out.values())  # the version the write expects


def test_two_dead_brokers_one_epoch_bump():
    states = {("t", 0): st(1, 2, (1, 2, 3))}
    assert states_after_broker_change(A, states, {3}, 5, False) == {("t", 0): st(3, 3, (3,), 5)}


def test_no_live_isr_member_clean_leaves_no_leader_and_keeps_last_isr_member():
    states = {("t", 0): st(1, 2, (1, 2))}
    out = states_after_broker_change(A, states, {3}, 5, False)
    # 3 is live but out of the ISR: no clean leader; 2 removed, 1 (the leader) kept
    assert out == {("t", 0): st(NO_LEADER, 3, (1,), 5)}
    # nothing more to do while the same brokers are down
    assert states_after_broker_change(A, {("t", 0): out[("t", 0)]}, {3}, 5, False) == {}


def test_unclean_election_picks_a_live_replica_alone_in_the_isr():
    states = {("t", 0): st(1, 2, (1, 2))}
    assert states_after_broker_change(A, states, {3}, 5, True) == {("t", 0): st(3, 3, (3,), 5)}
    # per topic
    assert states_after_broker_change(A, states, {3}, 5, lambda tp: tp[0] == "other") == {
        ("t", 0): st(NO_LEADER, 3, (1,), 5)}


def test_unclean_only_when_no_isr_member_is_live():
    states = {("t", 0): st(1, 2, (1, 2))}
    assert states_after_broker_change(A, states, {2, 3}, 5, True) == {("t", 0): st(2, 3, (2,), 5)}


def test_returning_isr_member_becomes_leader_of_an_offline_partition():
    states = {("t", 0): st(NO_LEADER, 3, (1,))}
    assert states_after_broker_change(A, states, {3}, 5, False) == {}
    assert states_after_broker_change(A, states, {1, 3}, 6, False) == {("t", 0): st(1, 4, (1,), 6)}


def test_offline_partition_loses_dead_isr_members_without_election():
    # no leader: the ISR keeps its first member
    states = {("t", 0): st(NO_LEADER, 3, (1, 2))}
    assert states_after_broker_change(A, states, {3}, 5, False) == {("t", 0): st(NO_LEADER, 4, (1,), 5)}
    # with a dead leader: the leader is the one kept
    states = {("t", 0): st(2, 3, (1, 2))}
    assert states_after_broker_change(A, states, {3}, 5, False) == {("t", 0): st(NO_LEADER, 4, (2,), 5)}


def test_partitions_without_state_or_assignment_are_left_alone():
    states = {("gone", 0): st(1, 2, (1, 2))}
    assert states_after_broker_change(A, states, {2}, 5, False) == {}
    assert states_after_broker_change(A, {}, {2}, 5, False) == {}


def test_rf1_partition_on_dead_broker_goes_offline_and_comes_back():
    a = {("x", 0): (2,)}
    out = states_after_broker_change(a, {("x", 0): st(2, 0, (2,))}, {1}, 5, False)
    assert out == {("x", 0): st(NO_LEADER, 1, (2,), 5)}
    back = states_after_broker_change(a, out, {1, 2}, 5, False)
    assert back == {("x", 0): st(2, 2, (2,), 5)}


def test_replicas_in_failed_log_dirs_are_offline_for_their_partitions_only():
    """KIP-112 (onReplicasBecomeOffline): broker 1 is live, but its replicas of t-0 and
    t-1 are in a failed log dir; its replica of t-2 is healthy."""
    a = {("t", 0): (1, 2, 3), ("t", 1): (1, 2), ("t", 2): (1, 2, 3)}
    states = {("t", 0): st(1, 3, (1, 2, 3)), ("t", 1): st(1, 3, (1,)), ("t", 2): st(1, 3, (1, 2, 3))}
    offline = {("t", 0): {1}, ("t", 1): {1}}
    out = states_after_broker_change(a, states, {1, 2, 3}, 5, False, offline)
    # leadership moves to a healthy ISR member; the sole ISR member stays, without leading
    assert out == {("t", 0): st(2, 4, (2, 3), 5), ("t", 1): st(NO_LEADER, 4, (1,), 5)}
    # stable: nothing more to write, and broker 1 is not elected back while its dir is offline
    assert states_after_broker_change(a, {**states, **out}, {1, 2, 3}, 5, False, offline) == {}
    # once the broker restarted (its offline replicas forgotten) the partition comes back
    assert states_after_broker_change(a, {**states, **out}, {1, 2, 3}, 6, False) == {("t", 1): st(1, 5, (1,), 6)}


def test_every_change_is_exactly_one_epoch_and_never_elects_outside_assignment():
    rng = random.Random(7)
    brokers = [1, 2, 3, 4, 5]
    for _ in range(300):
        assignment = tuple(rng.sample(brokers, 3))
        isr = tuple(r for r in assignment if rng.random() < 0.7) or (assignment[0],)
        leader = rng.choice((*isr, NO_LEADER))
        live = {b for b in brokers if rng.random() < 0.6}
        unclean = rng.random() < 0.3
        s = st(leader, 10, isr)
        out = states_after_broker_change({"p": assignment}, {"p": s}, live, 9, unclean)
        if "p" not in out:
            continue
        n = out["p"]
        assert n.leader_epoch == 11 and n.controller_epoch == 9 and n.zk_version == s.zk_version
        assert n.isr and set(n.isr) <= set(assignment)
        if n.leader != NO_LEADER:
            assert n.leader in live and n.leader in n.isr
            assert set(n.isr) <= live
            if not unclean:
                assert n.leader in isr


# --- controlled shutdown --------------------------------------------------------------------------
def test_controlled_shutdown_moves_leadership_and_leaves_isrs():
    states = {tp: st(r[0], 2, r) for tp, r in A.items()}
    out = states_after_controlled_shutdown(A, states, {1, 2, 3}, 5, 1)
    assert out == {
        ("t", 0): st(2, 3, (2, 3), 5),   # led by 1: 2 takes over, 1 leaves the ISR
        ("t", 1): st(2, 3, (2, 3), 5),   # 1 follows: leaves the ISR
        ("t", 2): st(3, 3, (3, 2), 5),
    }
    # applied: nothing left to do
    assert states_after_controlled_shutdown(A, {**states, **out}, {1, 2, 3}, 5, 1) == {}


def test_controlled_shutdown_keeps_a_leader_with_no_other_isr_member():
    states = {("t", 0): st(1, 2, (1,)), ("t", 1): st(2, 2, (2,))}
    assert states_after_controlled_shutdown(A, states, {1, 2, 3}, 5, 1) == {}


def test_controlled_shutdown_skips_single_replica_partitions_and_other_brokers():
    a = {("x", 0): (1,), ("x", 1): (2, 3)}
    states = {("x", 0): st(1, 0, (1,)), ("x", 1): st(2, 0, (2, 3))}
    assert states_after_controlled_shutdown(a, states, {1, 2, 3}, 5, 1) == {}


def test_controlled_shutdown_of_several_brokers():
    states = {("t", 0): st(1, 2, (1, 2, 3))}
    assert states_after_controlled_shutdown(A, states, {1, 2, 3}, 5, {1, 2}) == {("t", 0): st(3, 3, (3,), 5)}


# --- preferred election ---------------------------------------------------------------------------
def test_preferred_election_moves_leaders_back():
    states = {("t", 0): st(2, 3, (1, 2, 3)), ("t", 1): st(2, 3, (2, 3)), ("t", 2): st(1, 3, (1, 2))}
    out = states_after_preferred_election(A, states, {1, 2, 3}, 6)
    # t-0: 1 is back in the ISR; t-1 is already led by 2; t-2: 3 is not in the ISR
    assert out == {("t", 0): st(1, 4, (1, 2, 3), 6)}


def test_preferred_election_for_chosen_partitions_and_dead_preferred():
    states = {("t", 0): st(2, 3, (1, 2, 3)), ("t", 2): st(1, 3, (3, 1, 2))}
    assert states_after_preferred_election(A, states, {1, 2, 3}, 6, [("t", 2)]) == {("t", 2): st(3, 4, (3, 1, 2), 6)}
    assert states_after_preferred_election(A, states, {2, 3}, 6, [("t", 0), ("nope", 0)]) == {}
