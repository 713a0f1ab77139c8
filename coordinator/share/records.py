"""The KIP-932 share-group records of ``__consumer_offsets`` in Kafka 4.2's byte layouts,
written by hand (with the reader, writer and common layouts of
coordinator/consumer/records.py) from apache/kafka's
``group-coordinator/src/main/resources/common/message/ShareGroup*.json`` and the record
builders of Kafka's GroupCoordinatorRecordHelpers (newShareGroup*Record).

The key's version is the record type (the JSON's ``apiKey``; the keys are
``coordinator-key`` messages of version 0 whose bytes are unchanged since 4.0). Every value
is version 0 and flexible; none has a tagged field (we write an empty tag section and skip
any we read):

====  ========================================  =========================================
type  key (fields; never flexible)              value (version 0, flexible)
====  ========================================  =========================================
9     ShareGroupPartitionMetadataKey (group)    the subscribed topics (id, name, partitions)
10    ShareGroupMemberMetadataKey (+member)     rack, client id and host, subscribed topics
11    ShareGroupMetadataKey (group)             the group epoch, MetadataHash (int64)
12    ShareGroupTargetAssignmentMetadataKey     the target assignment epoch
13    ShareGroupTargetAssignmentMemberKey       one member's target partitions
14    ShareGroupCurrentMemberAssignmentKey      the member's epochs, state and partitions
15    ShareGroupStatePartitionMetadataKey       InitializingTopics, InitializedTopics,
                                                DeletingTopics
====  ========================================  =========================================

Types 9, 12 and 13 have the layouts of consumer-group types 4, 6 and 7 field for field (the
same value classes serve both).

Where each layout was taken from (apache/kafka, as stored in the reference index, compared
field by field: names, types, versions, nullability, flexibleVersions, no tagged fields, no
defaults that change the bytes):

* ShareGroupMetadataValue: 31f85dd07b1f8031e75f0030ea85510be4e715f0 — Epoch int32,
  MetadataHash int64 (both "0+"). The older specs (and Krait before this layout) had Epoch
  alone.
* ShareGroupStatePartitionMetadataValue: InitializingTopics []TopicPartitionsInfo, then
  InitializedTopics, then DeletingTopics []TopicInfo; TopicPartitionsInfo = TopicId uuid,
  TopicName string, Partitions []int32; TopicInfo = TopicId, TopicName. Kafka 4.2's
  GroupMetadataManager.replay (0013464cf112f01678cefa691f73b466e7ed7010) reads exactly these
  three lists, and tools' ShareGroupMessageFormatterTest
  (b94e3073681512b7a1fc6ee6da6ef5ffd53fe26b) prints exactly those fields. One stored version
  (25002b6a64b07c60e5777685732620ad6df6bbd5) also has a CreateTimestamp int64 in
  TopicPartitionsInfo; the replay above stamps InitializingTopics with the replay time
  instead, and the formatter (which prints every non-tagged field) shows none, so that
  version is taken not to be 4.2's and Krait neither writes nor reads it.
* ShareGroupMemberMetadataValue: 2831e7d2f163ace271cbd7acf09a13b1c3b8e0db — RackId nullable
  string, ClientId, ClientHost, SubscribedTopicNames []string: unchanged.
* ShareGroupCurrentMemberAssignmentValue: d2cdfb4559370b476c79e822f64c4ed3180ef626 —
  MemberEpoch, PreviousMemberEpoch int32, State int8, AssignedPartitions []TopicPartitions
  (TopicId, Partitions): unchanged.
* ShareGroupTargetAssignmentMemberValue: b835c1f5a3891d7b4d7e603248dba8266a98d564, and
  ShareGroupTargetAssignmentMetadataValue: 0c808e912de8a4da8a468bb5254b04fa96739739 —
  unchanged.
* ShareGroupPartitionMetadataValue: b091e287e82407780c72c00b0f4b1527d9fc6e0e — unchanged,
  but Kafka 4.2 no longer writes type 9 (its subscription metadata became MetadataHash, as
  KIP-1101 did for consumer groups); 4.2 still knows the type and reads it. Krait no longer
  writes it either, reads it from older logs and deletes it with its group.
* Keys: ShareGroupMemberMetadataKey 69cb4d8d15d413dc4c1641d7003584f5112d5a0b,
  ShareGroupStatePartitionMetadataKey 0c808e912de8a4da8a468bb5254b04fa96739739 (GroupId,
  and MemberId for types 10, 13, 14): unchanged bytes.

MetadataHash: Kafka computes it (Utils.computeGroupHash over computeTopicHash of each
subscribed topic: XXH3-64 of the topic id, name, partition count and partitions' racks) and
only ever compares it with the hash it computes from its own metadata image; a difference
bumps the group epoch once and recomputes the target assignment. Krait writes 0 (Kafka's
own value for a group subscribed to nothing): Python has no XXH3 here to match Kafka's
value bit for bit, and 0 costs a Kafka coordinator taking over a Krait log one epoch bump
(the hash it then writes is read back and ignored by Krait). Krait itself keeps the
subscribed topics' metadata in memory only: after a load the first heartbeat finds it
changed and bumps the epoch once, as Kafka does on reading 0.

Older logs: the values Krait wrote before these layouts (ShareGroupMetadataValue with the
epoch alone, ShareGroupStatePartitionMetadataValue without InitializingTopics) are also
version 0, so the decoder tries the 4.2 layout and then the old one. Old bytes never parse as
the new layout: an old ShareGroupMetadataValue is too short for MetadataHash, and in an old
ShareGroupStatePartitionMetadataValue (read as the new one: its InitializedTopics as
InitializingTopics, its DeletingTopics as InitializedTopics) the empty tag section of a
DeletingTopics entry lands where a Partitions array starts, or the value's final empty tag
section where the DeletingTopics array starts, and reads as a null array, which is refused.
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
    RecordDecodeError,
    RecordReader,
    UnknownRecordVersion,
    _Writer,
)
from coordinator.share.group import ShareGroup, ShareGroupMember

__all__ = [
    "ShareGroupKey",
    "ShareGroupMetadataValue",
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
class ShareGroupMetadataValue:
    """ShareGroupMetadataValue (type 11): the group epoch and, since Kafka 4.1, MetadataHash."""

    epoch: int
    #: Kafka's hash of the subscribed topics' metadata; Krait writes 0 (see the module docstring)
    metadata_hash: int = 0


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
    #: (topic id, topic name, partitions) whose share-group state is being initialised
    #: (InitializingTopics, Kafka 4.1+); first in the bytes, last here so that older callers
    #: building the value by position keep working
    initializing: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...] = ()


Value = (
    ShareGroupMetadataValue | PartitionMetadataValue | ShareMemberMetadataValue | AssignmentEpochValue
    | TargetAssignmentValue | ShareCurrentAssignmentValue | StatePartitionMetadataValue
)
#: a record as the coordinator builds and replays it; value None is a tombstone
SGRecord = tuple[ShareGroupKey, Value | None]


# --- builders (Kafka's GroupCoordinatorRecordHelpers) -------------------------------------


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> SGRecord:
    return ShareGroupKey(GROUP_METADATA, group_id), ShareGroupMetadataValue(epoch, metadata_hash)


def subscription_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> SGRecord:
    """A ShareGroupPartitionMetadata record (type 9): what Kafka 4.0 and Krait before the 4.2
    layouts wrote. Nothing writes it any more; kept to build old logs in tests."""
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


def _topic_partitions(
    topics: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
) -> tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]:
    return tuple((t, name, tuple(sorted(ps))) for t, (name, ps) in sorted(topics.items(), key=lambda kv: str(kv[0])) if ps)


def state_partition_metadata_record(
    group_id: str,
    initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
    deleting: Mapping[uuid.UUID, str],
    initializing: Mapping[uuid.UUID, tuple[str, frozenset[int]]] | None = None,
) -> SGRecord:
    """Kafka's newShareGroupStatePartitionMetadataRecord: the share-partitions being
    initialised, those initialised, the topics being deleted."""
    value = StatePartitionMetadataValue(
        initialized=_topic_partitions(initialized),
        deleting=tuple((t, name) for t, name in sorted(deleting.items(), key=lambda kv: str(kv[0]))),
        initializing=_topic_partitions(initializing or {}),
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
    the order replay needs (members' assignments, targets, target epoch, members, state
    partitions, epoch last). Kafka 4.2 writes no ShareGroupPartitionMetadata tombstone (it
    writes no such record); Krait still deletes it, as a log written before the 4.2 layouts
    may hold one and its value would bring the group back on the next load (a tombstone of
    a key Kafka knows and finds no group for is ignored by Kafka's replay)."""
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
    elif isinstance(value, ShareGroupMetadataValue):
        w.i32(value.epoch)
        w.i64(value.metadata_hash)
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
        _write_topic_partitions_info(w, value.initializing)
        _write_topic_partitions_info(w, value.initialized)
        w.array_len(len(value.deleting))
        for topic_id, name in value.deleting:
            w.uuid(topic_id)
            w.string(name)
            w.tags()
    else:
        raise TypeError(f"not a share-group record value: {value!r}")
    w.tags()
    return bytes(w.buf)


def _write_topic_partitions_info(w: _Writer, topics: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]) -> None:
    """A []TopicPartitionsInfo array: topic id, name, partitions, tags."""
    w.array_len(len(topics))
    for topic_id, name, partitions in topics:
        w.uuid(topic_id)
        w.string(name)
        w.array_len(len(partitions))
        for p in partitions:
            w.i32(p)
        w.tags()


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


def _read_topic_partitions_info(r: RecordReader) -> tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]:
    out = []
    for _ in range(r.array_len()):
        topic_id, name = r.uuid(), r.str_()
        partitions = tuple(r.i32() for _ in range(r.array_len()))
        r.skip_tags()
        out.append((topic_id, name, partitions))
    return tuple(out)


def _read_state_partitions(r: RecordReader, with_initializing: bool) -> StatePartitionMetadataValue:
    initializing = _read_topic_partitions_info(r) if with_initializing else ()
    initialized = _read_topic_partitions_info(r)
    deleting = []
    for _ in range(r.array_len()):
        topic_id, name = r.uuid(), r.str_()
        r.skip_tags()
        deleting.append((topic_id, name))
    return StatePartitionMetadataValue(initialized, tuple(deleting), initializing)


def _read_group_metadata(r: RecordReader, with_hash: bool) -> ShareGroupMetadataValue:
    epoch = r.i32()
    return ShareGroupMetadataValue(epoch, r.i64() if with_hash else 0)


#: value layouts that differ between Kafka 4.2 and the pre-4.1 specs Krait first wrote, both
#: value version 0: the 4.2 one first, then the old one. The old bytes never parse as the new
#: layout (see the module docstring), so trying them in turn is unambiguous.
_LAYOUTS = {
    GROUP_METADATA: (lambda r: _read_group_metadata(r, True), lambda r: _read_group_metadata(r, False)),
    STATE_PARTITION_METADATA: (lambda r: _read_state_partitions(r, True), lambda r: _read_state_partitions(r, False)),
}


def _decode_body(key_type: int, r: RecordReader) -> Value:
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
    else:
        raise UnknownRecordVersion("share-group key", key_type)
    r.skip_tags()
    r.end()
    return value


def _decode_value(key_type: int, data: bytes) -> Value:
    r = RecordReader(data)
    version = r.i16()
    if version != 0:
        raise UnknownRecordVersion(f"share-group value (type {key_type})", version)
    r.flexible = True
    layouts = _LAYOUTS.get(key_type)
    if layouts is None:
        return _decode_body(key_type, r)
    start, error = r.pos, None
    for read in layouts:
        r.pos = start
        try:
            value = read(r)
            r.skip_tags()
            r.end()
            return value
        except RecordDecodeError as exc:
            error = error or exc
    assert error is not None
    raise error


def decode_record(key: ShareGroupKey, data: bytes | bytearray | memoryview | None) -> SGRecord:
    """The value of a share-group record (None: tombstone); RecordDecodeError if malformed."""
    if data is None:
        return key, None
    return key, _decode_value(key.type, bytes(data))
