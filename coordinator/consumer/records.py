"""The KIP-848 records of ``__consumer_offsets``, written by hand from Kafka's JSON specs
(``group-coordinator/ConsumerGroup*Key.json`` / ``*Value.json``) with the reader and writer
of coordinator/records.py, and the record builders of Kafka's GroupCoordinatorRecordHelpers.

The key's version is the record type:

====  =======================================  ==========================================
type  key (fields; never flexible)             value (version 0, flexible)
====  =======================================  ==========================================
3     ConsumerGroupMetadataKey (group)         ConsumerGroupMetadataValue: the group epoch
4     ConsumerGroupPartitionMetadataKey        the subscribed topics (id, name, partitions)
5     ConsumerGroupMemberMetadataKey (+member) the member's subscription and client
6     ConsumerGroupTargetAssignmentMetadataKey the target assignment epoch
7     ConsumerGroupTargetAssignmentMemberKey   one member's target partitions
8     ConsumerGroupCurrentMemberAssignmentKey  the member's epochs, state and partitions
====  =======================================  ==========================================

Values carry a tagged-field section after each struct; we write none and skip any we read,
except ConsumerGroupMemberMetadataValue's tag 0, ClassicMemberMetadata: the session timeout
and JoinGroup protocols of a member using the classic protocol (a nullable struct, written
as Kafka's generated code does: size + 1, a presence byte, the struct). Record keys of other
types (share groups, regular expressions) raise UnknownRecordVersion so the loader skips
them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    TopicMetadata,
    normalized,
)
from coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    RecordDecodeError,
    RecordReader,
    UnknownRecordVersion,
    _Writer,
    decode_key,
)
from protocol.varint import encode_uvarint

__all__ = [
    "ConsumerGroupKey",
    "GroupEpochValue",
    "PartitionMetadataValue",
    "MemberMetadataValue",
    "AssignmentEpochValue",
    "TargetAssignmentValue",
    "CurrentAssignmentValue",
    "CGRecord",
    "GROUP_METADATA",
    "PARTITION_METADATA",
    "MEMBER_METADATA",
    "TARGET_ASSIGNMENT_METADATA",
    "TARGET_ASSIGNMENT_MEMBER",
    "CURRENT_MEMBER_ASSIGNMENT",
    "decode_any_key",
    "decode_record",
    "encode_record",
    "group_epoch_record",
    "group_epoch_tombstone",
    "subscription_metadata_record",
    "subscription_metadata_tombstone",
    "member_subscription_record",
    "member_subscription_tombstone",
    "target_assignment_record",
    "target_assignment_tombstone",
    "assignment_epoch_record",
    "assignment_epoch_tombstone",
    "current_assignment_record",
    "current_assignment_tombstone",
    "group_tombstones",
    "encode_group_key",
    "read_common_value",
    "read_strings",
    "read_topic_partitions",
    "write_common_value",
    "write_topic_partitions",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
_WITH_MEMBER = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a consumer-group record: its type (the key version), group and member."""

    type: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: tag 0: set for a member using the classic protocol
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class AssignmentEpochValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


Value = (
    GroupEpochValue | PartitionMetadataValue | MemberMetadataValue | AssignmentEpochValue
    | TargetAssignmentValue | CurrentAssignmentValue
)
#: a record as the coordinator builds and replays it; value None is a tombstone
CGRecord = tuple[ConsumerGroupKey, Value | None]


# --- builders (Kafka's GroupCoordinatorRecordHelpers) -------------------------------------


def group_epoch_record(group_id: str, epoch: int) -> CGRecord:
    return ConsumerGroupKey(GROUP_METADATA, group_id), GroupEpochValue(epoch)


def group_epoch_tombstone(group_id: str) -> CGRecord:
    return ConsumerGroupKey(GROUP_METADATA, group_id), None


def subscription_metadata_record(group_id: str, metadata: Mapping[str, TopicMetadata]) -> CGRecord:
    topics = tuple(metadata[name] for name in sorted(metadata))
    return ConsumerGroupKey(PARTITION_METADATA, group_id), PartitionMetadataValue(topics)


def subscription_metadata_tombstone(group_id: str) -> CGRecord:
    return ConsumerGroupKey(PARTITION_METADATA, group_id), None


def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> CGRecord:
    value = MemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        classic=member.classic,
    )
    return ConsumerGroupKey(MEMBER_METADATA, group_id, member.member_id), value


def member_subscription_tombstone(group_id: str, member_id: str) -> CGRecord:
    return ConsumerGroupKey(MEMBER_METADATA, group_id, member_id), None


def target_assignment_record(group_id: str, member_id: str, partitions: Assignment) -> CGRecord:
    return ConsumerGroupKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), TargetAssignmentValue(normalized(partitions))


def target_assignment_tombstone(group_id: str, member_id: str) -> CGRecord:
    return ConsumerGroupKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None


def assignment_epoch_record(group_id: str, epoch: int) -> CGRecord:
    return ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), AssignmentEpochValue(epoch)


def assignment_epoch_tombstone(group_id: str) -> CGRecord:
    return ConsumerGroupKey(TARGET_ASSIGNMENT_METADATA, group_id), None


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CGRecord:
    value = CurrentAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned=member.assigned,
        pending_revocation=member.pending_revocation,
    )
    return ConsumerGroupKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id), value


def current_assignment_tombstone(group_id: str, member_id: str) -> CGRecord:
    return ConsumerGroupKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None


def group_tombstones(group: ConsumerGroup, leaving: str | None = None, joining: str | None = None) -> list[CGRecord]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords: every record of the group, deleted,
    in the order replay needs (members' assignments, target epoch, members, metadata, epoch).
    With ``leaving`` and ``joining`` (createGroupTombstoneRecordsWithReplacedMember), the
    leaving member's records are deleted under the joining member's id: the joining member
    replaced it earlier in the same batch."""
    gid = group.group_id
    ids = [joining if joining is not None and mid == leaving else mid for mid in group.members]
    records = [current_assignment_tombstone(gid, mid) for mid in ids]
    records += [target_assignment_tombstone(gid, mid) for mid in ids]
    records.append(assignment_epoch_tombstone(gid))
    records += [member_subscription_tombstone(gid, mid) for mid in ids]
    records.append(subscription_metadata_tombstone(gid))
    records.append(group_epoch_tombstone(gid))
    return records


# --- encoding -----------------------------------------------------------------------------


def encode_group_key(key_type: int, group: str, member_id: str | None) -> bytes:
    """A modern group's record key (never flexible): its type as the version, the group id
    and, for the per-member types, the member id. Consumer and share groups alike."""
    w = _Writer(False)
    w.i16(key_type)
    w.string(group)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.buf)


def _encode_key(key: ConsumerGroupKey) -> bytes:
    if not GROUP_METADATA <= key.type <= CURRENT_MEMBER_ASSIGNMENT:
        raise ValueError(f"no consumer-group record type {key.type}")
    if key.type in _WITH_MEMBER and key.member_id is None:
        raise ValueError(f"record type {key.type} needs a member id")
    return encode_group_key(key.type, key.group, key.member_id if key.type in _WITH_MEMBER else None)


def write_topic_partitions(w: _Writer, assignment: Assignment) -> None:
    """A []TopicPartitions array (topic id, partitions, tags), in a stable order."""
    # Kafka writes a HashMap's order; sorted here so equal states give equal bytes.
    topics = sorted(assignment.items(), key=lambda kv: str(kv[0]))
    w.array_len(len(topics))
    for topic_id, partitions in topics:
        w.uuid(topic_id)
        ps = sorted(partitions)
        w.array_len(len(ps))
        for p in ps:
            w.i32(p)
        w.tags()


def _write_classic_tag(w: _Writer, classic: ClassicMemberMetadata) -> None:
    """The value's tagged fields with tag 0 (ClassicMemberMetadata) set: the count, the tag,
    the size (the struct's + 1 for the presence byte), the presence byte, the struct."""
    s = _Writer(True)
    s.i32(classic.session_timeout_ms)
    s.array_len(len(classic.protocols))
    for name, metadata in classic.protocols:
        s.string(name)
        s.bytes_(metadata)
        s.tags()
    s.tags()
    w.buf += encode_uvarint(1) + encode_uvarint(0) + encode_uvarint(len(s.buf) + 1) + b"\x01" + s.buf


def _read_member_tags(r: RecordReader) -> ClassicMemberMetadata | None:
    """The value's tagged fields: ClassicMemberMetadata (tag 0) if present; others skipped."""
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if end > len(r.data):
            raise RecordDecodeError("tagged field runs past the end of the record")
        if tag == 0 and r.uvarint() > 0:
            session_timeout = r.i32()
            protocols = []
            for _ in range(r.array_len()):
                name, metadata = r.str_(), r.bytes_()
                r.skip_tags()
                protocols.append((name, metadata))
            r.skip_tags()
            classic = ClassicMemberMetadata(session_timeout, tuple(protocols))
        if r.pos != end:
            if tag == 0:
                raise RecordDecodeError("ClassicMemberMetadata does not fill its tagged field")
            r.pos = end
    return classic


def write_common_value(w: _Writer, value: object) -> bool:
    """The body of a value whose layout consumer and share groups share (the group epoch,
    the target assignment epoch, the subscribed topics' metadata, a member's target
    assignment: ShareGroup*Value repeats ConsumerGroup*Value field for field); False for
    any other value."""
    if isinstance(value, GroupEpochValue):
        w.i32(value.epoch)
    elif isinstance(value, AssignmentEpochValue):
        w.i32(value.assignment_epoch)
    elif isinstance(value, PartitionMetadataValue):
        w.array_len(len(value.topics))
        for t in value.topics:
            w.uuid(t.topic_id)
            w.string(t.name)
            w.i32(t.num_partitions)
            w.array_len(0)  # PartitionMetadata (racks): unused since Kafka 4.0
            w.tags()
    elif isinstance(value, TargetAssignmentValue):
        write_topic_partitions(w, value.partitions)
    else:
        return False
    return True


def read_common_value(cls: type, r: RecordReader) -> Value:
    """The body of a value of ``cls``, one of the layouts :func:`write_common_value` writes."""
    if cls is GroupEpochValue:
        return GroupEpochValue(r.i32())
    if cls is AssignmentEpochValue:
        return AssignmentEpochValue(r.i32())
    if cls is TargetAssignmentValue:
        return TargetAssignmentValue(read_topic_partitions(r))
    if cls is PartitionMetadataValue:
        topics = []
        for _ in range(r.array_len()):
            topic_id, name, n = r.uuid(), r.str_(), r.i32()
            for _ in range(r.array_len()):  # PartitionMetadata: partition, racks
                r.i32()
                read_strings(r)
                r.skip_tags()
            r.skip_tags()
            topics.append(TopicMetadata(topic_id, name, n))
        return PartitionMetadataValue(tuple(topics))
    raise TypeError(f"no common layout for {cls.__name__}")


def _encode_value(value: Value) -> bytes:
    w = _Writer(True)
    w.i16(0)
    if write_common_value(w, value):
        pass
    elif isinstance(value, MemberMetadataValue):
        w.string(value.instance_id, nullable=True)
        w.string(value.rack_id, nullable=True)
        w.string(value.client_id)
        w.string(value.client_host)
        w.array_len(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.string(name)
        w.string(value.subscribed_topic_regex, nullable=True)
        w.i32(value.rebalance_timeout_ms)
        w.string(value.server_assignor, nullable=True)
        if value.classic is not None:
            _write_classic_tag(w, value.classic)
            return bytes(w.buf)
    elif isinstance(value, CurrentAssignmentValue):
        w.i32(value.member_epoch)
        w.i32(value.previous_member_epoch)
        w.i8(value.state)
        write_topic_partitions(w, value.assigned)
        write_topic_partitions(w, value.pending_revocation)
    else:
        raise TypeError(f"not a consumer-group record value: {value!r}")
    w.tags()
    return bytes(w.buf)


def encode_record(record: CGRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    return _encode_key(key), None if value is None else _encode_value(value)


# --- decoding -----------------------------------------------------------------------------


def decode_any_key(data: bytes | bytearray | memoryview | None) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey:
    """Any key this coordinator knows: offset commits and group metadata (coordinator/records.py)
    and the consumer-group types 3-8; UnknownRecordVersion for others."""
    if data is None or len(data) < 2:
        return decode_key(data)  # raises the right RecordDecodeError
    r = RecordReader(bytes(data))
    version = r.i16()
    if not GROUP_METADATA <= version <= CURRENT_MEMBER_ASSIGNMENT:
        return decode_key(data)
    group = r.str_()
    member_id = r.str_() if version in _WITH_MEMBER else None
    r.end()
    return ConsumerGroupKey(version, group, member_id)


def read_topic_partitions(r: RecordReader) -> Assignment:
    """A []TopicPartitions array as written by :func:`write_topic_partitions`."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.array_len()):
        topic_id = r.uuid()
        partitions = frozenset(r.i32() for _ in range(r.array_len()))
        r.skip_tags()
        if partitions:
            out[topic_id] = out.get(topic_id, frozenset()) | partitions
    return out


def read_strings(r: RecordReader) -> list[str]:
    """A []string array."""
    return [r.str_() for _ in range(r.array_len())]


_COMMON: dict[int, type] = {
    GROUP_METADATA: GroupEpochValue,
    TARGET_ASSIGNMENT_METADATA: AssignmentEpochValue,
    PARTITION_METADATA: PartitionMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: TargetAssignmentValue,
}


def _decode_value(key_type: int, data: bytes) -> Value:
    r = RecordReader(data)
    version = r.i16()
    if version != 0:
        raise UnknownRecordVersion(f"consumer-group value (type {key_type})", version)
    r.flexible = True
    value: Value
    common = _COMMON.get(key_type)
    if common is not None:
        value = read_common_value(common, r)
    elif key_type == MEMBER_METADATA:
        value = MemberMetadataValue(
            instance_id=r.string(nullable=True),
            rack_id=r.string(nullable=True),
            client_id=r.str_(),
            client_host=r.str_(),
            subscribed_topic_names=tuple(read_strings(r)),
            subscribed_topic_regex=r.string(nullable=True),
            rebalance_timeout_ms=r.i32(),
            server_assignor=r.string(nullable=True),
        )
        value = replace(value, classic=_read_member_tags(r))
        r.end()
        return value
    elif key_type == CURRENT_MEMBER_ASSIGNMENT:
        value = CurrentAssignmentValue(
            member_epoch=r.i32(),
            previous_member_epoch=r.i32(),
            state=r.i8(),
            assigned=read_topic_partitions(r),
            pending_revocation=read_topic_partitions(r),
        )
    else:
        raise UnknownRecordVersion("consumer-group key", key_type)
    r.skip_tags()
    r.end()
    return value


def decode_record(key: ConsumerGroupKey, data: bytes | bytearray | memoryview | None) -> CGRecord:
    """The value of a consumer-group record (None: tombstone); RecordDecodeError if malformed."""
    if data is None:
        return key, None
    return key, _decode_value(key.type, bytes(data))

