"""Reconciliation of a member's current assignment towards its target: Kafka's
CurrentAssignmentBuilder.

A member first revokes what its target no longer has (UNREVOKED_PARTITIONS, at its current
epoch, until its heartbeats stop reporting those partitions), then moves to the target epoch
and gets the new partitions that nobody owns any more; those still owned by another member
wait (UNRELEASED_PARTITIONS) and are handed over on a later heartbeat, once released. So a
partition never has two owners at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import ConsumerGroupMember, MemberState
from protocol.errors import KafkaError

__all__ = ["Owned", "reconcile", "owns_any"]

#: the partitions a member reports owning in its heartbeat: (topic id, partitions), or None
#: when the heartbeat did not say
Owned = Sequence[tuple[uuid.UUID, Sequence[int]]] | None


def owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: whether the member may still own any of ``partitions``
    (an unknown ownership counts as yes)."""
    if owned is None:
        return True
    for topic_id, ps in owned:
        pending = partitions.get(topic_id)
        if pending and any(p in pending for p in ps):
            return True
    return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerGroupMember:
    """The member's next state (the same object when it cannot move on yet).
    ``partition_epoch(topic, partition)`` is the epoch of a partition's current owner, -1
    when it is free. Raises FENCED_MEMBER_EPOCH for a member in an unknown state that still
    owns partitions."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: a state from a newer coordinator; start the member over, empty-handed.
    if owned is None or owned:
        raise KafkaError(
            ErrorCode.fenced_member_epoch,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerGroupMember:
    """Kafka's computeNextAssignment."""
    has_unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    current = member.assigned
    for topic_id in set(target) | set(current):
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        pending = want - keep
        free = frozenset(p for p in pending if partition_epoch(topic_id, p) == -1)
        has_unreleased = has_unreleased or free != pending
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            to_assign[topic_id] = free

    def moved(state: MemberState, epoch: int, partitions: dict[uuid.UUID, frozenset[int]],
              pending_revocation: dict[uuid.UUID, frozenset[int]]) -> ConsumerGroupMember:
        # Kafka's updateMemberEpoch: the previous epoch is the one the member had
        return replace(
            member,
            state=state,
            member_epoch=epoch,
            previous_member_epoch=member.member_epoch,
            assigned=partitions,
            pending_revocation=pending_revocation,
        )

    if revoking and owns_any(owned, revoking):
        # Revoke first: the member stays at its epoch until it confirms the revocation.
        return moved(MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    if to_assign:
        for topic_id, ps in to_assign.items():
            assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return moved(state, target_epoch, assigned, {})
    if has_unreleased:
        return moved(MemberState.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return moved(MemberState.STABLE, target_epoch, assigned, {})
