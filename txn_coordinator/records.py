"""Codecs for the records of ``__transaction_state``, written by hand from Kafka's JSON specs
(``transaction-coordinator/TransactionLogKey.json`` and ``TransactionLogValue.json``); kio
does not ship these internal schemas.

Every key and value starts with a big-endian int16 version (Kafka's
MessageUtil.toVersionPrefixedBytes).

* TransactionLogKey v0 (not flexible): ``TransactionalId`` string.
* TransactionLogValue v0 (not flexible) and v1 (flexible: compact strings and arrays,
  tagged fields): ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
  TransactionStatus int8, TransactionPartitions nullable array of {Topic string,
  PartitionIds []int32}, TransactionLastUpdateTimestampMs int64,
  TransactionStartTimestampMs int64; v1 adds the tagged fields PreviousProducerId (tag 0,
  default -1), NextProducerId (tag 1, default -1) and ClientTransactionVersion (tag 2,
  default 0).

Which version Kafka writes: TransactionLog.valueToBytes uses
``TransactionVersion.transactionLogValueVersion()``: v0 while the cluster's
``transaction.version`` feature is 0, v1 from 1. Krait serves transaction version 0 and so
writes v0 (readable by every Kafka since 0.11); v1 is decoded for logs written by newer
brokers. An Empty transaction carries a null partition array, as Kafka writes it. A
tombstone (value None) removes an expired transactional id.

Malformed bytes raise :class:`~coordinator.records.RecordDecodeError` (the same type the
``__consumer_offsets`` codec raises), unknown versions its subclass
:class:`~coordinator.records.UnknownRecordVersion`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from coordinator.records import RecordDecodeError, RecordReader, UnknownRecordVersion
from protocol.varint import encode_uvarint

__all__ = [
    "RecordDecodeError",
    "UnknownRecordVersion",
    "TopicPartition",
    "TransactionLogValue",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
    "KEY_VERSION",
    "VALUE_VERSION",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
]

KEY_VERSION = 0
#: The value version Krait writes (transaction.version 0, see the module docstring).
VALUE_VERSION = 0
NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# Tags of TransactionLogValue v1's tagged fields.
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One TransactionLogValue. ``partitions`` is None exactly when the record carries a null
    array (Kafka writes null for Empty transactions)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int  # TransactionState id
    partitions: frozenset[TopicPartition] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # v1 tagged field 0
    next_producer_id: int = NO_PRODUCER_ID  # v1 tagged field 1
    client_transaction_version: int = 0  # v1 tagged field 2


# --- writer ---------------------------------------------------------------------------


def _string(buf: bytearray, s: str, flexible: bool) -> None:
    data = s.encode("utf-8")
    if flexible:
        buf += encode_uvarint(len(data) + 1)
    else:
        if len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        buf += _I16.pack(len(data))
    buf += data


def _array_len(buf: bytearray, n: int | None, flexible: bool) -> None:
    # null arrays: int32 -1, or compact length 0 (length + 1)
    if flexible:
        buf += encode_uvarint(0 if n is None else n + 1)
    else:
        buf += _I32.pack(-1 if n is None else n)


def encode_key(transactional_id: str) -> bytes:
    buf = bytearray(_I16.pack(KEY_VERSION))
    _string(buf, transactional_id, False)
    return bytes(buf)


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue has no version {version}")
    flexible = version >= 1
    buf = bytearray(_I16.pack(version))
    buf += _I64.pack(value.producer_id)
    buf += _I16.pack(value.producer_epoch)
    buf += _I32.pack(value.transaction_timeout_ms)
    buf += _I8.pack(value.transaction_status)
    if value.partitions is None:
        _array_len(buf, None, flexible)
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in value.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        # Kafka groups by topic in hash order; sorting keeps our bytes reproducible.
        _array_len(buf, len(by_topic), flexible)
        for topic in sorted(by_topic):
            _string(buf, topic, flexible)
            ids = sorted(by_topic[topic])
            _array_len(buf, len(ids), flexible)
            for p in ids:
                buf += _I32.pack(p)
            if flexible:
                buf.append(0)  # the struct's empty tagged-field section
    buf += _I64.pack(value.last_update_timestamp_ms)
    buf += _I64.pack(value.start_timestamp_ms)
    if flexible:
        # Tagged fields are written in tag order, and only when they differ from the default.
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != NO_PRODUCER_ID:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
        buf += encode_uvarint(len(tags))
        for tag, data in tags:
            buf += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(buf)


# --- reader ---------------------------------------------------------------------------


def _open(data: bytes | bytearray | memoryview | None, what: str) -> RecordReader:
    if data is None:
        raise RecordDecodeError(f"{what} is null")
    return RecordReader(bytes(data))


def decode_key(data: bytes | bytearray | memoryview | None) -> str:
    """The transactional id of a key; UnknownRecordVersion for versions other than 0
    (Kafka's readTxnRecordKey returns UnknownKey and the loader skips the record)."""
    r = _open(data, "key")
    version = r.unpack(_I16)
    if version != KEY_VERSION:
        raise UnknownRecordVersion("TransactionLogKey", version)
    tid = r.string()
    r.end()
    return tid


def _tagged_int(tags: dict[int, memoryview], tag: int, s: struct.Struct, default: int) -> int:
    raw = tags.get(tag)
    if raw is None:
        return default
    if len(raw) != s.size:
        raise RecordDecodeError(f"tagged field {tag} has {len(raw)} bytes, expected {s.size}")
    return s.unpack(raw)[0]


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue:
    """Decode a non-null value (a tombstone is None and has nothing to decode)."""
    r = _open(data, "TransactionLogValue")
    version = r.unpack(_I16)
    if version not in (0, 1):
        raise UnknownRecordVersion("TransactionLogValue", version)
    r.flexible = version >= 1
    producer_id = r.unpack(_I64)
    producer_epoch = r.unpack(_I16)
    timeout = r.unpack(_I32)
    status = r.unpack(_I8)
    n_topics = r.array_len(nullable=True)
    partitions: frozenset[TopicPartition] | None = None
    if n_topics is not None:
        found: set[TopicPartition] = set()
        for _ in range(n_topics):
            topic = r.string()
            n = r.array_len()
            assert n is not None  # array_len raises for null unless nullable
            for _ in range(n):
                found.add(TopicPartition(topic, r.unpack(_I32)))
            r.tags()  # the struct's tagged fields: none are defined
        partitions = frozenset(found)
    last_update = r.unpack(_I64)
    start = r.unpack(_I64)
    tags = r.tags()
    r.end()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout,
        transaction_status=status,
        partitions=partitions,
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=_tagged_int(tags, _TAG_PREVIOUS_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        next_producer_id=_tagged_int(tags, _TAG_NEXT_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        client_transaction_version=_tagged_int(tags, _TAG_CLIENT_TRANSACTION_VERSION, _I16, 0),
    )
