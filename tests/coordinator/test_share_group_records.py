"""The share-group records of ``__consumer_offsets`` in Kafka 4.2's byte layouts (value
version 0 of every type), and logs written in the layouts Krait used before them."""

from __future__ import annotations

import struct
import uuid

import pytest

from coordinator.consumer.group import TopicMetadata
from coordinator.consumer.records import AssignmentEpochValue, PartitionMetadataValue, TargetAssignmentValue
from coordinator.records import RecordDecodeError
from coordinator.share.group import ShareGroupMember
from coordinator.share.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    PARTITION_METADATA,
    STATE_PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ShareCurrentAssignmentValue,
    ShareGroupKey,
    ShareGroupMetadataValue,
    StatePartitionMetadataValue,
    assignment_epoch_record,
    current_assignment_record,
    decode_any_key,
    decode_record,
    encode_record,
    group_epoch_record,
    group_tombstones,
    state_partition_metadata_record,
    subscription_metadata_record,
    target_assignment_record,
)

from .harness import E
from .test_share_groups import SG

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
V0 = b"\x00\x00"  # value version 0
NO_TAGS = b"\x00"


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def round_trip(record: tuple[ShareGroupKey, object]) -> tuple[bytes, bytes | None]:
    k, v = encode_record(record)  # type: ignore[arg-type]
    key = decode_any_key(k)
    assert key == record[0]
    assert decode_record(key, v) == record  # type: ignore[arg-type]
    return k, v


# --- the bytes Kafka 4.2 writes ---------------------------------------------------------------


def test_share_group_metadata_has_the_metadata_hash() -> None:
    k, v = round_trip(group_epoch_record("g", 5))
    assert k == b"\x00\x0b" + b"\x00\x01g"  # type 11, GroupId; keys are never flexible
    assert v == V0 + i32(5) + i64(0) + NO_TAGS  # Epoch, MetadataHash (Krait writes 0)
    _, v = round_trip(group_epoch_record("g", 5, metadata_hash=-2))
    assert v == V0 + i32(5) + b"\xff" * 7 + b"\xfe" + NO_TAGS


def test_state_partition_metadata_has_initializing_topics_first() -> None:
    record = state_partition_metadata_record(
        "g", initialized={T1: ("a", frozenset({0}))}, deleting={T2: "b"}, initializing={T1: ("a", frozenset({2, 1}))}
    )
    k, v = round_trip(record)
    assert k == b"\x00\x0f" + b"\x00\x01g"
    assert v == (
        V0
        # InitializingTopics: one TopicPartitionsInfo (TopicId, TopicName, Partitions, tags)
        + b"\x02" + T1.bytes + b"\x02a" + b"\x03" + i32(1) + i32(2) + NO_TAGS
        # InitializedTopics
        + b"\x02" + T1.bytes + b"\x02a" + b"\x02" + i32(0) + NO_TAGS
        # DeletingTopics: one TopicInfo (TopicId, TopicName, tags)
        + b"\x02" + T2.bytes + b"\x02b" + NO_TAGS
        + NO_TAGS
    )
    _, v = round_trip(state_partition_metadata_record("g", {}, {}))
    assert v == V0 + b"\x01\x01\x01" + NO_TAGS  # three empty arrays


def test_member_records_keep_their_layouts() -> None:
    member = ShareGroupMember("m", member_epoch=3, previous_member_epoch=2, assigned={T1: frozenset({1, 0})})
    k, v = round_trip(current_assignment_record("g", member))
    assert k == b"\x00\x0e" + b"\x00\x01g" + b"\x00\x01m"  # type 14, GroupId, MemberId
    # MemberEpoch, PreviousMemberEpoch, State (0: stable), AssignedPartitions
    assert v == V0 + i32(3) + i32(2) + b"\x00" + b"\x02" + T1.bytes + b"\x03" + i32(0) + i32(1) + NO_TAGS + NO_TAGS
    assert decode_record(decode_any_key(k), v)[1] == ShareCurrentAssignmentValue(3, 2, 0, {T1: frozenset({0, 1})})

    k, v = round_trip(target_assignment_record("g", "m", {T1: frozenset({2})}))
    assert k == b"\x00\x0d" + b"\x00\x01g" + b"\x00\x01m"  # type 13
    assert v == V0 + b"\x02" + T1.bytes + b"\x02" + i32(2) + NO_TAGS + NO_TAGS
    assert decode_record(decode_any_key(k), v)[1] == TargetAssignmentValue({T1: frozenset({2})})

    k, v = round_trip(assignment_epoch_record("g", 4))
    assert k == b"\x00\x0c" + b"\x00\x01g"  # type 12
    assert v == V0 + i32(4) + NO_TAGS
    assert decode_record(decode_any_key(k), v)[1] == AssignmentEpochValue(4)


def test_tombstones_and_the_partition_metadata_type_are_still_known() -> None:
    # Kafka 4.2 writes no ShareGroupPartitionMetadata (type 9) but reads it; so does Krait
    k, v = round_trip(subscription_metadata_record("g", {"t": TopicMetadata(T1, "t", 3)}))
    assert k == b"\x00\x09" + b"\x00\x01g"
    # Topics: TopicId, TopicName, NumPartitions, PartitionMetadata (empty), tags
    assert v == V0 + b"\x02" + T1.bytes + b"\x02t" + i32(3) + b"\x01" + NO_TAGS + NO_TAGS
    assert decode_record(decode_any_key(k), v)[1] == PartitionMetadataValue((TopicMetadata(T1, "t", 3),))
    for key_type in (GROUP_METADATA, STATE_PARTITION_METADATA, PARTITION_METADATA):
        assert decode_record(ShareGroupKey(key_type, "g"), None) == (ShareGroupKey(key_type, "g"), None)


def test_builders_write_no_partition_metadata_value() -> None:
    sg = SG()
    sg.join("m1")
    sg.hb("m1", -1)
    keys = [decode_any_key(k) for k, _ in sg.log.all_records()]
    typed = [(k.type, v) for k, (_, v) in zip(keys, sg.log.all_records(), strict=True)]
    assert all(v is None for t, v in typed if t == PARTITION_METADATA)
    epochs = [decode_record(k, v)[1] for k, (_, v) in zip(keys, sg.log.all_records(), strict=True)
              if k.type == GROUP_METADATA and v is not None]
    assert epochs and all(isinstance(e, ShareGroupMetadataValue) and e.metadata_hash == 0 for e in epochs)


def test_group_tombstones_still_delete_an_old_partition_metadata_record() -> None:
    sg = SG()
    sg.join("m1")
    types = [k.type for k, v in group_tombstones(sg.group()) if v is None]
    assert types[-3:] == [PARTITION_METADATA, STATE_PARTITION_METADATA, GROUP_METADATA]
    assert {CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, TARGET_ASSIGNMENT_METADATA} <= set(types)


# --- the layouts Krait wrote before (also value version 0) -----------------------------------


OLD_GROUP_METADATA = V0 + i32(7) + NO_TAGS
OLD_STATE_PARTITIONS = (
    V0
    + b"\x02" + T1.bytes + b"\x02a" + b"\x03" + i32(0) + i32(1) + NO_TAGS  # InitializedTopics
    + b"\x02" + T2.bytes + b"\x02b" + NO_TAGS  # DeletingTopics
    + NO_TAGS
)


def test_old_values_still_decode() -> None:
    assert decode_record(ShareGroupKey(GROUP_METADATA, "g"), OLD_GROUP_METADATA)[1] == ShareGroupMetadataValue(7, 0)
    value = decode_record(ShareGroupKey(STATE_PARTITION_METADATA, "g"), OLD_STATE_PARTITIONS)[1]
    assert value == StatePartitionMetadataValue(initialized=((T1, "a", (0, 1)),), deleting=((T2, "b"),))
    for old in (V0 + b"\x01\x01" + NO_TAGS, V0 + b"\x01\x02" + T2.bytes + b"\x02b" + NO_TAGS + NO_TAGS,
                V0 + b"\x02" + T1.bytes + b"\x02a\x01" + NO_TAGS + b"\x01" + NO_TAGS):
        value = decode_record(ShareGroupKey(STATE_PARTITION_METADATA, "g"), old)[1]
        assert isinstance(value, StatePartitionMetadataValue) and value.initializing == ()


@pytest.mark.parametrize("key_type, data", [
    (GROUP_METADATA, V0 + i32(7)),  # no tag section
    (GROUP_METADATA, V0 + i32(7) + i64(0) + NO_TAGS + b"\x00"),  # a trailing byte
    (STATE_PARTITION_METADATA, V0 + b"\x01\x01" + NO_TAGS + b"\x00"),
    (STATE_PARTITION_METADATA, V0 + b"\x00\x01\x01" + NO_TAGS),  # a null array
    (GROUP_METADATA, b"\x00\x01" + i32(7) + i64(0) + NO_TAGS),  # value version 1: unknown
])
def test_malformed_values_are_refused(key_type: int, data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_record(ShareGroupKey(key_type, "g"), data)


def _as_old_code_wrote(records: list[tuple[bytes, bytes | None]], metadata: bytes) -> list[tuple[bytes, bytes | None]]:
    """The log as Krait wrote it before the 4.2 layouts: ShareGroupMetadataValue without
    MetadataHash, ShareGroupStatePartitionMetadataValue without InitializingTopics, and a
    ShareGroupPartitionMetadata record before each group epoch record."""
    out: list[tuple[bytes, bytes | None]] = []
    for k, v in records:
        key = decode_any_key(k)
        if not isinstance(key, ShareGroupKey) or v is None:
            out.append((k, v))
        elif key.type == GROUP_METADATA:
            value = decode_record(key, v)[1]
            assert isinstance(value, ShareGroupMetadataValue)
            out.append((encode_record((ShareGroupKey(PARTITION_METADATA, key.group), None))[0], metadata))
            out.append((k, V0 + i32(value.epoch) + NO_TAGS))
        elif key.type == STATE_PARTITION_METADATA:
            assert v[2:3] == b"\x01"  # nothing initializing
            out.append((k, v[:2] + v[3:]))
        else:
            out.append((k, v))
    return out


def test_a_log_written_in_the_old_layouts_loads() -> None:
    sg = SG()
    sg.join("m1")
    sg.join("m2")
    sg.hb("m1", 1)
    before = sg.group()
    state = {mid: (m.member_epoch, m.assigned) for mid, m in before.members.items()}
    epochs = (before.group_epoch, before.assignment_epoch)
    t = sg.tid("t")
    # the old type 9 value: Topics [t, "t", 4 partitions, no PartitionMetadata]
    metadata = V0 + b"\x02" + t.bytes + b"\x02t" + i32(4) + b"\x01" + NO_TAGS + NO_TAGS
    for p, records in sg.log.partitions.items():
        sg.log.partitions[p] = _as_old_code_wrote(records, metadata)
    assert any(v == V0 + i32(before.group_epoch) + NO_TAGS for _, v in sg.log.all_records())

    sg.restart()
    after = sg.group()
    assert {mid: (m.member_epoch, m.assigned) for mid, m in after.members.items()} == state
    assert (after.group_epoch, after.assignment_epoch) == epochs
    assert after.initialized == before.initialized
    assert after.subscription_metadata == {"t": TopicMetadata(t, "t", 4)}
    # the type 9 record told the subscription metadata: the next heartbeat bumps nothing
    assert sg.hb("m1", after.members["m1"].member_epoch).error_code == E.none
    assert sg.group().group_epoch == epochs[0]
    # deleting the group deletes the old type 9 record too: nothing comes back on a load
    sg.hb("m1", -1)
    sg.hb("m2", -1)
    assert sg.delete("g") == E.none
    sg.restart()
    assert sg.c.group("g") is None


def test_a_load_of_the_new_layouts_bumps_the_epoch_once() -> None:
    """Without ShareGroupPartitionMetadata the subscribed topics' metadata is memory only:
    the first heartbeat after a load bumps the group epoch, as Kafka does on reading a
    MetadataHash that is not its own."""
    sg = SG()
    sg.join("m1")
    sg.hb("m1", 1)
    epoch = sg.group().group_epoch
    sg.restart()
    resp = sg.hb("m1", sg.group().members["m1"].member_epoch)
    assert resp.error_code == E.none and resp.member_epoch == epoch + 1
    assert sg.hb("m1", epoch + 1).member_epoch == epoch + 1
