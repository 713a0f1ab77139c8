"""The text of an Avro schema's normalised form, as Confluent's
``AvroSchemaUtils.toNormalizedString`` writes it (``AvroSchema.normalize()`` then parses
that text again, and the normalised schema's canonical string is the parsed text's
``Schema.toString()``).

What it writes, adapted from Avro's Parsing Canonical Form but keeping the metadata:

- each named type by its full name, ``{"name":<full name>,"type":...}`` first; a type met
  again, or one of the referenced schemas' top-level types, as its quoted full name; an
  ``error`` becomes a ``record``;
- an enum's symbols, a fixed type's size, a record's fields: each field as
  ``name, type, order (always, upper case), doc, aliases (sorted), default, props``;
- then a valid logical type (``logicalType``, and a decimal's ``precision`` and ``scale``
  unless 0), a named type's doc (unless empty), its aliases (full names, sorted), an enum's
  default, and all other attributes sorted by name, each value with its object keys sorted;
- defaults go through Avro's ``JacksonUtils.toObject(default, fieldSchema)``, which reads a
  union's default with the union's first branch: a default that does not fit the first
  branch is dropped, an int default of a long/float/double field becomes that type (a float
  printed by Java's ``Float.toString``).

Where Java would fail (a default object with a key that is not a field, a JSON integer
beyond 64 bits in an attribute, ...), :class:`InvalidSchemaError` says so.
"""

from __future__ import annotations

from typing import Any

from schema_registry import avro_json
from schema_registry.avro_json import Float32
from schema_registry.avro_model import (
    MISSING,
    Array,
    AvroType,
    Enum,
    Field,
    Fixed,
    Map,
    Named,
    Record,
    Union,
    to_string,
)
from schema_registry.schema_types import InvalidSchemaError

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)


class _JavaNull:
    """Java's null (no value), as opposed to JSON null."""


_JAVA_NULL: Any = _JavaNull()


class _JsonNull:
    """``JsonProperties.NULL_VALUE``: JSON null as an object."""


_JSON_NULL: Any = _JsonNull()


def normalized_text(schema: AvroType, reference_names: list[str]) -> str:
    """``toNormalizedString``: ``reference_names`` are the referenced schemas' full names."""
    env = {name: avro_json.quote(name) for name in reference_names}
    out: list[str] = []
    _build(env, schema, out)
    return "".join(out)


def _build(env: dict[str, str], s: AvroType, out: list[str]) -> None:
    if isinstance(s, Union):
        out.append("[")
        for i, branch in enumerate(s.types):
            if i:
                out.append(",")
            _build(env, branch, out)
        out.append("]")
    elif isinstance(s, Array | Map):
        out.append('{"type":' + avro_json.quote(s.type))
        out.append(',"items":' if isinstance(s, Array) else ',"values":')
        _build(env, s.items if isinstance(s, Array) else s.values, out)
        _logical_props(s, out)
        _simple_props(s.props, out)
        out.append("}")
    elif isinstance(s, Named):
        full = s.full_name
        if full in env:
            out.append(env[full])
            return
        env[full] = avro_json.quote(full)
        out.append('{"name":' + env[full] + ',"type":' + avro_json.quote(s.type))
        if isinstance(s, Enum):
            out.append(',"symbols":' + avro_json.dumps(s.symbols))
        elif isinstance(s, Fixed):
            out.append(f',"size":{s.size}')
        elif isinstance(s, Record):
            out.append(',"fields":[')
            for i, f in enumerate(s.fields):
                if i:
                    out.append(",")
                out.append('{"name":' + avro_json.quote(f.name) + ',"type":')
                _build(env, f.schema, out)
                _field_props(f, out)
                out.append("}")
            out.append("]")
        _logical_props(s, out)
        if s.doc:
            out.append(',"doc":' + avro_json.quote(s.doc))
        if s.aliases:
            out.append(',"aliases":' + avro_json.dumps(avro_json.java_sorted(set(s.alias_names()))))
        if isinstance(s, Enum) and s.default is not None:
            out.append(',"default":' + avro_json.quote(s.default))
        _simple_props(s.props, out)
        out.append("}")
    elif s.logical is not None or s.props:
        out.append('{"type":' + avro_json.quote(s.type))
        _logical_props(s, out)
        _simple_props(s.props, out)
        out.append("}")
    else:
        out.append(avro_json.quote(s.type))


def _logical_props(s: AvroType, out: list[str]) -> None:
    if s.logical is None:
        return
    name, precision, scale = s.logical
    out.append(',"logicalType":' + avro_json.quote(name))
    if name == "decimal":
        out.append(f',"precision":{precision}')
        if scale != 0:
            out.append(f',"scale":{scale}')


def _simple_props(props: dict[str, Any], out: list[str]) -> None:
    for key in avro_json.java_sorted(props):
        out.append("," + avro_json.quote(key) + ":" + avro_json.dumps(_gen(_to_object(props[key], None))))


def _field_props(f: Field, out: list[str]) -> None:
    out.append(',"order":' + avro_json.quote(f.order.upper()))
    if f.doc is not None:
        out.append(',"doc":' + avro_json.quote(f.doc))
    if f.aliases:
        out.append(',"aliases":' + avro_json.dumps(avro_json.java_sorted(set(f.aliases))))
    default = _to_object(f.default, f.schema)
    if default is not _JAVA_NULL:
        out.append(',"default":' + avro_json.dumps(_gen(default)))
    _simple_props(f.props, out)


def _to_object(node: Any, schema: AvroType | None) -> Any:
    """Avro's ``JacksonUtils.toObject(jsonNode, schema)``: the Java value Avro makes of a
    default (or, without a schema, of an attribute's value)."""
    if isinstance(schema, Union):
        return _to_object(node, schema.types[0])
    t = schema.type if schema is not None else None
    if node is MISSING:
        return _JAVA_NULL
    if node is None:
        return _JSON_NULL
    if isinstance(node, bool):
        return node
    if isinstance(node, int):
        if not _LONG[0] <= node <= _LONG[1]:
            return _JAVA_NULL  # a BigIntegerNode: none of toObject's cases
        if t is None or t in ("int", "long"):
            return node
        if t == "float":
            return Float32(node)
        return float(node) if t == "double" else _JAVA_NULL
    if isinstance(node, float):
        if t is None or t == "double":
            return node
        return Float32(node) if t == "float" else _JAVA_NULL
    if isinstance(node, str):
        if t is None or t in ("string", "enum"):
            return node
        if t in ("bytes", "fixed"):
            return "".join(c if ord(c) <= 0xFF else "?" for c in node)
        return _JAVA_NULL
    if isinstance(node, list):
        if schema is not None and not isinstance(schema, Array):
            raise InvalidSchemaError(f"Not an array: {to_string(schema, set())}")
        return [_to_object(item, schema.items if isinstance(schema, Array) else None) for item in node]
    result = {}
    for key, value in node.items():
        inner: AvroType | None = None
        if isinstance(schema, Map):
            inner = schema.values
        elif isinstance(schema, Record):
            field = schema.field(key)
            if field is None:
                raise InvalidSchemaError(
                    f"Cannot normalize the default {avro_json.dumps(node)}: {key} is not a field of {schema.full_name}")
            inner = field.schema
        result[key] = _to_object(value, inner)
    return result


def _gen(datum: Any) -> Any:
    """Confluent's ``AvroSchemaUtils.toJsonNode``: the value as JSON, object keys sorted."""
    if datum is _JAVA_NULL:
        raise InvalidSchemaError("Cannot normalize a value Avro cannot convert (a number beyond 64 bits, or a "
                                 "value of the wrong type inside a default)")
    if datum is _JSON_NULL:
        return None
    if isinstance(datum, list):
        return [_gen(item) for item in datum]
    if isinstance(datum, dict):
        return {key: _gen(datum[key]) for key in avro_json.java_sorted(datum)}
    return datum
