"""The controller's decisions on partition leadership, pure (no ZooKeeper, no clock):
Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokersRackUnaware),
the leader election algorithms (PartitionLeaderElectionAlgorithms: offline, preferred,
controlled shutdown, reassignment), the ZooKeeper-mode controller's ISR shrink
(ZkReplicaStateMachine.doRemoveReplicasFromIsr), and from these the partition states the
controller writes when brokers come and go (KafkaController.onBrokerFailure /
onBrokerStartup), when one shuts down cleanly (doControlledShutdown) and on a preferred
leader election. :class:`PartitionState` is one partition's state znode
(Kafka's LeaderIsrAndControllerEpoch)."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from protocol.errors import ErrorCode, KafkaError

#: LeaderAndIsr.NO_LEADER
NO_LEADER = -1
#: LeaderAndIsr.INITIAL_LEADER_EPOCH
INITIAL_LEADER_EPOCH = 0

TP = TypeVar("TP")


class InvalidReplicationFactorError(KafkaError, ValueError):
    """Kafka's InvalidReplicationFactorException."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_replication_factor, message)


class InvalidPartitionsError(KafkaError, ValueError):
    """Kafka's InvalidPartitionsException."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_partitions, message)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition's leader, leader epoch and ISR, with the epoch of the controller that
    wrote them; ``zk_version`` is the state znode's version (Kafka's partitionEpoch in
    ZooKeeper mode): -1 for a state not read from ZooKeeper. A state derived from another
    keeps its zk_version: the version its conditional write must expect."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.isr, tuple):
            object.__setattr__(self, "isr", tuple(self.isr))

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader_and_isr(self, leader: int, isr: Iterable[int], controller_epoch: int) -> PartitionState:
        """LeaderAndIsr.newLeaderAndIsr: every controller change bumps the leader epoch by one."""
        return PartitionState(leader, self.leader_epoch + 1, tuple(isr), controller_epoch, self.zk_version)


# --- replica assignment ---------------------------------------------------------------------------
def assign_replicas(brokers: list[int], n_partitions: int, replication_factor: int, *, start_index: int | None = None,
                    next_replica_shift: int | None = None, start_partition: int = 0) -> dict[int, tuple[int, ...]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware: the first replica of each partition
    round-robin over ``brokers`` from ``start_index``, the others at an increasing shift,
    so that replicas spread evenly and a broker's partitions have their followers on
    different brokers. Kafka passes the broker ids sorted. A given ``start_index`` is also
    the shift when ``next_replica_shift`` is None (Kafka's fixedStartIndex); both None:
    random, as Kafka. ``start_partition`` numbers the first new partition (adding
    partitions: the current count, with ``start_index`` the index of partition 0's first
    replica, as AdminZkClient.createNewPartitionsAssignment)."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    n = len(brokers)
    start = start_index if start_index is not None else random.randrange(n)
    if next_replica_shift is not None:
        shift = next_replica_shift
    else:
        shift = start_index if start_index is not None else random.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        out[partition] = tuple(replicas)
        partition += 1
    return out


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    # AdminUtils.replicaIndex: never the first replica's broker (shift in 1..n-1)
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def initial_partition_state(assignment: Sequence[int], live: Collection[int],
                            controller_epoch: int) -> PartitionState | None:
    """PartitionStateMachine.initializeLeaderAndIsrForPartitions (NewPartition ->
    OnlinePartition): the live replicas in assignment order are the ISR, the first leads,
    at epoch 0. None when no assigned replica is alive (the partition stays new)."""
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return None
    return PartitionState(live_replicas[0], INITIAL_LEADER_EPOCH, live_replicas, controller_epoch)


# --- leader election (PartitionLeaderElectionAlgorithms) ------------------------------------------
def offline_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                   unclean: bool) -> int | None:
    """offlinePartitionLeaderElection: the first live replica, in assignment order, that is
    in the ISR; failing that and only with unclean leader election, the first live replica
    (which may lack acknowledged records)."""
    for r in assignment:
        if r in live and r in isr:
            return r
    if unclean:
        for r in assignment:
            if r in live:
                return r
    return None


def preferred_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    """preferredReplicaPartitionLeaderElection: the first assigned replica if it is live and
    in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                               shutting_down: Collection[int]) -> int | None:
    """controlledShutdownPartitionLeaderElection: the first live ISR replica, in assignment
    order, that is not shutting down."""
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return r
    return None


def reassignment_leader(target_replicas: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    """reassignPartitionLeaderElection: the first live ISR replica of the target replicas."""
    for r in target_replicas:
        if r in live and r in isr:
            return r
    return None


# --- ISR shrink by the controller -----------------------------------------------------------------
def _without(state: PartitionState, replicas: Iterable[int]) -> tuple[int, tuple[int, ...]]:
    """The leader and ISR after removing each of ``replicas`` in turn with the rule of
    doRemoveReplicasFromIsr (the sole ISR member stays; a removed leader leaves no leader)."""
    leader, isr = state.leader, list(state.isr)
    for r in replicas:
        if r not in isr:
            continue
        if r == leader:
            leader = NO_LEADER
        if len(isr) > 1:
            isr.remove(r)
    return leader, tuple(isr)


def remove_replica_from_isr(state: PartitionState, replica: int, controller_epoch: int | None = None) -> PartitionState:
    """ZkReplicaStateMachine.doRemoveReplicasFromIsr for one partition: the replica leaves
    the ISR, unless it is its only member (it keeps the partition's last committed data,
    and a clean election can pick it when it returns); if it led, the partition has no
    leader (-1). Leader epoch + 1. A replica not in the ISR: the state, unchanged."""
    if replica not in state.isr:
        return state
    leader, isr = _without(state, [replica])
    epoch = state.controller_epoch if controller_epoch is None else controller_epoch
    return state.new_leader_and_isr(leader, isr, epoch)


def _dead_in_removal_order(state: PartitionState, dead: Collection[int]) -> list[int]:
    # the leader last, the others from the end of the ISR: when every ISR member is gone,
    # the ISR keeps the leader (the replica surest to hold everything acknowledged), or
    # without one its first member
    gone = [r for r in reversed(state.isr) if r in dead and r != state.leader]
    return gone + [state.leader] if state.leader in dead and state.leader in state.isr else gone


# --- state changes the controller writes ----------------------------------------------------------
def states_after_broker_change(assignments: Mapping[TP, Sequence[int]], states: Mapping[TP, PartitionState],
                               live: Collection[int], controller_epoch: int,
                               unclean: bool | Callable[[TP], bool] = False,
                               offline: Mapping[TP, Collection[int]] | None = None) -> dict[TP, PartitionState]:
    """The partition states to write after the set of live brokers changed
    (KafkaController.onBrokerFailure -> onReplicasBecomeOffline, and onBrokerStartup ->
    triggerOnlinePartitionStateChange), only for the partitions that change:

    - a partition whose leader is live loses its dead ISR members (doRemoveReplicasFromIsr);
    - a partition without a live leader (its leader died, or it was offline) gets the
      offline election: a live ISR replica, the ISR reduced to the live members; only when
      none is left and ``unclean`` (unclean.leader.election.enable, per partition if a
      callable), the first live replica, alone in the ISR;
    - when no leader can be elected, the dead leader and dead ISR members are removed as
      doRemoveReplicasFromIsr does: leader -1, the last ISR member kept.

    Each changed partition's leader epoch goes up by exactly one (Kafka may write once per
    dead replica; one write per partition is enough) and carries ``controller_epoch``.
    Partitions with no state (being created) or no assignment (being deleted) are left alone.

    ``offline``: per partition, the replicas on live brokers that are in a failed log dir
    (KIP-112): treated as dead for that partition only (Kafka's isReplicaOnline, and
    onReplicasBecomeOffline for the failure itself).
    """
    out: dict[TP, PartitionState] = {}
    all_live = live
    for tp, st in states.items():
        assignment = assignments.get(tp)
        if not assignment:
            continue
        gone = offline.get(tp) if offline else None
        live = set(all_live).difference(gone) if gone else all_live
        dead = {r for r in st.isr if r not in live}
        if st.has_leader and st.leader in live:
            if dead:
                leader, isr = _without(st, _dead_in_removal_order(st, dead))
                out[tp] = st.new_leader_and_isr(leader, isr, controller_epoch)
            continue
        allow_unclean = unclean(tp) if callable(unclean) else unclean
        leader = offline_leader(assignment, st.isr, live, allow_unclean)
        if leader is not None:
            isr = tuple(r for r in st.isr if r in live) if leader in st.isr else (leader,)
            out[tp] = st.new_leader_and_isr(leader, isr, controller_epoch)
            continue
        if st.has_leader:
            dead.add(st.leader)
        leader, isr = _without(st, _dead_in_removal_order(st, dead))
        if st.has_leader:
            leader = NO_LEADER  # a dead leader outside the ISR goes too
        if (leader, isr) != (st.leader, st.isr):
            out[tp] = st.new_leader_and_isr(leader, isr, controller_epoch)
    return out


def states_after_controlled_shutdown(assignments: Mapping[TP, Sequence[int]], states: Mapping[TP, PartitionState],
                                     live: Collection[int], controller_epoch: int,
                                     shutting_down: int | Collection[int]) -> dict[TP, PartitionState]:
    """KafkaController.doControlledShutdown: for each partition with more than one replica
    and a replica on a broker shutting down, leadership moves to the first live ISR replica
    not shutting down (the ISR loses the brokers shutting down); where no such replica
    exists the partition is left as it is (the broker keeps leading until it stops). A
    broker shutting down that follows leaves the ISR (doRemoveReplicasFromIsr: not if it
    is the only member). Leader epoch + 1 for each partition that changes."""
    down = {shutting_down} if isinstance(shutting_down, int) else set(shutting_down)
    out: dict[TP, PartitionState] = {}
    for tp, st in states.items():
        assignment = assignments.get(tp)
        if not assignment or len(assignment) <= 1 or not down.intersection(assignment):
            continue
        if st.leader in down:
            leader = controlled_shutdown_leader(assignment, st.isr, live, down)
            if leader is not None:
                out[tp] = st.new_leader_and_isr(leader, tuple(r for r in st.isr if r not in down), controller_epoch)
            continue
        leaving = [r for r in st.isr if r in down]
        if leaving:
            leader, isr = _without(st, leaving)
            if isr != st.isr:
                out[tp] = st.new_leader_and_isr(leader, isr, controller_epoch)
    return out


def states_after_preferred_election(assignments: Mapping[TP, Sequence[int]], states: Mapping[TP, PartitionState],
                                    live: Collection[int], controller_epoch: int,
                                    partitions: Iterable[TP] | None = None) -> dict[TP, PartitionState]:
    """KafkaController.onReplicaElection with PreferredReplicaPartitionLeaderElectionStrategy
    (ElectLeaders PREFERRED, auto.leader.rebalance): partitions (all, or ``partitions``)
    not led by their first assigned replica move to it when it is live and in the ISR; the
    ISR is unchanged, leader epoch + 1. Partitions already led by it (ELECTION_NOT_NEEDED)
    or whose preferred replica is not available are not in the result."""
    out: dict[TP, PartitionState] = {}
    for tp in states if partitions is None else partitions:
        st, assignment = states.get(tp), assignments.get(tp)
        if st is None or not assignment or st.leader == assignment[0]:
            continue
        leader = preferred_leader(assignment, st.isr, live)
        if leader is not None:
            out[tp] = st.new_leader_and_isr(leader, st.isr, controller_epoch)
    return out
