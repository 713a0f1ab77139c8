"""Typed keys and values in a kafka-segments read: records written with a Confluent
serializer (Avro or JSON Schema) decoded into Spark columns.

    df = (spark.read.format("kafka-segments").option("log.dirs", "/var/lib/krait")
          .option("subscribe", "orders").option("valueFormat", "avro")
          .option("schema.registry.url", "http://127.0.0.1:8081").load())
    df.groupBy("value.region").count()

Options (besides the source's own):

``valueFormat`` / ``keyFormat``   ``raw`` (default: binary, as Spark's Kafka source),
                        ``avro`` or ``json`` (Confluent's JSON Schema serializer)
``schema.registry.url``  the registry, comma-separated URLs (the first that answers)
``schema.registry.basic.auth.user.info``  ``user:password`` (HTTP Basic), as Confluent's
                        clients name it
``valueSubject`` / ``keySubject``  default ``<topic>-value`` / ``<topic>-key`` (Confluent's
                        TopicNameStrategy); several topics must share one subject's schema
``valueSchemaVersion`` / ``keySchemaVersion``  the version to read with (default
                        ``latest``)

A decoded column's type comes from its subject's schema at that version, fetched once when
the query is planned (:mod:`spark_jobs.typed_schema` gives the mapping); the key or value
column becomes that type, and two columns follow the source's own: ``valueSchemaId int``
(the id in the record's prefix) and ``valueError string`` (null, or why the value could
not be decoded), ``keySchemaId`` / ``keyError`` likewise.

Each record's own schema id is honoured (Confluent's wire format: magic byte 0, a 4-byte
big-endian schema id, the payload): its writer schema is fetched once per id and process
(``GET /schemas/ids/{id}``), and Avro data is read with it *resolved against* the reader
schema (Avro schema resolution: fields added since get their defaults, removed fields are
skipped, promotions apply). JSON values are shaped to the reader schema's properties.

A record that cannot be decoded -- a wrong magic byte, fewer than 5 bytes, an id the
registry does not know or of another schema type, a malformed payload, a writer schema
the reader schema cannot resolve -- gets a null value and the reason in the error column;
the read goes on. A null (tombstone) value is null with no error. Only a registry that
cannot be reached at all fails the task (Spark retries it), since nulls would then be a
statement about the registry, not the data.

Decoding is per Arrow batch: the 5-byte prefixes are checked with numpy for the whole
batch, records are grouped by schema id, each group decoded with one writer schema (Avro
records of flat schemas by the numba kernel of :mod:`spark_jobs.avro_kernel`, the others
with fastavro's C reader), the groups' Arrow arrays built at once (``RecordBatch
.from_pylist``, logical types converted column-wise) and put back in record order with one
``take``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from .logdir import list_partitions
from .planning import subscribed
from .registry_client import RegisteredSchema, RegistryClient, RegistryError, SchemaNotFound
from .schema import SCHEMA, arrow_schema, check_schema
from .streaming import KafkaSegmentsStreamReader
from .typed_schema import Node, avro_node, json_node, strip_logical_types

__all__ = ["FORMATS", "TypedColumn", "TypedRead", "TypedStreamReader", "typed_read", "wire_prefix", "decode_column"]

FORMATS = ("raw", "avro", "json")
MAGIC = 0
PREFIX = 5

# wire_prefix statuses
NULL, OK, BAD_MAGIC, SHORT = 0, 1, 2, 3


@dataclass
class TypedColumn:
    """One decoded column (``key`` or ``value``): its format, subject and reader schema."""

    name: str
    fmt: str
    subject: str
    reader: RegisteredSchema
    node: Node

    @property
    def id_column(self) -> str:
        return f"{self.name}SchemaId"

    @property
    def error_column(self) -> str:
        return f"{self.name}Error"


def _topics(opts: dict[str, str]) -> list[str]:
    if opts.get("subscribe"):
        return sorted({t.strip() for t in opts["subscribe"].split(",") if t.strip()})
    if opts.get("assign"):
        return sorted(json.loads(opts["assign"]))
    dirs = [d.strip() for d in opts.get("log.dirs", "").split(",") if d.strip()]
    return sorted({p.topic for p in subscribed(list_partitions(dirs), opts)})


def typed_read(options: dict[str, str], base: StructType) -> TypedRead | None:
    """The typed read the options ask for (reader schemas fetched now), or None when the
    key and value are both raw."""
    opts = {k.lower(): v for k, v in options.items()}
    fmts = {}
    for col in ("key", "value"):
        fmt = (opts.get(f"{col}format") or "raw").strip().lower()
        if fmt not in FORMATS:
            raise ValueError(f"option {col}Format must be one of {', '.join(FORMATS)}, not {fmt!r}"
                             + (" (Protobuf values are not supported)" if fmt == "protobuf" else ""))
        fmts[col] = fmt
    if all(f == "raw" for f in fmts.values()):
        return None
    url = opts.get("schema.registry.url")
    if not url:
        raise ValueError("keyFormat / valueFormat avro or json needs option schema.registry.url")
    registry = RegistryClient(url, opts.get("schema.registry.basic.auth.user.info"))
    columns = [_column(registry, opts, col, fmt) for col, fmt in fmts.items() if fmt != "raw"]
    return TypedRead(registry, columns, base)


def _column(registry: RegistryClient, opts: dict[str, str], col: str, fmt: str) -> TypedColumn:
    version = (opts.get(f"{col}schemaversion") or "latest").strip()
    subject = opts.get(f"{col}subject")
    if subject:
        reader = registry.version(subject, version)
    else:
        topics = _topics(opts)
        if not topics:
            raise ValueError(f"no topic to read, so no {col} subject: give option {col}Subject")
        found = {}
        for t in topics:
            try:
                found[f"{t}-{col}"] = registry.version(f"{t}-{col}", version)
            except SchemaNotFound as exc:
                raise ValueError(f"{col}Format={fmt}: subject {t}-{col} (topic {t}) has no version {version} in "
                                 f"the schema registry ({exc.message}); give option {col}Subject to read "
                                 "with another subject's schema") from None
        ids = {s.id for s in found.values()}
        if len(ids) > 1:
            desc = ", ".join(f"{s} (id {r.id})" for s, r in found.items())
            raise ValueError(f"the topics read have different {col} schemas: {desc}; read them separately or "
                             f"give option {col}Subject to read them all with one subject's schema")
        subject, reader = next(iter(found.items()))
    want = "AVRO" if fmt == "avro" else "JSON"
    if reader.schema_type != want:
        raise ValueError(f"{col}Format={fmt}, but subject {subject}'s schema (version {reader.version}) is "
                         f"{reader.schema_type}")
    node = avro_node(reader.schema, reader.references) if fmt == "avro" else json_node(reader.schema,
                                                                                        reader.references)
    return TypedColumn(col, fmt, subject, reader, node)


class TypedRead:
    """The decoded columns of a read (made on the driver, pickled to the executors)."""

    def __init__(self, registry: RegistryClient, columns: list[TypedColumn], base: StructType) -> None:
        self.registry = registry
        self.columns = columns
        by_name = {c.name: c for c in columns}
        fields = [StructField(f.name, by_name[f.name].node.spark, True) if f.name in by_name else f for f in base]
        for c in columns:
            fields += [StructField(c.id_column, IntegerType()), StructField(c.error_column, StringType())]
        #: every column of the read
        self.schema = StructType(fields)
        self._derived = {n: c for c in columns for n in (c.name, c.id_column, c.error_column)}

    def check(self, schema: StructType) -> StructType:
        """A user-given schema must name columns of :attr:`schema`, with their types."""
        return check_schema(schema, {f.name: f.dataType for f in self.schema}, "this read")

    def raw_schema(self, schema: StructType) -> StructType:
        """The source's own columns to read for ``schema`` (the raw key / value for the
        decoded ones)."""
        raw = {f.name: f for f in SCHEMA}
        out: list[StructField] = []
        for f in schema:
            c = self._derived.get(f.name)
            want = raw[c.name] if c is not None else f
            if all(o.name != want.name for o in out):
                out.append(want)
        return StructType(out)

    def decode(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Turn the raw batches into batches of ``schema`` (columns of :attr:`schema`)."""
        names = set(schema.names)
        decoders = {c.name: _Decoder(c, self.registry, schema) for c in self.columns
                    if names & {c.name, c.id_column, c.error_column}}
        for rb in batches:
            out: dict[str, pa.Array] = {}
            for name, d in decoders.items():
                values, ids, errors = d.decode(rb.column(name), want_values=bool(names & {name, d.col.error_column}))
                out.update({name: values, d.col.id_column: ids, d.col.error_column: errors})
            cols = [out[f.name] if f.name in out else rb.column(f.name) for f in schema]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)


class TypedStreamReader(KafkaSegmentsStreamReader):
    """The streaming reader, decoding keys / values like batch reads (with the reader
    schemas fetched when the query started)."""

    def __init__(self, options: dict[str, str], schema: StructType, typed: TypedRead) -> None:
        super().__init__(options, typed.raw_schema(schema))
        self.typed = typed
        self.typed_schema = schema

    def read(self, partition: object) -> Iterator[pa.RecordBatch]:
        return self.typed.decode(super().read(partition), arrow_schema(self.typed_schema))


# --- executors -------------------------------------------------------------------------------


def wire_prefix(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, memoryview]:
    """Check the Confluent prefix of every value of a binary array at once.

    Returns (status per row: NULL, OK, BAD_MAGIC or SHORT; schema id (valid where OK);
    magic byte (where there is one); start and end of each value in ``data``; data)."""
    n = len(arr)
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    data = memoryview(bufs[2]) if bufs[2] is not None and bufs[2].size else memoryview(b"")
    raw = np.frombuffer(data, dtype=np.uint8)
    starts, ends = offs[:-1], offs[1:]
    lens = ends - starts
    present = _valid(arr)
    has1 = present & (lens >= 1)
    magic = np.zeros(n, dtype=np.int64)
    magic[has1] = raw[starts[has1]]
    status = np.full(n, NULL, dtype=np.int8)
    status[present] = SHORT
    ok = present & (lens >= PREFIX) & (magic == MAGIC)
    status[ok] = OK
    status[has1 & (magic != MAGIC)] = BAD_MAGIC
    ids = np.zeros(n, dtype=np.int64)
    if ok.any():
        s = starts[ok]
        v = (raw[s + 1].astype(np.int64) << 24) | (raw[s + 2].astype(np.int64) << 16) | \
            (raw[s + 3].astype(np.int64) << 8) | raw[s + 4].astype(np.int64)
        ids[ok] = np.where(v >= 2**31, v - 2**32, v)
    return status, ids, magic, starts, ends, data


def _raw_type(node: Node, final: pa.DataType) -> pa.DataType:
    """The Arrow type decoded values are first built in: ``final`` with each logical
    leaf replaced by its underlying type (int32 days, int64 ms/µs, binary decimals)."""
    if node.logical == "date":
        return pa.int32()
    if node.logical in ("ts-millis", "ts-micros"):
        return pa.int64()
    if node.logical == "decimal":
        return pa.binary()
    if not node.has_logical:
        return final
    if node.kind in ("record", "union"):
        return pa.struct([pa.field(f.name, _raw_type(c, f.type), f.nullable) for f, (_, c) in zip(final, node.children,
                                                                                                   strict=True)])
    if node.kind == "array":
        vf = final.value_field
        return pa.list_(pa.field(vf.name, _raw_type(node.item, vf.type), vf.nullable))
    if node.kind == "map":
        itf = final.item_field
        return pa.map_(final.key_field.type, pa.field(itf.name, _raw_type(node.item, itf.type), itf.nullable))
    return final


def _finish(arr: pa.Array, node: Node, final: pa.DataType) -> pa.Array:
    """Convert an array of :func:`_raw_type` to ``final`` (column-wise)."""
    if not node.has_logical:
        return arr
    if node.logical is not None:
        return _convert_logical(arr, node.logical, final)
    mask = arr.is_null() if arr.null_count else None
    if node.kind in ("record", "union"):
        children = [_finish(arr.field(i), c, f.type) for i, (f, (_, c)) in enumerate(zip(final, node.children,
                                                                                           strict=True))]
        return pa.StructArray.from_arrays(children, fields=list(final), mask=mask)
    if node.kind == "array":
        return pa.ListArray.from_arrays(arr.offsets, _finish(arr.values, node.item, final.value_type), type=final,
                                        mask=mask)
    if node.kind == "map":
        items = _finish(arr.items, node.item, final.item_type)
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=final, mask=mask)
    return arr


def _convert_logical(arr: pa.Array, logical: str, final: pa.DataType) -> pa.Array:
    if logical in ("date", "ts-micros"):
        return arr.view(final)  # days as int32, µs as int64: the same bits
    if logical == "ts-millis":
        import pyarrow.compute as pc

        return pc.multiply(arr, pa.scalar(1000, pa.int64())).view(final)
    if logical == "decimal":
        return _decimals(arr, final)
    raise ValueError(f"unknown conversion {logical!r}")


def _valid(arr: pa.Array) -> np.ndarray:
    return ~arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(len(arr), dtype=bool)


def _decimals(arr: pa.Array, final: pa.DataType) -> pa.Array:
    """Big-endian two's complement bytes (Avro's decimal) to decimal128, vectorised."""
    n = len(arr)
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    valid = _valid(arr)
    lens = np.where(valid, offs[1:] - offs[:-1], 0)
    if (lens > 16).any():
        raise ValueError("a decimal of more than 16 bytes does not fit decimal(38)")
    out = np.zeros((n, 16), dtype=np.uint8)
    has = lens > 0
    neg = np.zeros(n, dtype=bool)
    neg[has] = data[offs[:-1][has]] >= 0x80
    out[neg] = 0xFF  # sign extension
    total = int(lens.sum())
    if total:
        row = np.repeat(np.arange(n), lens)
        first = np.repeat(offs[:-1], lens)
        j = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)  # byte index inside the value
        out[row, np.repeat(lens, lens) - 1 - j] = data[first + j]  # little-endian
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if arr.null_count else None
    return pa.Array.from_buffers(final, n, [validity, pa.py_buffer(out)], null_count=arr.null_count)


class _Decoder:
    """Decodes one column's batches (executor side; writer schemas cached per id)."""

    def __init__(self, col: TypedColumn, registry: RegistryClient, schema: pa.Schema) -> None:
        self.col = col
        self.registry = registry
        self.final = schema.field(col.name).type if col.name in schema.names else _arrow_type(col.node)
        self.raw = _raw_type(col.node, self.final)
        self.writers: dict[int, object] = {}  # id -> (parsed writer, reader or None) | error text
        self.reader = None
        self.shaping = col.node.needs_shaping

    # -- schemas ---------------------------------------------------------------------------
    def _reader(self):
        if self.reader is None:
            self.reader = _parse_avro(self.col.reader)
        return self.reader

    def writer(self, sid: int) -> object:
        """(parsed writer schema, reader schema or None when they are the same) for Avro, the
        schema for JSON; or the error text for the records of this id."""
        got = self.writers.get(sid)
        if got is not None:
            return got
        try:
            reg = self.registry.by_id(sid)
        except SchemaNotFound:
            got = f"schema id {sid} is not in the schema registry"
        except RegistryError as exc:
            got = f"schema id {sid}: {exc}"
        else:
            want = "AVRO" if self.col.fmt == "avro" else "JSON"
            if reg.schema_type != want:
                got = f"schema id {sid} is a {reg.schema_type} schema, not {want}"
            elif self.col.fmt == "json":
                got = (reg,)
            else:
                same = sid == self.col.reader.id or (reg.schema == self.col.reader.schema
                                                     and reg.references == self.col.reader.references)
                try:
                    got = (self._reader(), None) if same else (_parse_avro(reg), self._reader())
                except Exception as exc:  # a registered schema fastavro refuses
                    got = f"schema id {sid}: the writer schema cannot be parsed: {exc}"
                else:
                    got = (*got, self._plan(reg))
        self.writers[sid] = got
        return got

    def _plan(self, writer: RegisteredSchema) -> object:
        """The numba kernel's program for this writer schema, or None (then fastavro)."""
        node = self.col.node
        if (node.kind != "record" or writer.references or self.col.reader.references
                or any(c.kind != "prim" for _, c in node.children)):
            return None
        from .avro_kernel import plan

        return plan(json.loads(writer.schema), json.loads(self.col.reader.schema), list(self.raw))

    # -- a batch ---------------------------------------------------------------------------
    def decode(self, arr: pa.Array, *, want_values: bool = True) -> tuple[pa.Array, pa.Array, pa.Array]:
        n = len(arr)
        status, ids, magic, starts, ends, data = wire_prefix(arr)
        ok = status == OK
        id_arr = pa.array(ids.astype(np.int32), type=pa.int32(), mask=~ok)
        errors: dict[int, str] = {}
        for r in np.flatnonzero(status == BAD_MAGIC).tolist():
            errors[r] = f"not in the Confluent wire format: magic byte 0x{int(magic[r]):02x}, expected 0x00"
        for r in np.flatnonzero(status == SHORT).tolist():
            errors[r] = (f"not in the Confluent wire format: {int(ends[r] - starts[r])} bytes, shorter than its "
                         "5-byte header")
        pieces: list[pa.Array] = []
        rows: list[np.ndarray] = []
        if want_values and ok.any():
            okrows = np.flatnonzero(ok)
            okids = ids[okrows]
            for sid in np.unique(okids).tolist():
                same = okids == sid
                group = okrows if same.all() else okrows[same]
                w = self.writer(sid)
                if isinstance(w, str):
                    errors.update(dict.fromkeys(group.tolist(), w))
                    continue
                arr_g, good = self._decode_group(group, w, sid, starts, ends, data, errors)
                if len(good):
                    pieces.append(arr_g)
                    rows.append(good)
        values = _place(pieces, rows, n, self.raw)
        values = _finish(values, self.col.node, self.final)
        if errors:
            err = [None] * n
            for r, m in errors.items():
                err[r] = m
            err_arr = pa.array(err, type=pa.string())
        else:
            err_arr = pa.nulls(n, pa.string())
        return values, id_arr, err_arr

    def _decode_group(self, group: np.ndarray, w: object, sid: int, starts: np.ndarray, ends: np.ndarray,
                      mv: memoryview, errors: dict[int, str]) -> tuple[pa.Array, np.ndarray]:
        """Decode the records of one schema id: (raw Arrow array, their rows)."""
        if self.col.fmt == "avro" and w[2] is not None:
            return self._decode_planned(group, w[2], sid, starts, ends, mv, errors)
        vals: list = []
        good: list[int] = []
        s_list = (starts[group] + PREFIX).tolist()
        e_list = ends[group].tolist()
        rows = group.tolist()
        if self.col.fmt == "avro":
            from fastavro import schemaless_reader

            writer, reader, _ = w
            named = self.shaping  # unions: need the names of named types to pick the member
            for r, s, e in zip(rows, s_list, e_list, strict=True):
                try:
                    vals.append(schemaless_reader(io.BytesIO(mv[s:e]), writer, reader, return_named_type=named))
                except Exception as exc:  # any failure is this record's
                    if type(exc).__name__ == "SchemaResolutionError":
                        errors[r] = (f"schema id {sid} cannot be read with the reader schema ({self.col.subject} "
                                     f"version {self.col.reader.version}): {exc}")
                    else:
                        errors[r] = f"schema id {sid}: the Avro payload cannot be decoded: {_describe(exc)}"
                    continue
                good.append(r)
        else:
            loads = json.loads
            for r, s, e in zip(rows, s_list, e_list, strict=True):
                try:
                    vals.append(loads(mv[s:e].tobytes()))
                except (ValueError, UnicodeDecodeError) as exc:
                    errors[r] = f"schema id {sid}: the payload is not JSON: {exc}"
                    continue
                good.append(r)
        if self.shaping:
            vals, good = self._shaped(vals, good, sid, errors)
        arr, bad = _to_arrow(vals, self.raw)
        if bad:
            for i, msg in bad.items():
                errors[good[i]] = f"schema id {sid}: the value does not fit {self.col.subject}'s schema: {msg}"
            keep = np.array([i not in bad for i in range(len(good))], dtype=bool)
            good = [g for g, k in zip(good, keep, strict=True) if k]
        return arr, np.array(good, dtype=np.int64)


    def _decode_planned(self, group: np.ndarray, plan: object, sid: int, starts: np.ndarray, ends: np.ndarray,
                        mv: memoryview, errors: dict[int, str]) -> tuple[pa.Array, np.ndarray]:
        from .avro_kernel import ERRORS, decode

        buf = np.frombuffer(mv, dtype=np.uint8)
        arr, good, err, err_field = decode(plan, buf, starts[group] + PREFIX, ends[group], self.raw)
        if not good.all():
            for i in np.flatnonzero(~good).tolist():
                field = plan.names[int(err_field[i])] if 0 <= err_field[i] < len(plan.names) else "?"
                errors[int(group[i])] = (f"schema id {sid}: the Avro payload cannot be decoded: "
                                         f"{ERRORS.get(int(err[i]), 'malformed')} (field {field})")
            group = group[good]
        return arr, group

    def _shaped(self, vals: list, good: list[int], sid: int, errors: dict[int, str]) -> tuple[list, list[int]]:
        out, rows = [], []
        for v, r in zip(vals, good, strict=True):
            try:
                out.append(_shape(self.col.node, v))
            except (TypeError, ValueError) as exc:
                errors[r] = f"schema id {sid}: the value does not fit {self.col.subject}'s schema: {exc}"
                continue
            rows.append(r)
        return out, rows


def _arrow_type(node: Node) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(node.spark, timezone="UTC")


def _parse_avro(reg: RegisteredSchema) -> object:
    """fastavro's parsed schema of a registered Avro schema, without logical types."""
    from fastavro import parse_schema

    named: dict = {}
    for _, text in reg.references:
        parse_schema(strip_logical_types(json.loads(text)), named_schemas=named)
    return parse_schema(strip_logical_types(json.loads(reg.schema)), named_schemas=named)


def _describe(exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, EOFError):
        return "truncated" + (f" ({text})" if text else "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _to_arrow(vals: list, typ: pa.DataType) -> tuple[pa.Array, dict[int, str]]:
    """Arrow array of the values; values Arrow refuses are left out and reported."""
    try:
        return _build(vals, typ), {}
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        pass
    bad = {}
    for i, v in enumerate(vals):
        try:
            _build([v], typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
            bad[i] = str(exc)
    return _build([v for i, v in enumerate(vals) if i not in bad], typ), bad


def _build(vals: list, typ: pa.DataType) -> pa.Array:
    if pa.types.is_struct(typ) and vals and all(type(v) is dict for v in vals):
        rb = pa.RecordBatch.from_pylist(vals, schema=pa.schema(list(typ)))
        return pa.StructArray.from_arrays(rb.columns, fields=list(typ))
    return pa.array(vals, type=typ)


def _place(pieces: list[pa.Array], rows: list[np.ndarray], n: int, typ: pa.DataType) -> pa.Array:
    """One array of n rows: each piece's values at its rows, null elsewhere."""
    if not pieces:
        return pa.nulls(n, typ)
    if len(pieces) == 1 and len(rows[0]) == n:
        return pieces[0]  # every row decoded, in order
    cat = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
    idx = np.full(n, -1, dtype=np.int64)
    idx[np.concatenate(rows)] = np.arange(len(cat), dtype=np.int64)
    return cat.take(pa.array(idx, mask=idx < 0))


def _shape(node: Node, v: object) -> object:
    """A decoded value as Arrow takes it for the node: general unions as struct members,
    JSON text where the schema says nothing more; named-type tuples unwrapped."""
    if v is None:
        return None
    k = node.kind
    if k == "union":
        return _union_member(node, v)
    if type(v) is tuple:
        v = v[1]
    if k == "json":
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if k == "record":
        return {n: _shape(c, v.get(n)) for n, c in node.children} if isinstance(v, dict) else v
    if k == "array":
        return [_shape(node.item, x) for x in v] if isinstance(v, list) else v
    if k == "map":
        return {kk: _shape(node.item, x) for kk, x in v.items()} if isinstance(v, dict) else v
    return v


def _union_member(node: Node, v: object) -> dict:
    """{"member<i>": value} for the member of a general union the value belongs to."""
    name = v[0] if type(v) is tuple else None
    raw = v[1] if type(v) is tuple else v
    out: dict = {n: None for n, _ in node.children}
    for n, c in node.children:
        if _member_matches(c, name, raw):
            out[n] = _shape(c, raw)
            return out
    raise TypeError(f"a value of type {type(raw).__name__} matches no member of the union")


_PY_TYPES = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (float,), "double": (float,),
    "string": (str,), "bytes": (bytes,),
}


def _member_matches(c: Node, name: str | None, raw: object) -> bool:
    if name is not None:
        return c.avro == name
    if c.kind in ("record", "union") or c.avro not in _PY_TYPES and c.kind == "prim":
        return False  # named types come with their name
    if c.kind == "array":
        return isinstance(raw, list)
    if c.kind == "map":
        return isinstance(raw, dict)
    types = _PY_TYPES[c.avro]
    if types == (int,) and type(raw) is bool:
        return False
    return isinstance(raw, types)


def decode_column(col: TypedColumn, registry: RegistryClient, arr: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(values, schema ids, errors) of one binary column: for tests and jobs outside Spark."""
    return _Decoder(col, registry, pa.schema([])).decode(arr)
