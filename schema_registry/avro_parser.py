"""Parsing Avro schema text as Avro 1.12's Java ``Schema.Parser`` does, which is what
Confluent's registry runs (``AvroSchema``'s constructor: one parser, each referenced schema
parsed first so that the main schema can use its named types).

What it checks, with Avro's messages: the JSON; the attributes each kind of schema needs
("No type", "Record has no fields", "Enum has no symbols", "Invalid or no size", ...);
names (Confluent parses a new schema with Avro's ``STRICT_VALIDATOR``: ASCII letters, digits
and ``_``, namespaces included; an already-registered one with no validation and then its
own ``validateNames``, the Unicode rules on names, fields and symbols); duplicate fields,
symbols and union branches; a named type defined twice differently ("Can't redefine"; twice
the same is allowed); undefined names (Avro 1.12 allows a name to be used before its
definition in the same text); defaults (for new schemas: "Invalid default for field f: ...
not a ...", a union's default matching any branch, as in Avro 1.12). Logical types are
recognised as Avro does and an invalid one is ignored, not refused.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from schema_registry import avro_json
from schema_registry.avro_model import (
    MISSING,
    PRIMITIVES,
    Array,
    AvroType,
    Enum,
    Field,
    Fixed,
    Map,
    Name,
    Named,
    Record,
    Union,
    Unresolved,
    equal,
    to_string,
)
from schema_registry.schema_types import InvalidSchemaError

SCHEMA_RESERVED = frozenset(("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type",
                             "aliases"))
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
ORDERS = ("ascending", "descending", "ignore")
#: props with which Avro refuses a logical type (``LogicalType.INCOMPATIBLE_PROPS``)
_LOGICAL_INCOMPATIBLE = ("avro.java.string", "java-class", "java-key-class", "java-element-class")
#: logical type -> the types it may annotate (decimal, uuid, duration, variant, map: below)
_LOGICAL_ON = {
    "big-decimal": ("bytes",), "date": ("int",), "time-millis": ("int",), "time-micros": ("long",),
    "timestamp-millis": ("long",), "timestamp-micros": ("long",), "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",), "local-timestamp-micros": ("long",), "local-timestamp-nanos": ("long",),
}
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_MAX_FIXED_SIZE = 2**31 - 1 - 8


def _text(node: Any, key: str) -> str | None:
    """Jackson's ``node.get(key).textValue()``: the attribute when it is a string."""
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, str) else None


def _required(node: Any, key: str, error: str) -> str:
    value = _text(node, key)
    if value is None:
        raise InvalidSchemaError(f"{error}: {avro_json.dumps(node)}")
    return value


def strict_name_error(name: str | None) -> str | None:
    """Avro's ``NameValidator.STRICT_VALIDATOR``: [A-Za-z_][A-Za-z0-9_]*."""
    if name is None:
        return "Null name"
    if not name:
        return "Empty name"
    if not (name[0] == "_" or ("a" <= name[0] <= "z") or ("A" <= name[0] <= "Z")):
        return f"Illegal initial character: {name}"
    for c in name[1:]:
        if not (c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z") or ("0" <= c <= "9")):
            return f"Illegal character in: {name}"
    return None


def _java_letter(c: str, digit_ok: bool) -> bool:
    if ord(c) > 0xFFFF:  # Java sees two surrogate chars, neither a letter
        return False
    category = unicodedata.category(c)
    return category in ("Lu", "Ll", "Lt", "Lm", "Lo") or (digit_ok and category == "Nd")


def utf_name_error(name: str | None) -> str | None:
    """Avro's ``NameValidator.UTF_VALIDATOR`` (Java's ``Character.isLetter``/``isLetterOrDigit``)."""
    if name is None:
        return "Null name"
    if not name:
        return "Empty name"
    if not (name[0] == "_" or _java_letter(name[0], False)):
        return f"Illegal initial character: {name}"
    if any(not (c == "_" or _java_letter(c, True)) for c in name[1:]):
        return f"Illegal character in: {name}"
    return None


def valid_default(schema: AvroType, value: Any) -> bool:
    """Avro 1.12's ``Schema.isValidDefault``."""
    if value is MISSING:
        return False
    t = schema.type
    if t in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if t == "int":
        return avro_json.is_integral(value) and _INT_MIN <= value <= _INT_MAX
    if t == "long":
        return avro_json.is_integral(value) and _LONG_MIN <= value <= _LONG_MAX
    if t in ("float", "double"):
        return avro_json.is_number(value)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "null":
        return value is None
    if isinstance(schema, Array):
        return isinstance(value, list) and all(valid_default(schema.items, v) for v in value)
    if isinstance(schema, Map):
        return isinstance(value, dict) and all(valid_default(schema.values, v) for v in value.values())
    if isinstance(schema, Union):
        return any(valid_default(branch, value) for branch in schema.types)
    if isinstance(schema, Record):
        return isinstance(value, dict) and all(
            _valid_value(f.schema, value[f.name] if f.name in value else f.default)
            for f in schema.fields)
    return False


def _valid_value(schema: AvroType, value: Any) -> bool:
    if isinstance(schema, Union):
        return any(valid_default(branch, value) for branch in schema.types)
    return valid_default(schema, value)


def _int_prop(schema: AvroType, key: str) -> int:
    value = schema.props.get(key)
    if not avro_json.is_integral(value) or not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"Expected int {key}")
    return value


def logical_type(schema: AvroType) -> tuple[str, int, int] | None:
    """``LogicalTypes.fromSchemaIgnoreInvalid``: the schema's valid logical type, with a
    decimal's precision and scale; None when there is none or it is invalid. Besides Avro's
    own, Confluent registers ``variant`` (a record of two bytes fields, ``metadata`` and
    ``value``) and ``map`` (an array of ``key``/``value`` records)."""
    name = schema.props.get("logicalType")
    if not isinstance(name, str):
        return None
    if any(isinstance(schema.props.get(p), str) for p in _LOGICAL_INCOMPATIBLE):
        return None
    t = schema.type
    if name == "decimal":
        try:
            if "precision" not in schema.props:
                return None
            precision = _int_prop(schema, "precision")
            scale = _int_prop(schema, "scale") if "scale" in schema.props else 0
        except ValueError:
            return None
        if t == "bytes":
            max_precision = _INT_MAX
        elif isinstance(schema, Fixed):
            max_precision = round(math.floor(math.log10(2) * (8 * schema.size - 1)))
        else:
            return None
        if precision <= 0 or precision > max_precision or scale < 0 or scale > precision:
            return None
        return (name, precision, scale)
    if name == "uuid":
        ok = t == "string" or (isinstance(schema, Fixed) and schema.size == 16)
    elif name == "duration":
        ok = isinstance(schema, Fixed) and schema.size == 12
    elif name == "variant":
        ok = (isinstance(schema, Record) and len(schema.fields) == 2
              and all((f := schema.field(n)) is not None and f.schema.type == "bytes" for n in ("metadata", "value")))
    elif name == "map":
        items = schema.items if isinstance(schema, Array) else None
        ok = (isinstance(items, Record) and len(items.fields) == 2
              and [f.name for f in items.fields] == ["key", "value"])
    else:
        ok = t in _LOGICAL_ON.get(name, ())
    return (name, 0, 0) if ok else None


class Parser:
    """One Avro ``Schema.Parser``: the named types of each text parsed are known to the next
    (Confluent parses the referenced schemas first, then the schema)."""

    def __init__(self, validate_as_new: bool) -> None:
        #: new schemas: strict names and validated defaults; registered ones: neither here
        self.strict = validate_as_new
        self.validate_defaults = validate_as_new
        self.known: dict[str, Named] = {}
        self._new: dict[str, Named] = {}
        self._placeholders = 0

    def parse(self, text: str) -> AvroType:
        try:
            node = avro_json.read(text)
        except avro_json.JsonError as e:
            raise InvalidSchemaError(str(e)) from None
        self._new = {}
        schema = self._parse(node, None)
        self.known.update(self._new)
        resolved = _Resolver(self.known, self.validate_defaults).resolve(schema, list(self._new.values()))
        self._new = {}
        return resolved

    # -- names --

    def _check(self, name: str | None) -> None:
        if self.strict and (error := strict_name_error(name)) is not None:
            raise InvalidSchemaError(error)

    def _name(self, node: dict[str, Any], space: str | None) -> Name:
        given = _text(node, "namespace")
        name = Name(_required(node, "name", "No name in schema"), given if given is not None else space)
        self._check(name.name)
        return name

    def _put(self, schema: Named) -> None:
        """``ParseContext.put``: names the type; its full name's parts are checked."""
        full = schema.full_name
        if self.strict:
            parts = full.split(".")
            while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empties
                parts.pop()
            for i, part in enumerate(parts):
                if (error := strict_name_error(part)) is not None:
                    kind = "Name" if i == len(parts) - 1 else "Namespace part"
                    raise InvalidSchemaError(f'{kind} "{part}" is invalid: {error}')
        existing = self.known.get(full) or self._new.get(full)
        if existing is not None:
            if not equal(schema, existing):
                raise InvalidSchemaError(f"Can't redefine: {full}")
            return
        self._new[full] = schema

    def _find(self, name: str, space: str | None) -> AvroType:
        """``ParseContext.find``: a primitive, a known type, or a placeholder for later."""
        if name in PRIMITIVES:
            return AvroType(name)
        full = f"{space}.{name}" if space is not None and "." not in name else name
        for candidate in (full, name):
            found = self.known.get(candidate) or self._new.get(candidate)
            if found is not None:
                return found
        self._placeholders += 1
        return Unresolved(full, self._placeholders - 1)

    # -- schemas --

    def _parse(self, node: Any, space: str | None) -> AvroType:
        if isinstance(node, str):
            return self._find(node, space)
        if isinstance(node, list):
            return self._union(node, space)
        if not isinstance(node, dict):
            raise InvalidSchemaError(f"Schema not yet supported: {avro_json.dumps(node)}")
        type_ = _required(node, "type", "No type")
        if type_ in PRIMITIVES:
            schema = AvroType(type_)
            self._props(node, schema, SCHEMA_RESERVED)
            return schema
        if type_ in ("record", "error"):
            return self._record(node, space, type_ == "error")
        if type_ == "enum":
            return self._enum(node, space)
        if type_ == "fixed":
            return self._fixed(node, space)
        if type_ in ("array", "map"):
            key = "items" if type_ == "array" else "values"
            if key not in node:
                raise InvalidSchemaError(f"{type_.capitalize()} has no {key} type: {avro_json.dumps(node)}")
            inner = self._parse(node[key], space)
            container: AvroType = Array(inner) if type_ == "array" else Map(inner)
            self._props(node, container, SCHEMA_RESERVED)
            return container
        return self._find(type_, space)

    def _props(self, node: dict[str, Any], schema: AvroType, reserved: frozenset[str]) -> None:
        schema.props = {k: v for k, v in node.items() if k not in reserved}
        schema.logical = logical_type(schema)

    def _named(self, schema: Named, node: dict[str, Any]) -> None:
        """The end of a named type's parse: props, aliases, then its name is taken."""
        self._props(node, schema, ENUM_RESERVED if isinstance(schema, Enum) else SCHEMA_RESERVED)
        for alias in _aliases(node) or ():
            name = Name(alias, schema.space)
            self._check(name.name)
            schema.add_alias(name)
        self._put(schema)

    @staticmethod
    def _not_primitive(name: Name) -> None:
        """``NamedSchema``'s constructor."""
        if name.full in PRIMITIVES:
            raise InvalidSchemaError(f"Schemas may not be named after primitives: {name.full}")

    def _record(self, node: dict[str, Any], space: str | None, is_error: bool) -> Record:
        name = self._name(node, space)
        self._not_primitive(name)
        record = Record(name, _text(node, "doc"), is_error)
        fields_node = node.get("fields")
        if not isinstance(fields_node, list):
            raise InvalidSchemaError(f"Record has no fields: {avro_json.dumps(node)}")
        fields = [self._field(f, name.space) for f in fields_node]
        for pos, f in enumerate(fields):
            f.pos = pos
            existing = record.by_name.get(f.name)
            if existing is not None:
                raise InvalidSchemaError(f"Duplicate field {f.name} in record {name.full}: {f} and {existing}.")
            record.by_name[f.name] = f
        record.fields = fields
        self._named(record, node)
        return record

    def _field(self, node: Any, space: str | None) -> Field:
        name = _required(node, "name", "No field name")
        doc = _text(node, "doc")
        if "type" not in node:
            raise InvalidSchemaError(f"No field type: {avro_json.dumps(node)}")
        schema = self._parse(node["type"], space)
        order = "ascending"
        if "order" in node:
            given = node["order"]
            if not isinstance(given, str) or given.lower() not in ORDERS:
                shown = given.upper() if isinstance(given, str) else avro_json.dumps(given)
                raise InvalidSchemaError(f"No enum constant org.apache.avro.Schema.Field.Order.{shown}")
            order = given.lower()
        default = node.get("default", MISSING)
        if isinstance(default, str) and schema.type in ("float", "double"):
            try:
                default = avro_json.java_parse_double(default)
            except ValueError as e:
                raise InvalidSchemaError(str(e)) from None
        self._check(name)
        if self.validate_defaults and default is not MISSING and not valid_default(schema, default):
            raise InvalidSchemaError(default_error(name, default, schema))
        f = Field(name, schema, doc, default, order)
        f.props = {k: v for k, v in node.items() if k not in FIELD_RESERVED}
        aliases = _aliases(node)
        if aliases is not None:
            f.aliases = list(dict.fromkeys(aliases))
        return f

    def _enum(self, node: dict[str, Any], space: str | None) -> Enum:
        name = self._name(node, space)
        doc = _text(node, "doc")
        symbols_node = node.get("symbols")
        if not isinstance(symbols_node, list):
            raise InvalidSchemaError(f"Enum has no symbols: {avro_json.dumps(node)}")
        symbols = [s if isinstance(s, str) else None for s in symbols_node]
        default = _text(node, "default")
        self._not_primitive(name)
        seen: set[str | None] = set()
        for symbol in symbols:
            self._check(symbol)
            if symbol in seen:
                raise InvalidSchemaError(f"Duplicate enum symbol: {symbol}")
            seen.add(symbol)
        if default is not None and default not in seen:
            shown = ", ".join("null" if s is None else s for s in symbols)
            raise InvalidSchemaError(f"The Enum Default: {default} is not in the enum symbol set: [{shown}]")
        enum = Enum(name, doc, symbols, default)
        self._named(enum, node)
        return enum

    def _fixed(self, node: dict[str, Any], space: str | None) -> Fixed:
        name = self._name(node, space)
        doc = _text(node, "doc")
        size = node.get("size")
        if not avro_json.is_integral(size) or not _INT_MIN <= size <= _INT_MAX:
            raise InvalidSchemaError(f"Invalid or no size: {avro_json.dumps(node)}")
        self._not_primitive(name)
        if size < 0:
            raise InvalidSchemaError(f"Malformed data. Length is negative: {size}")
        if size > _MAX_FIXED_SIZE:
            raise InvalidSchemaError(f"Cannot read arrays longer than {_MAX_FIXED_SIZE} bytes in Java library")
        fixed = Fixed(name, doc, size)
        self._named(fixed, node)
        return fixed

    def _union(self, node: list[Any], space: str | None) -> Union:
        union = Union([self._parse(branch, space) for branch in node])
        check_union(union)
        return union


def _aliases(node: dict[str, Any]) -> list[str] | None:
    if "aliases" not in node:
        return None
    aliases = node["aliases"]
    if not isinstance(aliases, list):
        raise InvalidSchemaError(f"aliases not an array: {avro_json.dumps(node)}")
    for alias in aliases:
        if not isinstance(alias, str):
            raise InvalidSchemaError(f"alias not a string: {avro_json.dumps(alias)}")
    return aliases


def check_union(union: Union) -> None:
    """``UnionSchema``'s constructor: no union in a union, no two branches of one name."""
    seen: set[str] = set()
    for branch in union.types:
        if isinstance(branch, Union):
            raise InvalidSchemaError(f"Nested union: {to_string(union, set())}")
        if branch.full_name in seen:
            raise InvalidSchemaError(f"Duplicate in union:{branch.full_name}")
        seen.add(branch.full_name)


def default_error(field: str, default: Any, schema: AvroType) -> str:
    return f"Invalid default for field {field}: {avro_json.dumps(default)} not a {to_string(schema, set())}"


class _Resolver:
    """After a text is parsed: each placeholder replaced by the type of its name
    (``ParseContext.resolve``), then what Avro checks again on the resolved copy: each
    field's default (against the real type now) and each union's branch names."""

    def __init__(self, known: dict[str, Named], validate_defaults: bool) -> None:
        self.known = known
        self.validate_defaults = validate_defaults
        self.done: set[int] = set()

    def lookup(self, schema: AvroType) -> AvroType:
        if isinstance(schema, Unresolved):
            found = self.known.get(schema.target)
            if found is None:
                raise InvalidSchemaError(f"Undefined schema: {schema.target}")
            return found
        return schema

    def resolve(self, main: AvroType, new: list[Named]) -> AvroType:
        for schema in new:
            self.visit(schema)
        main = self.lookup(main)
        self.visit(main)
        return main

    def visit(self, schema: AvroType) -> None:
        if id(schema) in self.done:
            return
        self.done.add(id(schema))
        if isinstance(schema, Record):
            for f in schema.fields:
                f.schema = self.lookup(f.schema)
                self.visit(f.schema)
                if self.validate_defaults and f.has_default and not valid_default(f.schema, f.default):
                    raise InvalidSchemaError(default_error(f.name, f.default, f.schema))
        elif isinstance(schema, Array):
            schema.items = self.lookup(schema.items)
            self.visit(schema.items)
        elif isinstance(schema, Map):
            schema.values = self.lookup(schema.values)
            self.visit(schema.values)
        elif isinstance(schema, Union):
            schema.types = [self.lookup(t) for t in schema.types]
            for t in schema.types:
                self.visit(t)
            check_union(schema)
        if schema.logical is not None and schema.type in ("record", "array", "map") and "logicalType" in schema.props:
            # Avro's resolving copy adds the logical type first, then the other props
            schema.props = {"logicalType": schema.props["logicalType"],
                            **{k: v for k, v in schema.props.items() if k != "logicalType"}}


def validate_names(schema: AvroType, seen: set[int] | None = None) -> None:
    """Confluent's ``AvroSchemaUtils.validateNames`` for already-registered schemas: Avro's
    Unicode rules on the names of records, enums and fixed types, on field names and enum
    symbols (not namespaces, not aliases)."""
    seen = set() if seen is None else seen
    if id(schema) in seen:
        return
    seen.add(id(schema))
    names: list[str | None] = []
    if isinstance(schema, Named):
        names.append(schema.name)
    if isinstance(schema, Enum):
        names.extend(schema.symbols)
    for name in names:
        if (error := utf_name_error(name)) is not None:
            raise InvalidSchemaError(error)
    if isinstance(schema, Record):
        for f in schema.fields:
            if (error := utf_name_error(f.name)) is not None:
                raise InvalidSchemaError(error)
            validate_names(f.schema, seen)
    elif isinstance(schema, Array):
        validate_names(schema.items, seen)
    elif isinstance(schema, Map):
        validate_names(schema.values, seen)
    elif isinstance(schema, Union):
        for branch in schema.types:
            validate_names(branch, seen)

