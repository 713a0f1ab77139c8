"""The KIP-932 share-group records of ``__consumer_offsets``, written by hand from the JSON
specs Krait follows (``kafka-message-specs/group-coordinator/ShareGroup*Key.json`` /
``*Value.json``) with the reader, writer and common layouts of
coordinator/consumer/records.py, and the record builders of Kafka's
GroupCoordinatorRecordHelpers (newShareGroup*Record).

The key's version is the record type:

====  ========================================  =========================================
type  key (fields; never flexible)              value (version 0, flexible)
====  ========================================  =========================================
9     ShareGroupPartitionMetadataKey (group)    the subscribed topics (id, name, partitions)
10    ShareGroupMemberMetadataKey (+member)     rack, client id and host, subscribed topics
11    ShareGroupMetadataKey (group)             the group epoch
12    ShareGroupTargetAssignmentMetadataKey     the target assignment epoch
13    ShareGroupTargetAssignmentMemberKey       one member's target partitions
14    ShareGroupCurrentMemberAssignmentKey      the member's epochs, state and partitions
15    ShareGroupStatePartitionMetadataKey       initialised share-partitions, topics deleting
====  ========================================  =========================================

Types 9, 11, 12 and 13 have the layouts of consumer-group types 4, 3, 6 and 7 field for
field (the same value classes serve both). Kafka 4.2's own files have moved on from the specs
above (ShareGroupMetadataValue gained MetadataHash and type 9 is no longer written;
ShareGroupStatePartitionMetadataValue gained InitializingTopics): a value with fields past
those of the specs fails to decode here and is skipped by the loader, as any malformed record.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import TopicMetadata, normalized
from coordinator.consumer.records import (
    AssignmentEpochValue,
    ConsumerGroupKey,
    GroupEpochValue,
    PartitionMetadataValue,
    TargetAssignmentValue,
    encode_group_key,
    read_common_value,
    read_strings,
    read_topic_partitions,
    write_common_value,
    write_topic_partitions,
)
from coordinator.consumer.records import (
    decode_any_key as decode_consumer_key,
)
from coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    RecordReader,
    UnknownRecordVersion,
    _Writer,
)
from coordinator.share.group import ShareGroup, ShareGroupMember

__all__ = [
    "ShareGroupKey",
    "ShareMemberMetadataValue",
    "ShareCurrentAssignmentValue",
    "StatePartitionMetadataValue",
    "SGRecord",
    "PARTITION_METADATA",
    "MEMBER_METADATA",
    "GROUP_METADATA",
    "TARGET_ASSIGNMENT_METADATA",
    "TARGET_ASSIGNMENT_MEMBER",
    "CURRENT_MEMBER_ASSIGNMENT",
    "STATE_PARTITION_METADATA",
    "decode_any_key",
    "decode_record",
    "encode_record",
    "group_epoch_record",
    "subscription_metadata_record",
    "member_subscription_record",
    "member_subscription_tombstone",
    "target_assignment_record",
    "target_assignment_tombstone",
    "assignment_epoch_record",
    "current_assignment_record",
    "current_assignment_tombstone",
    "state_partition_metadata_record",
    "remove_member_records",
    "group_tombstones",
]

PARTITION_METADATA = 9
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
_FIRST, _LAST = PARTITION_METADATA, STATE_PARTITION_METADATA
_WITH_MEMBER = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
#: the types whose values have a consumer-group record's layout
_COMMON: dict[int, type] = {
    PARTITION_METADATA: PartitionMetadataValue,
    GROUP_METADATA: GroupEpochValue,
    TARGET_ASSIGNMENT_METADATA: AssignmentEpochValue,
    TARGET_ASSIGNMENT_MEMBER: TargetAssignmentValue,
}


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    """The key of a share-group record: its type (the key version), group and member."""

    type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class ShareMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment


@dataclass(frozen=True, slots=True)
class StatePartitionMetadataValue:
    #: (topic id, topic name, partitions) whose share-group state is initialised
    initialized: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    #: (topic id, topic name) whose share-group state is being deleted
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


Value = (
    GroupEpochValue | PartitionMetadataValue | ShareMemberMetadataValue | AssignmentEpochValue
    | TargetAssignmentValue | ShareCurrentAssignmentValue | StatePartitionMetadataValue
)
#: a record as the coordinator builds and replays it; value None is a tombstone
SGRecord = tuple[ShareGroupKey, Value | None]


# --- builders (Kafka's GroupCoordinatorRecordHelpers) -------------------------------------


def group_epoch_record(group_id: str, epoch: int) -> SGRecord:
    return ShareGroupKey(GROUP_METADATA, group_id), GroupEpochValue(epoch)


def subscription_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> SGRecord:
    topics = tuple(metadata[name] for name in sorted(metadata))
    return ShareGroupKey(PARTITION_METADATA, group_id), PartitionMetadataValue(topics)


def member_subscription_record(group_id: str, member: ShareGroupMember) -> SGRecord:
    value = ShareMemberMetadataValue(
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
    )
    return ShareGroupKey(MEMBER_METADATA, group_id, member.member_id), value


def member_subscription_tombstone(group_id: str, member_id: str) -> SGRecord:
    return ShareGroupKey(MEMBER_METADATA, group_id, member_id), None


def target_assignment_record(group_id: str, member_id: str, partitions: Assignment) -> SGRecord:
    return ShareGroupKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), TargetAssignmentValue(normalized(partitions))


def target_assignment_tombstone(group_id: str, member_id: str) -> SGRecord:
    return ShareGroupKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None


def assignment_epoch_record(group_id: str, epoch: int) -> SGRecord:
    return ShareGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), AssignmentEpochValue(epoch)


def current_assignment_record(group_id: str, member: ShareGroupMember) -> SGRecord:
    value = ShareCurrentAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned=member.assigned,
    )
    return ShareGroupKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id), value


def current_assignment_tombstone(group_id: str, member_id: str) -> SGRecord:
    return ShareGroupKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None


def state_partition_metadata_record(
    group_id: str,
    initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
    deleting: Mapping[uuid.UUID, str],
) -> SGRecord:
    value = StatePartitionMetadataValue(
        initialized=tuple(
            (t, name, tuple(sorted(ps))) for t, (name, ps) in sorted(initialized.items(), key=lambda kv: str(kv[0]))
            if ps
        ),
        deleting=tuple((t, name) for t, name in sorted(deleting.items(), key=lambda kv: str(kv[0]))),
    )
    return ShareGroupKey(STATE_PARTITION_METADATA, group_id), value


def remove_member_records(group_id: str, member_id: str) -> list[SGRecord]:
    """Kafka's removeMember for a share member: its tombstones, in the order replay needs."""
    return [
        current_assignment_tombstone(group_id, member_id),
        target_assignment_tombstone(group_id, member_id),
        member_subscription_tombstone(group_id, member_id),
    ]


def group_tombstones(group: ShareGroup) -> list[SGRecord]:
    """Kafka's ShareGroup.createGroupTombstoneRecords: every record of the group, deleted, in
    the order replay needs (members' assignments, targets, target epoch, members, metadata,
    state partitions, epoch last)."""
    gid = group.group_id
    records = [current_assignment_tombstone(gid, mid) for mid in group.members]
    records += [target_assignment_tombstone(gid, mid) for mid in group.members]
    records.append((ShareGroupKey(TARGET_ASSIGNMENT_METADATA, gid), None))
    records += [member_subscription_tombstone(gid, mid) for mid in group.members]
    records.append((ShareGroupKey(PARTITION_METADATA, gid), None))
    records.append((ShareGroupKey(STATE_PARTITION_METADATA, gid), None))
    records.append((ShareGroupKey(GROUP_METADATA, gid), None))
    return records


# --- encoding -----------------------------------------------------------------------------


def _encode_key(key: ShareGroupKey) -> bytes:
    if not _FIRST <= key.type <= _LAST:
        raise ValueError(f"no share-group record type {key.type}")
    if key.type in _WITH_MEMBER and key.member_id is None:
        raise ValueError(f"record type {key.type} needs a member id")
    return encode_group_key(key.type, key.group, key.member_id if key.type in _WITH_MEMBER else None)


def _encode_value(value: Value) -> bytes:
    w = _Writer(True)
    w.i16(0)
    if write_common_value(w, value):
        pass
    elif isinstance(value, ShareMemberMetadataValue):
        w.string(value.rack_id, nullable=True)
        w.string(value.client_id)
        w.string(value.client_host)
        w.array_len(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.string(name)
    elif isinstance(value, ShareCurrentAssignmentValue):
        w.i32(value.member_epoch)
        w.i32(value.previous_member_epoch)
        w.i8(value.state)
        write_topic_partitions(w, value.assigned)
    elif isinstance(value, StatePartitionMetadataValue):
        w.array_len(len(value.initialized))
        for topic_id, name, partitions in value.initialized:
            w.uuid(topic_id)
            w.string(name)
            w.array_len(len(partitions))
            for p in partitions:
                w.i32(p)
            w.tags()
        w.array_len(len(value.deleting))
        for topic_id, name in value.deleting:
            w.uuid(topic_id)
            w.string(name)
            w.tags()
    else:
        raise TypeError(f"not a share-group record value: {value!r}")
    w.tags()
    return bytes(w.buf)


def encode_record(record: SGRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    return _encode_key(key), None if value is None else _encode_value(value)


# --- decoding -----------------------------------------------------------------------------


def decode_any_key(
    data: bytes | bytearray | memoryview | None,
) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | ShareGroupKey:
    """Any key this coordinator knows: offsets and classic group metadata, the consumer-group
    types 3-8 and the share-group types 9-15; UnknownRecordVersion for others."""
    if data is None or len(data) < 2:
        return decode_consumer_key(data)  # raises the right RecordDecodeError
    r = RecordReader(bytes(data))
    version = r.i16()
    if not _FIRST <= version <= _LAST:
        return decode_consumer_key(data)
    group = r.str_()
    member_id = r.str_() if version in _WITH_MEMBER else None
    r.end()
    return ShareGroupKey(version, group, member_id)


def _decode_value(key_type: int, data: bytes) -> Value:
    r = RecordReader(data)
    version = r.i16()
    if version != 0:
        raise UnknownRecordVersion(f"share-group value (type {key_type})", version)
    r.flexible = True
    value: Value
    common = _COMMON.get(key_type)
    if common is not None:
        value = read_common_value(common, r)
    elif key_type == MEMBER_METADATA:
        value = ShareMemberMetadataValue(
            rack_id=r.string(nullable=True),
            client_id=r.str_(),
            client_host=r.str_(),
            subscribed_topic_names=tuple(read_strings(r)),
        )
    elif key_type == CURRENT_MEMBER_ASSIGNMENT:
        value = ShareCurrentAssignmentValue(
            member_epoch=r.i32(),
            previous_member_epoch=r.i32(),
            state=r.i8(),
            assigned=read_topic_partitions(r),
        )
    elif key_type == STATE_PARTITION_METADATA:
        initialized = []
        for _ in range(r.array_len()):
            topic_id, name = r.uuid(), r.str_()
            partitions = tuple(r.i32() for _ in range(r.array_len()))
            r.skip_tags()
            initialized.append((topic_id, name, partitions))
        deleting = []
        for _ in range(r.array_len()):
            topic_id, name = r.uuid(), r.str_()
            r.skip_tags()
            deleting.append((topic_id, name))
        value = StatePartitionMetadataValue(tuple(initialized), tuple(deleting))
    else:
        raise UnknownRecordVersion("share-group key", key_type)
    r.skip_tags()
    r.end()
    return value


def decode_record(key: ShareGroupKey, data: bytes | bytearray | memoryview | None) -> SGRecord:
    """The value of a share-group record (None: tombstone); RecordDecodeError if malformed."""
    if data is None:
        return key, None
    return key, _decode_value(key.type, bytes(data))
