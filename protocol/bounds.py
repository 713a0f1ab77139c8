"""A bounds pre-check run before kio decodes untrusted bytes.

kio 0.6.5's native reader allocates ``Vec::with_capacity(count)`` from an array's length
prefix before reading any element, so a 20-byte request claiming 2**31 elements makes it
ask for 16 GiB and the Rust allocator aborts the whole process. This module walks the
same schema (from the kio dataclasses' field metadata) without building anything and
checks that every array, string and bytes length fits in the bytes that remain. Only
then is the frame handed to kio. The walk is per field, never per byte, so its cost does
not grow with record data (a 1 MiB Produce request costs a few µs).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache

from .errors import DecodeError
from .varint import read_uvarint

__all__ = ["check_entity"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")

_FIXED = {
    "bool": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

Buf = bytes | bytearray | memoryview
Step = Callable[[Buf, int, int], int]


def _length(buf: Buf, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length prefix; -1 means null. ``wide``: int32 (bytes, arrays) rather than int16."""
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    size = 4 if wide else 2
    if pos + size > end:
        raise DecodeError("truncated length prefix")
    (n,) = (_I32 if wide else _I16).unpack_from(buf, pos)
    if n < -1:
        raise DecodeError(f"negative length {n}")
    return n, pos + size


def _fixed_step(n: int) -> Step:
    def step(buf: Buf, pos: int, end: int) -> int:
        pos += n
        if pos > end:
            raise DecodeError("message truncated")
        return pos
    return step


def _blob_step(flexible: bool, wide: bool) -> Step:
    def step(buf: Buf, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, wide)
        if n > 0:
            pos += n
            if pos > end:
                raise DecodeError(f"length {n} runs past the end of the message")
        return pos
    return step


def _array_step(flexible: bool, element: Step, fixed: int | None) -> Step:
    def step(buf: Buf, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, True)
        if n <= 0:
            return pos
        if n > end - pos:  # every element takes at least one byte
            raise DecodeError(f"array length {n} exceeds the {end - pos} bytes left")
        if fixed is not None:
            pos += n * fixed
            if pos > end:
                raise DecodeError("array runs past the end of the message")
            return pos
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos
    return step


def _nullable_struct_step(inner: Step) -> Step:
    def step(buf: Buf, pos: int, end: int) -> int:
        if pos >= end:
            raise DecodeError("message truncated")
        (marker,) = _I8.unpack_from(buf, pos)
        pos += 1
        return pos if marker < 0 else inner(buf, pos, end)
    return step


def _unwrap(tp: typing.Any) -> tuple[typing.Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        return next(a for a in typing.get_args(tp) if a is not type(None)), True
    return tp, False


def _value_step(kafka_type: str | None, tp: typing.Any, flexible: bool) -> tuple[Step, int | None]:
    """(step, fixed size or None) for one non-array value."""
    tp, nullable = _unwrap(tp)
    if dataclasses.is_dataclass(tp):
        inner = _entity_step(tp)
        return (_nullable_struct_step(inner) if nullable else inner), None
    if kafka_type in _FIXED:
        n = _FIXED[kafka_type]
        return _fixed_step(n), n
    if kafka_type == "string":
        return _blob_step(flexible, False), None
    if kafka_type in ("bytes", "records"):
        return _blob_step(flexible, True), None
    raise TypeError(f"bounds check: unknown kafka type {kafka_type!r}")


def _field_step(f: dataclasses.Field, tp: typing.Any, flexible: bool) -> Step:
    kafka_type = f.metadata.get("kafka_type")
    outer, _ = _unwrap(tp)
    if typing.get_origin(outer) is tuple:
        element, fixed = _value_step(kafka_type, typing.get_args(outer)[0], flexible)
        return _array_step(flexible, element, fixed)
    return _value_step(kafka_type, tp, flexible)[0]


@cache
def _entity_step(cls: type) -> Step:
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    fixed_run = 0  # consecutive fixed-size fields are skipped in one step
    for f in dataclasses.fields(cls):
        tag = f.metadata.get("tag")
        if tag is not None:
            tagged[tag] = _field_step(f, hints[f.name], flexible)
            continue
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type in _FIXED and typing.get_origin(_unwrap(hints[f.name])[0]) is not tuple:
            fixed_run += _FIXED[kafka_type]
            continue
        if fixed_run:
            steps.append(_fixed_step(fixed_run))
            fixed_run = 0
        steps.append(_field_step(f, hints[f.name], flexible))
    if fixed_run:
        steps.append(_fixed_step(fixed_run))

    def _tagged(buf: Buf, pos: int, end: int) -> int:
        count, pos = read_uvarint(buf, pos, end)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise DecodeError(f"tagged field {tag} runs past the end of the message")
            known = tagged.get(tag)
            if known is not None and known(buf, pos, stop) > stop:
                raise DecodeError(f"tagged field {tag} overruns its size")
            pos = stop
        return pos

    if not steps or (len(steps) == 1 and fixed_run):
        # all-fixed struct (e.g. a Fetch partition): no per-field calls
        size = fixed_run

        def walk_fixed(buf: Buf, pos: int, end: int) -> int:
            pos += size
            if pos > end:
                raise DecodeError("message truncated")
            if flexible:
                if pos < end and buf[pos] == 0:  # the usual empty tagged section
                    return pos + 1
                return _tagged(buf, pos, end)
            return pos

        return walk_fixed

    def walk(buf: Buf, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            if pos < end and buf[pos] == 0:
                return pos + 1
            return _tagged(buf, pos, end)
        return pos

    return walk


def check_entity(cls: type, buf: Buf, offset: int = 0) -> int:
    """Walk one ``cls`` entity at ``offset``; raise DecodeError if any length prefix
    overruns ``buf``. Returns the end position."""
    return _entity_step(cls)(buf, offset, len(buf))
