"""The PROTOBUF schema type (Confluent's ``ProtobufSchemaProvider`` and ``ProtobufSchema``).

A schema is a .proto file's text, or a base64 ``FileDescriptorProto`` (what confluent-kafka's
Python serializer registers; Confluent reads both). Its references map each import path to
that file's text; Google's well-known and common types and Confluent's own .proto files
resolve without them (:mod:`.protobuf_known`).

- :meth:`ProtobufSchema.canonical_string`: the file printed back as Confluent prints it
  (:mod:`.protobuf_printer`): comments and layout gone, elements in Confluent's order.
- :meth:`ProtobufSchema.normalize`: Confluent's ``normalize()``.
- :meth:`ProtobufSchema.is_backward_compatible`: Confluent's ``SchemaDiff`` rules
  (:mod:`.protobuf_diff`), one ``{errorType:"...", description:"..."}`` per incompatible
  difference, worded for this schema as the new (reader) one, as the AVRO type does.
- :meth:`ProtobufSchema.formatted_string`: ``format=serialized`` (the base64
  ``FileDescriptorProto`` the Python deserializer asks for) and ``ignore_extensions``.

Refused (InvalidSchemaError): what Confluent's parser refuses (:mod:`.protobuf_text`), a
type name that resolves to nothing (Confluent's validation), a map key that is not an
integral, bool or string scalar; and, as protoc does (Confluent only with
``schema.validate.fields``), two fields of a message sharing a number or a name, and a
field number out of range. Pure.
"""

from __future__ import annotations

import base64
import binascii
from functools import cached_property

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from . import protobuf_diff, schema_types
from .protobuf_descriptor import from_descriptor, to_descriptor
from .protobuf_known import KNOWN_PATHS, known_dependencies
from .protobuf_model import MAX_TAG_VALUE, Context, Enum, Field, Message, ProtoFile
from .protobuf_printer import Format, UnresolvedTypeError, to_string
from .protobuf_text import parse_proto
from .schema_types import InvalidSchemaError, ParsedSchema

SCHEMA_TYPE = "PROTOBUF"
DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"
_RESERVED_NUMBERS = range(19_000, 20_000)  # protobuf's own (FieldDescriptor.kFirstReservedNumber)


def parse(text: str, references: dict[str, str]) -> ProtobufSchema:
    """The Parser registered for PROTOBUF: ``references`` maps import path -> text."""
    dependencies: dict[str, ProtoFile] = {}
    for name, ref_text in references.items():
        try:
            dependencies[name] = _read(ref_text)
        except InvalidSchemaError as exc:
            raise InvalidSchemaError(f"Invalid reference {name}: {exc}") from None
    schema = ProtobufSchema(_read(text), references, dependencies)
    schema.validate()
    return schema


def _read(text: str) -> ProtoFile:
    """.proto text, else a base64 FileDescriptorProto (Confluent's ``toProtoFile``)."""
    try:
        return parse_proto(text)
    except InvalidSchemaError as exc:
        error = exc
    try:
        data = base64.b64decode(text.strip(), validate=True)
        return from_descriptor(descriptor_pb2.FileDescriptorProto.FromString(data))
    except (binascii.Error, ValueError, DecodeError):
        raise InvalidSchemaError(f"Could not parse Protobuf - {error}") from None


class ProtobufSchema(ParsedSchema):
    schema_type = SCHEMA_TYPE

    def __init__(self, file: ProtoFile, references: dict[str, str], dependencies: dict[str, ProtoFile],
                 canonical: str | None = None) -> None:
        self.file = file
        self.references = dict(references)
        self.dependencies = dependencies
        if canonical is not None:
            self.__dict__["_canonical"] = canonical

    # --- what the registry asks ---------------------------------------------------------------
    def canonical_string(self) -> str:
        return self._canonical

    @cached_property
    def _canonical(self) -> str:
        return to_string(self.file)

    def normalize(self) -> ProtobufSchema:
        return self._normalized

    @cached_property
    def _normalized(self) -> ProtobufSchema:
        """Confluent's ``normalize()``: the normalized text, read again (Confluent's validation
        is this: a type name that resolves to nothing, or a normalized text its parser cannot
        read back, makes the schema invalid)."""
        try:
            text = to_string(self.file, Format(self._context(), normalize=True))
        except (UnresolvedTypeError, ValueError) as exc:
            raise InvalidSchemaError(str(exc)) from None
        return ProtobufSchema(parse_proto(text), self.references, self.dependencies, text)

    def compatibility_templates(self, previous: ParsedSchema) -> list[str]:
        """Exactly what Confluent's ``isBackwardCompatible`` returns: one
        ``{errorType:"...", description:"..."}`` per incompatible difference from
        ``previous`` to this schema, each description with two ``%s`` for the reader's and
        the writer's role, which Confluent's ``SchemaValidatorBuilder`` fills with ("new",
        "old") when the new schema reads (BACKWARD) and ("old", "new") when the previous one
        does (FORWARD)."""
        if not isinstance(previous, ProtobufSchema):
            return [DIFFERENT_SCHEMA_TYPE]
        differences = protobuf_diff.compare(previous._side(), self._side())
        return [protobuf_diff.message(kind, path) for kind, path in differences
                if kind not in protobuf_diff.COMPATIBLE_CHANGES]

    def is_backward_compatible(self, previous: ParsedSchema, reader: str = "new", writer: str = "old") -> list[str]:
        """Why data written with ``previous`` cannot be read with this schema, as Confluent
        words it with this schema as the "new" one; pass ``reader="old", writer="new"`` when
        this is the previous schema reading the new one (FORWARD)."""
        return [fill(t, reader, writer) for t in self.compatibility_templates(previous)]

    # --- more of Confluent's ProtobufSchema ---------------------------------------------------
    def formatted_string(self, fmt: str | None) -> str:
        """Confluent's ``formattedString(format)``: ``serialized`` is the base64
        FileDescriptorProto, ``ignore_extensions`` the canonical string without custom
        options (Confluent's own kept), extension ranges and extends; any other format the
        canonical string."""
        fmt = (fmt or "").strip().lower()
        if fmt == "serialized":
            proto = to_descriptor(self.file, self._context(), set(self.dependencies) | KNOWN_PATHS)
            return base64.standard_b64encode(proto.SerializeToString()).decode("ascii")
        if fmt == "ignore_extensions":
            return to_string(self.file, Format(Context(), ignore_extensions=True))
        return self.canonical_string()

    def name(self) -> str:
        """Confluent's ``name()``: the full name of the first message (else enum)."""
        first = next((t for t in self.file.types if isinstance(t, Message)), None)
        first = first or next((t for t in self.file.types if isinstance(t, Enum)), None)
        if first is None:
            raise InvalidSchemaError("Protobuf schema definition contains no type definitions")
        return f"{self.file.package}.{first.name}" if self.file.package else first.name

    def validate(self) -> None:
        """Confluent's ``validate(false)`` (normalizing resolves every type name), and the
        field numbers and names protoc checks."""
        self.normalize()
        for type_element in self.file.types:
            if isinstance(type_element, Message):
                _check_fields(type_element, self.file.package)

    # --- internals ----------------------------------------------------------------------------
    def _all_dependencies(self) -> dict[str, ProtoFile]:
        """Confluent's ``dependenciesWithLogicalTypes()``: references, then the known files
        they do not shadow."""
        return {**self.dependencies, **{p: f for p, f in known_dependencies().items() if p not in self.dependencies}}

    def _context(self) -> Context:
        ctx = Context()
        ctx.collect(self.file, self._all_dependencies(), self.references, True)
        return ctx

    def _side(self) -> protobuf_diff.Side:
        return protobuf_diff.Side(self.file, self._all_dependencies(), self.references)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ProtobufSchema) and self.canonical_string() == other.canonical_string()
                and self.references == other.references)

    def __hash__(self) -> int:
        return hash(self.canonical_string())

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.canonical_string()!r})"


def fill(template: str, reader: str, writer: str) -> str:
    """Java's ``String.format(template, reader, writer)`` for templates with ``%s`` only."""
    return template.replace("%s", reader, 1).replace("%s", writer, 1)


def _check_fields(message: Message, scope: str | None) -> None:
    full_name = f"{scope}.{message.name}" if scope else message.name
    fields: list[Field] = [*message.fields, *(f for o in message.oneofs for f in o.fields)]
    numbered = [*((f.name, f.tag) for f in fields), *((g.name, g.tag) for g in message.groups),
                *((g.name, g.tag) for o in message.oneofs for g in o.groups)]
    by_number: dict[int, str] = {}
    names: set[str] = set()
    for name, tag in numbered:
        if name in names:
            raise InvalidSchemaError(f'{full_name}.{name}: "{name}" is already defined in "{full_name}".')
        names.add(name)
        if tag in by_number:
            raise InvalidSchemaError(f'{full_name}.{name}: Field number {tag} has already been used in '
                                     f'"{full_name}" by field "{by_number[tag]}".')
        by_number[tag] = name
        if not 0 < tag <= MAX_TAG_VALUE:
            raise InvalidSchemaError(f"{full_name}.{name}: Field numbers must be positive integers "
                                     f"(at most {MAX_TAG_VALUE}).")
        if tag in _RESERVED_NUMBERS:
            raise InvalidSchemaError(f"{full_name}.{name}: Field numbers 19000 through 19999 are reserved for "
                                     f"the protocol buffer library implementation.")
    for nested in message.nested:
        if isinstance(nested, Message):
            _check_fields(nested, full_name)


schema_types.register(SCHEMA_TYPE, parse)
