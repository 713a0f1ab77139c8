"""Protobuf values as Iceberg columns: a registered ``.proto`` schema made into protobuf
descriptors (the registry's parser gives the ``FileDescriptorProto``), a message of the
file mapped to columns, and each payload parsed by protobuf's own (upb, C) parser.

Protobuf -> Iceberg:

=========================================  ===========================================
message                                    struct (fields in declaration order)
repeated X / map<K, V>                     list<X> / map<K, V>
int32, sint32, sfixed32                    int
int64, sint64, sfixed64, uint32, fixed32   long
uint64, fixed64                            long (a value past 2^63 - 1: to the DLQ)
float / double / bool / string / bytes     float / double / boolean / string / binary
enum                                       string (the value's name; its number when
                                           the schema has no name for it)
google.protobuf.* well-known messages      structs of their fields, as any message
recursive messages                         not mapped: the records go to the DLQ
=========================================  ===========================================

A scalar field has its value as protobuf reads it (proto3's default when absent); a message
field is null when absent, a repeated or map field an empty list or map.

Each value is decoded as the message its wire-format message indexes name (Confluent's
serializer writes the path of the value's message in the file: ``[0]`` the first top-level
message, ``[1, 0]`` the first message nested in the second); ``value_schema_latest``
values, which carry no indexes, as the file's first message. Indexes naming no message send
the value to the DLQ.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable

# the well-known types' files, registered in protobuf's default pool on import, for schemas
# that import them
import google.protobuf.any_pb2
import google.protobuf.duration_pb2
import google.protobuf.empty_pb2
import google.protobuf.field_mask_pb2
import google.protobuf.struct_pb2
import google.protobuf.timestamp_pb2
import google.protobuf.wrappers_pb2  # noqa: F401
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

from schema_registry.protobuf import parse as parse_proto
from schema_registry.schema_types import InvalidSchemaError

from .schema_map import MappedSchema, SchemaMapError, mapped_struct

__all__ = ["ProtobufMessage", "protobuf_message", "read_message_indexes"]

_F = FieldDescriptor
_SCALARS: dict[int, IcebergType] = {
    _F.TYPE_INT32: IntegerType(), _F.TYPE_SINT32: IntegerType(), _F.TYPE_SFIXED32: IntegerType(),
    _F.TYPE_INT64: LongType(), _F.TYPE_SINT64: LongType(), _F.TYPE_SFIXED64: LongType(),
    _F.TYPE_UINT32: LongType(), _F.TYPE_FIXED32: LongType(), _F.TYPE_UINT64: LongType(), _F.TYPE_FIXED64: LongType(),
    _F.TYPE_FLOAT: FloatType(), _F.TYPE_DOUBLE: DoubleType(), _F.TYPE_BOOL: BooleanType(),
    _F.TYPE_STRING: StringType(), _F.TYPE_BYTES: BinaryType(), _F.TYPE_ENUM: StringType(),
}
_MESSAGE_TYPES = (_F.TYPE_MESSAGE, _F.TYPE_GROUP)


class ProtobufMessage:
    """One message of a registered Protobuf schema: its columns and a parser of one
    payload into the Python structure Arrow takes for them."""

    def __init__(self, mapped: MappedSchema, parse: Callable[[bytes], dict]) -> None:
        self.mapped = mapped
        self.parse = parse


def _descriptor_proto(name: str, text: str, refs: dict[str, str]) -> descriptor_pb2.FileDescriptorProto:
    try:
        parsed = parse_proto(text, refs)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(parsed.formatted_string("serialized")))
    except InvalidSchemaError as exc:
        raise SchemaMapError(f"the Protobuf schema cannot be read: {exc}") from None
    fdp.name = name
    return fdp


def _pool(text: str, references: tuple[tuple[str, str], ...],
          indexes: tuple[int, ...] = (0,)) -> tuple[descriptor_pool.DescriptorPool, str]:
    """A pool holding the schema's file (and its references and well-known imports); the
    full name of the file's message that ``indexes`` names."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    default = descriptor_pool.Default()

    def add(fdp: descriptor_pb2.FileDescriptorProto) -> None:
        for dep in fdp.dependency:
            if dep in added:
                continue
            try:
                known = default.FindFileByName(dep)
            except KeyError:
                raise SchemaMapError(f"the Protobuf schema imports {dep}, which is neither a reference nor a "
                                     f"well-known type") from None
            proto = descriptor_pb2.FileDescriptorProto()
            known.CopyToProto(proto)
            add(proto)
        try:
            pool.Add(fdp)
        except (TypeError, ValueError) as exc:
            raise SchemaMapError(f"protobuf cannot build the schema's descriptors: {exc}") from None
        added.add(fdp.name)

    seen: dict[str, str] = {}
    for name, ref_text in references:  # each after those it references
        add(_descriptor_proto(name, ref_text, dict(seen)))
        seen[name] = ref_text
    main = _descriptor_proto("krait-value.proto", text, dict(seen))
    if not main.message_type:
        raise SchemaMapError("the Protobuf schema has no message")
    add(main)
    names, messages = [], main.message_type
    for i in indexes:
        if not 0 <= i < len(messages):
            raise SchemaMapError(f"message indexes {list(indexes)} name no message of the Protobuf schema")
        names.append(messages[i].name)
        messages = messages[i].nested_type
    name = ".".join(names)
    return pool, f"{main.package}.{name}" if main.package else name


class _Mapper:
    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.active: list[str] = []

    def message(self, d: Descriptor) -> tuple[StructType, Callable[[object], dict]]:
        if d.full_name in self.active:
            raise SchemaMapError(f"Protobuf message {d.full_name} is recursive: Iceberg has no type for it")
        self.active.append(d.full_name)
        fields, getters = [], []
        for fd in d.fields:
            t, get = self.field(fd)
            fields.append(NestedField(next(self.ids), fd.name, t, required=False))
            getters.append((fd.name, get))
        self.active.pop()

        def convert(msg: object) -> dict:
            return {name: get(msg) for name, get in getters}

        return StructType(*fields), convert

    def field(self, fd: FieldDescriptor) -> tuple[IcebergType, Callable[[object], object]]:
        name = fd.name
        if fd.type in _MESSAGE_TYPES and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            kt, kconv = self.single(key_fd)
            vt, vconv = self.single(value_fd)
            t = MapType(next(self.ids), kt, next(self.ids), vt, value_required=False)
            return t, lambda msg: [(kconv(k), vconv(v)) for k, v in getattr(msg, name).items()]
        if fd.is_repeated:
            et, conv = self.single(fd)
            return (ListType(next(self.ids), et, element_required=False),
                    lambda msg: [conv(v) for v in getattr(msg, name)])
        t, conv = self.single(fd)
        if fd.type in _MESSAGE_TYPES:
            return t, lambda msg: conv(getattr(msg, name)) if msg.HasField(name) else None
        return t, lambda msg: conv(getattr(msg, name))

    def single(self, fd: FieldDescriptor) -> tuple[IcebergType, Callable[[object], object]]:
        """The type of one value of the field and the conversion of one such value."""
        if fd.type in _MESSAGE_TYPES:
            return self.message(fd.message_type)
        if fd.type == _F.TYPE_ENUM:
            names = {v.number: v.name for v in fd.enum_type.values}
            return StringType(), lambda v: names.get(v, str(v))
        t = _SCALARS.get(fd.type)
        if t is None:
            raise SchemaMapError(f"Protobuf field {fd.full_name} has a type with no column type")
        return t, _same


def _same(v: object) -> object:
    return v


def protobuf_message(text: str, references: tuple[tuple[str, str], ...] = (),
                     which: tuple[int, ...] | str = (0,)) -> ProtobufMessage:
    """The columns of one message of the schema and a parser of its payloads: the message at
    the index path ``which`` (the first by default), or the one of that full name
    (``value_schema_latest``'s ``protobuf_name`` option)."""
    pool, full_name = _pool(text, references, which if isinstance(which, tuple) else (0,))
    if isinstance(which, str):
        full_name = which.removeprefix(".")
    try:
        descriptor = pool.FindMessageTypeByName(full_name)
    except KeyError:
        raise SchemaMapError(f"the Protobuf schema has no message {full_name}") from None
    struct, convert = _Mapper().message(descriptor)
    cls = message_factory.GetMessageClass(descriptor)
    from_string = cls.FromString

    def parse(payload: bytes) -> dict:
        return convert(from_string(payload))

    return ProtobufMessage(mapped_struct(struct), parse)


def read_message_indexes(data: bytes, pos: int, end: int) -> tuple[list[int], int]:
    """Confluent's message-index list after the schema id: a zigzag varint count, then that
    many zigzag varint indexes; a count of 0 (the single byte 0) means ``[0]``. (indexes,
    position of the payload); ValueError when the bytes end first."""
    count, pos = _zigzag(data, pos, end)
    if count == 0:
        return [0], pos
    if count < 0 or count > end - pos:
        raise ValueError(f"bad message index count {count}")
    out = []
    for _ in range(count):
        i, pos = _zigzag(data, pos, end)
        out.append(i)
    return out, pos


def _zigzag(data: bytes, pos: int, end: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= end:
            raise ValueError("the message indexes run past the value's end")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("a message index varint is too long")
