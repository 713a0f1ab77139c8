"""__share_group_state codecs: byte-exact layouts (hand-computed from Kafka 4.2's JSON specs),
round trips, the tagged DeliveryCompleteCount, and what malformed bytes raise."""

from __future__ import annotations

import uuid

import pytest

from share_coordinator.records import (
    SHARE_SNAPSHOT_RECORD_TYPE,
    SHARE_UPDATE_RECORD_TYPE,
    RecordDecodeError,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    UnknownRecordVersion,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
    encode_key,
    encode_snapshot_value,
    encode_update_value,
    kafka_uuid_string,
)

TOPIC = uuid.UUID(bytes=bytes(range(16)))
KEY = SharePartitionKey("g", TOPIC, 3)


def test_snapshot_key_bytes():
    data = encode_key(SHARE_SNAPSHOT_RECORD_TYPE, KEY)
    assert data == bytes.fromhex(
        "0000"  # record type 0: ShareSnapshotKey
        "0001" "67"  # GroupId: int16 length, "g"
        "000102030405060708090a0b0c0d0e0f"  # TopicId
        "00000003"  # Partition
    )
    assert decode_key(data) == (SHARE_SNAPSHOT_RECORD_TYPE, KEY)


def test_update_key_differs_only_by_type():
    data = encode_key(SHARE_UPDATE_RECORD_TYPE, KEY)
    assert data[:2] == b"\x00\x01"
    assert data[2:] == encode_key(SHARE_SNAPSHOT_RECORD_TYPE, KEY)[2:]
    assert decode_key(data) == (SHARE_UPDATE_RECORD_TYPE, KEY)


SNAPSHOT = ShareSnapshotValue(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=10,
                              create_timestamp=1000, write_timestamp=2000,
                              state_batches=(StateBatch(10, 19, 2, 1),), delivery_complete_count=5)
SNAPSHOT_BYTES = bytes.fromhex(
    "0000"  # value version 0
    "00000001"  # SnapshotEpoch
    "00000002"  # StateEpoch
    "00000003"  # LeaderEpoch
    "000000000000000a"  # StartOffset 10
    "00000000000003e8"  # CreateTimestamp 1000
    "00000000000007d0"  # WriteTimestamp 2000
    "02"  # StateBatches: compact array of 1
    "000000000000000a" "0000000000000013" "02" "0001" "00"  # 10..19, Acked, count 1, no tags
    "01" "00" "04" "00000005"  # tagged fields: 1 field, tag 0, 4 bytes, DeliveryCompleteCount 5
)

UPDATE = ShareUpdateValue(snapshot_epoch=1, leader_epoch=3, start_offset=-1,
                          state_batches=(StateBatch(20, 20, 0, 2),))
UPDATE_BYTES = bytes.fromhex(
    "0000"  # value version 0
    "00000001"  # SnapshotEpoch
    "00000003"  # LeaderEpoch
    "ffffffffffffffff"  # StartOffset -1: not updated
    "02"  # one batch
    "0000000000000014" "0000000000000014" "00" "0002" "00"  # 20..20, Available, count 2
    "00"  # no tagged fields: DeliveryCompleteCount is its default -1
)


def test_snapshot_value_bytes():
    assert encode_snapshot_value(SNAPSHOT) == SNAPSHOT_BYTES
    assert decode_snapshot_value(SNAPSHOT_BYTES) == SNAPSHOT


def test_update_value_bytes():
    assert encode_update_value(UPDATE) == UPDATE_BYTES
    assert decode_update_value(UPDATE_BYTES) == UPDATE


def test_delivery_complete_count_absent_and_present():
    absent = ShareSnapshotValue(0, 0, 0, 0, 0, 0, ())
    data = encode_snapshot_value(absent)
    assert data.endswith(b"\x01\x00")  # empty batch array, empty tag section
    assert decode_snapshot_value(data).delivery_complete_count == -1

    present = ShareUpdateValue(0, 0, 0, (), delivery_complete_count=0)  # 0 is not the default
    data = encode_update_value(present)
    assert data.endswith(bytes.fromhex("01" "01" "00" "04" "00000000"))
    assert decode_update_value(data) == present


def test_unknown_tags_are_skipped():
    # A newer broker's tag 1 next to ours: read ours, ignore the other.
    data = SNAPSHOT_BYTES[:-7] + bytes.fromhex("02" "00" "04" "00000005" "01" "02" "abcd")
    assert decode_snapshot_value(data) == SNAPSHOT


@pytest.mark.parametrize("value", [SNAPSHOT, ShareSnapshotValue(7, 1, -1, -1, 5, 6, (), -1),
                                   ShareSnapshotValue(0, 0, 0, 0, 0, 0,
                                                      tuple(StateBatch(i * 10, i * 10 + 5, 4, 3) for i in range(40)),
                                                      123)])
def test_snapshot_round_trip(value):
    assert decode_snapshot_value(encode_snapshot_value(value)) == value


def test_malformed_bytes_raise_one_type():
    with pytest.raises(RecordDecodeError):
        decode_snapshot_value(SNAPSHOT_BYTES[:-3])  # truncated
    with pytest.raises(RecordDecodeError):
        decode_update_value(UPDATE_BYTES + b"\x00")  # trailing
    with pytest.raises(RecordDecodeError):
        decode_key(None)
    with pytest.raises(RecordDecodeError):
        decode_snapshot_value(SNAPSHOT_BYTES[:-6] + bytes.fromhex("02000005"))  # tag of the wrong size
    with pytest.raises(UnknownRecordVersion):
        decode_snapshot_value(b"\x00\x01" + SNAPSHOT_BYTES[2:])
    with pytest.raises(UnknownRecordVersion):
        decode_key(b"\x00\x02" + encode_key(0, KEY)[2:])
    # The subclass is still a decode error: a loader that only knows the base type skips it.
    assert issubclass(UnknownRecordVersion, RecordDecodeError)


def test_kafka_uuid_string():
    # Kafka's Uuid.toString: URL-safe base64 without padding.
    assert kafka_uuid_string(TOPIC) == "AAECAwQFBgcICQoLDA0ODw"
    assert kafka_uuid_string(uuid.UUID(bytes=b"\xff" * 16)) == "_____________________w"
    assert KEY.coordinator_key == "g:AAECAwQFBgcICQoLDA0ODw:3"
