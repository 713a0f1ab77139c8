"""Fast path for Produce (key 0, v3-11): decoding requests and encoding responses.

kio decodes a Produce request's records into new bytes objects: every produced byte is
copied once more before the broker sees it. This decoder returns each partition's records
as a view into the request frame. The server reads a large frame into a bytearray of its
own (broker/server.py), so the views are writable: the log patches offsets and the leader
epoch into them and writes them to the segment as they are, with no copy in between.

Responses are small, but building kio dataclasses and encoding them was ~9% of the broker's
CPU on 100 B records; ``encode_produce_response`` writes the frame from the handler's
per-partition dicts directly. Both are tested byte for byte against kio for every version.

Layout: ../shared/kafka-message-specs/clients/ProduceRequest.json and ProduceResponse.json
(flexible from v9; v10 added tagged fields that Krait does not send).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from typing import Any

from .errors import DecodeError
from .varint import encode_uvarint, read_uvarint, skip_tagged_fields

__all__ = ["ProduceRequest", "TopicProduceData", "PartitionProduceData", "decode_produce_request",
           "encode_produce_response", "FIRST_VERSION", "LAST_VERSION"]

FIRST_VERSION = 3
LAST_VERSION = 11
FIRST_FLEXIBLE = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_HEADER = struct.Struct(">ii")  # frame size, correlation id
_FLEX_HEADER = struct.Struct(">iiB")  # ... and the response header's empty tagged fields


class PartitionProduceData:
    """One partition's records: a view into the request frame (None for null records)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: tuple[PartitionProduceData, ...]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequest:
    """The fields kio's ProduceRequest has, with the same names and types (``timeout`` is
    a timedelta), so that handlers do not depend on which decoder made it."""

    __slots__ = ("transactional_id", "acks", "timeout", "topic_data")

    def __init__(self, transactional_id: str | None, acks: int, timeout: datetime.timedelta,
                 topic_data: tuple[TopicProduceData, ...]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout = timeout
        self.topic_data = topic_data


class _Reader:
    """Bounds-checked reads over one frame; anything out of bounds is a DecodeError."""

    __slots__ = ("buf", "view", "pos", "end", "flexible")

    def __init__(self, frame: bytes | bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.buf = frame
        self.view = memoryview(frame)
        self.pos = pos
        self.end = len(frame)
        self.flexible = flexible

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise DecodeError(f"Produce request: {n} bytes needed at {pos}, {self.end - pos} left")
        self.pos = pos + n
        return pos

    def length(self) -> int:
        """A string's, bytes' or array's length: -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, self.end)
            return n - 1
        if self.pos + 2 > self.end:
            raise DecodeError("Produce request: truncated length")
        (n,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return n

    def array_length(self) -> int:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, self.end)
            n -= 1
        else:
            (n,) = _I32.unpack_from(self.buf, self.need(4))
        if n > self.end - self.pos:  # every element takes at least one byte
            raise DecodeError(f"Produce request: array of {n} elements in {self.end - self.pos} bytes")
        return n

    def string(self, nullable: bool) -> str | None:
        n = self.length()
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError(f"Produce request: bad string length {n}")
        pos = self.need(n)
        try:
            return str(self.view[pos : pos + n], "utf-8")
        except UnicodeDecodeError:
            raise DecodeError("Produce request: string is not UTF-8") from None

    def records(self) -> memoryview | None:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, self.end)
            n -= 1
        else:
            (n,) = _I32.unpack_from(self.buf, self.need(4))
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"Produce request: bad records length {n}")
        pos = self.need(n)
        return self.view[pos : pos + n]

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos, self.end)


def decode_produce_request(frame: bytes | bytearray | memoryview, body_offset: int, version: int) -> ProduceRequest:
    """The request body at ``body_offset`` of ``frame`` (v3-11). Records are views into
    ``frame``: writable when the frame is a bytearray."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise DecodeError(f"Produce v{version} is not decoded here")
    r = _Reader(frame, body_offset, version >= FIRST_FLEXIBLE)
    transactional_id = r.string(nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, r.need(6))
    topics = []
    for _ in range(r.array_length()):
        name = r.string(nullable=False)
        parts = []
        for _ in range(r.array_length()):
            (index,) = _I32.unpack_from(frame, r.need(4))
            parts.append(PartitionProduceData(index, r.records()))
            r.tags()
        topics.append(TopicProduceData(name, tuple(parts)))  # type: ignore[arg-type]
        r.tags()
    r.tags()
    if r.pos != r.end:
        raise DecodeError(f"Produce request: {r.end - r.pos} bytes after the body")
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics))


def _str(out: bytearray, s: str | None, flexible: bool) -> None:
    if s is None:
        out += b"\x00" if flexible else b"\xff\xff"
        return
    b = s.encode()
    out += encode_uvarint(len(b) + 1) if flexible else _I16.pack(len(b))
    out += b


def _count(out: bytearray, n: int, flexible: bool) -> None:
    out += encode_uvarint(n + 1) if flexible else _I32.pack(n)


def _millis(t: Any) -> int:
    if t is None:
        return -1
    if isinstance(t, datetime.datetime):
        return int(t.timestamp() * 1000)
    return int(t)


def encode_produce_response(version: int, correlation_id: int, responses: Sequence[dict], throttle_ms: int
                            ) -> bytearray:
    """The whole response frame (size, header, body) for the handler's topics:
    ``[{"name", "partition_responses": [{"index", "error_code", "base_offset",
    "log_start_offset", optional "log_append_time" (datetime or ms), "error_message",
    "record_errors": [{"batch_index", "batch_index_error_message"}]}]}]``."""
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray(_FLEX_HEADER.size if flexible else _HEADER.size)
    _count(out, len(responses), flexible)
    for t in responses:
        _str(out, t["name"], flexible)
        parts = t["partition_responses"]
        _count(out, len(parts), flexible)
        for p in parts:
            lat = _millis(p.get("log_append_time"))
            if version >= 5:
                out += _PART_V5.pack(p["index"], p["error_code"], p["base_offset"], lat, p.get("log_start_offset", -1))
            else:
                out += _PART_V3.pack(p["index"], p["error_code"], p["base_offset"], lat)
            if version >= 8:
                errors = p.get("record_errors") or ()
                _count(out, len(errors), flexible)
                for e in errors:
                    out += _I32.pack(e["batch_index"])
                    _str(out, e.get("batch_index_error_message"), flexible)
                    if flexible:
                        out += b"\x00"
                _str(out, p.get("error_message"), flexible)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_ms)
    if flexible:
        out += b"\x00"
        _FLEX_HEADER.pack_into(out, 0, len(out) - 4, correlation_id, 0)
    else:
        _HEADER.pack_into(out, 0, len(out) - 4, correlation_id)
    return out
