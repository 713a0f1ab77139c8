"""Confluent's Protobuf compatibility rules (``io.confluent.kafka.schemaregistry.protobuf.diff``:
``SchemaDiff``, ``MessageSchemaDiff``, ``FieldSchemaDiff``, ``EnumSchemaDiff``,
``Difference``), ported: the differences between an original schema and an update, each a
``Difference.Type`` at a path (``#/Msg/Inner/3``, ``#/Msg/a_oneof/3``), in the order
Confluent finds them, and the changes that are compatible.

Confluent walks messages and enum constants in ``java.util.HashSet`` order; :func:`_java_order`
gives the same order, so the messages come out as Confluent's do. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .protobuf_model import Context, Enum, Field, Message, ProtoFile, TypeInfo, is_scalar, map_types

PACKAGE_CHANGED = "PACKAGE_CHANGED"
MESSAGE_ADDED = "MESSAGE_ADDED"
MESSAGE_REMOVED = "MESSAGE_REMOVED"
MESSAGE_MOVED = "MESSAGE_MOVED"
ENUM_ADDED = "ENUM_ADDED"
ENUM_REMOVED = "ENUM_REMOVED"
ENUM_CONST_ADDED = "ENUM_CONST_ADDED"
ENUM_CONST_CHANGED = "ENUM_CONST_CHANGED"
ENUM_CONST_REMOVED = "ENUM_CONST_REMOVED"
FIELD_ADDED = "FIELD_ADDED"
FIELD_REMOVED = "FIELD_REMOVED"
FIELD_NAME_CHANGED = "FIELD_NAME_CHANGED"
FIELD_KIND_CHANGED = "FIELD_KIND_CHANGED"
FIELD_SCALAR_KIND_CHANGED = "FIELD_SCALAR_KIND_CHANGED"
FIELD_NAMED_TYPE_CHANGED = "FIELD_NAMED_TYPE_CHANGED"
FIELD_NUMERIC_LABEL_CHANGED = "FIELD_NUMERIC_LABEL_CHANGED"
FIELD_STRING_OR_BYTES_LABEL_CHANGED = "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
REQUIRED_FIELD_ADDED = "REQUIRED_FIELD_ADDED"
REQUIRED_FIELD_REMOVED = "REQUIRED_FIELD_REMOVED"
ONEOF_ADDED = "ONEOF_ADDED"
ONEOF_REMOVED = "ONEOF_REMOVED"
ONEOF_FIELD_ADDED = "ONEOF_FIELD_ADDED"
ONEOF_FIELD_REMOVED = "ONEOF_FIELD_REMOVED"
ONEOF_FIELD_MOVED_TO_TOP_LEVEL = "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"
MULTIPLE_FIELDS_MOVED_TO_ONEOF = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
FIELD_MOVED_TO_EXISTING_ONEOF = "FIELD_MOVED_TO_EXISTING_ONEOF"

#: SchemaDiff.COMPATIBLE_CHANGES
COMPATIBLE_CHANGES = frozenset({
    MESSAGE_ADDED, MESSAGE_MOVED, ENUM_ADDED, ENUM_REMOVED, ENUM_CONST_ADDED, ENUM_CONST_CHANGED,
    ENUM_CONST_REMOVED, FIELD_ADDED, FIELD_REMOVED, FIELD_NAME_CHANGED, FIELD_STRING_OR_BYTES_LABEL_CHANGED,
    ONEOF_ADDED, ONEOF_REMOVED, ONEOF_FIELD_ADDED, ONEOF_FIELD_MOVED_TO_TOP_LEVEL,
})

#: Difference.error(): the description of each incompatible type; ``%s`` is the reader's
#: and then the writer's schema ("new"/"old"), filled in by the caller as Confluent's
#: SchemaValidatorBuilder does
_DESCRIPTIONS = {
    PACKAGE_CHANGED: "The package at '{}' in the %s schema does not match the package in the %s schema",
    MESSAGE_REMOVED: "The %s schema is missing a MESSAGE type at path '{}' in the %s schema",
    FIELD_KIND_CHANGED: "The type of a field at path '{}' in the %s schema does not match the %s schema",
    FIELD_SCALAR_KIND_CHANGED: "The kind of a SCALAR field at path '{}' in the %s schema does not match its kind "
                               "in the %s schema",
    FIELD_NAMED_TYPE_CHANGED: "The type of a MESSAGE field at path '{}' in the %s schema does not match its type "
                              "in the %s schema",
    FIELD_NUMERIC_LABEL_CHANGED: "The label for a NUMERIC field at path '{}' in the %s schema does not match its "
                                 "label in the %s schema",
    REQUIRED_FIELD_ADDED: "A required field  at path '{}' in the %s schema is missing in the %s schema",
    REQUIRED_FIELD_REMOVED: "The %s schema is missing a required field at path: '{}' in the %s schema",
    ONEOF_FIELD_REMOVED: "The %s schema is missing a oneof field at path '{}' in the %s schema",
    ONEOF_FIELD_MOVED_TO_TOP_LEVEL: "The oneof field at path '{}' in the %s schema was moved out of its oneof to a "
                                    "top-level field in the %s schema",
    MULTIPLE_FIELDS_MOVED_TO_ONEOF: "Multiple fields in the oneof at path '{}' in the %s schema are outside a oneof "
                                    "in the %s schema",
    FIELD_MOVED_TO_EXISTING_ONEOF: "A field in the oneof at path '{}' in the %s schema is outside an existing oneof "
                                   "in the %s schema",
}

_NUMERIC = ("GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE")
_SCALAR_KINDS = {
    "int32": "GENERAL_NUMBER", "int64": "GENERAL_NUMBER", "uint32": "GENERAL_NUMBER", "uint64": "GENERAL_NUMBER",
    "bool": "GENERAL_NUMBER", "sint32": "SIGNED_NUMBER", "sint64": "SIGNED_NUMBER", "string": "STRING_OR_BYTES",
    "bytes": "STRING_OR_BYTES", "fixed32": "FIXED32", "sfixed32": "FIXED32", "fixed64": "FIXED64",
    "sfixed64": "FIXED64", "float": "FLOAT", "double": "DOUBLE",
}


@dataclass(frozen=True)
class Side:
    """One schema of a comparison: its elements, its dependencies' (import path ->
    elements, well-known types included) and its references (import path -> text)."""

    file: ProtoFile
    dependencies: dict[str, ProtoFile]
    references: dict[str, str]


def message(kind: str, path: str) -> str:
    """Confluent's ``Difference.toString()``."""
    description = _DESCRIPTIONS.get(kind, "").replace("{}", path)
    return f'{{errorType:"{kind}", description:"{description}"}}'


def compare(original: Side, update: Side) -> list[tuple[str, str]]:
    """SchemaDiff.compare(original, update): (type, path) of every difference."""
    ctx = Context(COMPATIBLE_CHANGES)
    ctx.collect(original.file, original.dependencies, original.references, True)
    ctx.collect(update.file, update.dependencies, update.references, False)
    if original.file.package != update.file.package:
        ctx.add_difference(PACKAGE_CHANGED)
    compare_types(ctx, original.file.types, update.file.types)
    return ctx.diffs


# --- java.util.HashMap's iteration order --------------------------------------------------------

def _string_hash(value: str) -> int:
    h = 0
    data = value.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "little")) & 0xFFFFFFFF
    return h


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return max(size, 1)


class _JavaHashSet:
    """Keys in the order a java.util.HashSet (HashMap) built by the same additions iterates
    them: by bucket, a bucket's keys as added; tables grow as Java's do."""

    def __init__(self, initial_capacity: int | None = None) -> None:
        self.capacity = _table_size_for(initial_capacity) if initial_capacity is not None else 16
        self.buckets: list[list[tuple[object, int]]] = [[] for _ in range(self.capacity)]
        self.size = 0

    def add(self, key: object) -> None:
        h = _string_hash(key) if isinstance(key, str) else int(key) & 0xFFFFFFFF
        h ^= h >> 16
        bucket = self.buckets[h & (self.capacity - 1)]
        if any(k == key for k, _ in bucket):
            return
        bucket.append((key, h))
        if len(bucket) > 8 and self.capacity < 64:  # treeifyBin resizes a small table instead
            self._resize()
        self.size += 1
        if self.size > self.capacity * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        old, old_capacity = self.buckets, self.capacity
        self.capacity *= 2
        self.buckets = [[] for _ in range(self.capacity)]
        for j, bucket in enumerate(old):
            for key, h in bucket:
                self.buckets[j + old_capacity if h & old_capacity else j].append((key, h))

    def __iter__(self):
        return (key for bucket in self.buckets for key, _ in bucket)


def _java_order(first: Iterable[object], second: Iterable[object]) -> list[object]:
    """``s = new HashSet<>(a.keySet()); s.addAll(b.keySet())`` where a and b are HashMaps
    filled in the order given."""
    first_map, second_map = _JavaHashSet(), _JavaHashSet()
    for key in first:
        first_map.add(key)
    for key in second:
        second_map.add(key)
    keys = list(first_map)
    result = _JavaHashSet(max(int(len(keys) / 0.75) + 1, 16))
    for key in [*keys, *second_map]:
        result.add(key)
    return list(result)


# --- SchemaDiff / MessageSchemaDiff / EnumSchemaDiff ----------------------------------------

def compare_types(ctx: Context, original: list[Message | Enum], update: list[Message | Enum]) -> None:
    original_messages, original_indexes, original_enums = _index(original)
    update_messages, update_indexes, update_enums = _index(update)
    for name in _java_order(original_messages, update_messages):
        ctx.enter_name(name)
        try:
            original_message, update_message = original_messages.get(name), update_messages.get(name)
            if update_message is None:
                info = ctx.get_type(name, True)
                if info is not None and not info.is_map:
                    ctx.add_difference(MESSAGE_REMOVED)
            elif original_message is None:
                info = ctx.get_type(name, False)
                if info is not None and not info.is_map:
                    ctx.add_difference(MESSAGE_ADDED)
            else:
                compare_messages(ctx, original_message, update_message)
                index = original_indexes.get(name)
                if index is None or index != update_indexes.get(name):
                    # moving a message is compatible: serialized message indexes refer to the
                    # schema of their own ID
                    ctx.add_difference(MESSAGE_MOVED)
        finally:
            ctx.leave_name()
    for name in _java_order(original_enums, update_enums):
        ctx.enter_name(name)
        try:
            original_enum, update_enum = original_enums.get(name), update_enums.get(name)
            if update_enum is None:
                ctx.add_difference(ENUM_REMOVED)
            elif original_enum is None:
                ctx.add_difference(ENUM_ADDED)
            else:
                _compare_enums(ctx, original_enum, update_enum)
        finally:
            ctx.leave_name()


def _index(types: list[Message | Enum]) -> tuple[dict[str, Message], dict[str, int], dict[str, Enum]]:
    messages: dict[str, Message] = {}
    indexes: dict[str, int] = {}
    enums: dict[str, Enum] = {}
    for type_element in types:
        if isinstance(type_element, Message):
            messages[type_element.name] = type_element
            indexes[type_element.name] = len(indexes)
        else:
            enums[type_element.name] = type_element
    return messages, indexes, enums


def _compare_enums(ctx: Context, original: Enum, update: Enum) -> None:
    original_by_tag = {c.tag: c for c in original.constants}
    update_by_tag = {c.tag: c for c in update.constants}
    for tag in _java_order(original_by_tag, update_by_tag):
        ctx.enter_path(str(tag))
        try:
            original_constant, update_constant = original_by_tag.get(tag), update_by_tag.get(tag)
            if update_constant is None:
                ctx.add_difference(ENUM_CONST_REMOVED)
            elif original_constant is None:
                ctx.add_difference(ENUM_CONST_ADDED)
            elif original_constant.name != update_constant.name:
                ctx.add_difference(ENUM_CONST_CHANGED)
        finally:
            ctx.leave_path()


def _collect_fields(message: Message) -> tuple[dict[int, Field], dict[int, str], dict[str, list[Field]]]:
    by_tag: dict[int, Field] = {f.tag: f for f in message.fields}
    tag_to_oneof: dict[int, str] = {}
    oneofs: dict[str, list[Field]] = {}
    for oneof in message.oneofs:
        oneofs[oneof.name] = oneof.fields
        for f in oneof.fields:
            by_tag[f.tag] = f
            tag_to_oneof[f.tag] = oneof.name
    return by_tag, tag_to_oneof, oneofs


def _at(ctx: Context, parts: tuple[str, ...], kind: str) -> None:
    ctx.full_path.extend(parts)
    try:
        ctx.add_difference(kind)
    finally:
        del ctx.full_path[len(ctx.full_path) - len(parts):]


def compare_messages(ctx: Context, original: Message, update: Message) -> None:
    """MessageSchemaDiff.compare: fields by number wherever they sit (a oneof's or not), so
    that a oneof renamed or dissolved cannot hide a field's change."""
    guard = id(original) not in ctx.schemas
    if guard:
        ctx.schemas.add(id(original))
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.schemas.discard(id(original))
    compare_types(ctx, original.nested, update.nested)


def _compare_fields(ctx: Context, original: Message, update: Message) -> None:
    original_by_tag, original_oneof_of, original_oneofs = _collect_fields(original)
    update_by_tag, update_oneof_of, update_oneofs = _collect_fields(update)
    # a oneof gone with none of its fields left anywhere is a deletion, which is compatible
    deleted = {name for name, fields in original_oneofs.items()
               if name not in update_oneofs and not any(f.tag in update_by_tag for f in fields)}
    # fields that could be set together in the old schema, now in one oneof
    for oneof in update.oneofs:
        origins: set[str] = set()
        moved_in = 0
        for f in oneof.fields:
            if f.tag in original_oneof_of:
                origins.add("oneof:" + original_oneof_of[f.tag])
            elif f.tag in original_by_tag:
                origins.add(f"field:{f.tag}")
                moved_in += 1
        if len(origins) > 1:
            _at(ctx, (oneof.name,), MULTIPLE_FIELDS_MOVED_TO_ONEOF if moved_in > 1 else FIELD_MOVED_TO_EXISTING_ONEOF)
    for name in sorted({*original_oneofs, *update_oneofs}):
        if name not in update_oneofs:
            _at(ctx, (name,), ONEOF_REMOVED)
        elif name not in original_oneofs:
            _at(ctx, (name,), ONEOF_ADDED)
    for tag in sorted({*original_by_tag, *update_by_tag}):
        original_field, update_field = original_by_tag.get(tag), update_by_tag.get(tag)
        original_oneof, update_oneof = original_oneof_of.get(tag), update_oneof_of.get(tag)
        if update_field is None:
            if original_oneof is not None:
                if original_oneof not in deleted:
                    _at(ctx, (original_oneof, str(tag)), ONEOF_FIELD_REMOVED)
            else:
                _at(ctx, (str(tag),), REQUIRED_FIELD_REMOVED if original_field.label == "required" else FIELD_REMOVED)
        elif original_field is None:
            if update_oneof is not None:
                _at(ctx, (update_oneof, str(tag)), ONEOF_FIELD_ADDED)
            else:
                _at(ctx, (str(tag),), REQUIRED_FIELD_ADDED if update_field.label == "required" else FIELD_ADDED)
        else:
            if original_oneof is not None and update_oneof is None:
                _at(ctx, (str(tag),), ONEOF_FIELD_MOVED_TO_TOP_LEVEL)
            parts = (update_oneof, str(tag)) if update_oneof is not None else (str(tag),)
            ctx.full_path.extend(parts)
            try:
                _compare_field(ctx, original_field, update_field)
            finally:
                del ctx.full_path[len(ctx.full_path) - len(parts):]


# --- FieldSchemaDiff --------------------------------------------------------------------------

def _compare_field(ctx: Context, original: Field, update: Field) -> None:
    if original.name != update.name:
        ctx.add_difference(FIELD_NAME_CHANGED)
    _compare_labels_and_types(ctx, original.label, update.label, original.type, update.type)


def _map_or_self(ctx: Context, type_name: str, is_original: bool) -> str:
    info = ctx.get_type(type_name, is_original)
    if info is not None and info.is_map:
        return info.map_type() or type_name
    return type_name


def _kind(ctx: Context, type_name: str, is_original: bool) -> str:
    if is_scalar(type_name):
        return "SCALAR"
    if map_types(type_name) is not None:
        return "MAP"
    info = ctx.get_type(type_name, is_original)
    return "SCALAR" if info is not None and isinstance(info.type, Enum) else "MESSAGE"


def _scalar_kind(ctx: Context, type_name: str, is_original: bool) -> str:
    info = ctx.get_type(type_name, is_original)
    if info is not None and isinstance(info.type, Enum):
        return "GENERAL_NUMBER"
    return _SCALAR_KINDS[type_name]


def _compare_labels_and_types(ctx: Context, original_label: str | None, update_label: str | None,
                              original_type: str, update_type: str) -> None:
    original_type = _map_or_self(ctx, original_type, True)
    update_type = _map_or_self(ctx, update_type, False)
    original_kind, update_kind = _kind(ctx, original_type, True), _kind(ctx, update_type, False)
    if original_kind != update_kind:
        ctx.add_difference(FIELD_KIND_CHANGED)
    elif original_kind == "SCALAR":
        original_scalar = _scalar_kind(ctx, original_type, True)
        if original_scalar != _scalar_kind(ctx, update_type, False):
            ctx.add_difference(FIELD_SCALAR_KIND_CHANGED)
        elif original_label is not None and update_label is not None and original_label != update_label:
            if original_scalar in _NUMERIC:
                ctx.add_difference(FIELD_NUMERIC_LABEL_CHANGED)
            elif original_scalar == "STRING_OR_BYTES":
                ctx.add_difference(FIELD_STRING_OR_BYTES_LABEL_CHANGED)
    elif original_kind == "MESSAGE":
        _compare_message_types(ctx, original_type, update_type)
    else:
        original_map, update_map = map_types(original_type), map_types(update_type)
        _compare_labels_and_types(ctx, None, None, original_map[0], update_map[0])
        _compare_labels_and_types(ctx, None, None, original_map[1], update_map[1])


def _local_name(full_name: str, info: TypeInfo) -> str:
    prefix = info.package + "."
    return full_name[len(prefix):] if full_name.startswith(prefix) else full_name


def _compare_message_types(ctx: Context, original: str, update: str) -> None:
    original_full, update_full = ctx.resolve(original, True), ctx.resolve(update, False)
    if original_full is None or update_full is None:
        if original != update:  # unresolved: the names as written
            ctx.add_difference(FIELD_NAMED_TYPE_CHANGED)
        return
    original_info, update_info = ctx.get_type(original_full, True), ctx.get_type(update_full, False)
    if original_info is None or update_info is None:
        return
    original_local, update_local = _local_name(original_full, original_info), _local_name(update_full, update_info)
    if original_local != update_local:
        ctx.add_difference(FIELD_NAMED_TYPE_CHANGED)
        return
    # the same local type: compare what it is, unless both are this schema's own (compared
    # in their own place) or the same referenced schema
    if original_info.ref is not None and original_info.ref == update_info.ref:
        return
    if not isinstance(original_info.type, Message) or not isinstance(update_info.type, Message):
        return
    sub = ctx.subcontext()
    sub.set_package(original_info.package, True)
    sub.set_package(update_info.package, False)
    sub.set_full_name(original_local)
    compare_messages(sub, original_info.type, update_info.type)
    ctx.diffs.extend(sub.diffs)
    if not sub.is_compatible():
        ctx.add_difference(FIELD_NAMED_TYPE_CHANGED)
