"""Registry schemas (Avro, JSON Schema; Protobuf in :mod:`tables.protobuf_map`) as Iceberg
columns, and the rules that decide whether a schema fits a table's schema (evolution) or not
(the dead-letter table).

Avro -> Iceberg (as Redpanda and Spark's ``from_avro`` map it):

=====================================  ===========================================
record                                 struct (fields in order)
array / map                            list / map<string, ...>
union [null, X] (either order)         X
union [int, long] / [float, double]    long / double
any other union                        struct of its members but null, each field
                                       named by the member's type (a named type's
                                       short name, else int, string, array, map...),
                                       the member written set, the others null
recursive records                      not mapped: the record goes to the DLQ
enum / string / uuid                   string
bytes / fixed                          binary
int, long, float, double, boolean      int, long, float, double, boolean
date                                   date
time-millis / time-micros              time
timestamp-millis / -micros             timestamptz (Avro's are UTC instants)
local-timestamp-millis / -micros       timestamp
decimal(p, s), p <= 38                 decimal(p, s) (binary beyond)
=====================================  ===========================================

JSON Schema -> Iceberg: ``object`` with ``properties`` -> struct of them in order,
``additionalProperties`` alone -> map<string, ...>, ``array`` -> list of ``items``,
``string`` / ``integer`` / ``number`` / ``boolean`` -> string / long / double / boolean, a
``type`` list or ``oneOf`` / ``anyOf`` of null and one type -> that type; anything else
(no type, several types) -> string holding the value's JSON text. ``$ref`` is followed
within the document and to the schema's registry references.

Every decoded column is optional, nested fields, list elements and map values too: a
later schema version may drop a field (its column then holds nulls), and Iceberg adds only
optional columns to a table that has rows. Field ids are the table's: a column keeps the id
it got when it was added (pyiceberg's ``union_by_name`` gives new columns fresh ids and
never renumbers), so ids are stable across commits and schema versions.

A value field whose name is one of the metadata columns (``partition``, ``offset``,
``timestamp``, ``timestamp_type``, ``key``, ``value``, ``headers``) becomes the column
``value_<name>``; a schema in which that name is taken too is not mapped.

:func:`fit` compares a record schema's columns with the table's: a new field is added
(optional), a type Iceberg can widen (int -> long, float -> double, a decimal's precision)
is widened, a narrower type is written into the wider column; any other difference (a
string field that was an int, a struct that was a list) makes the schema incompatible and
its records go to the DLQ.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

__all__ = ["Incompatible", "JsonValueError", "METADATA_COLUMNS", "MappedSchema", "SchemaMapError", "arrow_type", "avro_columns",
           "column_name", "fit", "mapped_struct", "merged", "needs_update",
           "json_columns"]

#: the key_value layout's columns, which a decoded table keeps (``value`` only where the
#: table has it: see tables.decoded)
METADATA_COLUMNS = ("partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")


class SchemaMapError(ValueError):
    """A schema that has no Iceberg columns here (the message says why; it becomes the
    DLQ error of the records written with it)."""


def column_name(field: str) -> str:
    """The table column of a top-level value field."""
    return f"value_{field}" if field in METADATA_COLUMNS else field


@dataclass
class MappedSchema:
    """A registry schema as columns: ``struct`` is the value's fields (their own names,
    placeholder ids), ``columns`` the table column of each top-level field in order, and
    ``shape`` what turns one decoded value into the Python structure Arrow takes for
    ``struct`` (None: the decoded value is that structure already)."""

    struct: StructType
    columns: list[tuple[str, str]]  # (field name, column name)
    shape: Callable[[object], object] | None = None
    #: Avro with general unions: values are read with fastavro's return_named_type
    named_unions: bool = False

    def as_schema(self) -> Schema:
        """The columns as an Iceberg schema (top-level names are the column names)."""
        fields = [NestedField(f.field_id, col, f.field_type, required=False)
                  for f, (_, col) in zip(self.struct.fields, self.columns, strict=True)]
        return Schema(*fields)


class _Ids:
    def __init__(self) -> None:
        self._next: Iterator[int] = itertools.count(1)

    def __call__(self) -> int:
        return next(self._next)


def _optional(ids: _Ids, name: str, t: IcebergType) -> NestedField:
    return NestedField(ids(), name, t, required=False)


def _mapped(struct: StructType, shape: Callable[[object], object] | None) -> MappedSchema:
    columns = [(f.name, column_name(f.name)) for f in struct.fields]
    names = [c for _, c in columns]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise SchemaMapError(f"value fields map to the same column: {', '.join(dup)} (a metadata column's name "
                             f"becomes value_<name>)")
    return MappedSchema(struct, columns, shape)


def mapped_struct(struct: StructType) -> MappedSchema:
    """A value struct built elsewhere (tables.protobuf_map) as columns, its decoded values
    already in Arrow's input form."""
    return _mapped(struct, None)


# --- Avro -----------------------------------------------------------------------------------

_AVRO_PRIMITIVES: dict[str, PrimitiveType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_NAMED = ("record", "error", "enum", "fixed")


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


Shaper = Callable[[object], object]


class _Avro:
    """Maps an Avro schema to Iceberg types, each with its shaper: what turns a value
    fastavro decoded into Arrow's input (None: the value is that already). ``named``: the
    values are read with fastavro's ``return_named_type`` (a general union's named member
    arrives as ``(full name, value)``), which the schema needs when it has a general union."""

    def __init__(self, named: bool = False) -> None:
        self.ids = _Ids()
        self.named_types: dict[str, tuple[dict, str | None]] = {}
        self.active: list[str] = []
        self.named = named
        self.general_unions = False

    def define(self, schema: object, namespace: str | None) -> None:
        if isinstance(schema, list):
            for s in schema:
                self.define(s, namespace)
        elif isinstance(schema, dict):
            t = schema.get("type")
            if t in _NAMED:
                full = _full_name(schema["name"], schema.get("namespace", namespace))
                ns = full.rpartition(".")[0] or None
                self.named_types.setdefault(full, (schema, ns))
                for f in schema.get("fields", ()) if t in ("record", "error") else ():
                    self.define(f["type"], ns)
            elif t == "array":
                self.define(schema.get("items"), namespace)
            elif t == "map":
                self.define(schema.get("values"), namespace)
            elif isinstance(t, list | dict):
                self.define(t, namespace)

    def resolve(self, schema: object, namespace: str | None) -> tuple[object, str | None]:
        """A type name as the definition it names (and that definition's namespace)."""
        if isinstance(schema, str) and schema not in _AVRO_PRIMITIVES and schema != "null":
            found = self.named_types.get(_full_name(schema, namespace)) or self.named_types.get(schema)
            if found is None:
                raise SchemaMapError(f"unknown Avro type {schema!r}")
            return found
        return schema, namespace

    def type_of(self, schema: object, namespace: str | None) -> tuple[IcebergType, Shaper | None]:
        schema, namespace = self.resolve(schema, namespace)
        if isinstance(schema, str):
            if schema == "null":
                raise SchemaMapError("an Avro null type outside a union has no column type")
            return _AVRO_PRIMITIVES[schema], None
        if isinstance(schema, list):
            return self.union(schema, namespace)
        if not isinstance(schema, dict):
            raise SchemaMapError(f"not an Avro schema: {schema!r}")
        t = schema.get("type")
        if isinstance(t, list | dict):
            return self.type_of(t, namespace)
        lt = schema.get("logicalType")
        if t in ("record", "error"):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            if full in self.active:
                raise SchemaMapError(f"Avro record {full} is recursive: Iceberg has no type for it")
            self.active.append(full)
            ns = full.rpartition(".")[0] or None
            mapped = [(f["name"], *self.type_of(f["type"], ns)) for f in schema.get("fields", ())]
            self.active.pop()
            struct = StructType(*[_optional(self.ids, n, ft) for n, ft, _ in mapped])
            if all(sh is None for _, _, sh in mapped):
                return struct, None
            return struct, _record_shaper([(n, sh) for n, _, sh in mapped])
        if t == "enum":
            return StringType(), None
        if t == "fixed":
            return (self.decimal(schema) if lt == "decimal" else BinaryType()), None
        if t == "array":
            et, esh = self.type_of(schema["items"], namespace)
            return ListType(self.ids(), et, element_required=False), _list_shaper(esh) if esh else None
        if t == "map":
            vt, vsh = self.type_of(schema["values"], namespace)
            return (MapType(self.ids(), StringType(), self.ids(), vt, value_required=False),
                    _pairs_shaper(vsh))  # Arrow's map type takes (key, value) pairs
        if t in _AVRO_PRIMITIVES:
            if t == "int" and lt == "date":
                return DateType(), None
            if t == "int" and lt == "time-millis" or t == "long" and lt == "time-micros":
                return TimeType(), None
            if t == "long" and lt in ("timestamp-millis", "timestamp-micros"):
                return TimestamptzType(), None
            if t == "long" and lt in ("local-timestamp-millis", "local-timestamp-micros"):
                return TimestampType(), None
            if t == "bytes" and lt == "decimal":
                return self.decimal(schema), None
            return _AVRO_PRIMITIVES[t], None
        raise SchemaMapError(f"unknown Avro type {t!r}")

    @staticmethod
    def decimal(schema: dict) -> IcebergType:
        p, s = schema.get("precision"), schema.get("scale", 0)
        if isinstance(p, int) and isinstance(s, int) and 0 < p <= 38 and 0 <= s <= p:
            return DecimalType(p, s)
        return BinaryType()

    def union(self, branches: list, namespace: str | None) -> tuple[IcebergType, Shaper | None]:
        members = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        if not members:
            raise SchemaMapError("an Avro union of null alone has no column type")
        if len(members) == 1:
            t, sh = self.type_of(members[0], namespace)
            if not self.named or not self._is_named(members[0], namespace):
                return t, sh
            return t, _unwrap_shaper(sh)  # read as (name, value) under return_named_type
        kinds = {m if isinstance(m, str) else m.get("type") for m in members}
        if len(members) == 2 and kinds == {"int", "long"}:
            return LongType(), None
        if len(members) == 2 and kinds == {"float", "double"}:
            return DoubleType(), None
        return self.general_union(members, namespace)

    def _is_named(self, schema: object, namespace: str | None) -> bool:
        schema, _ = self.resolve(schema, namespace)
        return isinstance(schema, dict) and schema.get("type") in _NAMED

    def general_union(self, members: list, namespace: str | None) -> tuple[IcebergType, Shaper | None]:
        """A struct with a field per member, named by the member's type (a named type's
        short name; ``int``, ``string``, ``array``, ``map``... otherwise), so that a member
        added later is a new field rather than a renumbering; the member written is set,
        the others null."""
        self.general_unions = True
        fields, by_name, by_kind = [], {}, {}
        for m in members:
            resolved, ns = self.resolve(m, namespace)
            t, sh = self.type_of(m, namespace)
            if isinstance(resolved, dict) and resolved.get("type") in _NAMED:
                full = _full_name(resolved["name"], resolved.get("namespace", ns))
                name = full.rpartition(".")[2]
                by_name[full] = (name, sh)
            else:
                kind = resolved if isinstance(resolved, str) else resolved.get("type")
                name = str(kind)
                by_kind[name] = (name, sh)
            if any(f.name == name for f in fields):
                raise SchemaMapError(f"Avro union members {json.dumps(members)} share the name {name}")
            fields.append(_optional(self.ids, name, t))
        return StructType(*fields), _union_shaper(by_name, by_kind)


def _record_shaper(fields: list[tuple[str, Shaper | None]]) -> Shaper:
    def shape(v: object) -> object:
        if v is None:
            return None
        return {n: (sh(v.get(n)) if sh is not None else v.get(n)) for n, sh in fields}  # type: ignore[union-attr]
    return shape


def _list_shaper(item: Shaper) -> Shaper:
    return lambda v: None if v is None else [item(x) for x in v]  # type: ignore[union-attr]


def _pairs_shaper(value: Shaper | None) -> Shaper:
    if value is None:
        return lambda v: None if v is None else list(v.items())  # type: ignore[union-attr]
    return lambda v: None if v is None else [(k, value(x)) for k, x in v.items()]  # type: ignore[union-attr]


def _unwrap_shaper(inner: Shaper | None) -> Shaper:
    def shape(v: object) -> object:
        if isinstance(v, tuple):
            v = v[1]
        return inner(v) if inner is not None else v
    return shape


# Python type of a decoded union member -> the Avro kinds it may be, in order of preference
_PY_KINDS: list[tuple[type, tuple[str, ...]]] = [
    (bool, ("boolean",)), (int, ("long", "int")), (float, ("double", "float")), (str, ("string",)),
    (bytes, ("bytes",)), (list, ("array",)), (dict, ("map",)),
]


def _union_shaper(by_name: dict[str, tuple[str, Shaper | None]],
                  by_kind: dict[str, tuple[str, Shaper | None]]) -> Shaper:
    """The value of a general union (read with return_named_type: a named member as
    ``(full name, value)``, any other as its Python value) as the struct of its members."""
    def shape(v: object) -> object:
        if v is None:
            return None
        if isinstance(v, tuple):
            found = by_name.get(v[0])
            v = v[1]
        else:
            found = None
            for py, kinds in _PY_KINDS:
                if isinstance(v, py):
                    found = next((by_kind[k] for k in kinds if k in by_kind), None)
                    break
        if found is None:
            raise ValueError(f"no member of the union holds a {type(v).__name__}")
        name, sh = found
        return {name: sh(v) if sh is not None else v}
    return shape


def avro_columns(schema_text: str, references: tuple[tuple[str, str], ...] = ()) -> MappedSchema:
    """The columns of an Avro record schema (its references' named types defined first).
    ``MappedSchema.named_unions``: read the values with fastavro's ``return_named_type``."""
    try:
        defs = [json.loads(text) for _, text in references]
        root = json.loads(schema_text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise SchemaMapError(f"the Avro schema cannot be read: {exc}") from None

    def run(named: bool) -> tuple[_Avro, IcebergType, Shaper | None]:
        m = _Avro(named)
        try:
            for d in defs:
                m.define(d, None)
            m.define(root, None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise SchemaMapError(f"the Avro schema cannot be read: {exc!r}") from None
        return (m, *m.type_of(root, None))

    m, t, shape = run(False)
    if m.general_unions:  # the shapers must then also unwrap the (name, value) of [null, Named]
        m, t, shape = run(True)
    if not isinstance(t, StructType):
        raise SchemaMapError(f"the value schema is an Avro {t}, not a record: it has no fields to make columns of")
    out = _mapped(t, shape)
    out.named_unions = m.general_unions
    return out


# --- JSON Schema ----------------------------------------------------------------------------

_JSON_TYPES: dict[str, PrimitiveType] = {"string": StringType(), "integer": LongType(), "number": DoubleType(),
                                         "boolean": BooleanType()}
_TEXT = "json"  # a node kept as the JSON text of the value


class JsonValueError(ValueError):
    """A JSON value that does not have its schema's type."""


class _Json:
    def __init__(self, root: object, references: dict[str, object]) -> None:
        self.ids = _Ids()
        self.references = references
        self.root = root
        self.active: list[str] = []

    def deref(self, schema: dict, doc: object) -> tuple[object, object, str]:
        ref = schema["$ref"]
        where, _, frag = ref.partition("#")
        if where:
            if where not in self.references:
                raise SchemaMapError(f"JSON Schema $ref {ref!r} names no reference of the schema")
            doc = self.references[where]
        target = doc
        for part in [p for p in frag.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise SchemaMapError(f"JSON Schema $ref {ref!r} points at nothing")
            target = target[part]
        return target, doc, f"{where}#{frag}"

    def node(self, schema: object, doc: object) -> tuple[IcebergType, Callable[[object], object]]:
        """(type, shaper): the shaper checks a decoded JSON value against the type and
        returns what Arrow takes for it (JsonValueError when it does not fit)."""
        if schema is True or schema == {}:
            return StringType(), _as_text
        if not isinstance(schema, dict):
            raise SchemaMapError(f"not a JSON Schema: {schema!r}")
        if "$ref" in schema:
            target, tdoc, key = self.deref(schema, doc)
            if key in self.active:
                raise SchemaMapError(f"JSON Schema {key} is recursive: Iceberg has no type for it")
            self.active.append(key)
            try:
                return self.node(target, tdoc)
            finally:
                self.active.pop()
        for k in ("oneOf", "anyOf"):
            if k in schema and "type" not in schema and "properties" not in schema:
                alts = [a for a in schema[k] if not (isinstance(a, dict) and a.get("type") == "null")]
                return self.node(alts[0], doc) if len(alts) == 1 else (StringType(), _as_text)
        t = schema.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            if len(rest) != 1:
                return StringType(), _as_text
            t = rest[0]
        if t is None:
            if "properties" in schema:
                t = "object"
            elif "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
                t = "string"
            else:
                return StringType(), _as_text
        if t in _JSON_TYPES:
            return _JSON_TYPES[t], _PRIM_CHECK[t]
        if t == "array":
            items = schema.get("items")
            et, eshape = (StringType(), _as_text) if not isinstance(items, dict | bool) or items is False \
                else self.node(items, doc)
            return ListType(self.ids(), et, element_required=False), _list_shaper(eshape)
        if t == "object":
            props = schema.get("properties")
            if props:
                subs = [(name, *self.node(sub, doc)) for name, sub in props.items()]
                st = StructType(*[_optional(self.ids, n, ft) for n, ft, _ in subs])
                return st, _struct_shaper([(n, s) for n, _, s in subs])
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                vt, vshape = self.node(extra, doc)
                return (MapType(self.ids(), StringType(), self.ids(), vt, value_required=False),
                        _map_shaper(vshape))
            return StringType(), _as_text
        raise SchemaMapError(f"JSON Schema type {t!r} has no column type")


def _as_text(v: object) -> object:
    return None if v is None else json.dumps(v, separators=(",", ":"))


def _check(pred: Callable[[object], bool], what: str) -> Callable[[object], object]:
    def check(v: object) -> object:
        if v is None or pred(v):
            return v
        raise JsonValueError(f"{json.dumps(v)[:80]} is not {what}")
    return check


_PRIM_CHECK = {
    "string": _check(lambda v: isinstance(v, str), "a string"),
    "boolean": _check(lambda v: isinstance(v, bool), "a boolean"),
    # Arrow would truncate 1.5 into a long: the schema says integer, so it is an error
    "integer": _check(lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": _check(lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
}


def _list_shaper(item: Callable[[object], object]) -> Callable[[object], object]:
    def shape(v: object) -> object:
        if v is None:
            return None
        if not isinstance(v, list):
            raise JsonValueError(f"{json.dumps(v)[:80]} is not an array")
        return [item(x) for x in v]
    return shape


def _map_shaper(item: Callable[[object], object]) -> Callable[[object], object]:
    def shape(v: object) -> object:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise JsonValueError(f"{json.dumps(v)[:80]} is not an object")
        return [(k, item(x)) for k, x in v.items()]
    return shape


def _struct_shaper(fields: list[tuple[str, Callable[[object], object]]]) -> Callable[[object], object]:
    def shape(v: object) -> object:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise JsonValueError(f"{json.dumps(v)[:80]} is not an object")
        return {n: s(v.get(n)) for n, s in fields}
    return shape


def json_columns(schema_text: str, references: tuple[tuple[str, str], ...] = ()) -> MappedSchema:
    """The columns of a JSON Schema of an object with properties; its shaper checks each
    value's types (JsonValueError) and turns the text nodes and maps into Arrow's input."""
    try:
        root = json.loads(schema_text)
        refs = {name: json.loads(text) for name, text in references}
    except json.JSONDecodeError as exc:
        raise SchemaMapError(f"the JSON Schema is not JSON: {exc}") from None
    t, shape = _Json(root, refs).node(root, root)
    if not isinstance(t, StructType):
        raise SchemaMapError(f"the value schema is a JSON {t}, not an object with properties: it has no fields "
                             f"to make columns of")
    return _mapped(t, shape)


# --- Iceberg types to Arrow, and fitting a schema into a table's --------------------------


def arrow_type(t: IcebergType) -> pa.DataType:
    """The Arrow type rows are built in for an Iceberg type (small offsets, as
    tables.records builds the metadata columns; pyiceberg takes them)."""
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.field_type), nullable=not f.required) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(pa.field("element", arrow_type(t.element_type), nullable=not t.element_required))
    if isinstance(t, MapType):
        return pa.map_(pa.field("key", arrow_type(t.key_type), nullable=False),
                       pa.field("value", arrow_type(t.value_type), nullable=not t.value_required))
    simple = {BooleanType: pa.bool_(), IntegerType: pa.int32(), LongType: pa.int64(), FloatType: pa.float32(),
              DoubleType: pa.float64(), StringType: pa.string(), BinaryType: pa.binary(), DateType: pa.date32(),
              TimeType: pa.time64("us"), TimestampType: pa.timestamp("us"),
              TimestamptzType: pa.timestamp("us", tz="UTC")}
    for cls, at in simple.items():
        if type(t) is cls:
            return at
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    raise SchemaMapError(f"no Arrow type for Iceberg {t}")


class Incompatible(ValueError):
    """A record schema whose columns clash with the table's (the message names them)."""


#: Iceberg's allowed type promotions (the table's type -> the wider one it may become)
_WIDER = {IntegerType: LongType, FloatType: DoubleType}


def _fit_type(table: IcebergType, rec: IcebergType, path: str) -> bool:
    """Whether ``rec`` fits ``table`` (Incompatible if not); True when the table's type
    must change (a field to add below, or a promotion)."""
    if isinstance(table, StructType) and isinstance(rec, StructType):
        changed = False
        for f in rec.fields:
            tf = next((x for x in table.fields if x.name == f.name), None)
            if tf is None:
                changed = True
            else:
                changed |= _fit_type(tf.field_type, f.field_type, f"{path}.{f.name}")
        return changed
    if isinstance(table, ListType) and isinstance(rec, ListType):
        return _fit_type(table.element_type, rec.element_type, f"{path}.element")
    if isinstance(table, MapType) and isinstance(rec, MapType):
        return (_fit_type(table.key_type, rec.key_type, f"{path}.key")
                | _fit_type(table.value_type, rec.value_type, f"{path}.value"))
    if table == rec:
        return False
    if _WIDER.get(type(rec)) is type(table):
        return False  # written into the wider column
    if _WIDER.get(type(table)) is type(rec):
        return True  # the column widens
    if isinstance(table, DecimalType) and isinstance(rec, DecimalType) and table.scale == rec.scale:
        return rec.precision > table.precision
    raise Incompatible(f"column {path.lstrip('.')} is {table} in the table, {rec} in the record's schema")


def fit(table: Schema, mapped: MappedSchema) -> bool:
    """Whether the record schema's columns fit the table's (Incompatible if not: a type
    that Iceberg cannot promote, or a metadata column's); True when the table's schema must
    evolve first (``update_schema().union_by_name(mapped.as_schema())``)."""
    cols = mapped.as_schema()
    metadata = set(METADATA_COLUMNS)
    changed = False
    # top-level names compared as names: Schema.find_field would read a dot as a path
    by_name = {f.name: f for f in table.fields}
    for f in cols.fields:
        tf = by_name.get(f.name)
        if tf is None:
            changed = True
            continue
        if f.name in metadata:
            raise Incompatible(f"column {f.name} is a metadata column")
        changed |= _fit_type(tf.field_type, f.field_type, f.name)
    return changed


def needs_update(table: Schema, wanted: Schema) -> bool:
    """Whether ``table`` lacks a column of ``wanted`` or has a narrower type for one
    (Incompatible when a type clashes): the writer then evolves the table first."""
    return _fit_type(table.as_struct(), wanted.as_struct(), "")


def _merge_type(table: IcebergType, rec: IcebergType, ids: Iterator[int]) -> IcebergType:
    if isinstance(table, StructType) and isinstance(rec, StructType):
        fields = list(table.fields)
        for f in rec.fields:
            i = next((k for k, x in enumerate(fields) if x.name == f.name), None)
            if i is None:
                fields.append(NestedField(next(ids), f.name, _fresh_ids(f.field_type, ids), required=False))
            else:
                old = fields[i]
                fields[i] = NestedField(old.field_id, old.name, _merge_type(old.field_type, f.field_type, ids),
                                        required=old.required)
        return StructType(*fields)
    if isinstance(table, ListType) and isinstance(rec, ListType):
        return ListType(table.element_id, _merge_type(table.element_type, rec.element_type, ids),
                        element_required=table.element_required)
    if isinstance(table, MapType) and isinstance(rec, MapType):
        return MapType(table.key_id, table.key_type, table.value_id,
                       _merge_type(table.value_type, rec.value_type, ids), value_required=table.value_required)
    if _WIDER.get(type(table)) is type(rec):
        return rec
    if isinstance(table, DecimalType) and isinstance(rec, DecimalType) and rec.precision > table.precision:
        return rec
    return table


def _fresh_ids(t: IcebergType, ids: Iterator[int]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(*[NestedField(next(ids), f.name, _fresh_ids(f.field_type, ids), required=f.required)
                            for f in t.fields])
    if isinstance(t, ListType):
        return ListType(next(ids), _fresh_ids(t.element_type, ids), element_required=t.element_required)
    if isinstance(t, MapType):
        return MapType(next(ids), t.key_type, next(ids), _fresh_ids(t.value_type, ids),
                       value_required=t.value_required)
    return t


def merged(table: Schema, mapped: MappedSchema) -> Schema:
    """The table's schema once the record schema's columns are in (what pyiceberg's
    ``union_by_name`` makes of it: new fields appended in order, promotions applied; the ids
    of new fields here are placeholders, the table assigns its own). ``fit`` first."""
    ids = itertools.count(table.highest_field_id + 1)
    struct = _merge_type(table.as_struct(), mapped.as_schema().as_struct(), ids)
    return Schema(*struct.fields)  # type: ignore[union-attr]
