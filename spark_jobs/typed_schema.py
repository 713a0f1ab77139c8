"""Spark types for registry schemas: an Avro schema mapped as Spark's ``from_avro`` maps it
(``SchemaConverters.toSqlType``), a JSON Schema mapped to the struct of its properties.

Each mapping returns a :class:`Node` tree next to the Spark type: what the executors need
to turn decoded values into Arrow arrays of that type (:mod:`spark_jobs.typed_values`).

Avro -> Spark:

=====================================  ===========================================
record                                 struct (fields in order; a field is nullable
                                       only when its type is a union with null)
array / map                            array / map<string, ...>
union [null, X] (either order)         X, nullable
union [int, long] / [float, double]    long / double (as Spark does)
any other union                        struct<member0, member1, ...> (null left out),
                                       the member that was written set, the others null
enum / string (uuid too)               string
bytes / fixed                          binary
int, long, float, double, boolean      integer, long, float, double, boolean
date                                   date
timestamp-millis / -micros             timestamp (µs, UTC)
local-timestamp-millis / -micros       timestamp_ntz
decimal(p, s) on bytes or fixed        decimal(p, s) (binary when p > 38)
time-millis / time-micros, others      the underlying int / long
=====================================  ===========================================

Logical types are decoded as their underlying type (fastavro is given the schemas
without ``logicalType``: no Python date or Decimal objects per record) and converted
column-wise in Arrow afterwards (:attr:`Node.logical`).

JSON Schema -> Spark: ``object`` with ``properties`` -> struct of them in order (all
nullable: JSON may leave any out), ``additionalProperties`` alone -> map<string, ...>,
``array`` -> array of ``items``, ``string`` / ``integer`` / ``number`` / ``boolean`` ->
string / long / double / boolean, a ``type`` list or ``oneOf`` / ``anyOf`` of null and one
type -> that type; anything else (no type, several types) -> string holding the JSON text.
``$ref`` is followed within the document (``#/definitions/...``, ``#/$defs/...``) and to
the registry references named by it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["Node", "avro_node", "json_node", "strip_logical_types"]

AVRO_PRIMITIVES = {
    "null": None, "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_NAMED = ("record", "error", "enum", "fixed")


@dataclass
class Node:
    """One type of a decoded column's tree.

    kind: ``prim`` (a leaf: boolean, numbers, string, binary, and enum/fixed, which decode
    to str / bytes), ``record``, ``array``, ``map``, ``union`` (a general union: a struct
    of its members) or ``json`` (JSON text of whatever value is there). ``avro`` is the
    Avro type name of a leaf or the full name of a named type (for union members).
    ``logical`` names the column-wise conversion of a leaf (``date``, ``ts-millis``,
    ``ts-micros``, ``decimal``)."""

    kind: str
    spark: DataType
    nullable: bool = False
    children: list[tuple[str, Node]] = field(default_factory=list)  # record fields; union members
    item: Node | None = None  # array items, map values
    logical: str | None = None
    avro: str | None = None

    @property
    def needs_shaping(self) -> bool:
        """Does a decoded value need per-record reshaping before Arrow takes it (a general
        union or JSON text somewhere in the tree)?"""
        if self.kind in ("union", "json"):
            return True
        return any(c.needs_shaping for _, c in self.children) or (self.item is not None and self.item.needs_shaping)

    @property
    def has_logical(self) -> bool:
        return self.logical is not None or any(c.has_logical for _, c in self.children) or (
            self.item is not None and self.item.has_logical)


# --- Avro ---------------------------------------------------------------------------------


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


class _AvroMapper:
    def __init__(self) -> None:
        self.named: dict[str, dict | str] = {}  # full name -> its definition
        self.namespaces: dict[str, str | None] = {}
        self.active: list[str] = []  # records being mapped (recursion check)

    def define(self, schema: object, namespace: str | None) -> None:
        """Collect the named types a schema defines (for references and later uses)."""
        if isinstance(schema, list):
            for s in schema:
                self.define(s, namespace)
        elif isinstance(schema, dict):
            t = schema.get("type")
            if t in _NAMED:
                full = _full_name(schema["name"], schema.get("namespace", namespace))
                self.named.setdefault(full, schema)
                ns = full.rpartition(".")[0] or None
                self.namespaces.setdefault(full, ns)
                for f in schema.get("fields", ()) if t in ("record", "error") else ():
                    self.define(f["type"], ns)
            elif t == "array":
                self.define(schema.get("items"), namespace)
            elif t == "map":
                self.define(schema.get("values"), namespace)
            elif isinstance(t, list | dict):
                self.define(t, namespace)

    def node(self, schema: object, namespace: str | None) -> Node:
        if isinstance(schema, str):
            if schema in AVRO_PRIMITIVES:
                if schema == "null":
                    raise ValueError("an Avro null type (outside a union) has no Spark column type")
                return Node("prim", AVRO_PRIMITIVES[schema], avro=schema)
            full = _full_name(schema, namespace) if _full_name(schema, namespace) in self.named else schema
            if full not in self.named:
                raise ValueError(f"unknown Avro type {schema!r} (not defined before it is used, nor a reference)")
            return self.node(self.named[full], self.namespaces.get(full))
        if isinstance(schema, list):
            return self.union(schema, namespace)
        if not isinstance(schema, dict):
            raise ValueError(f"not an Avro schema: {schema!r}")
        t = schema.get("type")
        if isinstance(t, list | dict):
            return self.node(t, namespace)
        if t in ("record", "error"):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            if full in self.active:
                raise ValueError(f"Avro record {full} is recursive: Spark has no type for it")
            self.active.append(full)
            ns = full.rpartition(".")[0] or None
            children = [(f["name"], self.node(f["type"], ns)) for f in schema.get("fields", ())]
            self.active.pop()
            spark = StructType([StructField(n, c.spark, c.nullable) for n, c in children])
            return Node("record", spark, children=children, avro=full)
        if t == "enum":
            return Node("prim", StringType(), avro=_full_name(schema["name"], schema.get("namespace", namespace)))
        if t == "fixed":
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            if schema.get("logicalType") == "decimal":
                return self.decimal(schema, full)
            return Node("prim", BinaryType(), avro=full)
        if t == "array":
            item = self.node(schema["items"], namespace)
            return Node("array", ArrayType(item.spark, item.nullable), item=item, avro="array")
        if t == "map":
            item = self.node(schema["values"], namespace)
            return Node("map", MapType(StringType(), item.spark, item.nullable), item=item, avro="map")
        if t in AVRO_PRIMITIVES:
            base = self.node(t, namespace)
            lt = schema.get("logicalType")
            if t == "int" and lt == "date":
                return Node("prim", DateType(), logical="date", avro=t)
            if t == "long" and lt in ("timestamp-millis", "timestamp-micros"):
                return Node("prim", TimestampType(), logical="ts-" + lt.split("-")[1], avro=t)
            if t == "long" and lt in ("local-timestamp-millis", "local-timestamp-micros"):
                return Node("prim", TimestampNTZType(), logical="ts-" + lt.split("-")[2], avro=t)
            if t == "bytes" and lt == "decimal":
                return self.decimal(schema, t)
            return base
        raise ValueError(f"unknown Avro type {t!r}")

    def decimal(self, schema: dict, avro: str) -> Node:
        p, s = schema.get("precision"), schema.get("scale", 0)
        if isinstance(p, int) and isinstance(s, int) and 0 < p <= 38 and 0 <= s <= p:
            return Node("prim", DecimalType(p, s), logical="decimal", avro=avro)
        return Node("prim", BinaryType(), avro=avro)  # an invalid decimal is its bytes, as Avro says

    def union(self, branches: list, namespace: str | None) -> Node:
        members = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        nullable = len(members) < len(branches)
        if not members:
            raise ValueError("an Avro union of null alone has no Spark column type")
        kinds = {m if isinstance(m, str) else m.get("type") for m in members}
        if len(members) == 1:
            n = self.node(members[0], namespace)
            n.nullable = nullable or n.nullable
            return n
        if len(members) == 2 and kinds in ({"int", "long"}, {"float", "double"}):
            spark = LongType() if "long" in kinds else DoubleType()
            return Node("prim", spark, nullable=nullable, avro="long" if "long" in kinds else "double")
        nodes = []
        for i, m in enumerate(members):
            n = self.node(m, namespace)
            n.nullable = True  # only the member written is set
            nodes.append((f"member{i}", n))
        spark = StructType([StructField(name, n.spark, True) for name, n in nodes])
        return Node("union", spark, nullable=nullable, children=nodes, avro="union")


def avro_node(schema_text: str, references: tuple[tuple[str, str], ...] = ()) -> Node:
    """The Spark type (``node.spark``) and conversion tree of an Avro schema's text, its
    references' named types defined first."""
    m = _AvroMapper()
    for _, text in references:
        m.define(_parse_json(text, "Avro"), None)
    root = _parse_json(schema_text, "Avro")
    m.define(root, None)
    return m.node(root, None)


def strip_logical_types(schema: object) -> object:
    """The schema without ``logicalType`` attributes (fastavro then returns the underlying
    ints, longs and bytes, which :mod:`spark_jobs.typed_values` converts column-wise)."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "logicalType":
                continue
            if k in ("type", "items", "values"):
                v = strip_logical_types(v)
            elif k == "fields":
                v = [{**f, "type": strip_logical_types(f["type"])} for f in v]
            out[k] = v
        return out
    return schema


def _parse_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the registry's {what} schema is not JSON: {exc}") from None


# --- JSON Schema --------------------------------------------------------------------------

_JSON_TYPES = {"string": StringType(), "integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}


class _JsonMapper:
    def __init__(self, root: object, references: dict[str, object]) -> None:
        self.root = root
        self.references = references
        self.active: list[str] = []

    def deref(self, schema: dict, doc: object) -> tuple[object, object, str]:
        ref = schema["$ref"]
        where, _, frag = ref.partition("#")
        if where:
            if where not in self.references:
                raise ValueError(f"JSON Schema $ref {ref!r} names no reference of the schema")
            doc = self.references[where]
        target = doc
        for part in [p for p in frag.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ValueError(f"JSON Schema $ref {ref!r} points at nothing")
            target = target[part]
        return target, doc, f"{where}#{frag}"

    def node(self, schema: object, doc: object) -> Node:
        if schema is True or schema == {}:
            return Node("json", StringType(), nullable=True)
        if not isinstance(schema, dict):
            raise ValueError(f"not a JSON Schema: {schema!r}")
        if "$ref" in schema:
            target, tdoc, key = self.deref(schema, doc)
            if key in self.active:
                raise ValueError(f"JSON Schema {key} is recursive: Spark has no type for it")
            self.active.append(key)
            try:
                return self.node(target, tdoc)
            finally:
                self.active.pop()
        for k in ("oneOf", "anyOf"):
            if k in schema and "type" not in schema and "properties" not in schema:
                alts = [a for a in schema[k] if not (isinstance(a, dict) and a.get("type") == "null")]
                if len(alts) == 1:
                    n = self.node(alts[0], doc)
                    n.nullable = True
                    return n
                return Node("json", StringType(), nullable=True)
        t = schema.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            if len(rest) != 1:
                return Node("json", StringType(), nullable=True)
            t = rest[0]
        if t is None:
            if "properties" in schema:
                t = "object"
            elif "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
                t = "string"
            elif "const" in schema and isinstance(schema["const"], str):
                t = "string"
            else:
                return Node("json", StringType(), nullable=True)
        if t in _JSON_TYPES:
            return Node("prim", _JSON_TYPES[t], nullable=True, avro=t)
        if t == "array":
            items = schema.get("items")
            if not isinstance(items, dict | bool) or items is False:
                item = Node("json", StringType(), nullable=True)
            else:
                item = self.node(items, doc)
            return Node("array", ArrayType(item.spark, True), nullable=True, item=item)
        if t == "object":
            props = schema.get("properties")
            if props:
                children = [(name, self.node(sub, doc)) for name, sub in props.items()]
                spark = StructType([StructField(n, c.spark, True) for n, c in children])
                return Node("record", spark, nullable=True, children=children)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                item = self.node(extra, doc)
                return Node("map", MapType(StringType(), item.spark, True), nullable=True, item=item)
            return Node("json", StringType(), nullable=True)
        if t == "null":
            raise ValueError("a JSON Schema of type null alone has no Spark column type")
        raise ValueError(f"unknown JSON Schema type {t!r}")


def json_node(schema_text: str, references: tuple[tuple[str, str], ...] = ()) -> Node:
    """The Spark type and shaping tree of a JSON Schema's text."""
    root = _parse_json(schema_text, "JSON")
    refs = {name: _parse_json(text, "JSON") for name, text in references}
    return _JsonMapper(root, refs).node(root, root)
