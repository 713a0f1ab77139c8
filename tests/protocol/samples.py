"""Non-trivial kio instances of any message type, built from the dataclass field metadata.

``sample(cls, variant)``: variant 0 fills every field (tagged ones too) with a
non-default value and arrays with two elements; variant 1 uses nulls where the field is
nullable, empty arrays and extreme integers.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.records import build_batch

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}
RECORDS = build_batch([(b"key", b"value"), (None, b"v2", [("h", b"x")])], timestamp=1_700_000_000_000)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        return next(a for a in typing.get_args(tp) if a is not type(None)), True
    return tp, False


def _scalar(kafka_type: str, variant: int, i: int) -> Any:
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        return (hi if i % 2 else lo) if variant else min(hi, 7 + i)
    if kafka_type == "bool":
        return not variant
    if kafka_type == "float64":
        return 0.5 + i
    if kafka_type == "string":
        return "" if variant else f"name-é{i}"
    if kafka_type == "bytes":
        return b"" if variant else bytes([i, 0, 255])
    if kafka_type == "records":
        return RECORDS
    if kafka_type == "uuid":
        return uuid.UUID(int=i + 1)
    if kafka_type == "error_code":
        return ErrorCode.not_leader_or_follower if not variant else ErrorCode.unknown_server_error
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(milliseconds=(2**31 - 1) if variant else 1500 + i)
    if kafka_type == "timedelta_i64":
        return datetime.timedelta(milliseconds=(2**40) if variant else 1500 + i)
    if kafka_type == "datetime_i64":
        return datetime.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=datetime.UTC)
    raise TypeError(kafka_type)


def sample(cls: type, variant: int = 0, depth: int = 0) -> Any:
    kwargs = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        tp, nullable = _unwrap(_hints(cls)[f.name])
        kt = f.metadata.get("kafka_type")
        if variant and nullable:
            kwargs[f.name] = None
            continue
        if typing.get_origin(tp) is tuple:
            el = typing.get_args(tp)[0]
            if variant:
                kwargs[f.name] = ()
            elif dataclasses.is_dataclass(el):
                kwargs[f.name] = tuple(sample(el, variant, depth + 1) for _ in range(2))
            else:
                kwargs[f.name] = tuple(_scalar(kt, variant, i + j) for j in range(2))
        elif dataclasses.is_dataclass(tp):
            kwargs[f.name] = sample(tp, variant, depth + 1)
        else:
            kwargs[f.name] = _scalar(kt, variant, i)
    return cls(**kwargs)
