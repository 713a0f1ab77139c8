"""Applying consumer-group records to groups: Kafka's GroupMetadataManager.replay methods.

The coordinator changes a consumer group only this way: an operation builds its records,
appends them to ``__consumer_offsets`` and then replays them here, exactly as the loader
replays them after a restart (Kafka's coordinator runtime does the same). So what was
written is what is in memory, and a reload reproduces it.

Where the groups live is the caller's (:class:`GroupSource`): the live coordinator's
groups, or a loading partition's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol, TypeVar

from coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    normalized,
)
from coordinator.consumer.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    AssignmentEpochValue,
    CGRecord,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetAssignmentValue,
)

__all__ = ["GroupSource", "ReplayError", "replay", "value_as"]


class ReplayError(ValueError):
    """A record that does not fit the group's state (Kafka's IllegalStateException on replay)."""


class GroupSource(Protocol):
    """Where replay finds and puts consumer groups."""

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group with this id, if there is one."""
        ...

    def create(self, group_id: str) -> ConsumerGroup:
        """The consumer group with this id, created if needed (Kafka's
        getOrMaybeCreatePersistedConsumerGroup); raises ReplayError if the id is taken by a
        group of another type that cannot be replaced."""
        ...

    def remove(self, group_id: str) -> None:
        """The group's last record was deleted (its epoch tombstone)."""
        ...


def replay(groups: GroupSource, record: CGRecord) -> None:
    """Apply one record. Raises ReplayError when it contradicts the state."""
    key, value = record
    gid = key.group
    if key.type == GROUP_METADATA:
        _group_metadata(groups, gid, value)
        return
    if value is None:
        group = groups.get(gid)
        if group is None:
            return  # a tombstone for a group that is gone already
    else:
        group = groups.create(gid)
    mid = key.member_id or ""
    if key.type == PARTITION_METADATA:
        group.set_subscription_metadata(
            {} if value is None else {t.name: t for t in value_as(value, PartitionMetadataValue).topics}
        )
    elif key.type == TARGET_ASSIGNMENT_METADATA:
        if value is None:
            if group.target_assignment:
                raise ReplayError(f"group {gid}: target assignment epoch deleted with members still assigned")
            group.set_assignment_epoch(-1)
        else:
            group.set_assignment_epoch(value_as(value, AssignmentEpochValue).assignment_epoch)
    elif key.type == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.remove_target(mid)
        else:
            group.update_target(mid, value_as(value, TargetAssignmentValue).partitions)
    elif key.type == MEMBER_METADATA:
        _member_metadata(group, mid, value)
    elif key.type == CURRENT_MEMBER_ASSIGNMENT:
        _current_assignment(group, mid, value)
    else:
        raise ReplayError(f"not a consumer-group record type: {key.type}")


_T = TypeVar("_T")


def value_as(value: object, cls: type[_T]) -> _T:
    """``value`` as a ``cls`` (a record value of the type its key says), else ReplayError."""
    if not isinstance(value, cls):
        raise ReplayError(f"expected {cls.__name__}, got {type(value).__name__}")
    return value


def _group_metadata(groups: GroupSource, gid: str, value: object | None) -> None:
    if value is not None:
        groups.create(gid).set_group_epoch(value_as(value, GroupEpochValue).epoch)
        return
    group = groups.get(gid)
    if group is None:
        return
    if group.members:
        raise ReplayError(f"group {gid}: deleted with {len(group.members)} members")
    if group.target_assignment:
        raise ReplayError(f"group {gid}: deleted with a target assignment")
    if group.assignment_epoch != -1:
        raise ReplayError(f"group {gid}: deleted before its target assignment epoch")
    groups.remove(gid)


def remove_member(group: Any, mid: str) -> None:
    """A member metadata tombstone (consumer and share groups alike): the member goes, which
    its current and target assignments must already have done."""
    member = group.members.get(mid)
    if member is None:
        return
    if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
        raise ReplayError(f"group {group.group_id}: member {mid} deleted before its current assignment")
    if mid in group.target_assignment:
        raise ReplayError(f"group {group.group_id}: member {mid} deleted before its target assignment")
    group.remove_member(mid)


def _member_metadata(group: ConsumerGroup, mid: str, value: object | None) -> None:
    if value is None:
        remove_member(group, mid)
        return
    v = value_as(value, MemberMetadataValue)
    old = group.members.get(mid) or ConsumerGroupMember(mid)
    group.update_member(
        replace(
            old,
            instance_id=v.instance_id,
            rack_id=v.rack_id,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topic_names=frozenset(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex,
            rebalance_timeout_ms=v.rebalance_timeout_ms,
            server_assignor=v.server_assignor,
            classic=v.classic,
        )
    )


def _current_assignment(group: ConsumerGroup, mid: str, value: object | None) -> None:
    if value is None:
        member = group.members.get(mid)
        if member is None:
            return
        group.update_member(
            replace(
                member,
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned={},
                pending_revocation={},
            )
        )
        return
    v = value_as(value, CurrentAssignmentValue)
    old = group.members.get(mid) or ConsumerGroupMember(mid)
    group.update_member(
        replace(
            old,
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=MemberState.from_value(v.state),
            assigned=normalized(v.assigned),
            pending_revocation=normalized(v.pending_revocation),
        )
    )
