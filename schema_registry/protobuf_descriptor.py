"""Between :mod:`.protobuf_model` elements and protobuf's ``FileDescriptorProto``.

In: a schema registered as a base64 ``FileDescriptorProto`` (what confluent-kafka's Python
``ProtobufSerializer`` sends), and the well-known types the registry knows without
references, read as Confluent's ``ProtobufSchema.toProtoFile(FileDescriptorProto)`` reads
them: the standard options it names, Confluent's ``confluent.*_meta`` options, other custom
options dropped; a proto3 ``optional`` field's synthetic oneof folded back; groups as the
messages and fields they are.

Out: ``format=serialized`` (what the Python deserializer asks for), as Confluent's
``toDynamicSchema`` builds it: map fields as ``XxxEntry`` messages, proto3 ``optional`` in a
synthetic oneof, type names fully qualified. Pure.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, unknown_fields

from .protobuf_model import (
    BOOLEAN,
    ENUM,
    MAP,
    NUMBER,
    STRING,
    Context,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    Message,
    OneOf,
    Option,
    Primitive,
    ProtoFile,
    Reserved,
    Rpc,
    Service,
    find_option,
    is_scalar,
    map_types,
)
from .protobuf_printer import transform

FDP = descriptor_pb2.FieldDescriptorProto
#: the extension number of Confluent's ``confluent.*_meta`` options (confluent/meta.proto)
META_FIELD = 1088
_META_NAMES = {
    "file": "confluent.file_meta", "message": "confluent.message_meta", "field": "confluent.field_meta",
    "enum": "confluent.enum_meta", "enum_value": "confluent.enum_value_meta",
}
_FILE_OPTIONS = (
    ("java_package", STRING), ("java_outer_classname", STRING), ("java_multiple_files", BOOLEAN),
    ("java_generate_equals_and_hash", BOOLEAN), ("java_string_check_utf8", BOOLEAN), ("optimize_for", ENUM),
    ("go_package", STRING), ("cc_generic_services", BOOLEAN), ("java_generic_services", BOOLEAN),
    ("py_generic_services", BOOLEAN), ("deprecated", BOOLEAN), ("cc_enable_arenas", BOOLEAN),
    ("objc_class_prefix", STRING), ("csharp_namespace", STRING), ("swift_prefix", STRING),
    ("php_class_prefix", STRING), ("php_namespace", STRING), ("php_metadata_namespace", STRING),
    ("ruby_package", STRING),
)
_FEATURES = ("field_presence", "enum_type", "repeated_field_encoding", "utf8_validation", "message_encoding",
             "json_format")
_SCALAR_TYPES = {name: getattr(FDP, "TYPE_" + name.upper()) for name in (
    "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string", "bytes", "uint32",
    "sfixed32", "sfixed64", "sint32", "sint64")}


# --- reading ----------------------------------------------------------------------------------

def from_descriptor(file: descriptor_pb2.FileDescriptorProto) -> ProtoFile:
    proto3 = file.syntax == "proto3"
    proto = ProtoFile(package=file.package or None,
                      syntax=file.syntax if file.syntax in ("proto2", "proto3") else None)
    proto.types = [*(_message(m, proto3) for m in file.message_type), *(_enum(e) for e in file.enum_type)]
    proto.services = [_service(s) for s in file.service]
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    for i, dependency in enumerate(file.dependency):
        (proto.public_imports if i in public else proto.weak_imports if i in weak else proto.imports).append(dependency)
    options = file.options
    for name, kind in _FILE_OPTIONS:
        if _has(options, name):
            proto.options.append(Option(name, kind, _scalar_text(options, name)))
    _features_and_meta(options, "file", proto.options)
    proto.extends = _extends(file.extension, proto3)
    return proto


def _has(message: Any, name: str) -> bool:
    """Whether ``name`` is set, False for a field this protobuf runtime's descriptor.proto
    does not have yet (editions' options came late)."""
    return name in message.DESCRIPTOR.fields_by_name and message.HasField(name)


def _repeated(message: Any, name: str) -> Any:
    return getattr(message, name) if name in message.DESCRIPTOR.fields_by_name else ()


def _scalar_text(options: Any, name: str) -> str:
    value = getattr(options, name)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and not isinstance(value, bool):
        enum_type = options.DESCRIPTOR.fields_by_name[name].enum_type
        if enum_type is not None:
            return enum_type.values_by_number[value].name
    return str(value)


def _features_and_meta(options: Any, meta_kind: str | None, out: list[Option]) -> None:
    if _has(options, "features"):
        features = options.features
        out.append(Option("features", MAP, {
            name: Primitive(ENUM, _scalar_text(features, name)) for name in _FEATURES if _has(features, name)}))
    if meta_kind == "field" or meta_kind == "enum_value":
        if _has(options, "feature_support"):
            support = options.feature_support
            value: dict[str, Any] = {}
            for name in ("edition_introduced", "edition_deprecated", "deprecation_warning", "edition_removed"):
                if _has(support, name):
                    text = _scalar_text(support, name)
                    value[name] = text if name == "deprecation_warning" else Primitive(ENUM, text)
            out.append(Option("feature_support", MAP, value))
    if meta_kind is not None:
        data = _meta_data(options)
        meta = meta_option(_META_NAMES[meta_kind], data) if data is not None else None
        if meta is not None:
            out.append(meta)


def _meta_data(options: Any) -> bytes | None:
    """The Meta bytes of a ``confluent.*_meta`` option: an unknown field to protobuf's runtime,
    or a known extension when confluent-kafka's meta_pb2 is loaded in this process."""
    for field_descriptor, value in options.ListFields():
        if field_descriptor.is_extension and field_descriptor.number == META_FIELD:
            return value.SerializeToString()
    for unknown in unknown_fields.UnknownFieldSet(options):
        if unknown.field_number == META_FIELD and unknown.wire_type == 2:
            return unknown.data
    return None


def _extends(fields: Any, proto3: bool) -> list[Extend]:
    grouped: dict[str, list[Field]] = {}
    for fd in fields:
        grouped.setdefault(fd.extendee, []).append(_field(fd, proto3, in_oneof=False))
    return [Extend(name, fields) for name, fields in grouped.items()]


def _message(descriptor: descriptor_pb2.DescriptorProto, proto3: bool) -> Message:
    message = Message(descriptor.name)
    oneofs = [OneOf(o.name) for o in descriptor.oneof_decl]
    for fd in descriptor.field:
        if _has(fd, "oneof_index") and not fd.proto3_optional:
            oneofs[fd.oneof_index].fields.append(_field(fd, proto3, in_oneof=True))
        else:
            message.fields.append(_field(fd, proto3, in_oneof=False))
    for oneof, decl in zip(oneofs, descriptor.oneof_decl, strict=True):
        _features_and_meta(decl.options, None, oneof.options)
    message.oneofs = [o for o in oneofs if o.fields]
    message.nested = [*(_message(m, proto3) for m in descriptor.nested_type), *(_enum(e) for e in descriptor.enum_type)]
    message.reserveds = [Reserved([r.start if r.start == r.end - 1 else (r.start, r.end - 1)])
                         for r in descriptor.reserved_range]
    message.reserveds += [Reserved([name]) for name in descriptor.reserved_name]
    for ext_range in descriptor.extension_range:
        start, end = ext_range.start, ext_range.end - 1
        message.extensions.append(Extensions([start if start == end else (start, end)],
                                             _extension_range_options(ext_range.options)))
    options = descriptor.options
    for name in ("no_standard_descriptor_accessor", "deprecated", "map_entry"):
        if _has(options, name):
            message.options.append(Option(name, BOOLEAN, _scalar_text(options, name)))
    _features_and_meta(options, "message", message.options)
    message.extends = _extends(descriptor.extension, proto3)
    return message


def _extension_range_options(options: Any) -> list[Option]:
    out = []
    for decl in _repeated(options, "declaration"):
        value: dict[str, Any] = {}
        if _has(decl, "number"):
            value["number"] = Primitive(NUMBER, str(decl.number))
        for name in ("full_name", "type"):
            if _has(decl, name):
                value[name] = getattr(decl, name)
        for name in ("reserved", "repeated"):
            if _has(decl, name):
                value[name] = Primitive(BOOLEAN, _scalar_text(decl, name))
        out.append(Option("declaration", MAP, value))
    _features_and_meta(options, None, out)
    if _has(options, "verification"):
        out.append(Option("verification", BOOLEAN, _scalar_text(options, "verification")))
    return out


def _field(fd: descriptor_pb2.FieldDescriptorProto, proto3: bool, in_oneof: bool) -> Field:
    options: list[Option] = []
    opts = fd.options
    for name, kind in (("ctype", ENUM), ("packed", BOOLEAN), ("jstype", ENUM), ("deprecated", BOOLEAN),
                       ("debug_redact", BOOLEAN), ("retention", ENUM)):
        if _has(opts, name):
            options.append(Option(name, kind, _scalar_text(opts, name)))
    for target in _repeated(opts, "targets"):
        target_type = opts.DESCRIPTOR.fields_by_name["targets"].enum_type
        options.append(Option("targets", ENUM, target_type.values_by_number[target].name))
    for default in _repeated(opts, "edition_defaults"):
        value: dict[str, Any] = {}
        if _has(default, "edition"):
            value["edition"] = Primitive(ENUM, _scalar_text(default, "edition"))
        if _has(default, "value"):
            value["value"] = default.value
        options.append(Option("edition_defaults", MAP, value))
    _features_and_meta(opts, "field", options)
    if in_oneof:
        label = None
    elif fd.proto3_optional:
        label = "optional"
    elif fd.label == FDP.LABEL_REPEATED:
        label = "repeated"
    elif proto3:
        label = None
    else:
        label = "required" if fd.label == FDP.LABEL_REQUIRED else "optional"
    type_name = fd.type_name if _has(fd, "type_name") else FDP.Type.Name(fd.type)[5:].lower()
    default = fd.default_value if not proto3 and _has(fd, "default_value") else None
    json_name = fd.json_name if _has(fd, "json_name") else None
    return Field(label, type_name, fd.name, fd.number, default, json_name, options)


def _enum(descriptor: descriptor_pb2.EnumDescriptorProto) -> Enum:
    enum = Enum(descriptor.name)
    for value in descriptor.value:
        options = []
        for name in ("deprecated", "debug_redact"):
            if _has(value.options, name):
                options.append(Option(name, BOOLEAN, _scalar_text(value.options, name)))
        _features_and_meta(value.options, "enum_value", options)
        enum.constants.append(EnumConstant(value.name, value.number, options))
    enum.reserveds = [Reserved([r.start if r.start == r.end else (r.start, r.end)]) for r in descriptor.reserved_range]
    enum.reserveds += [Reserved([name]) for name in descriptor.reserved_name]
    for name in ("allow_alias", "deprecated"):
        if _has(descriptor.options, name):
            enum.options.append(Option(name, BOOLEAN, _scalar_text(descriptor.options, name)))
    _features_and_meta(descriptor.options, "enum", enum.options)
    return enum


def _service(descriptor: descriptor_pb2.ServiceDescriptorProto) -> Service:
    service = Service(descriptor.name)
    for method in descriptor.method:
        options = []
        if _has(method.options, "deprecated"):
            options.append(Option("deprecated", BOOLEAN, _scalar_text(method.options, "deprecated")))
        if _has(method.options, "idempotency_level"):
            options.append(Option("idempotency_level", ENUM, _scalar_text(method.options, "idempotency_level")))
        _features_and_meta(method.options, None, options)
        service.rpcs.append(Rpc(method.name, method.input_type, method.output_type, method.client_streaming,
                                method.server_streaming, options))
    if _has(descriptor.options, "deprecated"):
        service.options.append(Option("deprecated", BOOLEAN, _scalar_text(descriptor.options, "deprecated")))
    _features_and_meta(descriptor.options, None, service.options)
    return service


# --- Confluent's Meta (confluent/meta.proto), by hand on the wire ---------------------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """(number, value) of a message's fields: bytes for length-delimited ones, ints else."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, value))
    return out


def meta_option(name: str, data: bytes) -> Option | None:
    """Confluent's ``toOption(name, Meta)``: doc, params (``{key, value}`` maps, precision and
    scale with their value first), tags and rules; None when all are empty."""
    doc, params, tags, rules = "", {}, [], []
    for number, value in _fields(data):
        if number == 1:
            doc = value.decode()
        elif number == 2:
            entry = dict(_fields(value))
            params[entry.get(1, b"").decode()] = entry.get(2, b"").decode()
        elif number == 3:
            tags.append(value.decode())
        elif number == 4:
            rule = dict(_fields(value))
            entry = {key: rule[n].decode() for n, key in ((1, "name"), (2, "doc"), (3, "expr"), (4, "sql"))
                     if rule.get(n)}
            if entry:
                rules.append(entry)
    result: dict[str, Any] = {}
    if doc:
        result["doc"] = doc
    if params:
        result["params"] = [{"value": v, "key": k} if k in ("precision", "scale") else {"key": k, "value": v}
                            for k, v in params.items()]
    if tags:
        result["tags"] = tags
    if rules:
        result["rules"] = rules
    return Option(name, MAP, result, True) if result else None


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _encode_varint(len(payload)) + payload


def _merged_meta(options: list[Option], name: str) -> dict[str, Any] | None:
    """Confluent's ``mergeOptions`` for one name: ``(confluent.field_meta).tags = "a"`` and
    ``(confluent.field_meta) = {doc: "b"}`` make one map, repeated values collected."""
    merged: dict[str, Any] | None = None
    for option in options:
        if option.name.lstrip(".") != name:
            continue
        option = transform(option)
        if option.kind != MAP:
            continue
        if merged is None:
            merged = dict(option.value)
            continue
        for key, value in option.value.items():
            if key not in merged:
                merged[key] = value
            else:
                items: list[Any] = []
                for item in [*_as_list(merged[key]), *_as_list(value)]:
                    if item not in items:
                        items.append(item)
                merged[key] = items
    return merged


def _meta_bytes(options: list[Option], name: str) -> bytes | None:
    """The ``Meta`` of a ``(confluent.x_meta)`` option, encoded (Confluent's ``findMeta``), or
    None."""
    meta = _merged_meta(options, name)
    if meta is None:
        return None
    out = bytearray()
    doc = meta.get("doc")
    if isinstance(doc, str) and doc:
        out += _length_delimited(1, doc.encode())
    params: dict[str, str] = {}
    for param in _as_list(meta.get("params")):
        if isinstance(param, dict):
            params[_text(param.get("key"))] = _text(param.get("value"))
    for key, value in params.items():
        out += _length_delimited(2, _length_delimited(1, key.encode()) + _length_delimited(2, value.encode()))
    for tag in _as_list(meta.get("tags")):
        out += _length_delimited(3, _text(tag).encode())
    for rule in _as_list(meta.get("rules")):
        if isinstance(rule, dict):
            out += _length_delimited(4, b"".join(
                _length_delimited(n, _text(rule[k]).encode())
                for n, k in ((1, "name"), (2, "doc"), (3, "expr"), (4, "sql")) if rule.get(k) is not None))
    return bytes(out)


def _text(value: Any) -> str:
    return value.value if isinstance(value, Primitive) else "" if value is None else str(value)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


# --- writing (format=serialized) -------------------------------------------------------------

def to_descriptor(file: ProtoFile, ctx: Context, known: set[str], name: str = "default"
                  ) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of ``file``; ``ctx`` holds its types (and its dependencies'),
    ``known`` the import paths the registry can resolve (references and well-known types)."""
    out = descriptor_pb2.FileDescriptorProto(name=name)
    if file.syntax is not None:
        out.syntax = file.syntax
    if file.package:
        out.package = file.package
    proto3 = file.syntax == "proto3"
    writer = _Writer(ctx, proto3)
    for type_element in file.types:
        ctx.enter_name(type_element.name)
        try:
            if isinstance(type_element, Message):
                out.message_type.append(writer.message(type_element))
            else:
                out.enum_type.append(writer.enum(type_element))
        finally:
            ctx.leave_name()
    for service in file.services:
        out.service.append(writer.service(service))
    for extend in file.extends:
        out.extension.extend(writer.extend_fields(extend))
    for path in file.imports:
        if path in known:
            out.dependency.append(path)
    for path in file.public_imports:
        if path in known:
            out.public_dependency.append(len(out.dependency))
            out.dependency.append(path)
    for option_name, kind in _FILE_OPTIONS:
        option = _last(file.options, option_name)
        if option is not None:
            _set_scalar(out.options, option_name, kind, option.value)
    _set_meta(out.options, file.options, "confluent.file_meta")
    return out


def _last(options: list[Option], name: str) -> Option | None:
    found = None
    for option in options:
        if option.name == name and not option.parenthesized:
            found = option
    return found


def _set_scalar(target: Any, name: str, kind: str, value: Any) -> None:
    try:
        if kind == BOOLEAN:
            setattr(target, name, str(value).lower() == "true")
        elif kind == ENUM:
            enum_type = target.DESCRIPTOR.fields_by_name[name].enum_type
            setattr(target, name, enum_type.values_by_name[str(value)].number)
        else:
            setattr(target, name, str(value))
    except (KeyError, TypeError, ValueError):
        pass  # not a value this option takes: left out, as Confluent ignores what it cannot read


def _set_meta(target: Any, options: list[Option], name: str) -> None:
    data = _meta_bytes(options, name)
    if data is not None:
        target.MergeFromString(_length_delimited(META_FIELD, data))


def map_entry_name(field_name: str) -> str:
    """Confluent's ``toMapEntry``: ``my_map`` -> ``MyMapEntry`` (Guava's LOWER_UNDERSCORE to
    UPPER_CAMEL), a name without ``_`` kept as it is."""
    if "_" in field_name:
        field_name = "".join(w[:1].upper() + w[1:].lower() for w in field_name.split("_"))
    return field_name + "Entry"


class _Writer:
    def __init__(self, ctx: Context, proto3: bool) -> None:
        self.ctx = ctx
        self.proto3 = proto3

    def type_of(self, type_name: str, target: descriptor_pb2.FieldDescriptorProto) -> None:
        if is_scalar(type_name):
            target.type = _SCALAR_TYPES[type_name]
            return
        full = self.ctx.resolve(type_name, True)
        info = self.ctx.type_for_full_name(full, True) if full is not None else None
        target.type_name = "." + full if full is not None else type_name
        target.type = FDP.TYPE_ENUM if info is not None and isinstance(info.type, Enum) else FDP.TYPE_MESSAGE

    def field(self, f: Field, label: str | None, type_name: str | None = None) -> descriptor_pb2.FieldDescriptorProto:
        fd = FDP(name=f.name, number=f.tag)
        fd.label = {"repeated": FDP.LABEL_REPEATED, "required": FDP.LABEL_REQUIRED}.get(label or "", FDP.LABEL_OPTIONAL)
        self.type_of(type_name or f.type, fd)
        if f.default is not None:
            fd.default_value = f.default
        if f.json_name is not None:
            fd.json_name = f.json_name
        for option_name, kind in (("ctype", ENUM), ("packed", BOOLEAN), ("jstype", ENUM), ("deprecated", BOOLEAN),
                                  ("debug_redact", BOOLEAN), ("retention", ENUM)):
            option = _last(f.options, option_name)
            if option is not None:
                _set_scalar(fd.options, option_name, kind, option.value)
        _set_meta(fd.options, f.options, "confluent.field_meta")
        return fd

    def message(self, message: Message) -> descriptor_pb2.DescriptorProto:
        out = descriptor_pb2.DescriptorProto(name=message.name)
        for nested in message.nested:
            self.ctx.enter_name(nested.name)
            try:
                if isinstance(nested, Message):
                    out.nested_type.append(self.message(nested))
                else:
                    out.enum_type.append(self.enum(nested))
            finally:
                self.ctx.leave_name()
        in_oneof = set()
        for oneof in message.oneofs:
            out.oneof_decl.add(name=oneof.name)
            for f in oneof.fields:
                fd = self.field(f, "optional")
                fd.oneof_index = len(out.oneof_decl) - 1
                out.field.append(fd)
                in_oneof.add(f.name)
        for f in message.fields:
            if f.name in in_oneof:
                continue
            label, type_name = f.label, f.type
            types = map_types(f.type)
            if types is not None:
                label, type_name = "repeated", map_entry_name(f.name)
                entry = out.nested_type.add(name=type_name)
                entry.options.map_entry = True
                for number, (part, part_type) in enumerate((("key", types[0]), ("value", types[1])), start=1):
                    self.type_of(part_type, entry.field.add(name=part, number=number, label=FDP.LABEL_OPTIONAL))
                type_name = f"{'.'.join(self.ctx.full_name)}.{type_name}"
                if self.ctx.package[True]:
                    type_name = f"{self.ctx.package[True]}.{type_name}"
                type_name = "." + type_name
            fd = self.field(f, label, type_name)
            if label == "optional" and self.proto3:
                out.oneof_decl.add(name="_" + f.name)
                fd.proto3_optional = True
                fd.oneof_index = len(out.oneof_decl) - 1
            out.field.append(fd)
        for reserved in message.reserveds:
            for value in reserved.values:
                if isinstance(value, str):
                    out.reserved_name.append(value)
                else:
                    start, end = (value, value) if isinstance(value, int) else value
                    out.reserved_range.add(start=start, end=end + 1)
        for extensions in message.extensions:
            for value in extensions.values:
                if not isinstance(value, str):
                    start, end = (value, value) if isinstance(value, int) else value
                    out.extension_range.add(start=start, end=end + 1)
        for extend in message.extends:
            out.extension.extend(self.extend_fields(extend))
        for option_name in ("no_standard_descriptor_accessor", "deprecated", "map_entry"):
            option = _last(message.options, option_name)
            if option is not None:
                _set_scalar(out.options, option_name, BOOLEAN, option.value)
        _set_meta(out.options, message.options, "confluent.message_meta")
        return out

    def extend_fields(self, extend: Extend) -> list[descriptor_pb2.FieldDescriptorProto]:
        full = self.ctx.resolve(extend.name, True)
        fields = []
        for f in extend.fields:
            fd = self.field(f, f.label)
            fd.extendee = "." + full if full is not None else extend.name
            fields.append(fd)
        return fields

    def enum(self, enum: Enum) -> descriptor_pb2.EnumDescriptorProto:
        out = descriptor_pb2.EnumDescriptorProto(name=enum.name)
        for constant in enum.constants:
            value = out.value.add(name=constant.name, number=constant.tag)
            option = _last(constant.options, "deprecated")
            if option is not None:
                _set_scalar(value.options, "deprecated", BOOLEAN, option.value)
            _set_meta(value.options, constant.options, "confluent.enum_value_meta")
        for reserved in enum.reserveds:
            for value in reserved.values:
                if isinstance(value, str):
                    out.reserved_name.append(value)
                else:
                    start, end = (value, value) if isinstance(value, int) else value
                    out.reserved_range.add(start=start, end=end)
        for option_name in ("allow_alias", "deprecated"):
            option = _last(enum.options, option_name)
            if option is not None:
                _set_scalar(out.options, option_name, BOOLEAN, option.value)
        _set_meta(out.options, enum.options, "confluent.enum_meta")
        return out

    def service(self, service: Service) -> descriptor_pb2.ServiceDescriptorProto:
        out = descriptor_pb2.ServiceDescriptorProto(name=service.name)
        for rpc in service.rpcs:
            method = out.method.add(name=rpc.name, client_streaming=rpc.request_streaming,
                                    server_streaming=rpc.response_streaming)
            for attr, type_name in (("input_type", rpc.request), ("output_type", rpc.response)):
                full = self.ctx.resolve(type_name, True)
                setattr(method, attr, "." + full if full is not None else type_name)
            for option_name, kind in (("deprecated", BOOLEAN), ("idempotency_level", ENUM)):
                option = _last(rpc.options, option_name)
                if option is not None:
                    _set_scalar(method.options, option_name, kind, option.value)
        option = find_option("deprecated", service.options)
        if option is not None:
            _set_scalar(out.options, "deprecated", BOOLEAN, option.value)
        return out
