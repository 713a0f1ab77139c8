"""The schema model Confluent's JSON Schema compatibility check compares, and the loader that
builds it from drafts 4, 6 and 7 (:mod:`schema_registry.json_schema_modern` builds it from
2019-09 and 2020-12).

Confluent (``io.confluent.kafka.schemaregistry.json.JsonSchema.rawSchema()``) does not diff
JSON: it loads the schema into the everit-json-schema object model (``StringSchema``,
``NumberSchema``, ``ObjectSchema``, ``ArraySchema``, ``CombinedSchema``, ``EnumSchema``,
``ConstSchema``, ``NotSchema``, ``ReferenceSchema``, ``EmptySchema``/``TrueSchema``,
``FalseSchema``, ...) and its ``SchemaDiff`` walks those objects. How keywords become objects
decides the result (``{"type": ["string", "null"]}`` is an ``anyOf`` of two schemas,
``{"type": "object", "maxLength": 3}`` a synthetic ``allOf``), so the same model is rebuilt
the same way:

- drafts 4, 6 and 7 as everit's ``SchemaLoader`` loads them (its extractors run in order:
  enum, allOf/anyOf/oneOf, not, const, type, then the "property sniffer" that makes a schema
  for keywords of a type not declared; ``$ref`` hides every sibling but the annotations);
- drafts 2019-09 and 2020-12 as json-sKema loads them and Confluent's ``SchemaTranslator``
  turns the keyword schemas into everit ones (in the other module).

Also here: the Java semantics the diff depends on (``equals`` of JSON values, the iteration
order of a ``HashMap`` of property names) and Java regular expressions in Python.

``$ref`` is resolved with ``referencing`` (the library ``jsonschema`` uses); every reference to
the same JSON node shares one referred schema (a :class:`Knot`), as everit's and json-sKema's
do, which is what lets the diff stop on recursive schemas.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from referencing import Specification
from referencing.exceptions import Unresolvable

from schema_registry.schema_types import InvalidSchemaError

if TYPE_CHECKING:
    from referencing._core import Resolver

#: no ``default`` keyword (Java ``null``); a JSON null default is Python ``None``
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


# ---------------------------------------------------------------------------------------------
# Java semantics the diff depends on


def java_key(value: Any) -> Any:
    """A hashable key that is equal for two JSON values exactly when the Java objects everit
    holds for them are ``equals``: booleans are not numbers, an integer never equals a decimal,
    and decimals compare as ``BigDecimal`` does (scale included: 1.5 is not 1.50)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, Decimal):
        return ("dec", value.as_tuple())
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", tuple(java_key(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((k, java_key(v)) for k, v in value.items()))
    if isinstance(value, Schema):
        return ("schema", schema_key(value))
    return ("other", id(value))


def java_string_hash(s: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, 32 bits."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _bucket_order(keys: list[str], capacity: int) -> list[str]:
    # A HashMap iterates its buckets in index order, each in insertion order (a resize keeps
    # the relative order of the entries that stay together), so its order is a stable sort.
    def bucket(k: str) -> int:
        h = java_string_hash(k)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)


def _grown(capacity: int, size: int) -> int:
    while size > int(capacity * 0.75):
        capacity *= 2
    return capacity


def _table_size_for(n: int) -> int:
    capacity = 1
    while capacity < n:
        capacity *= 2
    return capacity


def hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) filled by ``put`` in
    the order of ``keys`` from empty (everit's builders)."""
    return _bucket_order(keys, _grown(16, len(keys)))


def copied_hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of ``new HashMap<>(map)`` of a builder's HashMap (everit's
    ``copyMap``; the Java 17 capacity rule)."""
    source = hashmap_order(keys)
    if not source:
        return source
    return _bucket_order(source, _table_size_for(int(len(source) / 0.75 + 1.0)))


def hashset_union_order(first: list[str], second: list[str]) -> list[str]:
    """The iteration order of ``s = new HashSet<>(first); s.addAll(second)``, ``first`` and
    ``second`` given in their own iteration order."""
    seen = dict.fromkeys(first)
    for k in second:
        seen.setdefault(k)
    keys = list(seen)
    capacity = _table_size_for(max(int(len(first) / 0.75) + 1, 16))
    return _bucket_order(keys, _grown(capacity, len(keys)))


# ---------------------------------------------------------------------------------------------
# Regular expressions: everit and json-sKema compile ``pattern`` and ``patternProperties`` with
# java.util.regex; Python's ``re`` lacks a few of its constructs, which are translated.

_UNICODE_CLASSES = {
    "Digit": r"\d", "Nd": r"\d", "N": r"\d", "IsDigit": r"\d",
    "Space": r"\s", "javaWhitespace": r"\s", "Z": r"\s", "Zs": r"\s", "IsWhite_Space": r"\s",
}


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a schema's regular expression (Java syntax, as Confluent's loaders do). Java's
    ``\\p{...}`` classes are approximated (``\\d``, ``\\s``, else ``\\w``), ``(?<name>`` and
    ``\\z`` and ``\\Q...\\E`` translated. Raises InvalidSchemaError when it does not compile."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d in "pP":
                if i + 2 < n and pattern[i + 2] == "{":
                    end = pattern.find("}", i + 3)
                    if end < 0:
                        raise InvalidSchemaError(f"invalid regular expression '{pattern}': unclosed \\{d}{{")
                    name, i = pattern[i + 3:end], end + 1
                else:
                    name, i = pattern[i + 2:i + 3], i + 3
                cls = _UNICODE_CLASSES.get(name) or _UNICODE_CLASSES.get(name.removeprefix("Is"), r"\w")
                out.append(cls.upper() if d == "P" else cls)
                continue
            if d == "z":
                out.append(r"\Z")
                i += 2
                continue
            if d == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out))
    except (re.error, OverflowError, RecursionError) as e:
        raise InvalidSchemaError(f"invalid regular expression '{pattern}': {e}") from None


# ---------------------------------------------------------------------------------------------
# The model (everit's classes; field names follow its getters)


@dataclass(eq=False)
class Schema:
    id: str | None = None
    title: str | None = None
    description: str | None = None
    #: MISSING when there is no default (Java null); ``has_default_value()`` as everit's
    default: Any = MISSING
    #: keywords the loader did not consume, raw JSON (2019-09/2020-12: some hold a Schema)
    unprocessed: dict[str, Any] = field(default_factory=dict)

    def has_default_value(self) -> bool:
        return self.default is not MISSING


@dataclass(eq=False)
class EmptySchema(Schema):
    pass


@dataclass(eq=False)
class TrueSchema(EmptySchema):
    pass


@dataclass(eq=False)
class FalseSchema(Schema):
    pass


@dataclass(eq=False)
class NullSchema(Schema):
    pass


@dataclass(eq=False)
class BooleanSchema(Schema):
    pass


@dataclass(eq=False)
class StringSchema(Schema):
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: str | None = None
    requires_string: bool = True


@dataclass(eq=False)
class NumberSchema(Schema):
    minimum: int | Decimal | None = None
    maximum: int | Decimal | None = None
    #: draft 4's boolean exclusiveMinimum/exclusiveMaximum
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    #: draft 6+'s numeric exclusiveMinimum/exclusiveMaximum
    exclusive_minimum_limit: int | Decimal | None = None
    exclusive_maximum_limit: int | Decimal | None = None
    multiple_of: int | Decimal | None = None
    requires_number: bool = True
    requires_integer: bool = False


@dataclass(eq=False)
class PatternProperty:
    pattern: str
    regex: re.Pattern[str]
    schema: Schema


@dataclass(eq=False)
class ObjectSchema(Schema):
    #: in the order the builder put them (see :func:`hashmap_order` for Java's iteration order)
    properties: dict[str, Schema] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    additional_properties: bool = True
    schema_of_additional_properties: Schema | None = None
    pattern_properties: list[PatternProperty] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    schema_dependencies: dict[str, Schema] = field(default_factory=dict)
    min_properties: int | None = None
    max_properties: int | None = None
    property_name_schema: Schema | None = None
    requires_object: bool = True


@dataclass(eq=False)
class ArraySchema(Schema):
    all_item_schema: Schema | None = None
    item_schemas: list[Schema] = field(default_factory=list)
    additional_items: bool = True
    schema_of_additional_items: Schema | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    contains: Schema | None = None
    requires_array: bool = True


@dataclass(eq=False)
class CombinedSchema(Schema):
    #: "allOf", "anyOf" or "oneOf" (everit's criterion's toString)
    criterion: str = "allOf"
    subschemas: list[Schema] = field(default_factory=list)
    #: made by the loader, not written (everit's synthetic, Confluent's generated)
    generated: bool = False


@dataclass(eq=False)
class EnumSchema(Schema):
    values: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class ConstSchema(Schema):
    value: Any = None


@dataclass(eq=False)
class NotSchema(Schema):
    must_not_match: Schema | None = None


@dataclass(eq=False)
class ConditionalSchema(Schema):
    if_schema: Schema | None = None
    then_schema: Schema | None = None
    else_schema: Schema | None = None


class Knot:
    """The schema every ``$ref`` to one JSON node refers to (set once it is loaded, which may
    be after the references to it were made: recursion)."""

    __slots__ = ("schema",)

    def __init__(self) -> None:
        self.schema: Schema | None = None


@dataclass(eq=False)
class ReferenceSchema(Schema):
    ref: str = ""
    knot: Knot | None = None

    @property
    def referred(self) -> Schema:
        assert self.knot is not None and self.knot.schema is not None, f"unresolved $ref {self.ref}"
        return self.knot.schema


def schema_key(schema: Schema) -> Any:
    """Equal for two schemas whose JSON (everit's ``toString()``) is equal: Confluent collapses
    such duplicates among a combined schema's subschemas. A reference is its ``$ref``."""
    generic = (type(schema).__name__, schema.id, schema.title, schema.description,
               java_key(schema.default) if schema.has_default_value() else None,
               frozenset((k, java_key(v)) for k, v in schema.unprocessed.items()))
    if isinstance(schema, ReferenceSchema):
        return ("$ref", schema.ref)
    key = lambda s: None if s is None else schema_key(s)  # noqa: E731
    if isinstance(schema, StringSchema):
        own = (schema.min_length, schema.max_length, schema.pattern, schema.format, schema.requires_string)
    elif isinstance(schema, NumberSchema):
        own = tuple(java_key(v) for v in (
            schema.minimum, schema.maximum, schema.exclusive_minimum, schema.exclusive_maximum,
            schema.exclusive_minimum_limit, schema.exclusive_maximum_limit, schema.multiple_of,
            schema.requires_number, schema.requires_integer))
    elif isinstance(schema, ObjectSchema):
        own = (frozenset((k, key(v)) for k, v in schema.properties.items()), tuple(schema.required),
               schema.additional_properties, key(schema.schema_of_additional_properties),
               tuple((p.pattern, key(p.schema)) for p in schema.pattern_properties),
               frozenset((k, frozenset(v)) for k, v in schema.property_dependencies.items()),
               frozenset((k, key(v)) for k, v in schema.schema_dependencies.items()),
               schema.min_properties, schema.max_properties, key(schema.property_name_schema),
               schema.requires_object)
    elif isinstance(schema, ArraySchema):
        own = (key(schema.all_item_schema), tuple(key(s) for s in schema.item_schemas), schema.additional_items,
               key(schema.schema_of_additional_items), schema.min_items, schema.max_items, schema.unique_items,
               key(schema.contains), schema.requires_array)
    elif isinstance(schema, CombinedSchema):
        own = (schema.criterion, tuple(key(s) for s in schema.subschemas))
    elif isinstance(schema, EnumSchema):
        own = frozenset(java_key(v) for v in schema.values)
    elif isinstance(schema, ConstSchema):
        own = java_key(schema.value)
    elif isinstance(schema, NotSchema):
        own = key(schema.must_not_match)
    elif isinstance(schema, ConditionalSchema):
        own = (key(schema.if_schema), key(schema.then_schema), key(schema.else_schema))
    else:
        own = ()
    return generic, own


# ---------------------------------------------------------------------------------------------
# Shared by both loaders


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidSchemaError(f"{what}: expected a string, found {_json_type(value)}")
    return value


def _integer(value: Any, what: str) -> int:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSchemaError(f"{what}: expected an integer, found {_json_type(value)}")
    return value


def _number(value: Any, what: str) -> int | Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise InvalidSchemaError(f"{what}: expected a number, found {_json_type(value)}")
    return value


def _boolean(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidSchemaError(f"{what}: expected a boolean, found {_json_type(value)}")
    return value


def _array(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidSchemaError(f"{what}: expected an array, found {_json_type(value)}")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidSchemaError(f"{what}: expected an object, found {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, Decimal, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


class _Loader:
    """What both loaders share: descending into subschemas (their ``$id`` changes the base URI
    ``$ref`` resolves against) and resolving ``$ref`` once per JSON node."""

    def __init__(self, specification: Specification[Any]) -> None:
        self.specification = specification
        self.knots: dict[int, Knot] = {}

    def load(self, value: Any, resolver: Resolver[Any]) -> Schema:
        raise NotImplementedError

    def child(self, value: Any, resolver: Resolver[Any]) -> Schema:
        if isinstance(value, dict):
            resolver = resolver.in_subresource(self.specification.create_resource(value))
        return self.load(value, resolver)

    def reference(self, ref: str, resolver: Resolver[Any]) -> ReferenceSchema:
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable:
            raise InvalidSchemaError(f"cannot resolve $ref '{ref}' (not in the schema, its references "
                                     "or the JSON Schema metaschemas; remote schemas are not fetched)") from None
        contents = resolved.contents
        knot = self.knots.get(id(contents)) if isinstance(contents, dict) else None
        if knot is None:
            knot = Knot()
            if isinstance(contents, dict):
                self.knots[id(contents)] = knot
            knot.schema = self.load(contents, resolved.resolver)
        return ReferenceSchema(ref=ref, knot=knot)

    def pattern(self, value: Any, what: str) -> str:
        pattern = _string(value, what)
        compile_pattern(pattern)
        return pattern


def pattern_property(pattern: str, schema: Schema) -> PatternProperty:
    return PatternProperty(pattern=pattern, regex=compile_pattern(pattern), schema=schema)


# ---------------------------------------------------------------------------------------------
# Drafts 4, 6 and 7: everit's SchemaLoader

_V4_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties", "dependencies",
                       "patternProperties", "additionalProperties")
_V6_OBJECT_KEYWORDS = (*_V4_OBJECT_KEYWORDS, "propertyNames")
_V4_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems")
_V6_ARRAY_KEYWORDS = (*_V4_ARRAY_KEYWORDS, "contains")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_CONDITIONAL_KEYWORDS = ("if", "then", "else")


class EveritLoader(_Loader):
    """Drafts 4, 6 and 7 (``draft`` 4, 6 or 7), as everit-json-schema loads them with the
    options Confluent sets (``useDefaults``, draft 7 unless ``$schema`` names 4 or 6)."""

    def __init__(self, specification: Specification[Any], draft: int) -> None:
        super().__init__(specification)
        self.draft = draft
        self.id_keyword = "id" if draft == 4 else "$id"
        self.object_keywords = _V4_OBJECT_KEYWORDS if draft == 4 else _V6_OBJECT_KEYWORDS
        self.array_keywords = _V4_ARRAY_KEYWORDS if draft == 4 else _V6_ARRAY_KEYWORDS

    def load(self, value: Any, resolver: Resolver[Any]) -> Schema:
        if isinstance(value, bool):
            return TrueSchema() if value else FalseSchema()
        if not isinstance(value, dict):
            raise InvalidSchemaError(f"a schema must be a boolean or an object, found {_json_type(value)}")
        return self._load_object(value, resolver)

    def _load_object(self, o: dict[str, Any], resolver: Resolver[Any]) -> Schema:
        # ``remaining`` is everit's projected JSON: what the extractors so far left unconsumed
        remaining = dict(o)
        extracted: list[Schema] = []
        if "$ref" in o:
            del remaining["$ref"]
            extracted.append(self.reference(_string(o["$ref"], "$ref"), resolver))
        else:
            if "enum" in remaining:
                extracted.append(EnumSchema(values=list(_array(remaining.pop("enum"), "enum"))))
            for criterion in ("allOf", "anyOf", "oneOf"):
                if criterion in remaining:
                    subschemas = [self.child(s, resolver) for s in _array(remaining.pop(criterion), criterion)]
                    extracted.append(CombinedSchema(criterion=criterion, subschemas=subschemas))
            if "not" in remaining:
                extracted.append(NotSchema(must_not_match=self.child(remaining.pop("not"), resolver)))
            if self.draft != 4 and "const" in remaining:
                extracted.append(ConstSchema(value=remaining.pop("const")))
            if "type" in remaining:
                declared = remaining.pop("type")
                if isinstance(declared, list):
                    extracted.append(CombinedSchema(criterion="anyOf", subschemas=[
                        self._typed(_string(t, "type"), o, remaining, resolver) for t in declared]))
                else:
                    extracted.append(self._typed(_string(declared, "type"), o, remaining, resolver))
            extracted.extend(self._sniffed(o, remaining, resolver))
        if not extracted:
            schema: Schema = EmptySchema()
        elif len(extracted) == 1:
            schema = extracted[0]
        else:
            schema = CombinedSchema(criterion="allOf", subschemas=extracted, generated=True)
        if self.id_keyword in remaining:
            schema.id = _string(remaining.pop(self.id_keyword), self.id_keyword)
        for keyword in ("title", "description"):
            if keyword in remaining:
                setattr(schema, keyword, _string(remaining.pop(keyword), keyword))
        if self.draft == 7:
            for keyword in ("readOnly", "writeOnly"):
                if keyword in remaining:
                    _boolean(remaining.pop(keyword), keyword)
        if "default" in remaining:
            schema.default = remaining.pop("default")
        schema.unprocessed = remaining
        return schema

    def _consume(self, remaining: dict[str, Any], keywords: tuple[str, ...]) -> None:
        for keyword in keywords:
            remaining.pop(keyword, None)

    def _typed(self, name: str, o: dict[str, Any], remaining: dict[str, Any], resolver: Resolver[Any]) -> Schema:
        if name == "string":
            return self._string_schema(o, remaining)
        if name == "integer":
            return self._number_schema(o, remaining, requires_integer=True)
        if name == "number":
            return self._number_schema(o, remaining)
        if name == "boolean":
            return BooleanSchema()
        if name == "null":
            return NullSchema()
        if name == "array":
            return self._array_schema(o, remaining, resolver)
        if name == "object":
            return self._object_schema(o, remaining, resolver)
        raise InvalidSchemaError(f"unknown type: [{name}]")

    def _sniffed(self, o: dict[str, Any], remaining: dict[str, Any], resolver: Resolver[Any]) -> list[Schema]:
        present = set(remaining)
        out: list[Schema] = []
        if present.intersection(self.array_keywords):
            out.append(self._array_schema(o, remaining, resolver, requires_array=False))
        if present.intersection(self.object_keywords):
            out.append(self._object_schema(o, remaining, resolver, requires_object=False))
        if present.intersection(_NUMBER_KEYWORDS):
            out.append(self._number_schema(o, remaining, requires_number=False))
        if present.intersection(_STRING_KEYWORDS):
            out.append(self._string_schema(o, remaining, requires_string=False))
        if self.draft == 7 and present.intersection(_CONDITIONAL_KEYWORDS):
            self._consume(remaining, _CONDITIONAL_KEYWORDS)
            out.append(ConditionalSchema(
                if_schema=self.child(o["if"], resolver) if "if" in o else None,
                then_schema=self.child(o["then"], resolver) if "then" in o else None,
                else_schema=self.child(o["else"], resolver) if "else" in o else None))
        return out

    def _string_schema(self, o: dict[str, Any], remaining: dict[str, Any], requires_string: bool = True) -> StringSchema:
        self._consume(remaining, _STRING_KEYWORDS)
        s = StringSchema(requires_string=requires_string)
        if "minLength" in o:
            s.min_length = _integer(o["minLength"], "minLength")
        if "maxLength" in o:
            s.max_length = _integer(o["maxLength"], "maxLength")
        if "pattern" in o:
            s.pattern = self.pattern(o["pattern"], "pattern")
        if "format" in o:
            s.format = _string(o["format"], "format")
        return s

    def _number_schema(self, o: dict[str, Any], remaining: dict[str, Any], requires_number: bool = True,
                       requires_integer: bool = False) -> NumberSchema:
        self._consume(remaining, _NUMBER_KEYWORDS)
        s = NumberSchema(requires_number=requires_number, requires_integer=requires_integer)
        for keyword, attr in (("minimum", "minimum"), ("maximum", "maximum"), ("multipleOf", "multiple_of")):
            if keyword in o:
                setattr(s, attr, _number(o[keyword], keyword))
        for keyword, flag, limit in (("exclusiveMinimum", "exclusive_minimum", "exclusive_minimum_limit"),
                                     ("exclusiveMaximum", "exclusive_maximum", "exclusive_maximum_limit")):
            if keyword in o:
                if self.draft == 4:
                    setattr(s, flag, _boolean(o[keyword], keyword))
                else:
                    setattr(s, limit, _number(o[keyword], keyword))
        return s

    def _object_schema(self, o: dict[str, Any], remaining: dict[str, Any], resolver: Resolver[Any],
                       requires_object: bool = True) -> ObjectSchema:
        self._consume(remaining, self.object_keywords)
        s = ObjectSchema(requires_object=requires_object)
        if "minProperties" in o:
            s.min_properties = _integer(o["minProperties"], "minProperties")
        if "maxProperties" in o:
            s.max_properties = _integer(o["maxProperties"], "maxProperties")
        for name, value in _object(o.get("properties", {}), "properties").items():
            if name != self.id_keyword or isinstance(value, dict):
                s.properties[name] = self.child(value, resolver)
        if "additionalProperties" in o:
            additional = o["additionalProperties"]
            if isinstance(additional, bool):
                s.additional_properties = additional
            else:
                s.schema_of_additional_properties = self.child(_object(additional, "additionalProperties"), resolver)
        for name in _array(o.get("required", []), "required"):
            s.required.append(_string(name, "required"))
        for pattern, value in _object(o.get("patternProperties", {}), "patternProperties").items():
            s.pattern_properties.append(pattern_property(pattern, self.child(value, resolver)))
        for name, value in _object(o.get("dependencies", {}), "dependencies").items():
            if isinstance(value, list):
                for dependency in value:
                    deps = s.property_dependencies.setdefault(name, [])
                    if _string(dependency, "dependencies") not in deps:
                        deps.append(dependency)
            else:
                s.schema_dependencies[name] = self.child(value, resolver)
        if self.draft != 4 and "propertyNames" in o:
            s.property_name_schema = self.child(o["propertyNames"], resolver)
        return s

    def _array_schema(self, o: dict[str, Any], remaining: dict[str, Any], resolver: Resolver[Any],
                      requires_array: bool = True) -> ArraySchema:
        self._consume(remaining, self.array_keywords)
        s = ArraySchema(requires_array=requires_array)
        if "minItems" in o:
            s.min_items = _integer(o["minItems"], "minItems")
        if "maxItems" in o:
            s.max_items = _integer(o["maxItems"], "maxItems")
        if "uniqueItems" in o:
            s.unique_items = _boolean(o["uniqueItems"], "uniqueItems")
        if "additionalItems" in o:
            additional = o["additionalItems"]
            if isinstance(additional, bool):
                s.additional_items = additional
            else:
                s.schema_of_additional_items = self.child(_object(additional, "additionalItems"), resolver)
        if "items" in o:
            items = o["items"]
            if isinstance(items, list):
                s.item_schemas = [self.child(item, resolver) for item in items]
            else:
                s.all_item_schema = self.child(items, resolver)
        if self.draft != 4 and "contains" in o:
            s.contains = self.child(o["contains"], resolver)
        return s
