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

Partitioning is a spec string in Redpanda's ``redpanda.iceberg.partition.spec`` syntax (the
topic config ``krait.iceberg.partition.spec``), ``(partition, hour(timestamp))`` by default;
each item is a column (identity) or ``year|month|day|hour(col)``, ``bucket(N, col)``,
``truncate(W, col)``. The syntax is :mod:`storage.iceberg_spec`'s (storage validates the
config value with it); this module binds a spec to a table's columns.
"""

from __future__ import annotations

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

from storage.iceberg_spec import DEFAULT_PARTITION_SPEC, IDENTITY, SpecField, parse_partition_spec

__all__ = ["DEFAULT_PARTITION_SPEC", "KEY_VALUE_ARROW_SCHEMA", "HEADER_TYPE", "bind_spec", "key_value_schema",
           "partition_spec", "spec_text"]


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


def _transform(field: SpecField) -> Transform:
    if field.transform == IDENTITY:
        return IdentityTransform()
    if field.transform in _TIME:
        return _TIME[field.transform]()
    if field.transform == "bucket":
        return BucketTransform(field.param)
    return TruncateTransform(field.param)


def bind_spec(schema: Schema, spec: str | Sequence[str]) -> list[tuple[SpecField, NestedField, Transform]]:
    """Each item of ``spec`` (a spec string, or its items) with the column of ``schema`` it
    partitions by and its transform; ValueError for a syntax error, a column the schema
    lacks, or one of a type the transform does not take (hour of a binary key)."""
    text = spec if isinstance(spec, str) else f"({', '.join(spec)})"
    out = []
    for item in parse_partition_spec(text):
        try:
            source = schema.find_field(item.column)
        except ValueError:
            raise ValueError(f"partition spec names no column of the table: {item.column!r}") from None
        transform = _transform(item)
        if not transform.can_transform(source.field_type):
            raise ValueError(f"{item}: {item.transform} cannot partition the {source.field_type} column {item.column}")
        out.append((item, source, transform))
    return out


def partition_spec(schema: Schema, spec: str | Sequence[str] = DEFAULT_PARTITION_SPEC) -> PartitionSpec:
    """The Iceberg partition spec of ``schema`` that ``spec`` names (see :func:`bind_spec`
    for its errors). Field ids start at 1000, as Iceberg's do."""
    return PartitionSpec(*(PartitionField(source.field_id, 1000 + i, transform, item.name)
                           for i, (item, source, transform) in enumerate(bind_spec(schema, spec))))


def spec_text(schema: Schema, spec: PartitionSpec) -> str:
    """A table's partition spec in the config's syntax (``(partition, hour(timestamp))``), as
    ``krait tables`` shows it; a transform this syntax has no name for is shown as Iceberg
    names it."""
    items = []
    for f in spec.fields:
        try:
            column = schema.find_column_name(f.source_id) or str(f.source_id)
        except ValueError:
            column = str(f.source_id)
        t = f.transform
        if isinstance(t, IdentityTransform):
            items.append(str(SpecField(column)))
        elif isinstance(t, BucketTransform):
            items.append(str(SpecField(column, "bucket", t.num_buckets)))
        elif isinstance(t, TruncateTransform):
            items.append(str(SpecField(column, "truncate", t.width)))
        else:
            name = next((n for n, cls in _TIME.items() if isinstance(t, cls)), None)
            items.append(str(SpecField(column, name)) if name else f"{t}({column})")
    return f"({', '.join(items)})"
