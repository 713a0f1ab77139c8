"""Build kio messages of any version from plain, version-agnostic values.

Handlers describe a response once, as keyword values and dicts; :func:`make` keeps the
fields the chosen version has, fills the ones it lacks from their schema defaults, and
converts nested dicts into the version's nested dataclasses. This keeps one handler per
API instead of one per (API, version).
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

__all__ = ["make", "to_plain"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

_ZERO = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint8": 0, "uint16": 0, "uint32": 0, "uint64": 0,
    "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None, "uuid": None,
    "error_code": ErrorCode.none, "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
}


@cache
def _fields(cls: type) -> tuple[tuple[str, Any, Any, dataclasses.Field], ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        out.append((f.name, hints[f.name], f.metadata.get("kafka_type"), f))
    return tuple(out)


def _entity_of(tp: Any) -> tuple[type | None, bool]:
    """(nested dataclass type, is_tuple) for a field annotation, else (None, is_tuple)."""
    is_tuple = False
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if args else tp
        origin = typing.get_origin(tp)
    if origin is tuple:
        is_tuple = True
        tp = typing.get_args(tp)[0]
    if dataclasses.is_dataclass(tp):
        return tp, is_tuple
    return None, is_tuple


def _convert(value: Any, kafka_type: str | None, annotation: Any) -> Any:
    if value is None:
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        # Kafka's -1 is kio's None (e.g. ProduceResponse.log_append_time)
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type == "uuid" and isinstance(value, bytes):
        return uuid.UUID(bytes=value)
    nested, is_tuple = _entity_of(annotation)
    if nested is not None:
        if is_tuple:
            return tuple(v if isinstance(v, nested) else make(nested, **v) for v in value)
        return value if isinstance(value, nested) else make(nested, **value)
    if is_tuple:
        return tuple(value)
    return value


def make(cls: type, **values: Any) -> Any:
    """Instantiate kio dataclass ``cls`` from values, ignoring fields it lacks."""
    kwargs = {}
    for name, annotation, kafka_type, f in _fields(cls):
        if name in values:
            kwargs[name] = _convert(values[name], kafka_type, annotation)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            nested, is_tuple = _entity_of(annotation)
            if is_tuple:
                kwargs[name] = ()
            elif nested is not None:
                kwargs[name] = make(nested)
            elif kafka_type in _ZERO:
                kwargs[name] = _ZERO[kafka_type]
            else:
                kwargs[name] = None
    return cls(**kwargs)


def to_plain(obj: Any) -> Any:
    """A kio object as nested dicts/lists (for logging and tests)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [to_plain(v) for v in obj]
    return obj
