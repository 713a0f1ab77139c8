"""The Iceberg layout of a ``key_value`` table: its schema, the matching Arrow schema, and
the partition spec.

Columns (field ids fixed, so every table of this mode has the same ids)::

    partition       int        required   the Kafka partition
    offset          long       required
    timestamp       timestamptz required  Kafka's epoch milliseconds, stored as µs (Iceberg's unit) in UTC
    timestamp_type  int        required   0 CreateTime, 1 LogAppendTime (Kafka's TimestampType ids)
    key             binary     optional   null: a null key
    value           binary     optional   null: a tombstone
    headers         list<struct<key string, value binary>>  required list, optional header values

The timestamp is ``timestamptz`` (an instant, as Kafka's is): Spark reads it as its
``TimestampType``, the type ``kafka-segments`` gives the same column, so the table and the
tail of the log union without a cast.

Partitioning is a spec string in Redpanda's ``redpanda.iceberg.partition.spec`` syntax:
``(partition, hour(timestamp))`` by default; each item is a column (identity) or
``year|month|day|hour(col)``, ``bucket(N, col)``, ``truncate(W, col)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

__all__ = ["DEFAULT_PARTITION_SPEC", "KEY_VALUE_ARROW_SCHEMA", "HEADER_TYPE", "key_value_schema", "parse_spec_names",
           "partition_spec"]

DEFAULT_PARTITION_SPEC = "(partition, hour(timestamp))"


def key_value_schema() -> Schema:
    """The ``key_value`` mode's Iceberg schema."""
    return Schema(
        NestedField(1, "partition", IntegerType(), required=True),
        NestedField(2, "offset", LongType(), required=True),
        NestedField(3, "timestamp", TimestamptzType(), required=True),
        NestedField(4, "timestamp_type", IntegerType(), required=True),
        NestedField(5, "key", BinaryType(), required=False),
        NestedField(6, "value", BinaryType(), required=False),
        NestedField(7, "headers", ListType(8, StructType(
            NestedField(9, "key", StringType(), required=True),
            NestedField(10, "value", BinaryType(), required=False),
        ), element_required=True), required=True),
    )


#: headers as Arrow builds them (a non-null struct per header, a nullable value)
HEADER_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string(), nullable=False),
                                                      pa.field("value", pa.binary())]), nullable=False))
#: the Arrow schema of the rows :mod:`tables.records` builds (what pyiceberg accepts for the schema above)
KEY_VALUE_ARROW_SCHEMA = pa.schema([
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("timestamp_type", pa.int32(), nullable=False),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", HEADER_TYPE, nullable=False),
])

_TIME = {"year": YearTransform, "month": MonthTransform, "day": DayTransform, "hour": HourTransform}
_ITEM = re.compile(r"^(?:(?P<fn>[a-z]+)\((?:(?P<n>\d+)\s*,\s*)?(?P<col>[A-Za-z_][\w.]*)\)|(?P<ident>[A-Za-z_][\w.]*))$")


def parse_spec_names(spec: str | Sequence[str]) -> list[str]:
    """``"(partition, hour(timestamp))"`` -> ``["partition", "hour(timestamp)"]`` (a
    sequence is taken as the items already)."""
    if not isinstance(spec, str):
        return [s.strip() for s in spec]
    s = spec.strip()
    if s.startswith("(") and s.endswith(")"):
        s = s[1:-1]
    items, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur.strip():
        items.append(cur.strip())
    return items


def _transform(fn: str | None, n: str | None, item: str) -> Transform:
    if fn is None:
        return IdentityTransform()
    if fn in _TIME and n is None:
        return _TIME[fn]()
    if fn == "bucket" and n is not None:
        return BucketTransform(int(n))
    if fn == "truncate" and n is not None:
        return TruncateTransform(int(n))
    raise ValueError(f"unknown partition transform {item!r}")


def partition_spec(schema: Schema, spec: str | Sequence[str] = DEFAULT_PARTITION_SPEC) -> PartitionSpec:
    """The Iceberg partition spec of ``schema`` that ``spec`` names; ValueError for an
    unknown column or transform. Field ids start at 1000, as Iceberg's do."""
    fields = []
    for i, item in enumerate(parse_spec_names(spec)):
        m = _ITEM.match(item)
        if m is None:
            raise ValueError(f"bad partition spec item {item!r}")
        col = m["col"] or m["ident"]
        try:
            source = schema.find_field(col)
        except ValueError:
            raise ValueError(f"partition spec names no column of the table: {col!r}") from None
        transform = _transform(m["fn"], m["n"], item)
        name = col if m["fn"] is None else f"{col}_{m['fn']}"
        fields.append(PartitionField(source.field_id, 1000 + i, transform, name))
    return PartitionSpec(*fields)
