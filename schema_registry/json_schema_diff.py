"""Confluent's JSON Schema compatibility rules (``io.confluent.kafka.schemaregistry.json.diff``:
``SchemaDiff``, ``ObjectSchemaDiff``, ``ArraySchemaDiff``, ``StringSchemaDiff``,
``NumberSchemaDiff``, ``CombinedSchemaDiff``, ``EnumSchemaDiff``, ``ConstSchemaDiff``,
``NotSchemaDiff``, ``Context``, ``Difference``), over the everit model of
:mod:`schema_registry.json_schema_model`.

``compare(original, update)`` lists every difference found reading data written with
``original`` by ``update`` (a backward check passes the previous schema as ``original``), each
a Confluent ``Difference.Type`` name and a JSON path (``#/properties/foo``); the ones not among
the policy's compatible changes (:mod:`schema_registry.json_schema_difference`) make the
schemas incompatible.

The content model of an object or array decides what adding or removing a property or item
means: open (additional properties allowed, no schema for them, no patternProperties, no
unevaluatedProperties or ``true``), partially open (a schema for additional properties, a
pattern property, or one for unevaluated properties), closed (``false``). Differences are
found in the order Confluent's are, down to its HashSet iteration over property names.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from schema_registry.json_schema_difference import COMPATIBLE_CHANGES_STRICT, Difference
from schema_registry.json_schema_model import (
    ArraySchema,
    CombinedSchema,
    ConstSchema,
    EmptySchema,
    EnumSchema,
    FalseSchema,
    NotSchema,
    NumberSchema,
    ObjectSchema,
    ReferenceSchema,
    Schema,
    StringSchema,
    copied_hashmap_order,
    hashmap_order,
    hashset_union_order,
    java_key,
    schema_key,
)

# ---------------------------------------------------------------------------------------------
# Context: the path being compared, the differences found, and the memo that bounds recursion


class _Shared:
    def __init__(self, compatible: frozenset[str], seed: dict[tuple[int, int], list[Difference]]) -> None:
        self.compatible = compatible
        self.memo: dict[tuple[int, int], list[Difference]] = {}
        self.pinned: list[Schema] = []  # keeps the memo's schemas alive, so ids stay theirs
        self.in_progress: set[tuple[int, int]] = set()
        self.seed = seed
        self.optimism_used = False


class Context:
    def __init__(self, shared: _Shared, path: list[str] | None = None) -> None:
        self.shared = shared
        self.path: list[str] = list(path or [])
        self.differences: list[Difference] = []

    def subcontext(self) -> Context:
        return Context(self.shared, self.path)

    def is_compatible(self) -> bool:
        return all(d.type in self.shared.compatible for d in self.differences)

    @contextmanager
    def enter(self, segment: str) -> Iterator[None]:
        self.path.append(segment)
        try:
            yield
        finally:
            self.path.pop()

    def _path(self) -> str:
        return "#/" + "/".join(self.path)

    def add(self, type_: str, attribute: str | None = None) -> None:
        if attribute is None:
            self.differences.append(Difference(type_, self._path()))
        else:
            with self.enter(attribute):
                self.differences.append(Difference(type_, self._path()))

    def compare_memoized(self, original: Schema, update: Schema,
                         comparator: Callable[[Context], None]) -> list[Difference]:
        """``Context.compareMemoized``: differences relative to the pair; a pair met again
        while it is being compared is a cycle, compatible unless the seed says otherwise."""
        key = (id(original), id(update))
        shared = self.shared
        if key in shared.memo:
            return shared.memo[key]
        if key in shared.in_progress:
            if key in shared.seed:
                return shared.seed[key]
            shared.optimism_used = True
            return []
        shared.in_progress.add(key)
        try:
            sub = Context(shared)
            comparator(sub)
            shared.memo[key] = list(sub.differences)
            shared.pinned.extend((original, update))
            return shared.memo[key]
        finally:
            shared.in_progress.discard(key)

    def add_rebased(self, relative: list[Difference]) -> None:
        if not self.path:
            self.differences.extend(relative)
            return
        prefix = self._path()
        for d in relative:
            self.differences.append(Difference(d.type, prefix if len(d.path) <= 2 else f"{prefix}/{d.path[2:]}"))


# The comparison recurses through every pair of schemas on its path: recursive schemas (a
# dozen definitions that refer to each other through unions) go a few thousand Python frames
# deep, which Java's stack takes and Python's default recursion limit does not. The limit is
# raised while any comparison runs (Python 3.11 calls between Python functions use no C stack).
_DEEP_RECURSION_LIMIT = 50_000
_recursion_lock = threading.Lock()
_recursion_users = 0
_recursion_saved = 0


@contextmanager
def _deep_recursion() -> Iterator[None]:
    global _recursion_users, _recursion_saved
    with _recursion_lock:
        if _recursion_users == 0:
            _recursion_saved = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_recursion_saved, _DEEP_RECURSION_LIMIT))
        _recursion_users += 1
    try:
        yield
    finally:
        with _recursion_lock:
            _recursion_users -= 1
            if _recursion_users == 0:
                sys.setrecursionlimit(_recursion_saved)


def compare(original: Schema | None, update: Schema | None,
            compatible: frozenset[str] = COMPATIBLE_CHANGES_STRICT) -> list[Difference]:
    """``SchemaDiff.compare(compatibleChanges, original, update)``: iterated to a fixpoint so
    that a recursive cycle assumed compatible cannot hide a difference found elsewhere."""
    seed: dict[tuple[int, int], list[Difference]] = {}
    with _deep_recursion():
        while True:
            shared = _Shared(compatible, seed)
            ctx = Context(shared)
            _compare(ctx, original, update)
            incompatible = {k: v for k, v in shared.memo.items() if any(d.type not in compatible for d in v)}
            if not shared.optimism_used or incompatible.keys() == seed.keys():
                return ctx.differences
            seed = incompatible


def _resolve(schema: Schema) -> Schema:
    return schema.referred if isinstance(schema, ReferenceSchema) else schema


def _compare(ctx: Context, original: Schema | None, update: Schema | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    o, u = _resolve(original), _resolve(update)
    ctx.add_rebased(ctx.compare_memoized(o, u, lambda sub: _compare_types(sub, o, u)))


def _types_equal(a: Schema, b: Schema) -> bool:
    return type(a) is type(b) or (isinstance(a, CombinedSchema) and isinstance(b, CombinedSchema))


def _compare_types(ctx: Context, original: Schema, update: Schema) -> None:
    if not isinstance(original, CombinedSchema) and isinstance(update, CombinedSchema):
        if len(update.subschemas) == 1:
            sub = ctx.subcontext()
            _compare(sub, original, update.subschemas[0])
            if sub.is_compatible():
                ctx.differences.extend(sub.differences)
                return
        elif update.criterion in ("anyOf", "oneOf"):
            for subschema in update.subschemas:
                sub = ctx.subcontext()
                _compare(sub, original, subschema)
                if sub.is_compatible():
                    ctx.differences.extend(sub.differences)
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif isinstance(original, CombinedSchema) and not isinstance(update, CombinedSchema):
        if len(original.subschemas) == 1:
            sub = ctx.subcontext()
            _compare(sub, original.subschemas[0], update)
            if sub.is_compatible():
                ctx.differences.extend(sub.differences)
                return
        elif original.criterion == "allOf":
            for subschema in original.subschemas:
                sub = ctx.subcontext()
                _compare(sub, subschema, update)
                if sub.is_compatible():
                    ctx.differences.extend(sub.differences)
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return

    if not _types_equal(original, update):
        # a false schema accepts nothing, an empty (or true) schema everything
        if isinstance(original, FalseSchema) or isinstance(update, EmptySchema):
            return
        if original.unprocessed.get("connect.type") == "bytes" and update.unprocessed.get("connect.type") == "bytes":
            return
        ctx.add("TYPE_CHANGED")
        return

    if original.id != update.id:
        ctx.add("ID_CHANGED")
    if original.title != update.title:
        ctx.add("TITLE_CHANGED")
    if original.description != update.description:
        ctx.add("DESCRIPTION_CHANGED")
    if _default_key(original) != _default_key(update):
        ctx.add("DEFAULT_CHANGED")

    if isinstance(original, StringSchema):
        _compare_string(ctx, original, update)  # type: ignore[arg-type]
    elif isinstance(original, NumberSchema):
        _compare_number(ctx, original, update)  # type: ignore[arg-type]
    elif isinstance(original, ConstSchema):
        if java_key(original.value) != java_key(update.value):  # type: ignore[attr-defined]
            ctx.add("ENUM_ARRAY_CHANGED", "const")
    elif isinstance(original, EnumSchema):
        _compare_enum(ctx, original, update)  # type: ignore[arg-type]
    elif isinstance(original, CombinedSchema):
        _compare_combined(ctx, original, update)  # type: ignore[arg-type]
    elif isinstance(original, NotSchema):
        with ctx.enter("not"):
            sub = ctx.subcontext()
            _compare(sub, update.must_not_match, original.must_not_match)  # type: ignore[attr-defined]
            ctx.add("NOT_TYPE_NARROWED" if sub.is_compatible() else "NOT_TYPE_EXTENDED")
    elif isinstance(original, ObjectSchema):
        _compare_object(ctx, original, update)  # type: ignore[arg-type]
    elif isinstance(original, ArraySchema):
        _compare_array(ctx, original, update)  # type: ignore[arg-type]


def _default_key(schema: Schema) -> Any:
    # everit holds an object or array default as an org.json JSONObject or JSONArray, which
    # are equal only to themselves
    if not schema.has_default_value():
        return ("none",)
    if isinstance(schema.default, (dict, list)):
        return ("identity", id(schema))
    return java_key(schema.default)


# ---------------------------------------------------------------------------------------------
# StringSchemaDiff, NumberSchemaDiff, EnumSchemaDiff


def _compare_bound(ctx: Context, attribute: str, original: Any, update: Any, prefix: str,
                   more: str = "INCREASED", less: str = "DECREASED") -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add(f"{prefix}_ADDED", attribute)
    elif update is None:
        ctx.add(f"{prefix}_REMOVED", attribute)
    elif float(original) < float(update):
        ctx.add(f"{prefix}_{more}", attribute)
    elif float(original) > float(update):
        ctx.add(f"{prefix}_{less}", attribute)


def _compare_string(ctx: Context, original: StringSchema, update: StringSchema) -> None:
    _compare_bound(ctx, "maxLength", original.max_length, update.max_length, "MAX_LENGTH")
    _compare_bound(ctx, "minLength", original.min_length, update.min_length, "MIN_LENGTH")
    if original.pattern is None and update.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif original.pattern is not None and update.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif original.pattern != update.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _compare_number(ctx: Context, original: NumberSchema, update: NumberSchema) -> None:
    _compare_bound(ctx, "maximum", original.maximum, update.maximum, "MAXIMUM")
    _compare_bound(ctx, "minimum", original.minimum, update.minimum, "MINIMUM")
    o, u = original.exclusive_maximum_limit, update.exclusive_maximum_limit
    if o is not None and u is not None and float(o) > float(u):
        # Confluent compares the old exclusiveMaximum with the new *maximum* here (and fails
        # when there is none): with one, its answer; without, the decrease it means to find
        if update.maximum is None or float(o) > float(update.maximum):
            ctx.add("EXCLUSIVE_MAXIMUM_DECREASED", "exclusiveMaximum")
    else:
        _compare_bound(ctx, "exclusiveMaximum", o, u, "EXCLUSIVE_MAXIMUM")
    _compare_bound(ctx, "exclusiveMinimum", original.exclusive_minimum_limit, update.exclusive_minimum_limit,
                   "EXCLUSIVE_MINIMUM")
    o_multiple = None if original.multiple_of is None else Decimal(original.multiple_of)
    u_multiple = None if update.multiple_of is None else Decimal(update.multiple_of)
    if o_multiple is None or u_multiple is None:
        if o_multiple is None and u_multiple is not None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif o_multiple is not None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
    elif o_multiple != u_multiple:
        ctx.add(_multiple_of_change(o_multiple, u_multiple), "multipleOf")
    if original.requires_integer != update.requires_integer:
        ctx.add("TYPE_EXTENDED" if original.requires_integer else "TYPE_NARROWED")


def _multiple_of_change(original: Decimal, update: Decimal) -> str:
    # BigDecimal.remainder: exact, whatever the scales
    with localcontext() as dc:
        dc.prec = 10_000
        try:
            if original != 0 and update % original == 0:
                return "MULTIPLE_OF_EXPANDED"
            if update != 0 and original % update == 0:
                return "MULTIPLE_OF_REDUCED"
        except InvalidOperation:
            pass
    return "MULTIPLE_OF_CHANGED"


def _compare_enum(ctx: Context, original: EnumSchema, update: EnumSchema) -> None:
    o = {java_key(v) for v in original.values}
    u = {java_key(v) for v in update.values}
    if o != u:
        if u >= o:
            ctx.add("ENUM_ARRAY_EXTENDED", "enum")
        elif o >= u:
            ctx.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            ctx.add("ENUM_ARRAY_CHANGED", "enum")


# ---------------------------------------------------------------------------------------------
# CombinedSchemaDiff


def _distinct(subschemas: list[Schema]) -> list[Schema]:
    # Confluent collects the subschemas in a LinkedHashSet of JsonSchema (equal when their JSON is)
    seen: dict[Any, Schema] = {}
    for s in subschemas:
        seen.setdefault(schema_key(s), s)
    return list(seen.values())


def _compare_combined(ctx: Context, original: CombinedSchema, update: CombinedSchema) -> None:
    if original.criterion != update.criterion:
        o_single, u_single = len(original.subschemas) == 1, len(update.subschemas) == 1
        if (update.criterion == "anyOf" or (o_single and u_single) or (o_single and update.criterion == "oneOf")
                or (u_single and original.criterion == "allOf")):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    originals, updates = _distinct(original.subschemas), _distinct(update.subschemas)
    if len(originals) < len(updates):
        ctx.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(originals) > len(updates):
        ctx.add("SUM_TYPE_NARROWED" if original.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    # compatible pairs, then a maximum matching of them (MaximumCardinalityMatch)
    edges: dict[tuple[int, int], list[Difference]] = {}
    for i, o in enumerate(originals):
        with ctx.enter(f"{original.criterion}/{i}"):
            for j, u in enumerate(updates):
                sub = ctx.subcontext()
                _compare(sub, o, u)
                if sub.is_compatible():
                    edges[(i, j)] = sub.differences
    match_of_update: dict[int, int] = {}

    def augment(i: int, visited: set[int]) -> bool:
        for j in range(len(updates)):
            if (i, j) in edges and j not in visited:
                visited.add(j)
                if j not in match_of_update or augment(match_of_update[j], visited):
                    match_of_update[j] = i
                    return True
        return False

    for i in range(len(originals)):
        augment(i, set())
    for j, i in sorted(match_of_update.items(), key=lambda item: item[1]):
        ctx.differences.extend(edges[(i, j)])
    if len(match_of_update) < min(len(originals), len(updates)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


# ---------------------------------------------------------------------------------------------
# ObjectSchemaDiff


def _unevaluated(schema: Schema, keyword: str) -> Schema | None:
    value = schema.unprocessed.get(keyword)
    return value if isinstance(value, Schema) else None


def _object_is_open(schema: ObjectSchema) -> bool:
    if not schema.additional_properties or schema.schema_of_additional_properties is not None:
        return False
    if schema.pattern_properties:
        return False
    uneval = _unevaluated(schema, "unevaluatedProperties")
    return uneval is None or isinstance(uneval, EmptySchema)


def _object_partial_schema(schema: ObjectSchema, name: str) -> Schema | None:
    for pattern in schema.pattern_properties:
        if pattern.regex.search(name):
            return pattern.schema
    if schema.schema_of_additional_properties is not None:
        return schema.schema_of_additional_properties
    if schema.additional_properties:
        uneval = _unevaluated(schema, "unevaluatedProperties")
        if uneval is not None and not isinstance(uneval, (FalseSchema, EmptySchema)):
            return uneval
    return None


def _compare_object(ctx: Context, original: ObjectSchema, update: ObjectSchema) -> None:
    _compare_required(ctx, original, update)
    _compare_properties(ctx, original, update)
    _compare_dependencies(ctx, original, update)
    with ctx.enter("additionalProperties"):
        if original.additional_properties != update.additional_properties:
            ctx.add("ADDITIONAL_PROPERTIES_ADDED" if update.additional_properties else "ADDITIONAL_PROPERTIES_REMOVED")
        elif original.schema_of_additional_properties is None and update.schema_of_additional_properties is not None:
            ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
        elif update.schema_of_additional_properties is None and original.schema_of_additional_properties is not None:
            ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
        else:
            _compare(ctx, original.schema_of_additional_properties, update.schema_of_additional_properties)
    _compare_unevaluated(ctx, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _compare_bound(ctx, "maxProperties", original.max_properties, update.max_properties, "MAX_PROPERTIES")
    _compare_bound(ctx, "minProperties", original.min_properties, update.min_properties, "MIN_PROPERTIES")


def _compare_unevaluated(ctx: Context, original: Schema, update: Schema, keyword: str, prefix: str) -> None:
    o, u = _unevaluated(original, keyword), _unevaluated(update, keyword)
    if o is None and u is None:
        return
    with ctx.enter(keyword):
        if o is None:
            ctx.add(f"{prefix}_REMOVED" if isinstance(u, FalseSchema) else f"{prefix}_NARROWED")
        elif u is None:
            ctx.add(f"{prefix}_ADDED" if isinstance(o, FalseSchema) else f"{prefix}_EXTENDED")
        elif isinstance(o, FalseSchema) and not isinstance(u, FalseSchema):
            ctx.add(f"{prefix}_ADDED")
        elif not isinstance(o, FalseSchema) and isinstance(u, FalseSchema):
            ctx.add(f"{prefix}_REMOVED")
        elif isinstance(o, EmptySchema) and not isinstance(u, EmptySchema):
            ctx.add(f"{prefix}_NARROWED")
        elif not isinstance(o, EmptySchema) and isinstance(u, EmptySchema):
            ctx.add(f"{prefix}_EXTENDED")
        else:
            _compare(ctx, o, u)


def _compare_required(ctx: Context, original: ObjectSchema, update: ObjectSchema) -> None:
    with ctx.enter("required"):
        for name in hashmap_order(list(original.properties)):
            if name not in update.properties:
                continue
            was, now = name in original.required, name in update.required
            if was and not now:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
            elif now and not was:
                with_default = update.properties[name].has_default_value()
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else "REQUIRED_ATTRIBUTE_ADDED", name)


def _compare_properties(ctx: Context, original: ObjectSchema, update: ObjectSchema) -> None:
    names = hashset_union_order(hashmap_order(list(original.properties)), hashmap_order(list(update.properties)))
    with ctx.enter("properties"):
        for name in names:
            with ctx.enter(name):
                o, u = original.properties.get(name), update.properties.get(name)
                if u is None:
                    assert o is not None
                    _property_removed(ctx, o, update, name)
                elif o is None:
                    _property_added(ctx, original, update, name, u)
                else:
                    _compare(ctx, o, u)


def _property_removed(ctx: Context, o: Schema, update: ObjectSchema, name: str) -> None:
    # only the update's content model decides whether a property may go
    if _object_is_open(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _object_partial_schema(update, name)
    if partial is not None:
        sub = ctx.subcontext()
        _compare(sub, o, partial)
        ctx.differences.extend(sub.differences)
        ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.is_compatible()
                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif isinstance(o, FalseSchema):
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(ctx: Context, original: ObjectSchema, update: ObjectSchema, name: str, u: Schema) -> None:
    # only the original's content model decides whether a property may come
    required = name in update.required
    if _object_is_open(original):
        if isinstance(u, EmptySchema):
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL" if u.has_default_value()
                    else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _object_partial_schema(original, name)
    if partial is not None:
        sub = ctx.subcontext()
        _compare(sub, partial, u)
        ctx.differences.extend(sub.differences)
        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.is_compatible()
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if u.has_default_value()
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _compare_dependencies(ctx: Context, original: ObjectSchema, update: ObjectSchema) -> None:
    with ctx.enter("dependencies"):
        names = hashset_union_order(copied_hashmap_order(list(original.property_dependencies)),
                                    copied_hashmap_order(list(update.property_dependencies)))
        for name in names:
            with ctx.enter(name):
                o, u = original.property_dependencies.get(name), update.property_dependencies.get(name)
                if u is None:
                    ctx.add("DEPENDENCY_ARRAY_REMOVED")
                elif o is None:
                    ctx.add("DEPENDENCY_ARRAY_ADDED")
                elif set(o) != set(u):
                    if set(u) >= set(o):
                        ctx.add("DEPENDENCY_ARRAY_EXTENDED")
                    elif set(o) >= set(u):
                        ctx.add("DEPENDENCY_ARRAY_NARROWED")
                    else:
                        ctx.add("DEPENDENCY_ARRAY_CHANGED")
        names = hashset_union_order(copied_hashmap_order(list(original.schema_dependencies)),
                                    copied_hashmap_order(list(update.schema_dependencies)))
        for name in names:
            with ctx.enter(name):
                o_schema, u_schema = original.schema_dependencies.get(name), update.schema_dependencies.get(name)
                if u_schema is None:
                    ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                elif o_schema is None:
                    ctx.add("DEPENDENCY_SCHEMA_ADDED")
                else:
                    _compare(ctx, o_schema, u_schema)


# ---------------------------------------------------------------------------------------------
# ArraySchemaDiff


def _array_is_open(schema: ArraySchema) -> bool:
    if not schema.additional_items or schema.schema_of_additional_items is not None:
        return False
    uneval = _unevaluated(schema, "unevaluatedItems")
    return uneval is None or isinstance(uneval, EmptySchema)


def _array_partial_schema(schema: ArraySchema) -> Schema | None:
    if schema.schema_of_additional_items is not None:
        return schema.schema_of_additional_items
    if schema.additional_items:
        uneval = _unevaluated(schema, "unevaluatedItems")
        if uneval is not None and not isinstance(uneval, (FalseSchema, EmptySchema)):
            return uneval
    return None


def _contains_limit(schema: Schema, keyword: str) -> int | None:
    value = schema.unprocessed.get(keyword)
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
        return None
    return int(value)


def _compare_array(ctx: Context, original: ArraySchema, update: ArraySchema) -> None:
    with ctx.enter("items"):
        _compare(ctx, original.all_item_schema, update.all_item_schema)
    _compare_items(ctx, original, update)
    with ctx.enter("additionalItems"):
        if original.additional_items != update.additional_items:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if original.additional_items else "ADDITIONAL_ITEMS_ADDED")
        elif original.schema_of_additional_items is None and update.schema_of_additional_items is not None:
            ctx.add("ADDITIONAL_ITEMS_NARROWED")
        elif update.schema_of_additional_items is None and original.schema_of_additional_items is not None:
            ctx.add("ADDITIONAL_ITEMS_EXTENDED")
        else:
            _compare(ctx, original.schema_of_additional_items, update.schema_of_additional_items)
    _compare_unevaluated(ctx, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _compare_bound(ctx, "maxItems", original.max_items, update.max_items, "MAX_ITEMS")
    _compare_bound(ctx, "minItems", original.min_items, update.min_items, "MIN_ITEMS")
    if original.unique_items != update.unique_items:
        ctx.add("UNIQUE_ITEMS_REMOVED" if original.unique_items else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    for keyword, prefix in (("maxContains", "MAX_CONTAINS"), ("minContains", "MIN_CONTAINS")):
        _compare_bound(ctx, keyword, _contains_limit(original, keyword), _contains_limit(update, keyword), prefix)


def _compare_items(ctx: Context, original: ArraySchema, update: ArraySchema) -> None:
    o_items, u_items = original.item_schemas, update.item_schemas
    for index in range(max(len(o_items), len(u_items))):
        with ctx.enter(f"items/{index}"):
            if index < len(o_items) and index < len(u_items):
                _compare(ctx, o_items[index], u_items[index])
            elif index < len(o_items):
                _item_removed(ctx, o_items[index], update)
            else:
                _item_added(ctx, original, u_items[index])


def _item_removed(ctx: Context, o: Schema, update: ArraySchema) -> None:
    if _array_is_open(update):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _array_partial_schema(update)
    if partial is not None:
        sub = ctx.subcontext()
        _compare(sub, o, partial)
        ctx.differences.extend(sub.differences)
        ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.is_compatible()
                else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif isinstance(o, FalseSchema):
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: Context, original: ArraySchema, u: Schema) -> None:
    if _array_is_open(original):
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if isinstance(u, EmptySchema)
                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _array_partial_schema(original)
    if partial is not None:
        sub = ctx.subcontext()
        _compare(sub, partial, u)
        ctx.differences.extend(sub.differences)
        ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.is_compatible()
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
