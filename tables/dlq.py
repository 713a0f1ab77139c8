"""The dead-letter table ``<topic>~dlq`` of a decoded table topic: the records whose value
could not be decoded into the topic's table (no wire-format prefix, an id the registry does
not know, bytes that do not decode with the schema, a schema without columns here, or one
incompatible with the table's), each with its raw value bytes and the error. ``~`` cannot be
in a topic's name, so no table of a topic has this name.

Columns: the ``key_value`` layout's (partition, offset, timestamp, timestamp_type, key,
value, headers; ``value`` the raw bytes, prefix included) and ``error`` (required string),
partitioned by the default spec whatever the topic's ``krait.iceberg.partition.spec`` (which
may name decoded fields this table lacks). How its rows and the main table's are
committed exactly once is :mod:`tables.decoded`'s module doc.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StringType

from .layout import KEY_VALUE_ARROW_SCHEMA, key_value_schema

__all__ = ["DLQ_ARROW_SCHEMA", "DLQ_SUFFIX", "dlq_rows", "dlq_schema", "dlq_topic"]

DLQ_SUFFIX = "~dlq"

#: the Arrow schema of DLQ rows
DLQ_ARROW_SCHEMA = KEY_VALUE_ARROW_SCHEMA.append(pa.field("error", pa.string(), nullable=False))


def dlq_topic(topic: str) -> str:
    """The name the DLQ table is made from (tables.catalog.table_name keeps the ``~``)."""
    return topic + DLQ_SUFFIX


def dlq_schema() -> Schema:
    kv = key_value_schema()
    return Schema(*kv.fields, NestedField(kv.highest_field_id + 1, "error", StringType(), required=True))


def dlq_rows(rows: pa.Table, indices: Sequence[int] | np.ndarray, errors: Sequence[str]) -> pa.Table:
    """The DLQ rows of ``rows`` (key_value layout) at ``indices``, each with its error."""
    if not len(indices):
        return DLQ_ARROW_SCHEMA.empty_table()
    picked = rows.select(KEY_VALUE_ARROW_SCHEMA.names).take(pa.array(np.asarray(indices, dtype=np.int64)))
    return picked.append_column(DLQ_ARROW_SCHEMA.field("error"), pa.array(list(errors), pa.string()))
