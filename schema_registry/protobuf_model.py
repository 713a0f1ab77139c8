"""The elements of a parsed .proto file, as Confluent's Protobuf provider holds them (Square
Wire's ``ProtoFileElement``, ``MessageElement``, ``FieldElement``, ``OptionElement``, ...),
and the type table its printer and compatibility check resolve names in (Confluent's
``io.confluent.kafka.schemaregistry.protobuf.diff.Context``).

An element keeps what the text said, not what it means: a field's type is the name as
written (``Inner``, ``.pkg.Outer.Inner``, ``map<string, Inner>``), an option's value its
literal (a number stays ``"0x1F"``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Wire's OptionElement.Kind
STRING, BOOLEAN, NUMBER, ENUM, MAP, LIST, OPTION = "STRING", "BOOLEAN", "NUMBER", "ENUM", "MAP", "LIST", "OPTION"

#: the largest field number (2^29 - 1); Wire reads ``max`` in a range as this
MAX_TAG_VALUE = 536_870_911

SCALAR_TYPES = frozenset((
    "bool", "bytes", "double", "float", "fixed32", "fixed64", "int32", "int64", "sfixed32", "sfixed64",
    "sint32", "sint64", "string", "uint32", "uint64",
))


@dataclass(frozen=True)
class Primitive:
    """Wire's ``OptionPrimitive``: a BOOLEAN, NUMBER or ENUM value inside an option's map or
    list (a string there is a plain ``str``)."""

    kind: str
    value: str


@dataclass
class Option:
    """Wire's ``OptionElement``: ``name`` without its parentheses (``parenthesized`` says they
    were there); ``value`` is a ``str`` (STRING, BOOLEAN, NUMBER, ENUM), a ``dict`` (MAP), a
    ``list`` (LIST) or an :class:`Option` (OPTION, the rest of a dotted name
    ``(a).b.c = 1``)."""

    name: str
    kind: str
    value: Any
    parenthesized: bool = False


@dataclass
class Field:
    label: str | None  # "optional", "required", "repeated" or None
    type: str
    name: str
    tag: int
    default: str | None = None  # Wire takes ``default`` and ``json_name`` out of the options
    json_name: str | None = None
    options: list[Option] = field(default_factory=list)


@dataclass
class Group:
    label: str | None
    name: str
    tag: int
    fields: list[Field] = field(default_factory=list)


@dataclass
class OneOf:
    name: str
    fields: list[Field] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


#: a reserved or extension value: a number, an inclusive range (start, end), or a name
RangeValue = int | tuple[int, int] | str


@dataclass
class Reserved:
    values: list[RangeValue]


@dataclass
class Extensions:
    values: list[RangeValue]
    options: list[Option] = field(default_factory=list)


@dataclass
class Extend:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class EnumConstant:
    name: str
    tag: int
    options: list[Option] = field(default_factory=list)


@dataclass
class Enum:
    name: str
    options: list[Option] = field(default_factory=list)
    constants: list[EnumConstant] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)


@dataclass
class Message:
    name: str
    nested: list[Message | Enum] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    reserveds: list[Reserved] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)
    oneofs: list[OneOf] = field(default_factory=list)
    extensions: list[Extensions] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)


@dataclass
class Rpc:
    name: str
    request: str
    response: str
    request_streaming: bool = False
    response_streaming: bool = False
    options: list[Option] = field(default_factory=list)


@dataclass
class Service:
    name: str
    rpcs: list[Rpc] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


@dataclass
class ProtoFile:
    package: str | None = None
    syntax: str | None = None  # "proto2", "proto3" or None (none declared)
    imports: list[str] = field(default_factory=list)
    public_imports: list[str] = field(default_factory=list)
    weak_imports: list[str] = field(default_factory=list)
    types: list[Message | Enum] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    extends: list[Extend] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)


# --- types as Wire's ProtoType reads a field's type -------------------------------------------

def is_scalar(type_name: str) -> bool:
    return type_name in SCALAR_TYPES


def map_types(type_name: str) -> tuple[str, str] | None:
    """(key, value) of ``map<K, V>``, else None."""
    if type_name.startswith("map<") and type_name.endswith(">"):
        comma = type_name.find(",")
        if comma < 0:
            raise ValueError(f"expected ',' in map type: {type_name}")
        return type_name[4:comma].strip(), type_name[comma + 1:-1].strip()
    return None


def check_map_key(type_name: str) -> None:
    """Wire's ProtoType.get refuses a map whose key is not an integral, bool or string scalar."""
    types = map_types(type_name)
    if types is not None and (not is_scalar(types[0]) or types[0] in ("bytes", "double", "float")):
        raise ValueError(f"map key must be non-byte, non-floating point scalar: {types[0]}")


def find_option(name: str, options: list[Option]) -> Option | None:
    for option in options:
        if option.name == name:
            return option
    return None


def is_map_entry(message: Message) -> bool:
    option = find_option("map_entry", message.options)
    return option is not None and str(option.value).lower() == "true"


# --- the type table (Confluent's diff.Context) ----------------------------------------------

#: ``TypeInfo.ref`` of the schema's own types (Confluent's dummy reference)
LOCAL = "\x00local"


@dataclass
class TypeInfo:
    """Confluent's ``TypeElementInfo``: where a type is defined. ``ref`` is :data:`LOCAL` for
    the schema's own types, (import path, text) of the reference that defines it (Confluent
    holds its subject and version), or None for the well-known types the registry knows
    without references."""

    package: str
    ref: object
    type: Message | Enum
    is_map: bool = False
    key: Field | None = None
    value: Field | None = None

    def map_type(self) -> str | None:
        if not self.is_map or self.key is None or self.value is None:
            return None
        return f"map<{self.key.type}, {self.value.type}>"


@dataclass
class ExtendInfo:
    package: str
    ref: object
    field: Field

    @property
    def repeated(self) -> bool:
        return self.field.label == "repeated"


class Context:
    """Confluent's ``Context``: the types (and extension fields) of an original and an update
    schema with what they import, keyed by full name; the path being compared (for the
    differences' ``#/Msg/1``) and the names of the messages entered (to resolve a relative
    type name as protoc's scoping does, innermost first)."""

    def __init__(self, compatible_changes: frozenset[str] = frozenset()) -> None:
        self.compatible_changes = compatible_changes
        self.schemas: set[int] = set()
        self.types: dict[bool, dict[str, TypeInfo]] = {True: {}, False: {}}
        self.extend_fields: dict[bool, dict[str, ExtendInfo]] = {True: {}, False: {}}
        self.package: dict[bool, str] = {True: "", False: ""}
        self.full_path: list[str] = []
        self.full_name: list[str] = []
        self.diffs: list[tuple[str, str]] = []

    def subcontext(self) -> Context:
        ctx = Context(self.compatible_changes)
        ctx.schemas = set(self.schemas)
        ctx.types = {True: dict(self.types[True]), False: dict(self.types[False])}
        ctx.package = dict(self.package)
        ctx.full_path = list(self.full_path)
        ctx.full_name = list(self.full_name)
        return ctx

    # --- collecting -------------------------------------------------------------------------
    def collect(self, file: ProtoFile, dependencies: dict[str, ProtoFile], references: dict[str, str],
                is_original: bool) -> None:
        """Confluent's ``collectTypeInfo(schema, isOriginal)``: the dependencies' types (a
        reference's under (import path, text), a well-known type's under None), then the
        schema's own, which win over an imported type of the same full name."""
        for name, dep in dependencies.items():
            self._collect_file((name, references[name]) if name in references else None, dep, is_original)
        self._collect_file(LOCAL, file, is_original)

    def _collect_file(self, ref: object, file: ProtoFile, is_original: bool) -> None:
        self.set_package(file.package, is_original)
        self._collect_extends(ref, file.extends, is_original)
        self._collect_types(ref, file.types, is_original)

    def _collect_types(self, ref: object, types: list[Message | Enum], is_original: bool) -> None:
        for type_element in types:
            self.enter_name(type_element.name)
            try:
                is_map, key, value = False, None, None
                if isinstance(type_element, Message):
                    self._collect_extends(ref, type_element.extends, is_original)
                    is_map = is_map_entry(type_element)
                    if is_map:
                        key = next((f for f in type_element.fields if f.name == "key"), None)
                        value = next((f for f in type_element.fields if f.name == "value"), None)
                info = TypeInfo(self.package[is_original], ref, type_element, is_map, key, value)
                self.types[is_original][self._qualified(is_original)] = info
                if isinstance(type_element, Message):
                    self._collect_types(ref, type_element.nested, is_original)
            finally:
                self.leave_name()

    def _collect_extends(self, ref: object, extends: list[Extend], is_original: bool) -> None:
        for extend in extends:
            for extend_field in extend.fields:
                self.enter_name(extend_field.name)
                try:
                    info = ExtendInfo(self.package[is_original], ref, extend_field)
                    self.extend_fields[is_original][self._qualified(is_original)] = info
                finally:
                    self.leave_name()

    def _qualified(self, is_original: bool) -> str:
        name = ".".join(self.full_path)
        package = self.package[is_original]
        return f"{package}.{name}" if package else name

    def set_package(self, package: str | None, is_original: bool) -> None:
        self.package[is_original] = package or ""

    def set_full_name(self, name: str) -> None:
        parts = name.split(".")
        self.full_path = list(parts)
        self.full_name = list(parts)

    # --- scopes -----------------------------------------------------------------------------
    def enter_path(self, part: str) -> None:
        self.full_path.append(part)

    def leave_path(self) -> None:
        self.full_path.pop()

    def enter_name(self, name: str) -> None:
        self.full_path.append(name)
        self.full_name.append(name)

    def leave_name(self) -> None:
        self.full_name.pop()
        self.full_path.pop()

    # --- resolving --------------------------------------------------------------------------
    def type_for_full_name(self, name: str, is_original: bool) -> TypeInfo | None:
        return self.types[is_original].get(name[1:] if name.startswith(".") else name)

    def extend_field_for_full_name(self, name: str, is_original: bool) -> ExtendInfo | None:
        return self.extend_fields[is_original].get(name[1:] if name.startswith(".") else name)

    def resolve(self, name: str, is_original: bool, extend_fields: bool = False) -> str | None:
        """Confluent's ``Context.resolve``: the full name (no leading dot) a type name (or an
        extension field's name) written in the current scope refers to, or None."""
        lookup = self.extend_field_for_full_name if extend_fields else self.type_for_full_name
        if not self.types[is_original]:
            return None
        if name.startswith("."):
            return name[1:] if lookup(name[1:], is_original) is not None else None
        package = self.package[is_original]
        prefix = (package.split(".") if package else []) + self.full_name
        while prefix:
            candidate = ".".join(prefix) + "." + name
            if lookup(candidate, is_original) is not None:
                return candidate
            prefix.pop()
        return name if lookup(name, is_original) is not None else None

    def get_type(self, name: str, is_original: bool) -> TypeInfo | None:
        full = self.resolve(name, is_original)
        return self.type_for_full_name(full, is_original) if full is not None else None

    # --- differences ------------------------------------------------------------------------
    def add_difference(self, kind: str) -> None:
        self.diffs.append((kind, "#/" + "/".join(self.full_path)))

    def is_compatible(self) -> bool:
        return all(kind in self.compatible_changes for kind, _ in self.diffs)
