"""Prints :mod:`.protobuf_model` elements back as .proto text, as Confluent's
``ProtobufSchemaUtils.toString`` does: the canonical string the registry stores, and, with
``normalize``, the form ``normalize=true`` registers (type names fully qualified, fields by
number, options by name, imports sorted, map-entry messages back to ``map<K, V>``, numbers
reformatted, ``syntax = "proto2"`` dropped).

The order of messages is kept even when normalizing: the serializers' message indexes
count it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from decimal import Context as DecimalContext
from typing import Any

from .protobuf_model import (
    BOOLEAN,
    ENUM,
    LIST,
    MAP,
    MAX_TAG_VALUE,
    NUMBER,
    OPTION,
    STRING,
    Context,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    Group,
    Message,
    OneOf,
    Option,
    Primitive,
    ProtoFile,
    RangeValue,
    Reserved,
    Rpc,
    Service,
    check_map_key,
    is_scalar,
    map_types,
)

CONFLUENT_PREFIX = "confluent."
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
            "\\": "\\\\", "'": "\\'", '"': '\\"'}


#: wide enough for any exponent a .proto number literal carries
_WIDE = DecimalContext(prec=10_000, Emax=10_000_000, Emin=-10_000_000)


class UnresolvedTypeError(ValueError):
    """A type name that names no type of the schema or of what it can import."""


@dataclass
class Format:
    """Confluent's ``FormatContext``."""

    ctx: Context
    normalize: bool = False
    ignore_extensions: bool = False


def to_string(file: ProtoFile, fmt: Format | None = None) -> str:
    fmt = fmt or Format(Context())
    out: list[str] = []
    if file.syntax is not None and (not fmt.normalize or file.syntax == "proto3"):
        out.append(f'syntax = "{file.syntax}";\n')
    if file.package is not None:
        out.append(f"package {file.package};\n")
    if file.imports or file.public_imports:
        out.append("\n")
        imports, public_imports = file.imports, file.public_imports
        if fmt.normalize:
            imports, public_imports = sorted(set(imports)), sorted(set(public_imports))
        out.extend(f'import "{path}";\n' for path in imports)
        out.extend(f'import public "{path}";\n' for path in public_imports)
    options = filter_options(fmt, file.options)
    if options:
        out.append("\n")
        out.extend(_option_statement(fmt, option) for option in options)
    types = _filter_types(fmt, file.types)
    if types:
        out.append("\n")
        out.extend(_types(fmt, types, indent=False))
    if not fmt.ignore_extensions and file.extends:
        out.append("\n")
        out.extend(_extend(fmt, extend) for extend in _extends(fmt, file.extends))
    if file.services:
        out.append("\n")
        out.extend(_service(fmt, service) for service in file.services)
    return "".join(out)


# --- layout -----------------------------------------------------------------------------------

def _java_lines(value: str) -> list[str]:
    """Java's ``String.split("\\n")``: trailing empty strings dropped."""
    parts = value.split("\n")
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _indented(value: str) -> str:
    return "".join(f"  {line}\n" for line in _java_lines(value))


def escape_chars(value: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in value)


def _types(fmt: Format, types: list[Message | Enum], indent: bool) -> list[str]:
    """Messages first, then enums, each printed inside its own name scope."""
    out = []
    for wanted in (Message, Enum):
        for type_element in types:
            if isinstance(type_element, wanted):
                fmt.ctx.enter_name(type_element.name)
                try:
                    text = _message(fmt, type_element) if wanted is Message else _enum(fmt, type_element)
                finally:
                    fmt.ctx.leave_name()
                out.append(_indented(text) if indent else text)
    return out


def _filter_types(fmt: Format, types: list[Message | Enum]) -> list[Message | Enum]:
    if not fmt.normalize:
        return types
    kept = []
    for type_element in types:
        info = fmt.ctx.get_type(type_element.name, True) if isinstance(type_element, Message) else None
        if info is None or not info.is_map:  # a map's synthetic entry message is not printed
            kept.append(type_element)
    return kept


# --- types ------------------------------------------------------------------------------------

def _range_sort_key(value: RangeValue) -> tuple[int, str]:
    if isinstance(value, tuple):
        return value[0], f"{value[0]}..{value[1]}"  # Kotlin's IntRange.toString
    if isinstance(value, int):
        return value, str(value)
    return 2**31 - 1, value


def _split_ranges(items: list[Any], make: Any, sort_names: bool = True) -> list[Any]:
    """Normalizing: one statement per value, by number (names last, by name)."""
    flat = [make(item, value) for item in items for value in item.values]
    key = _range_sort_key if sort_names else (lambda v: _range_sort_key(v)[0])
    return sorted(flat, key=lambda item: key(item.values[0]))


def _enum(fmt: Format, enum: Enum) -> str:
    out = [f"enum {enum.name} {{"]
    if enum.reserveds:
        out.append("\n")
        reserveds = enum.reserveds
        if fmt.normalize:
            reserveds = _split_ranges(reserveds, lambda r, v: Reserved([v]))
        out.extend(_indented(_ranges(fmt, "reserved", r.values, [])) for r in reserveds)
    if not enum.reserveds and (enum.options or enum.constants):
        out.append("\n")
    out.extend(_indented(_option_statement(fmt, o)) for o in filter_options(fmt, enum.options))
    constants = enum.constants
    if fmt.normalize:
        constants = sorted(constants, key=lambda c: (c.tag, c.name))
    out.extend(_indented(_constant(fmt, c)) for c in constants)
    out.append("}\n")
    return "".join(out)


def _constant(fmt: Format, constant: EnumConstant) -> str:
    text = f"{constant.name} = {constant.tag}"
    options = filter_options(fmt, constant.options)
    if options:
        text += " " + _append_options(fmt, options)
    return text + ";\n"


def _message(fmt: Format, message: Message) -> str:
    out = [f"message {message.name} {{"]
    if message.reserveds:
        out.append("\n")
        reserveds = message.reserveds
        if fmt.normalize:
            reserveds = _split_ranges(reserveds, lambda r, v: Reserved([v]))
        out.extend(_indented(_ranges(fmt, "reserved", r.values, [])) for r in reserveds)
    options = filter_options(fmt, message.options)
    if options:
        out.append("\n")
        out.extend(_indented(_option_statement(fmt, o)) for o in options)
    if message.fields:
        out.append("\n")
        fields = sorted(message.fields, key=lambda f: f.tag) if fmt.normalize else message.fields
        out.extend(_indented(_field(fmt, f)) for f in fields)
    if message.oneofs:
        out.append("\n")
        oneofs = message.oneofs
        if fmt.normalize:
            oneofs = [OneOf(o.name, sorted(o.fields, key=lambda f: f.tag), o.groups, o.options)
                      for o in oneofs if o.fields]
            oneofs.sort(key=lambda o: o.fields[0].tag)
        out.extend(_indented(_oneof(fmt, o)) for o in oneofs)
    if message.groups:
        out.append("\n")
        groups = sorted(message.groups, key=lambda g: g.tag) if fmt.normalize else message.groups
        out.extend(_indented(_group(fmt, g)) for g in groups)
    if not fmt.ignore_extensions and message.extensions:
        out.append("\n")
        extensions = message.extensions
        if fmt.normalize:
            extensions = _split_ranges(extensions, lambda e, v: Extensions([v], e.options), sort_names=False)
        out.extend(_indented(_ranges(fmt, "extensions", e.values, e.options)) for e in extensions)
    if not fmt.ignore_extensions and message.extends:
        out.append("\n")
        out.extend(_indented(_extend(fmt, e)) for e in _extends(fmt, message.extends))
    types = _filter_types(fmt, message.nested)
    if types:
        out.append("\n")
        out.extend(_types(fmt, types, indent=True))
    out.append("}\n")
    return "".join(out)


def _ranges(fmt: Format, keyword: str, values: list[RangeValue], options: list[Option]) -> str:
    parts = []
    for value in values:
        if isinstance(value, str):
            parts.append(f'"{value}"')
        elif isinstance(value, int):
            parts.append(str(value))
        else:
            start, end = value
            if fmt.normalize and start == end:
                parts.append(str(start))
            else:
                parts.append(f"{start} to {end if end < MAX_TAG_VALUE else 'max'}")
    text = f"{keyword} {', '.join(parts)}"
    options = filter_options(fmt, options)
    if options:
        text += " " + _append_options(fmt, options)
    return text + ";\n"


def _oneof(fmt: Format, oneof: OneOf) -> str:
    out = [f"oneof {oneof.name} {{"]
    options = filter_options(fmt, oneof.options)
    if options:
        out.append("\n")
        out.extend(_indented(_option_statement(fmt, o)) for o in options)
    if oneof.fields:
        out.append("\n")
        out.extend(_indented(_field(fmt, f)) for f in oneof.fields)
    if oneof.groups:
        out.append("\n")
        groups = sorted(oneof.groups, key=lambda g: g.tag) if fmt.normalize else oneof.groups
        out.extend(_indented(_group(fmt, g)) for g in groups)
    out.append("}\n")
    return "".join(out)


def _group(fmt: Format, group: Group) -> str:
    out = [f"{group.label} " if group.label else "", f"group {group.name} = {group.tag} {{"]
    if group.fields:
        out.append("\n")
        fields = sorted(group.fields, key=lambda f: f.tag) if fmt.normalize else group.fields
        out.extend(_indented(_field(fmt, f)) for f in fields)
    out.append("}\n")
    return "".join(out)


def _extends(fmt: Format, extends: list[Extend]) -> list[Extend]:
    """Normalizing: the extended type's full name, one ``extend`` per type."""
    if not fmt.normalize:
        return extends
    grouped: dict[str, list[Field]] = {}
    for extend in extends:
        for extend_field in extend.fields:
            grouped.setdefault(resolve(fmt, extend.name), []).append(extend_field)
    return [Extend(name, fields) for name, fields in grouped.items()]


def _extend(fmt: Format, extend: Extend) -> str:
    out = [f"extend {extend.name} {{"]
    if extend.fields:
        out.append("\n")
        fields = sorted(extend.fields, key=lambda f: f.tag) if fmt.normalize else extend.fields
        out.extend(_indented(_field(fmt, f)) for f in fields)
    out.append("}\n")
    return "".join(out)


def _field(fmt: Format, f: Field) -> str:
    label, field_type = f.label, f.type
    check_map_key(field_type)
    proto_type = field_type
    if fmt.normalize:
        if not is_scalar(field_type) and map_types(field_type) is None:
            field_type = resolve(fmt, field_type)
            info = fmt.ctx.type_for_full_name(field_type, True)
            proto_type = info.map_type() if info is not None and info.is_map else field_type
            check_map_key(proto_type or field_type)
            proto_type = proto_type or field_type
        types = map_types(proto_type)
        if types is not None:
            value_type = fmt.ctx.resolve(types[1], True)
            if value_type is not None:
                proto_type = f"map<{types[0]}, .{value_type}>"
            label = None
        field_type = proto_type
    text = f"{label} " if label else ""
    text += f"{field_type} {f.name} = {f.tag}"
    options = list(f.options)
    if f.default is not None:
        options.append(Option("default", _default_kind(proto_type), f.default))
    if f.json_name is not None:
        options.append(Option("json_name", STRING, f.json_name))
    options = filter_options(fmt, options)
    if options:
        text += " " + _append_options(fmt, options)
    return text + ";\n"


def _default_kind(type_name: str) -> str:
    simple = type_name[type_name.rfind(".") + 1:]
    if simple == "bool":
        return BOOLEAN
    if simple == "string":
        return STRING
    return NUMBER if is_scalar(simple) else ENUM


def _service(fmt: Format, service: Service) -> str:
    out = [f"service {service.name} {{"]
    options = filter_options(fmt, service.options)
    if options:
        out.append("\n")
        out.extend(_indented(_option_statement(fmt, o)) for o in options)
    if service.rpcs:
        out.append("\n")
        out.extend(_indented(_rpc(fmt, rpc)) for rpc in service.rpcs)
    out.append("}\n")
    return "".join(out)


def _rpc(fmt: Format, rpc: Rpc) -> str:
    request = resolve(fmt, rpc.request) if fmt.normalize else rpc.request
    response = resolve(fmt, rpc.response) if fmt.normalize else rpc.response
    text = (f"rpc {rpc.name} ({'stream ' if rpc.request_streaming else ''}{request}) returns "
            f"({'stream ' if rpc.response_streaming else ''}{response})")
    options = filter_options(fmt, rpc.options)
    if options:
        text += " {\n" + "".join(_indented(_option_statement(fmt, o)) for o in options) + "}"
    return text + ";\n"


def resolve(fmt: Format, type_name: str) -> str:
    resolved = fmt.ctx.resolve(type_name, True)
    if resolved is None:
        raise UnresolvedTypeError(f"Could not resolve type: {type_name}")
    return "." + resolved


# --- options ----------------------------------------------------------------------------------

def _option_statement(fmt: Format, option: Option) -> str:
    return f"option {_option(fmt, option)};\n"


def _option(fmt: Format, option: Option) -> str:
    name = f"({option.name})" if option.parenthesized else option.name
    kind, value = option.kind, option.value
    if kind == STRING:
        return f'{name} = "{escape_chars(str(value))}"'
    if kind in (BOOLEAN, ENUM):
        return f"{name} = {value}"
    if kind == NUMBER:
        return f"{name} = {format_number(fmt, value)}"
    if kind == OPTION:
        return f"{name}.{_option(fmt, value)}"
    if kind == MAP:
        return f"{name} = {{\n{_option_map(fmt, value)}}}"
    if kind == LIST:
        return f"{name} = {_append_options(fmt, value)}"
    return name


def _option_map(fmt: Format, value_map: dict[str, Any]) -> str:
    if fmt.normalize:
        entries: dict[str, Any] = {}
        for key, value in value_map.items():
            if isinstance(value, list) and not value:
                continue
            if key.startswith("[") and key.endswith("]"):
                resolved = fmt.ctx.resolve(key[1:-1], True, extend_fields=True)
                if resolved is not None:
                    key = f"[{resolved}]"
            entries.setdefault(key, value)
        value_map = dict(sorted(entries.items()))
    last = len(value_map) - 1
    return "".join(_indented(f"{key}: {_map_or_list_value(fmt, value)}{',' if i != last else ''}")
                   for i, (key, value) in enumerate(value_map.items()))


def _map_or_list_value(fmt: Format, value: Any) -> str:
    if isinstance(value, str):
        return f'"{escape_chars(value)}"'
    if isinstance(value, dict):
        return "{\n" + _option_map(fmt, value) + "}"
    if isinstance(value, list):
        if fmt.normalize and len(value) == 1:
            return _map_or_list_value(fmt, value[0])
        last = len(value) - 1
        return "[\n" + "".join(_indented(_map_or_list_value(fmt, item) + ("," if i != last else ""))
                               for i, item in enumerate(value)) + "]"
    if isinstance(value, Primitive):
        if value.kind in (BOOLEAN, ENUM):
            return value.value
        if value.kind == NUMBER:
            return format_number(fmt, value.value)
        return _map_or_list_value(fmt, value.value)
    if isinstance(value, Option):
        return _option(fmt, value)
    return str(value)


def _append_options(fmt: Format, options: list[Any]) -> str:
    if len(options) == 1:
        return f"[{_map_or_list_value(fmt, options[0])}]"
    last = len(options) - 1
    return "[\n" + "".join(_indented(_map_or_list_value(fmt, o) + ("," if i < last else ""))
                           for i, o in enumerate(options)) + "]"


def filter_options(fmt: Format, options: list[Option]) -> list[Option]:
    """Confluent's ``FormatContext.filterOptions``: custom options dropped when ignoring
    extensions (Confluent's own kept); normalizing, custom option names fully qualified,
    options by name, a non-repeated custom option given twice merged into one."""
    if not options:
        return options
    if fmt.ignore_extensions:
        options = [o for o in options if not o.parenthesized or o.name.startswith(CONFLUENT_PREFIX)]
    if not fmt.normalize:
        return options
    qualified = []
    for option in options:
        if option.parenthesized:
            resolved = fmt.ctx.resolve(option.name, True, extend_fields=True)
            if resolved is not None:
                option = transform(Option(resolved, option.kind, option.value, option.parenthesized))
        qualified.append(option)
    qualified.sort(key=lambda o: o.name)
    grouped: dict[str, list[Option]] = {}
    for option in qualified:
        grouped.setdefault(option.name, []).append(option)
    result = []
    for name, group in grouped.items():
        info = fmt.ctx.extend_field_for_full_name(name, True)
        if info is not None and not info.repeated:
            merged = group[0]
            for replacement in group[1:]:
                merged = _merge_option(fmt, info.field, merged, replacement)
            result.append(merged)
        else:
            result.extend(group)
    return result


def transform(option: Option) -> Option:
    """An option of kind OPTION (``(a).b.c = 1``) as the MAP it stands for (``{b: {c: 1}}``)."""
    if option.kind == OPTION:
        return Option(option.name, MAP, _transform_map(option), option.parenthesized)
    return option


def _transform_map(option: Option) -> dict[str, Any]:
    inner: Option = option.value
    value: Any = inner.value
    if inner.kind in (BOOLEAN, ENUM, NUMBER):
        value = Primitive(inner.kind, value)
    elif inner.kind == OPTION:
        value = _transform_map(inner)
    return {inner.name: value}


def _merge_option(fmt: Format, field: Field, existing: Option, replacement: Option) -> Option:
    replacement = transform(replacement)
    if existing.kind == MAP and replacement.kind == MAP:
        merged = _merge_maps(fmt, field, existing.value, replacement.value)
        return Option(replacement.name, MAP, merged, replacement.parenthesized)
    return replacement


def _message_type(fmt: Format, f: Field | None) -> Message | None:
    if f is None:
        return None
    info = fmt.ctx.get_type(f.type, True)
    return info.type if info is not None and isinstance(info.type, Message) else None


def _merge_maps(fmt: Format, container: Field | None, existing: dict[str, Any], replacement: dict[str, Any]):
    container_type = _message_type(fmt, container)
    merged = dict(existing)
    for key, value in replacement.items():
        if key not in merged or merged[key] is None:
            merged[key] = value
            continue
        nested = None
        if container_type is not None:
            candidates = [*container_type.fields, *(f for o in container_type.oneofs for f in o.fields)]
            nested = next((f for f in candidates if f.name == key), None)
        merged[key] = _merge_values(fmt, nested, merged[key], value)
    return merged


def _merge_values(fmt: Format, f: Field | None, v1: Any, v2: Any) -> Any:
    singular = f is not None and f.label != "repeated"
    if singular and isinstance(v1, dict) and isinstance(v2, dict) and _message_type(fmt, f) is not None:
        return _merge_maps(fmt, f, v1, v2)
    if singular:
        return v2
    items: list[Any] = []
    for item in [*(v1 if isinstance(v1, list) else [v1]), *(v2 if isinstance(v2, list) else [v2])]:
        if item not in items:
            items.append(item)
    return items


# --- numbers, as Confluent normalizes them (commons-lang's createNumber, Java's DecimalFormat) --

def format_number(fmt: Format, value: Any) -> str:
    text = str(value)
    if not fmt.normalize:
        return text
    formatted = _normalized_number(text)
    return formatted if formatted is not None else text


def _normalized_number(text: str) -> str | None:
    body = text.lstrip("+-")
    negative = text.startswith("-")
    if not body:
        return None
    if body[:2].lower() == "0x":
        try:
            number = int(body[2:], 16)
        except ValueError:
            return None
        return str(-number if negative else number)
    if body[-1] in "lL" and body[:-1].isdigit():  # commons-lang's type qualifiers: 10L, 1.5f, 2d
        body, text = body[:-1], text[:-1]
    elif body[-1] in "fFdD":
        body, text = body[:-1] + ".", text[:-1]
    if any(c in body for c in ".eE"):
        try:
            exact = Decimal(text)
        except InvalidOperation:
            return None
        if not exact.is_finite():
            return None
        rounded = exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN, context=_WIDE)
        formatted = format(rounded, "f")
        return formatted.rstrip("0").rstrip(".") if "." in formatted else formatted
    if not body.isdigit():
        return None
    if len(body) > 1 and body.startswith("0"):
        try:
            number = int(body, 8)
        except ValueError:
            return None
    else:
        number = int(body)
    return str(-number if negative else number)
