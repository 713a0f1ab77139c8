"""Avro schemas as Avro's Java library holds them (``org.apache.avro.Schema``), and their
text as its ``Schema.toString()`` prints it.

Confluent's ``AvroSchema.canonicalString()`` is that ``toString`` (with the referenced
schemas' names known, so that they are printed by name), so the model keeps what Java keeps
and in its order: a schema's other attributes ("props", including ``logicalType``) in the
order they came, a field's default as the JSON it was, aliases as names resolved against
the schema's namespace, and each named type as one object wherever it is used.
"""

from __future__ import annotations

from typing import Any

from schema_registry import avro_json

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "enum", "fixed")
#: the names of Java's ``Schema.Type`` (a name spelled like one is always written in full)
TYPE_NAMES = frozenset((*PRIMITIVES, *NAMED, "array", "map", "union"))


class _Missing:
    """No value (a field without a default), as opposed to JSON null (None)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Name:
    """A named type's name, or an alias: Avro's ``Schema.Name``."""

    __slots__ = ("full", "name", "space")

    def __init__(self, name: str, space: str | None) -> None:
        if "." in name:
            space, name = name.rsplit(".", 1)
        self.name = name
        self.space = space or None
        self.full = f"{self.space}.{name}" if self.space else name

    def qualified(self, default_space: str | None) -> str:
        """The name as written where ``default_space`` is the enclosing namespace:
        ``getQualified``."""
        if self.space is not None and self.space == default_space and self.name not in TYPE_NAMES:
            return self.name
        return self.full


class AvroType:
    """One schema node. ``type`` is Java's ``Schema.Type`` in lower case; an ``error`` is a
    record with ``is_error``."""

    __slots__ = ("logical", "props", "type")

    def __init__(self, type_: str) -> None:
        self.type = type_
        self.props: dict[str, Any] = {}
        #: the valid logical type (name, precision, scale) or None (Avro ignores invalid ones)
        self.logical: tuple[str, int, int] | None = None

    @property
    def full_name(self) -> str:
        """Java's ``getFullName()``: a named type's full name, else the type's name."""
        return self.type

    def __str__(self) -> str:
        """Java's ``Schema.toString()``."""
        return to_string(self, set())


class Named(AvroType):
    __slots__ = ("aliases", "doc", "name_")

    def __init__(self, type_: str, name: Name, doc: str | None) -> None:
        super().__init__(type_)
        self.name_ = name
        self.doc = doc
        #: aliases in their order (a set: Java's LinkedHashSet of names)
        self.aliases: list[Name] = []

    @property
    def name(self) -> str:
        return self.name_.name

    @property
    def space(self) -> str | None:
        return self.name_.space

    @property
    def full_name(self) -> str:
        return self.name_.full

    def alias_names(self) -> list[str]:
        """Java's ``getAliases()``: full names, ``.name`` for an alias in the null namespace
        of a type that has one."""
        return [f".{a.name}" if a.space is None and self.space is not None else a.full for a in self.aliases]

    def add_alias(self, alias: Name) -> None:
        if all(a.full != alias.full for a in self.aliases):
            self.aliases.append(alias)


class Field:
    """A record's field: Avro's ``Schema.Field``."""

    __slots__ = ("aliases", "default", "doc", "name", "order", "pos", "props", "schema")

    def __init__(self, name: str, schema: AvroType, doc: str | None, default: Any, order: str) -> None:
        self.name = name
        self.schema = schema
        self.doc = doc
        #: the default as JSON (None is JSON null), MISSING when there is none
        self.default = default
        #: "ascending", "descending" or "ignore"
        self.order = order
        #: None when the field has no "aliases" attribute
        self.aliases: list[str] | None = None
        self.props: dict[str, Any] = {}
        self.pos = -1

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING

    def __str__(self) -> str:
        """Java's ``Field.toString()``."""
        return f"{self.name} type:{self.schema.type.upper()} pos:{self.pos}"


class Record(Named):
    __slots__ = ("by_name", "fields", "is_error")

    def __init__(self, name: Name, doc: str | None, is_error: bool) -> None:
        super().__init__("record", name, doc)
        self.is_error = is_error
        self.fields: list[Field] = []
        self.by_name: dict[str, Field] = {}

    def field(self, name: str) -> Field | None:
        return self.by_name.get(name)


class Unresolved(Record):
    """A name used before its type is defined: Avro 1.12's placeholder (an empty record,
    ``SchemaResolver.unresolvedSchema``), replaced once the whole text is parsed."""

    __slots__ = ("target",)

    def __init__(self, target: str, number: int) -> None:
        super().__init__(Name(f"UnresolvedSchema_{number}", "org.apache.avro.compiler"), "unresolved schema", False)
        self.target = target
        self.props["org.apache.avro.idl.unresolved.name"] = target


class Enum(Named):
    __slots__ = ("default", "symbols")

    def __init__(self, name: Name, doc: str | None, symbols: list[str | None], default: str | None) -> None:
        super().__init__("enum", name, doc)
        #: None for a symbol that is not a string: only in a schema read back without name
        #: validation, which Confluent's validateNames then refuses
        self.symbols = symbols
        self.default = default


class Fixed(Named):
    __slots__ = ("size",)

    def __init__(self, name: Name, doc: str | None, size: int) -> None:
        super().__init__("fixed", name, doc)
        self.size = size


class Array(AvroType):
    __slots__ = ("items",)

    def __init__(self, items: AvroType) -> None:
        super().__init__("array")
        self.items = items


class Map(AvroType):
    __slots__ = ("values",)

    def __init__(self, values: AvroType) -> None:
        super().__init__("map")
        self.values = values


class Union(AvroType):
    __slots__ = ("types",)

    def __init__(self, types: list[AvroType]) -> None:
        super().__init__("union")
        self.types = types


def equal(a: AvroType, b: AvroType, seen: set[tuple[int, int]] | None = None) -> bool:
    """Java's ``Schema.equals``: type, full name, props, fields (name, type, default, order,
    props), symbols, size; docs, aliases and an enum's default do not count."""
    if a is b:
        return True
    if a.type != b.type or not avro_json.json_equal(a.props, b.props):
        return False
    if isinstance(a, Named) and (not isinstance(b, Named) or a.full_name != b.full_name):
        return False
    seen = set() if seen is None else seen
    if isinstance(a, Record) and isinstance(b, Record):
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
        return len(a.fields) == len(b.fields) and all(
            fa.name == fb.name and fa.order == fb.order and equal(fa.schema, fb.schema, seen)
            and _default_equal(fa.default, fb.default) and avro_json.json_equal(fa.props, fb.props)
            for fa, fb in zip(a.fields, b.fields, strict=True))
    if isinstance(a, Enum) and isinstance(b, Enum):
        return a.symbols == b.symbols
    if isinstance(a, Fixed) and isinstance(b, Fixed):
        return a.size == b.size
    if isinstance(a, Array) and isinstance(b, Array):
        return equal(a.items, b.items, seen)
    if isinstance(a, Map) and isinstance(b, Map):
        return equal(a.values, b.values, seen)
    if isinstance(a, Union) and isinstance(b, Union):
        return len(a.types) == len(b.types) and all(
            equal(x, y, seen) for x, y in zip(a.types, b.types, strict=True))
    return True


def _default_equal(a: Any, b: Any) -> bool:
    if a is MISSING or b is MISSING:
        return a is b
    return avro_json.json_equal(a, b)


# -- Schema.toString() -------------------------------------------------------------------


def to_string(schema: AvroType, known: set[str]) -> str:
    """Java's ``Schema.toString(knownNames)``: compact JSON; a named type already written, or
    in ``known`` (the referenced schemas' names), is written by name."""
    out: list[str] = []
    _to_json(schema, set(known), None, out)
    return "".join(out)


def _key(out: list[str], key: str, first: bool = False) -> None:
    if not first:
        out.append(",")
    out.append(avro_json.quote(key))
    out.append(":")


def _props(props: dict[str, Any], out: list[str]) -> None:
    for key, value in props.items():
        _key(out, key)
        avro_json.write(value, out)


def _to_json(schema: AvroType, known: set[str], space: str | None, out: list[str]) -> None:
    if isinstance(schema, Named):
        if schema.full_name in known:
            out.append(avro_json.quote(schema.name_.qualified(space)))
            return
        known.add(schema.full_name)
        out.append("{")
        _key(out, "type", first=True)
        out.append(avro_json.quote("error" if isinstance(schema, Record) and schema.is_error else schema.type))
        _key(out, "name")
        out.append(avro_json.quote(schema.name))
        if schema.space is not None:
            if schema.space != space:
                _key(out, "namespace")
                out.append(avro_json.quote(schema.space))
        elif space is not None:
            _key(out, "namespace")
            out.append('""')
        if schema.doc is not None:
            _key(out, "doc")
            out.append(avro_json.quote(schema.doc))
        if isinstance(schema, Record):
            _key(out, "fields")
            _fields_to_json(schema, known, out)
        elif isinstance(schema, Enum):
            _key(out, "symbols")
            avro_json.write(schema.symbols, out)
            if schema.default is not None:
                _key(out, "default")
                out.append(avro_json.quote(schema.default))
        elif isinstance(schema, Fixed):
            _key(out, "size")
            out.append(str(schema.size))
        _props(schema.props, out)
        if schema.aliases:
            _key(out, "aliases")
            avro_json.write([a.qualified(schema.space) for a in schema.aliases], out)
        out.append("}")
    elif isinstance(schema, Union):
        out.append("[")
        for i, branch in enumerate(schema.types):
            if i:
                out.append(",")
            _to_json(branch, known, space, out)
        out.append("]")
    elif isinstance(schema, Array | Map):
        out.append("{")
        _key(out, "type", first=True)
        out.append(avro_json.quote(schema.type))
        if isinstance(schema, Array):
            _key(out, "items")
            _to_json(schema.items, known, space, out)
        else:
            _key(out, "values")
            _to_json(schema.values, known, space, out)
        _props(schema.props, out)
        out.append("}")
    elif schema.props:
        out.append("{")
        _key(out, "type", first=True)
        out.append(avro_json.quote(schema.type))
        _props(schema.props, out)
        out.append("}")
    else:
        out.append(avro_json.quote(schema.type))


def _fields_to_json(record: Record, known: set[str], out: list[str]) -> None:
    out.append("[")
    for i, f in enumerate(record.fields):
        if i:
            out.append(",")
        out.append("{")
        _key(out, "name", first=True)
        out.append(avro_json.quote(f.name))
        _key(out, "type")
        _to_json(f.schema, known, record.space, out)
        if f.doc is not None:
            _key(out, "doc")
            out.append(avro_json.quote(f.doc))
        if f.has_default:
            _key(out, "default")
            avro_json.write(f.default, out)
        if f.order != "ascending":
            _key(out, "order")
            out.append(avro_json.quote(f.order))
        if f.aliases:
            _key(out, "aliases")
            avro_json.write(f.aliases, out)
        _props(f.props, out)
        out.append("}")
    out.append("]")
