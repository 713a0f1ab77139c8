"""The columns of a kafka-segments read: Spark's Kafka source schema (:data:`SCHEMA`, and
:data:`SCHEMA_WITH_HEADERS` with ``includeHeaders``), the subset a query names with
``.schema(...)`` (:func:`check_schema`), and the Arrow schema its batches are built in
(:func:`arrow_schema`). Shared by the batch reader (:mod:`spark_jobs.datasource`) and the
streaming one (:mod:`spark_jobs.streaming`).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["SCHEMA", "SCHEMA_WITH_HEADERS", "arrow_schema", "check_schema"]

# Spark's Kafka source schema (KafkaRecordToRowConverter), every field nullable like there.
SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
SCHEMA_WITH_HEADERS = StructType([
    *SCHEMA.fields,
    StructField("headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))),
])


_COLUMNS = {f.name: f.dataType for f in SCHEMA_WITH_HEADERS.fields}


def check_schema(schema: StructType, columns: dict | None = None, what: str = "kafka-segments") -> StructType:
    """A schema given with ``.schema(...)`` must be columns of the source (any subset, any
    order, names as in :data:`SCHEMA_WITH_HEADERS`, their types); returns it. ``columns``
    (name -> type) and ``what`` describe another column set (a typed read's).

    Spark gives Python data sources no column pruning (the reader always gets the whole
    output schema), so a narrow user-given schema is how a query says what to decode: the
    columns not asked for are not decoded at all (see ``decode.decode_batches``)."""
    columns = _COLUMNS if columns is None else columns
    seen = set()
    for f in schema.fields:
        want = columns.get(f.name)
        if want is None:
            raise ValueError(f"kafka-segments has no column {f.name!r}; its columns are {', '.join(columns)}")
        if f.name in seen:
            raise ValueError(f"column {f.name!r} appears twice in the schema")
        seen.add(f.name)
        if f.dataType.simpleString() != want.simpleString():
            raise ValueError(f"column {f.name!r} of {what} has type {want.simpleString()}, "
                             f"not {f.dataType.simpleString()}")
    if not schema.fields:
        raise ValueError("the schema of a kafka-segments read needs at least one column")
    return schema


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks yielded batches against (µs UTC timestamps, binary)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
