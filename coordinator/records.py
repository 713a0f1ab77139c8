"""Codecs for the records of ``__consumer_offsets``, written by hand from Kafka's JSON specs
(``group-coordinator/OffsetCommitKey.json``, ``OffsetCommitValue.json``,
``GroupMetadataKey.json``, ``GroupMetadataValue.json``).

Every key and value starts with a big-endian int16 version. The key version doubles as the
record type: 0 and 1 are offset commits (same layout), 2 is group metadata; 3-8 are KIP-848
consumer-group records, decoded by coordinator/consumer/records.py with the reader and
writer below (:func:`decode_key` here reports them as unknown versions).

Which versions Kafka writes (MetadataVersion.offsetCommitValueVersion /
groupMetadataValueVersion, IBP >= 2.3): OffsetCommitKey v1, OffsetCommitValue v3 (v1 when
the commit carries an explicit expire timestamp, i.e. OffsetCommit v2-v4 with
retention_time != -1), GroupMetadataKey v2, GroupMetadataValue v3. Versions 4 (flexible:
compact strings/arrays/bytes, tagged fields) are decoded too because newer brokers may write
them.

Malformed bytes raise :class:`RecordDecodeError` (and nothing else); a version this module
does not know raises its subclass :class:`UnknownRecordVersion`, so a loader can skip such
records quietly while still treating garbage as garbage.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from protocol.errors import DecodeError
from protocol.varint import encode_uvarint, read_uvarint, skip_tagged_fields

log = logging.getLogger(__name__)

__all__ = [
    "RecordDecodeError",
    "UnknownRecordVersion",
    "OffsetCommitKey",
    "GroupMetadataKey",
    "OffsetCommitValue",
    "MemberMetadata",
    "GroupMetadataValue",
    "encode_offset_commit_key",
    "encode_group_metadata_key",
    "encode_offset_commit_value",
    "encode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_group_metadata_value",
    "OFFSET_COMMIT_KEY_VERSION",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
#: Kafka writes OffsetCommitValue v3 unless an expire timestamp is set (then v1).
OFFSET_COMMIT_VALUE_VERSION = 3


class RecordDecodeError(ValueError):
    """Bytes that are not a valid __consumer_offsets key or value."""


class UnknownRecordVersion(RecordDecodeError):
    """A well-framed record whose version this codec does not know (skip it)."""

    def __init__(self, what: str, version: int) -> None:
        super().__init__(f"unknown {what} version {version}")
        self.what = what
        self.version = version


# --- data ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1  # v3+
    expire_timestamp: int = -1  # v1 only


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None  # v3+
    rebalance_timeout: int = -1  # v1+


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int = -1  # v2+


# --- writer ---------------------------------------------------------------------------

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, flexible: bool) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def i8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def string(self, v: str | None, nullable: bool = False) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null for a non-nullable string")
            # Classic null string is length -1; compact null is length+1 = 0.
            self.buf += encode_uvarint(0) if self.flexible else _I16.pack(-1)
            return
        data = v.encode("utf-8")
        if self.flexible:
            self.buf += encode_uvarint(len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise ValueError("string longer than 32767 bytes")
            self.buf += _I16.pack(len(data))
        self.buf += data

    def bytes_(self, v: bytes) -> None:
        if self.flexible:
            self.buf += encode_uvarint(len(v) + 1)
        else:
            self.buf += _I32.pack(len(v))
        self.buf += v

    def array_len(self, n: int) -> None:
        self.buf += encode_uvarint(n + 1) if self.flexible else _I32.pack(n)

    def tags(self) -> None:
        # We never write tagged fields; an empty tagged-field section is one zero byte.
        if self.flexible:
            self.buf.append(0)


def encode_offset_commit_key(group: str, topic: str, partition: int, version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"OffsetCommitKey has no version {version}")
    w = _Writer(False)
    w.i16(version)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.buf)


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer(False)
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.buf)


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Encode ``value``; by default in the version Kafka would pick (1 if it expires, else 3)."""
    if version is None:
        version = 1 if value.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_VERSION
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = _Writer(version >= 4)
    w.i16(version)
    w.i64(value.offset)
    if version >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if version == 1:
        w.i64(value.expire_timestamp)
    w.tags()
    return bytes(w.buf)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(version >= 4)
    w.i16(version)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol, nullable=True)
    w.string(value.leader, nullable=True)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.buf)


# --- reader ---------------------------------------------------------------------------


class RecordReader:
    """Bounds-checked reader of one internal-topic record (``__consumer_offsets`` and
    ``__transaction_state`` share it): anything malformed is a RecordDecodeError."""

    __slots__ = ("data", "pos", "flexible")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.flexible = False

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordDecodeError(f"truncated record: need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def unpack(self, s: struct.Struct) -> int:
        return s.unpack(self.take(s.size))[0]

    def i8(self) -> int:
        return _I8.unpack(self.take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self.take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self.take(8))[0]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except DecodeError as e:
            raise RecordDecodeError(str(e)) from None
        return value

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise RecordDecodeError("null or negative length for a non-nullable string")
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise RecordDecodeError(f"string is not UTF-8: {e}") from None

    def str_(self) -> str:
        s = self.string()
        assert s is not None  # string() raises for null when not nullable
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordDecodeError("null or negative length for non-nullable bytes")
        return bytes(self.take(n))

    def array_len(self, nullable: bool = False) -> int | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise RecordDecodeError("null or negative array length")
        # Each element is at least one byte: a cheap bound that stops absurd counts early.
        if n > len(self.data) - self.pos:
            raise RecordDecodeError(f"array length {n} exceeds the remaining bytes")
        return n

    def tags(self) -> dict[int, memoryview]:
        """The tagged fields (flexible versions), raw, by tag."""
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        try:
            self.pos = skip_tagged_fields(self.data, self.pos)
        except DecodeError as e:
            raise RecordDecodeError(str(e)) from None

    def end(self) -> None:
        # Kafka's readers ignore trailing bytes of a known version, but for a log that clients
        # must not be able to poison we prefer to refuse anything that is not exactly a record.
        if self.pos != len(self.data):
            raise RecordDecodeError(f"{len(self.data) - self.pos} trailing bytes")


def _reader(data: bytes | bytearray | memoryview | None, what: str) -> tuple[RecordReader, int]:
    if data is None:
        raise RecordDecodeError(f"{what} is null")
    r = RecordReader(bytes(data))
    return r, r.i16()


def decode_key(data: bytes | bytearray | memoryview | None) -> OffsetCommitKey | GroupMetadataKey:
    """Decode a record key; raises UnknownRecordVersion for key types other than 0, 1, 2."""
    r, version = _reader(data, "key")
    if version in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.str_(), r.str_(), r.i32())
    elif version == 2:
        key = GroupMetadataKey(r.str_())
    else:
        raise UnknownRecordVersion("key", version)
    r.end()
    return key


def decode_offset_commit_value(data: bytes | bytearray | memoryview | None) -> OffsetCommitValue:
    r, version = _reader(data, "OffsetCommitValue")
    if not 0 <= version <= 4:
        raise UnknownRecordVersion("OffsetCommitValue", version)
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str_()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    r.end()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def decode_group_metadata_value(data: bytes | bytearray | memoryview | None) -> GroupMetadataValue:
    r, version = _reader(data, "GroupMetadataValue")
    if not 0 <= version <= 4:
        raise UnknownRecordVersion("GroupMetadataValue", version)
    r.flexible = version >= 4
    protocol_type = r.str_()
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.str_()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.str_()
        client_host = r.str_()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberMetadata(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
                group_instance_id=instance_id,
                rebalance_timeout=rebalance_timeout,
            )
        )
    r.skip_tags()
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members), state_ts)


def replay_each(topic: str, partition: int, items: Iterable[Any], apply: Callable[[Any], None], *,
                unknown_level: int = logging.DEBUG) -> int:
    """A coordinator's load loop (the group and the transaction coordinators share it):
    ``apply`` each item of an internal topic's partition in log order. A record that does
    not decode is logged and skipped, never fatal; the broker's iterator failing (a corrupt
    batch) ends the load with what was read so far, as Kafka keeps what it loaded. Items
    carry their offset first. A record of a version this broker does not know is logged at
    ``unknown_level``. Returns how many records were skipped."""
    skipped = 0
    it = iter(items)
    while True:
        try:
            item = next(it)
        except StopIteration:
            break
        except Exception:
            log.exception("%s-%d: reading records failed; loaded what was readable", topic, partition)
            break
        try:
            apply(item)
        except UnknownRecordVersion as e:
            skipped += 1
            log.log(unknown_level, "%s-%d offset %s: skipping record: %s", topic, partition, item[0], e)
        except (RecordDecodeError, ValueError) as e:
            skipped += 1
            log.warning("%s-%d offset %s: skipping malformed record: %s", topic, partition, item[0], e)
        except Exception:
            skipped += 1
            log.exception("%s-%d offset %s: skipping record", topic, partition, item[0])
    return skipped
