"""The decoded table modes: a topic's values decoded with registry schemas into columns, and
the records that cannot be decoded sent to the dead-letter table (:mod:`tables.dlq`).

Modes (:mod:`tables.modes`):

- ``value_schema_id_prefix``: each value is in Confluent's wire format, magic byte 0, the
  4-byte big-endian schema id, the payload; it is decoded with the schema of that id;
- ``value_schema_latest``: each value is the bare payload (no prefix: this is what
  Redpanda's docs say this mode expects, "the serialized message as-is without the magic
  byte or schema ID prefix"), decoded with the latest schema of the subject
  ``<topic>-value`` (Confluent's TopicNameStrategy) at the time of the commit.

The schemas come through a :class:`SchemaSource` (id -> type, text and resolved
references; subject -> latest id): the broker's is its own registry replica; tests give a
dict.

**Layout.** The metadata columns of ``key_value`` (partition, offset, timestamp,
timestamp_type, key, headers) then the value's top-level fields, one column each (mapping in
:mod:`tables.schema_map`). A table created in a decoded mode has **no raw ``value``
column**, as Redpanda's decoded tables have none: the fields are the value, the raw bytes
stay in the log (and in the DLQ table for records that do not decode), and a second copy of
every value would double the table's size and the Parquet write for a column queries do not
need. A table that was created as ``key_value`` and switched to a decoded mode keeps its
``value`` column and it stays filled, so that the queries written against it (sum of value
lengths, say) keep their meaning; likewise a decoded table switched to ``key_value`` gains
the ``value`` column (null in the earlier rows) and its decoded columns are null in the new
rows. A tombstone (null value) is a row whose decoded columns are all null: it is data, not
an error. Unlike Redpanda, which nests the metadata in one ``redpanda`` struct column,
the metadata columns stay top-level as in ``key_value``: a decoded table and a ``key_value``
table share their first columns and partition spec, and the tail read from the log
(``kafka-segments``) has them top-level too; a value field with a metadata column's name
becomes ``value_<name>`` instead.

**Evolution.** A record schema with a field the table lacks adds it as an optional column
(with a new field id; existing ids never change); a type Iceberg can widen is widened; an
incompatible schema sends its records to the DLQ (:func:`tables.schema_map.fit`). The
evolution is committed in the same catalog commit as the rows that need it.

**Unknown ids.** An id the registry does not have goes to the DLQ at once when it is at or
below the highest id the registry has handed out (deleted, or never given). An id above it
may be a registration this broker's replica of ``_schemas`` has not read yet (a follower
lags its leader): the partition's region then ends before that record, which is tried
again at the next commits, for at most 30 s (``grace_s``) after the decoder first met the
id; then it goes to the DLQ.

How its rows and the DLQ rows are committed exactly once, and what a mode change does to
an existing table: :mod:`tables.topic_table`.

**Cost.** Work is per region and per schema: the 5-byte prefixes of all values are
checked with numpy at once, records grouped by schema id, each group's payloads copied into
one buffer and decoded with one parsed schema (Avro: fastavro's ``schemaless_reader`` per
record over one stream, its C reader; JSON: ``json.loads`` and one shaping walk per record,
which also checks the types), and each group's Arrow columns built with one ``pa.array``
call over the group (a record Arrow refuses is found by a per-record retry of that group
only). Measured by ``test_decode_rate`` (100 k values; Avro: 6 fields with an array and a
nested record; JSON: 4 properties with an array of objects and a map; Protobuf: 8 fields
with a nested message, a repeated field and a map), on the shared 2-core machine: at a load
average of 5, Avro 183 k records/s, JSON Schema 80 k, Protobuf 115 k; at a load average of
11-13, Avro 65-140 k, JSON 30-57 k, Protobuf 34-44 k (fastavro alone is 4-5 µs a record
there; Protobuf is protobuf's C parser then one Python getter per field). A whole commit of
100 k Avro values (log region to rows, decode, Parquet write, catalog commit; load 5) costs
8.5 µs of CPU a record against 2.3 µs for the same region in ``key_value`` mode: 115 k
against 300 k records/s.

Protobuf values are decoded too (:mod:`tables.protobuf_map`): in ``value_schema_id_prefix``
mode as the message the indexes after the schema id name (the records of one id are grouped
by message, each message's columns merged into the table as another schema's would be), in
``value_schema_latest`` mode as the schema's first message.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro import parse_schema, schemaless_reader
from pyiceberg.schema import Schema

from .dlq import DLQ_ARROW_SCHEMA, dlq_rows
from .layout import KEY_VALUE_ARROW_SCHEMA, key_value_schema
from .modes import VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST
from .protobuf_map import protobuf_message, read_message_indexes
from .schema_map import (
    Incompatible,
    JsonValueError,
    MappedSchema,
    SchemaMapError,
    arrow_type,
    avro_columns,
    fit,
    json_columns,
    merged,
)

__all__ = ["DecodedRows", "RegistrySchema", "SchemaSource", "ValueDecoder", "base_schema", "value_subject"]

MAGIC = 0
PREFIX = 5
#: how long records of an unknown schema id above the registry's highest are held back
#: before they go to the DLQ (see ValueDecoder._wait_for)
DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class RegistrySchema:
    """A registered schema: Confluent's type name (``AVRO``, ``JSON``, ``PROTOBUF``), its
    text, and its references' texts by the name the schema uses for them (each after those
    it references itself)."""

    schema_type: str
    schema: str
    references: tuple[tuple[str, str], ...] = ()


class SchemaSource(Protocol):
    """Where the decoder finds schemas (the broker's registry replica, or a test's dict)."""

    def schema_by_id(self, schema_id: int) -> RegistrySchema | None:
        """The schema of a global id; None when the registry has no such id."""

    def latest_id(self, subject: str) -> int | None:
        """The id of the latest live version of ``subject``; None when it has none."""

    def max_id(self) -> int:
        """The highest id the registry has handed out (ids are given in increasing order:
        an unknown id above it may be one this replica has not read yet)."""


def value_subject(topic: str) -> str:
    """TopicNameStrategy's subject of a topic's values."""
    return f"{topic}-value"


def base_schema() -> Schema:
    """The schema a table created in a decoded mode starts with: the metadata columns
    without the raw ``value`` (see the module doc); the value's columns are added by the
    first commit that has them."""
    return Schema(*[f for f in key_value_schema().fields if f.name != "value"])


@dataclass
class DecodedRows:
    """One region decoded: ``rows`` for the main table (Arrow types of ``schema``),
    ``schema`` the main table's schema these rows need (None: the table's as it is), and the
    DLQ rows."""

    rows: pa.Table
    schema: Schema | None
    dlq: pa.Table = field(default_factory=DLQ_ARROW_SCHEMA.empty_table)
    #: the offset of the first record held back (its id may not be replicated here yet):
    #: the region ends before it this time (rows of one partition only)
    hold: int | None = None

    def held(self) -> DecodedRows:
        """Without the rows at or after ``hold`` (they are read again next commit)."""
        assert self.hold is not None
        keep_main = pc.less(self.rows["offset"], self.hold)
        keep_dlq = pc.less(self.dlq["offset"], self.hold)
        return DecodedRows(self.rows.filter(keep_main), self.schema, self.dlq.filter(keep_dlq), self.hold)


@dataclass
class _Codec:
    """A schema ready to decode with: its columns, and a function that decodes the payloads
    found in one buffer at ``(start, end)`` positions, giving each value or the exception
    that stopped it."""

    mapped: MappedSchema
    #: (buffer, starts, ends, prefixed: the payloads follow a wire-format prefix) -> values
    read: Callable[[bytes, list[int], list[int], bool], list[object]]
    #: Protobuf's: the message indexes follow the schema id, and name the message
    indexed: bool = False


def _strip_unmapped_logical(schema: object) -> object:
    """fastavro's logical types give Python objects Arrow takes (date, datetime, time,
    Decimal), except ``uuid`` (a UUID object: read as its string) and a decimal mapped as
    bytes (precision over 38)."""
    if isinstance(schema, list):
        return [_strip_unmapped_logical(s) for s in schema]
    if isinstance(schema, dict):
        out = dict(schema)
        lt = out.get("logicalType")
        if lt == "uuid" or lt == "decimal" and not (isinstance(out.get("precision"), int)
                                                     and 0 < out["precision"] <= 38):
            out.pop("logicalType")
        for k in ("type", "items", "values"):
            if k in out and isinstance(out[k], dict | list):
                out[k] = _strip_unmapped_logical(out[k])
        if isinstance(out.get("fields"), list):
            out["fields"] = [{**f, "type": _strip_unmapped_logical(f.get("type"))} for f in out["fields"]]
        return out
    return schema


def _avro_codec(s: RegistrySchema) -> _Codec:
    mapped = avro_columns(s.schema, s.references)
    named: dict = {}
    try:
        for _, text in s.references:
            parse_schema(_strip_unmapped_logical(json.loads(text)), named_schemas=named)
        parsed = parse_schema(_strip_unmapped_logical(json.loads(s.schema)), named_schemas=named)
    except Exception as exc:  # fastavro's SchemaParseException and friends
        raise SchemaMapError(f"fastavro cannot read the Avro schema: {exc}") from None

    reader, named = schemaless_reader, mapped.named_unions

    def read(data: bytes, starts: list[int], ends: list[int], prefixed: bool) -> list[object]:
        # one stream for the whole group, each record read from its own start: a record
        # that fails or ends elsewhere than its payload does cannot shift the next one.
        # (A BytesIO per record costs about as much as decoding the record.)
        buf = io.BytesIO(data)
        out: list[object] = []
        for start, end in zip(starts, ends, strict=True):
            buf.seek(start)
            try:
                value = reader(buf, parsed, None, return_named_type=named)
            except Exception as exc:  # fastavro's errors on malformed bytes (EOFError, ValueError, ...)
                out.append(exc)
                continue
            pos = buf.tell()
            out.append(value if pos == end else ValueError(
                f"{end - pos} bytes left after the Avro value" if pos < end else "the Avro value runs past its end"))
        return out

    return _Codec(mapped, read)


def _json_codec(s: RegistrySchema) -> _Codec:
    mapped = json_columns(s.schema, s.references)
    loads = json.loads

    def read(data: bytes, starts: list[int], ends: list[int], prefixed: bool) -> list[object]:
        out: list[object] = []
        for start, end in zip(starts, ends, strict=True):
            try:
                out.append(loads(data[start:end]))
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                out.append(exc)
        return out

    return _Codec(mapped, read)


def _protobuf_codec(s: RegistrySchema, which: tuple[int, ...] | str = (0,)) -> _Codec:
    """The codec of the schema's message at the index path ``which``, or of that full name;
    prefixed values' indexes were read when they were grouped by message
    (:meth:`ValueDecoder._by_message`) and are skipped here."""
    message = protobuf_message(s.schema, s.references, which)
    parse = message.parse

    def read(data: bytes, starts: list[int], ends: list[int], prefixed: bool) -> list[object]:
        out: list[object] = []
        for start, end in zip(starts, ends, strict=True):
            try:
                if prefixed:  # the message indexes follow the schema id
                    _, start = read_message_indexes(data, start, end)
                out.append(parse(data[start:end]))
            except Exception as exc:  # protobuf's DecodeError, bad indexes
                out.append(exc)
        return out

    return _Codec(message.mapped, read, indexed=True)


_CODECS = {"AVRO": _avro_codec, "JSON": _json_codec, "PROTOBUF": _protobuf_codec}


def _prefixes(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """(status, schema id) of each value, for the whole array at once: status 0 a null
    value, 1 a prefix, 2 no magic byte, 3 shorter than a prefix."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1 + values.offset)[values.offset:]
    data_buf = values.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets)
    long_enough = lengths >= PREFIX
    idx = np.where(long_enough, starts, 0)
    if len(data) < PREFIX:
        data = np.concatenate([data, np.zeros(PREFIX, np.uint8)])
    magic_ok = long_enough & (data[idx] == MAGIC)
    ids = ((data[idx + 1].astype(np.int64) << 24) | (data[idx + 2].astype(np.int64) << 16)
           | (data[idx + 3].astype(np.int64) << 8) | data[idx + 4].astype(np.int64))
    status = np.where(magic_ok, 1, np.where(long_enough, 2, 3)).astype(np.int8)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    status[~valid] = 0
    # a signed id, as Java reads it (ids are positive; a negative one is unknown anyway)
    ids = np.where(ids >= 2**31, ids - 2**32, ids)
    return status, ids


def _gathered(values: pa.BinaryArray, idx: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The values at ``idx`` in one buffer (one copy) and their offsets in it: value j is
    ``data[offs[j]:offs[j + 1]]``."""
    taken = values.take(pa.array(idx))
    n = len(taken)
    offs = np.frombuffer(taken.buffers()[1], dtype=np.int32, count=n + 1 + taken.offset)[taken.offset:]
    data_buf = taken.buffers()[2]
    return (data_buf.to_pybytes() if data_buf is not None else b""), offs


class ValueDecoder:
    """Decodes a topic's values; keeps each id's parsed schema (an id's schema never
    changes) for the life of the topic's writer."""

    def __init__(self, topic: str, source: SchemaSource, *, grace_s: float = DEFAULT_GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topic = topic
        self.source = source
        self.grace_s = grace_s
        self.clock = clock
        self._codecs: dict[int, _Codec | str] = {}
        #: Protobuf codecs of messages other than the first, by (id, message indexes or name)
        self._message_codecs: dict[tuple[int, tuple[int, ...] | str], _Codec | str] = {}
        #: unknown ids above the registry's highest: when this decoder first met each
        self._waiting: dict[int, float] = {}

    def _codec(self, schema_id: int) -> _Codec | str | None:
        """The codec of an id, why there is none (an error text), or None: the registry
        does not have the id (not cached: it may be read by the next commit)."""
        got = self._codecs.get(schema_id)
        if got is not None:
            return got
        s = self.source.schema_by_id(schema_id)
        if s is None:
            return None
        make = _CODECS.get(s.schema_type)
        if make is None:
            out: _Codec | str = f"schema id {schema_id} is of the unknown schema type {s.schema_type}"
        else:
            try:
                out = make(s)
            except SchemaMapError as exc:
                out = f"schema id {schema_id}: {exc}"
            except Exception as exc:  # a schema the libraries choke on: its records to the DLQ, the topic goes on
                out = f"schema id {schema_id} cannot be used: {type(exc).__name__}: {exc}"
        self._codecs[schema_id] = out
        return out

    def decode(self, rows: pa.Table, table_schema: Schema, mode: str, *, subject: str | None = None,
               protobuf_name: str | None = None) -> DecodedRows:
        """The main-table and DLQ rows of ``rows`` (the key_value rows of a region, one or
        more partitions) decoded in ``mode``, against the table's current schema.
        ``value_schema_latest`` takes the latest schema of ``subject`` (default
        ``<topic>-value``) and, for Protobuf, the message ``protobuf_name`` (default: the
        schema's first)."""
        n = rows.num_rows
        values = rows.column("value").combine_chunks()
        if isinstance(values, pa.ChunkedArray):  # an empty table's column
            values = pa.array([], pa.binary())
        dlq_idx: list[np.ndarray] = []
        dlq_err: list[str] = []

        def to_dlq(idx: Sequence[int] | np.ndarray, err: str | Sequence[str]) -> None:
            idx = np.asarray(idx, dtype=np.int64)
            if len(idx):
                dlq_idx.append(idx)
                dlq_err.extend([err] * len(idx) if isinstance(err, str) else err)

        if mode == VALUE_SCHEMA_ID_PREFIX:
            status, ids = _prefixes(values)
            to_dlq(np.flatnonzero(status == 2), "the value does not start with the wire format's magic byte 0")
            to_dlq(np.flatnonzero(status == 3), "the value is shorter than the wire format's 5-byte prefix")
            skip = PREFIX
        elif mode == VALUE_SCHEMA_LATEST:
            valid = values.is_valid().to_numpy(zero_copy_only=False)
            status = valid.astype(np.int8)
            subject = subject or value_subject(self.topic)
            latest = self.source.latest_id(subject)
            if latest is None:
                to_dlq(np.flatnonzero(valid), f"subject {subject} has no schema in the registry")
                status[:] = 0
            ids = np.full(n, latest if latest is not None else -1, dtype=np.int64)
            skip = 0
        else:
            raise ValueError(f"not a decoded mode: {mode!r}")

        # one codec per id present; the table schema grown by each compatible one in turn
        schema = table_schema
        evolve = False
        groups: list[tuple[np.ndarray, _Codec]] = []
        ok = np.flatnonzero(status == 1)
        hold: int | None = None
        for sid in np.unique(ids[ok]).tolist():
            idx = ok[ids[ok] == sid]
            codec = self._codec(int(sid))
            if codec is None:
                if self._wait_for(int(sid)):
                    first = int(rows.column("offset").take(pa.array(idx[:1]))[0].as_py())
                    hold = first if hold is None else min(hold, first)
                else:
                    to_dlq(idx, f"schema id {sid} is not in the schema registry")
                continue
            self._waiting.pop(int(sid), None)
            if isinstance(codec, str):
                to_dlq(idx, codec)
                continue
            subgroups = [(idx, codec, "")]
            if codec.indexed and mode == VALUE_SCHEMA_LATEST and protobuf_name:
                named = self._message_codec(int(sid), protobuf_name)
                if isinstance(named, str):
                    to_dlq(idx, named)
                    continue
                subgroups = [(idx, named, f" (message {protobuf_name})")]
            elif codec.indexed and mode == VALUE_SCHEMA_ID_PREFIX:
                subgroups = []
                for path, sub in self._by_message(values, idx, to_dlq).items():
                    c = codec if path == (0,) else self._message_codec(int(sid), path)
                    if isinstance(c, str):
                        to_dlq(sub, c)
                    else:
                        subgroups.append((sub, c, "" if path == (0,) else f" (message indexes {list(path)})"))
            for sub, c, which in subgroups:
                try:
                    if fit(schema, c.mapped):
                        schema = merged(schema, c.mapped)
                        evolve = True
                except Incompatible as exc:
                    to_dlq(sub, f"schema id {sid}{which} does not fit the table: {exc}")
                    continue
                groups.append((sub, c))

        columns = {f.name: arrow_type(f.field_type) for f in schema.fields}
        value_cols = [name for name in columns if name not in KEY_VALUE_ARROW_SCHEMA.names]
        parts_idx: list[np.ndarray] = []
        parts_cols: list[dict[str, pa.Array]] = []
        for idx, codec in groups:
            try:
                got, cols, bad, errs = self._decode_group(values, idx, skip, codec, columns,
                                                          mode == VALUE_SCHEMA_ID_PREFIX)
            except Exception as exc:  # whatever it is, the group's records must not hold the topic up
                to_dlq(idx, f"decoding failed: {type(exc).__name__}: {exc}")
                continue
            to_dlq(bad, errs)
            if len(got):
                parts_idx.append(got)
                parts_cols.append(cols)
        tomb = np.flatnonzero(status == 0) if mode == VALUE_SCHEMA_ID_PREFIX else np.flatnonzero(
            ~values.is_valid().to_numpy(zero_copy_only=False))
        if len(tomb):
            parts_idx.append(tomb)
            parts_cols.append({})

        main = self._assemble(rows, parts_idx, parts_cols, columns, value_cols, "value" in columns)
        if dlq_idx:
            all_idx = np.concatenate(dlq_idx)
            order = np.argsort(all_idx, kind="stable")
            dlq = dlq_rows(rows, all_idx[order], [dlq_err[i] for i in order.tolist()])
        else:
            dlq = DLQ_ARROW_SCHEMA.empty_table()
        out = DecodedRows(main, schema if evolve else None, dlq, hold)
        return out.held() if hold is not None else out

    @staticmethod
    def _by_message(values: pa.BinaryArray, idx: np.ndarray,
                    to_dlq: Callable[[Sequence[int], str], None]) -> dict[tuple[int, ...], np.ndarray]:
        """The Protobuf values at ``idx`` by the message indexes after their schema id; a
        value whose indexes cannot be read goes to the DLQ."""
        data, offs = _gathered(values, idx)
        bounds = offs.tolist()
        paths: dict[tuple[int, ...], list[int]] = {}
        for j, i in enumerate(idx.tolist()):
            try:
                path, _ = read_message_indexes(data, bounds[j] + PREFIX, bounds[j + 1])
            except ValueError as exc:
                to_dlq([i], f"the value cannot be decoded with its schema: {exc}")
                continue
            paths.setdefault(tuple(path), []).append(i)
        return {path: np.asarray(sub, dtype=np.int64) for path, sub in paths.items()}

    def _message_codec(self, schema_id: int, which: tuple[int, ...] | str) -> _Codec | str:
        """The codec of a Protobuf schema's message at an index path or of a full name (the
        id is known)."""
        key = (schema_id, which)
        got = self._message_codecs.get(key)
        if got is None:
            s = self.source.schema_by_id(schema_id)
            assert s is not None  # its first message's codec was made from it
            try:
                got = _protobuf_codec(s, which)
            except SchemaMapError as exc:
                got = f"schema id {schema_id}: {exc}"
            except Exception as exc:  # as in _codec: the records to the DLQ, the topic goes on
                got = f"schema id {schema_id} cannot be used: {type(exc).__name__}: {exc}"
            self._message_codecs[key] = got
        return got

    def _wait_for(self, schema_id: int) -> bool:
        """Whether to hold records of an unknown id back rather than send them to the DLQ:
        an id above the highest this replica has read may be a registration it has not
        read yet (a follower replica of ``_schemas`` lags its leader's high watermark), for
        at most ``grace_s`` after this decoder first met it. An id at or below it was
        deleted, or never given: the DLQ at once."""
        if schema_id <= self.source.max_id() or self.grace_s <= 0:
            return False
        first = self._waiting.setdefault(schema_id, self.clock())
        return self.clock() - first < self.grace_s

    @staticmethod
    def _decode_group(values: pa.BinaryArray, idx: np.ndarray, skip: int, codec: _Codec,
                      columns: dict[str, pa.DataType],
                      prefixed: bool) -> tuple[np.ndarray, dict[str, pa.Array], list[int], list[str]]:
        """Decode one schema's records: (indices decoded, their columns, indices that
        failed, their errors)."""
        data, offs = _gathered(values, idx)
        starts = (offs[:-1] + skip).tolist()
        ends = offs[1:].tolist()
        decoded: list[object] = []
        good: list[int] = []
        bad: list[int] = []
        errs: list[str] = []
        shape = codec.mapped.shape
        for i, v in zip(idx.tolist(), codec.read(data, starts, ends, prefixed), strict=True):
            if isinstance(v, Exception):
                bad.append(i)
                errs.append(f"the value cannot be decoded with its schema: {type(v).__name__}: {v}")
                continue
            try:
                if shape is not None:
                    v = shape(v)
                if not isinstance(v, dict):
                    raise JsonValueError(f"the value is a {type(v).__name__}, not an object")
            except JsonValueError as exc:
                bad.append(i)
                errs.append(f"the value does not match its schema: {exc}")
                continue
            except Exception as exc:  # a shaper meeting a value of an unexpected kind
                bad.append(i)
                errs.append(f"the value cannot be decoded with its schema: {type(exc).__name__}: {exc}")
                continue
            decoded.append(v)
            good.append(i)
        struct = pa.struct([pa.field(name, columns[col]) for name, col in codec.mapped.columns])
        try:
            arr = pa.array(decoded, struct)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError, TypeError):
            # find the records Arrow refuses, one at a time (this group only)
            keep_v, keep_i = [], []
            for i, v in zip(good, decoded, strict=True):
                try:
                    pa.array([v], struct)
                except Exception as exc:
                    bad.append(i)
                    errs.append(f"the value does not fit its columns: {type(exc).__name__}: {exc}")
                    continue
                keep_v.append(v)
                keep_i.append(i)
            good, arr = keep_i, pa.array(keep_v, struct)
        children = arr.flatten() if len(arr) else [pa.array([], t.type) for t in struct]
        cols = {col: child for (_, col), child in zip(codec.mapped.columns, children, strict=True)}
        return np.asarray(good, dtype=np.int64), cols, bad, errs

    @staticmethod
    def _assemble(rows: pa.Table, parts_idx: list[np.ndarray], parts_cols: list[dict[str, pa.Array]],
                  columns: dict[str, pa.DataType], value_cols: list[str], keep_value: bool) -> pa.Table:
        """The main rows in offset order: metadata taken from ``rows``, each value column
        the groups' arrays (nulls where a group has no such field)."""
        meta_names = [n for n in KEY_VALUE_ARROW_SCHEMA.names if n != "value" or keep_value]
        fields = [KEY_VALUE_ARROW_SCHEMA.field(n) for n in meta_names] + [pa.field(c, columns[c]) for c in value_cols]
        target = pa.schema(fields)
        if not parts_idx:
            return target.empty_table()
        order = np.concatenate(parts_idx)
        meta = rows.select(meta_names).take(pa.array(order))
        arrays = list(meta.columns)
        for c in value_cols:
            chunks = [cols[c] if c in cols else pa.nulls(len(idx), columns[c])
                      for idx, cols in zip(parts_idx, parts_cols, strict=True)]
            arrays.append(pa.concat_arrays([ch.cast(columns[c]) if ch.type != columns[c] else ch for ch in chunks]))
        table = pa.Table.from_arrays(arrays, schema=target)
        return table.take(pa.array(np.argsort(order, kind="stable")))
