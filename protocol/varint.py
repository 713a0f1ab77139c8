"""Varints, one implementation for every codec in Krait: unsigned varints (Kafka's compact
lengths and tagged-field headers), tagged-field skipping, and the zig-zag signed varints
of record fields (Kafka's ByteUtils.readVarlong/writeVarlong). The Spark decoder keeps its
own numba-compiled copy (spark_jobs/decode.py): numba cannot call these."""

from __future__ import annotations

from .errors import CorruptRecordError, DecodeError

__all__ = ["encode_uvarint", "read_uvarint", "skip_tagged_fields", "read_varlong", "write_varlong"]


def encode_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """(value, next position). Kafka's unsigned varints here fit in 5 bytes (int32)."""
    end = len(buf) if end is None else end
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint too long")


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int, end: int | None = None) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes each); returns the position after it."""
    end = len(buf) if end is None else end
    count, pos = read_uvarint(buf, pos, end)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        pos += size
        if pos > end:
            raise DecodeError("tagged field runs past the end of the frame")
    return pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint of a record field: (value, next position). Record bytes are
    client data, so a bad one is a corrupt record, not a bad frame."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def write_varlong(out: bytearray, value: int) -> None:
    """Append ``value`` as a zig-zag signed varint."""
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
