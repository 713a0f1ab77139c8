"""Unsigned varints (Kafka's compact lengths and tagged-field headers) and tagged-field
skipping: one implementation for every codec in Krait."""

from __future__ import annotations

from .errors import DecodeError

__all__ = ["encode_uvarint", "read_uvarint", "skip_tagged_fields"]


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
