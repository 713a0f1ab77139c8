"""Applying share-group records to groups: Kafka's GroupMetadataManager.replay for the
ShareGroup* records.

As for consumer groups (coordinator/consumer/replay.py), an operation appends its records
and then replays them here, exactly as the loader replays them after a restart, so what was
written is what is in memory.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from coordinator.consumer.group import MemberState, normalized
from coordinator.consumer.records import (
    AssignmentEpochValue,
    PartitionMetadataValue,
    TargetAssignmentValue,
)
from coordinator.consumer.replay import ReplayError, remove_member, value_as
from coordinator.share.group import LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareGroupMember
from coordinator.share.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    STATE_PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    SGRecord,
    ShareCurrentAssignmentValue,
    ShareGroupMetadataValue,
    ShareMemberMetadataValue,
    StatePartitionMetadataValue,
)

__all__ = ["ShareGroupSource", "replay"]


class ShareGroupSource(Protocol):
    """Where replay finds and puts share groups."""

    def get(self, group_id: str) -> ShareGroup | None:
        """The share group with this id, if there is one."""
        ...

    def create(self, group_id: str) -> ShareGroup:
        """The share group with this id, created if needed; raises ReplayError if the id is
        taken by a group of another type."""
        ...

    def remove(self, group_id: str) -> None:
        """The group's last record was deleted (its epoch tombstone)."""
        ...


def replay(groups: ShareGroupSource, record: SGRecord) -> None:
    """Apply one record. Raises ReplayError when it contradicts the state."""
    key, value = record
    gid = key.group
    if key.type == GROUP_METADATA:
        _group_metadata(groups, gid, value)
        return
    group = groups.get(gid) if value is None else groups.create(gid)
    if group is None:
        return  # a tombstone for a group that is gone already
    mid = key.member_id or ""
    if key.type == PARTITION_METADATA:  # only in logs written before the 4.2 layouts
        group.set_subscription_metadata(
            {} if value is None else {t.name: t for t in value_as(value, PartitionMetadataValue).topics}
        )
    elif key.type == STATE_PARTITION_METADATA:
        if value is None:
            group.set_state_partitions({}, {})
        else:
            v = value_as(value, StatePartitionMetadataValue)
            # InitializingTopics stay unread: Krait asks again for what is not initialised
            # (Kafka does so after group.share.initialize.retry.interval.ms)
            group.set_state_partitions(
                {t: (name, frozenset(ps)) for t, name, ps in v.initialized}, dict(v.deleting)
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
        raise ReplayError(f"not a share-group record type: {key.type}")


def _group_metadata(groups: ShareGroupSource, gid: str, value: object | None) -> None:
    if value is not None:
        # MetadataHash is Kafka's, compared with nothing here (see coordinator/share/records.py)
        groups.create(gid).set_group_epoch(value_as(value, ShareGroupMetadataValue).epoch)
        return
    group = groups.get(gid)
    if group is None:
        return
    if group.members:
        raise ReplayError(f"group {gid}: deleted with {len(group.members)} members")
    if group.target_assignment:
        raise ReplayError(f"group {gid}: deleted with a target assignment")
    groups.remove(gid)


def _member_metadata(group: ShareGroup, mid: str, value: object | None) -> None:
    if value is None:
        remove_member(group, mid)
        return
    v = value_as(value, ShareMemberMetadataValue)
    old = group.members.get(mid) or ShareGroupMember(mid)
    group.update_member(
        replace(
            old,
            rack_id=v.rack_id,
            client_id=v.client_id,
            client_host=v.client_host,
            subscribed_topic_names=frozenset(v.subscribed_topic_names),
        )
    )


def _current_assignment(group: ShareGroup, mid: str, value: object | None) -> None:
    if value is None:
        member = group.members.get(mid)
        if member is not None:
            group.update_member(
                replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={})
            )
        return
    v = value_as(value, ShareCurrentAssignmentValue)
    old = group.members.get(mid) or ShareGroupMember(mid)
    group.update_member(
        replace(
            old,
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=MemberState.from_value(v.state),
            assigned=normalized(v.assigned),
        )
    )
