"""Codecs for the records of ``__share_group_state``, written by hand from Kafka 4.2's JSON
specs (``share-coordinator/ShareSnapshotKey.json``, ``ShareSnapshotValue.json``,
``ShareUpdateKey.json``, ``ShareUpdateValue.json``); kio does not ship these internal schemas.

Keys start with a big-endian int16 record type (Kafka's CoordinatorRecordType): 0 is a
ShareSnapshot, 1 a ShareUpdate. Both keys are version 0 and not flexible: GroupId string
(int16 length), TopicId uuid (16 bytes), Partition int32.

Values start with a big-endian int16 version (0). Both are flexible: compact arrays
(uvarint length + 1) and a tagged-field section at the end of every struct.

* ShareSnapshotValue v0: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
  StartOffset int64, CreateTimestamp int64, WriteTimestamp int64, StateBatches
  []{FirstOffset int64, LastOffset int64, DeliveryState int8, DeliveryCount int16}.
  The full state of one share-partition.
* ShareUpdateValue v0: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1: not
  updated), StateBatches (same struct). A delta to apply on the last snapshot.

Both carry DeliveryCompleteCount int32 as tagged field 0 of the top-level struct (added in
Kafka 4.2 by KIP-1226, default -1). Kafka's generated writer emits a tagged field only when it
differs from its default, so the field is written exactly when it is not -1; a log written
before 4.2 simply has none, and decodes to -1.

A tombstone (a ShareSnapshot key with a null value) deletes the share-partition's state.

Malformed bytes raise :class:`~coordinator.records.RecordDecodeError` (the type the other
internal-topic codecs raise), unknown key types and value versions its subclass
:class:`~coordinator.records.UnknownRecordVersion`, so a loader skips records of a newer
broker quietly and still reports garbage.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass

# The writer and reader are the ones __consumer_offsets and __transaction_state use: one
# implementation of Kafka's primitive types for every internal topic.
from coordinator.records import RecordDecodeError, RecordReader, UnknownRecordVersion
from coordinator.records import _Writer as RecordWriter
from protocol.varint import encode_uvarint

__all__ = [
    "RecordDecodeError",
    "UnknownRecordVersion",
    "SharePartitionKey",
    "StateBatch",
    "ShareSnapshotValue",
    "ShareUpdateValue",
    "SHARE_SNAPSHOT_RECORD_TYPE",
    "SHARE_UPDATE_RECORD_TYPE",
    "VALUE_VERSION",
    "NO_DELIVERY_COMPLETE_COUNT",
    "encode_key",
    "decode_key",
    "encode_snapshot_value",
    "decode_snapshot_value",
    "encode_update_value",
    "decode_update_value",
    "kafka_uuid_string",
]

#: Key prefixes: Kafka's ShareCoordinator.SHARE_SNAPSHOT_RECORD_KEY_VERSION / ..._UPDATE_...
SHARE_SNAPSHOT_RECORD_TYPE = 0
SHARE_UPDATE_RECORD_TYPE = 1
#: The only value version of both records.
VALUE_VERSION = 0
#: DeliveryCompleteCount's default: unknown (lag cannot be computed yet).
NO_DELIVERY_COMPLETE_COUNT = -1

_TAG_DELIVERY_COMPLETE_COUNT = 0
_I32 = struct.Struct(">i")


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding (22
    characters). It is part of the coordinator key, so it decides placement."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """One share-partition: a share group's view of one topic partition (Kafka's
    SharePartitionKey). Both record keys carry exactly these fields."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``groupId:topicId:partition``, the
        string FindCoordinator (key type 2) sends and whose hash places the key."""
        return f"{self.group_id}:{kafka_uuid_string(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one delivery state (Kafka's PersisterStateBatch). States: 0
    Available, 2 Acknowledged, 4 Archived (Acquired, 1, is never persisted)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT  # tagged 0 (4.2+)


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not updated
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT  # tagged 0 (4.2+)


# --- writing --------------------------------------------------------------------------


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    """A ShareSnapshotKey (record type 0) or ShareUpdateKey (1); both have this layout."""
    if record_type not in (SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE):
        raise ValueError(f"__share_group_state has no record type {record_type}")
    w = RecordWriter(False)
    w.i16(record_type)
    w.string(key.group_id)
    w.uuid(key.topic_id)
    w.i32(key.partition)
    return bytes(w.buf)


def _write_batches(w: RecordWriter, batches: tuple[StateBatch, ...]) -> None:
    w.array_len(len(batches))
    for b in batches:
        w.i64(b.first_offset)
        w.i64(b.last_offset)
        w.i8(b.delivery_state)
        w.i16(b.delivery_count)
        w.tags()


def _write_top_level_tags(w: RecordWriter, delivery_complete_count: int) -> None:
    # The shared writer only writes empty sections; this struct has one tagged field,
    # present only when it is not its default (what Kafka's generated code does).
    if delivery_complete_count == NO_DELIVERY_COMPLETE_COUNT:
        w.tags()
        return
    w.buf += encode_uvarint(1)  # one tagged field
    w.buf += encode_uvarint(_TAG_DELIVERY_COMPLETE_COUNT)
    w.buf += encode_uvarint(_I32.size)
    w.i32(delivery_complete_count)


def encode_snapshot_value(value: ShareSnapshotValue) -> bytes:
    w = RecordWriter(True)
    w.i16(VALUE_VERSION)
    w.i32(value.snapshot_epoch)
    w.i32(value.state_epoch)
    w.i32(value.leader_epoch)
    w.i64(value.start_offset)
    w.i64(value.create_timestamp)
    w.i64(value.write_timestamp)
    _write_batches(w, value.state_batches)
    _write_top_level_tags(w, value.delivery_complete_count)
    return bytes(w.buf)


def encode_update_value(value: ShareUpdateValue) -> bytes:
    w = RecordWriter(True)
    w.i16(VALUE_VERSION)
    w.i32(value.snapshot_epoch)
    w.i32(value.leader_epoch)
    w.i64(value.start_offset)
    _write_batches(w, value.state_batches)
    _write_top_level_tags(w, value.delivery_complete_count)
    return bytes(w.buf)


# --- reading --------------------------------------------------------------------------


def decode_key(data: bytes | bytearray | memoryview | None) -> tuple[int, SharePartitionKey]:
    """(record type, key). Raises UnknownRecordVersion for record types other than 0 and 1."""
    if data is None:
        raise RecordDecodeError("key is null")
    r = RecordReader(bytes(data))
    record_type = r.i16()
    if record_type not in (SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE):
        raise UnknownRecordVersion("__share_group_state key", record_type)
    key = SharePartitionKey(r.str_(), r.uuid(), r.i32())
    r.end()
    return record_type, key


def _value_reader(data: bytes | bytearray | memoryview | None, what: str) -> RecordReader:
    if data is None:
        raise RecordDecodeError(f"{what} is null")
    r = RecordReader(bytes(data))
    version = r.i16()
    if version != VALUE_VERSION:
        raise UnknownRecordVersion(what, version)
    r.flexible = True
    return r


def _read_batches(r: RecordReader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.array_len() or 0):
        b = StateBatch(r.i64(), r.i64(), r.i8(), r.i16())
        r.skip_tags()
        out.append(b)
    return tuple(out)


def _read_delivery_complete_count(r: RecordReader) -> int:
    raw = r.tags().get(_TAG_DELIVERY_COMPLETE_COUNT)
    if raw is None:
        return NO_DELIVERY_COMPLETE_COUNT
    if len(raw) != _I32.size:
        raise RecordDecodeError(f"DeliveryCompleteCount tag holds {len(raw)} bytes, not 4")
    return _I32.unpack(raw)[0]


def decode_snapshot_value(data: bytes | bytearray | memoryview | None) -> ShareSnapshotValue:
    r = _value_reader(data, "ShareSnapshotValue")
    snapshot_epoch = r.i32()
    state_epoch = r.i32()
    leader_epoch = r.i32()
    start_offset = r.i64()
    create_ts = r.i64()
    write_ts = r.i64()
    batches = _read_batches(r)
    dcc = _read_delivery_complete_count(r)
    r.end()
    return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, create_ts, write_ts,
                              batches, dcc)


def decode_update_value(data: bytes | bytearray | memoryview | None) -> ShareUpdateValue:
    r = _value_reader(data, "ShareUpdateValue")
    snapshot_epoch = r.i32()
    leader_epoch = r.i32()
    start_offset = r.i64()
    batches = _read_batches(r)
    dcc = _read_delivery_complete_count(r)
    r.end()
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, dcc)
