"""Drafts 2019-09 and 2020-12 into the everit model (:mod:`schema_registry.json_schema_model`),
as Confluent builds it for them: json-sKema loads one schema per keyword (in the order the
keywords are written) and Confluent's ``SchemaTranslator`` turns each into an everit schema
and joins them. Joining merges two schemas of the same type (two ``ObjectSchema`` become one
with both keywords' constraints), folds a schema into a ``"type": [...]`` union holding its
type, and otherwise makes a *generated* ``allOf``; a generated ``allOf`` left with one
subschema is that subschema, with none the empty schema. ``properties``, ``patternProperties``
and ``unevaluatedItems``/``unevaluatedProperties`` are joined after the keywords, the last two
kept as unprocessed properties holding a schema (where the diff looks for them), as are
``minContains``/``maxContains`` next to ``contains``.

Translator behaviours kept because they decide compatibility results: the subschemas of
``allOf``/``anyOf``/``oneOf`` that are generated ``allOf``s are spliced into the combined
schema; a schema's unknown keywords and ``$defs`` replace the unprocessed properties joined
so far (``unevaluatedProperties`` included); ``items`` must be a schema (json-sKema rejects
2019-09's array form); ``additionalItems``, ``dependencies`` and ``$recursiveRef`` are unknown
keywords; ``$id`` is not kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schema_registry.json_schema_model import (
    ArraySchema,
    BooleanSchema,
    CombinedSchema,
    ConditionalSchema,
    ConstSchema,
    EmptySchema,
    EnumSchema,
    FalseSchema,
    NotSchema,
    NullSchema,
    NumberSchema,
    ObjectSchema,
    ReferenceSchema,
    Schema,
    StringSchema,
    TrueSchema,
    _array,
    _boolean,
    _integer,
    _json_type,
    _Loader,
    _number,
    _object,
    _string,
    hashmap_order,
    pattern_property,
)
from schema_registry.schema_types import InvalidSchemaError

if TYPE_CHECKING:
    from referencing._core import Resolver

#: json-sKema's Keyword enum: any other key is an unprocessed property
_KNOWN_KEYWORDS = frozenset((
    "$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$ref", "$defs", "$schema", "$vocabulary",
    "minLength", "maxLength", "allOf", "anyOf", "oneOf", "additionalProperties", "properties",
    "patternProperties", "title", "description", "readOnly", "writeOnly", "deprecated", "default",
    "enum", "const", "false", "true", "type", "not", "required", "maximum", "minimum",
    "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "uniqueItems", "items", "prefixItems",
    "contains", "minContains", "maxContains", "if", "then", "else", "dependentSchemas",
    "dependentRequired", "unevaluatedItems", "unevaluatedProperties", "minItems", "maxItems",
    "minProperties", "maxProperties", "propertyNames", "pattern", "format"))

_MERGEABLE = (ArraySchema, NumberSchema, ObjectSchema, StringSchema)


def _generated(schema: Schema, criterion: str) -> bool:
    return isinstance(schema, CombinedSchema) and schema.generated and schema.criterion == criterion


def _same_type(a: Schema, b: Schema) -> bool:
    return type(a) is type(b) or (isinstance(a, CombinedSchema) and isinstance(b, CombinedSchema))


def _copy_generic(target: Schema, source: Schema) -> None:
    # Confluent's SchemaUtils.copyGenericAttrs: set attributes override, unprocessed ones add up
    for attr in ("title", "description", "id"):
        if getattr(source, attr) is not None:
            setattr(target, attr, getattr(source, attr))
    if source.has_default_value() and source.default is not None:
        target.default = source.default
    target.unprocessed = {**target.unprocessed, **source.unprocessed}


def _merge_into(target: Schema, s: Schema) -> None:
    """Confluent's ``SchemaUtils.merge(builder, s)``: ``s``'s constraints onto ``target``."""
    _copy_generic(target, s)
    if isinstance(target, ObjectSchema) and isinstance(s, ObjectSchema):
        target.pattern_properties = [*target.pattern_properties, *s.pattern_properties]
        target.requires_object = target.requires_object or s.requires_object
        properties = dict(target.properties)
        for name in hashmap_order(list(s.properties)):
            properties[name] = s.properties[name]
        target.properties = properties
        if not s.additional_properties:
            target.additional_properties = False
        if s.schema_of_additional_properties is not None:
            target.schema_of_additional_properties = s.schema_of_additional_properties
        target.required = [*target.required, *s.required]
        if s.min_properties is not None:
            target.min_properties = s.min_properties
        if s.max_properties is not None:
            target.max_properties = s.max_properties
        deps = {k: list(v) for k, v in target.property_dependencies.items()}
        for name, values in s.property_dependencies.items():
            bucket = deps.setdefault(name, [])
            bucket.extend(v for v in values if v not in bucket)
        target.property_dependencies = deps
        target.schema_dependencies = {**target.schema_dependencies, **s.schema_dependencies}
        if s.property_name_schema is not None:
            target.property_name_schema = s.property_name_schema
    elif isinstance(target, ArraySchema) and isinstance(s, ArraySchema):
        target.requires_array = target.requires_array or s.requires_array
        if s.min_items is not None:
            target.min_items = s.min_items
        if s.max_items is not None:
            target.max_items = s.max_items
        target.unique_items = target.unique_items or s.unique_items
        if s.all_item_schema is not None:
            target.all_item_schema = s.all_item_schema
        target.item_schemas = [*target.item_schemas, *s.item_schemas]
        if not s.additional_items:
            target.additional_items = False
        if s.schema_of_additional_items is not None:
            target.schema_of_additional_items = s.schema_of_additional_items
        if s.contains is not None:
            target.contains = s.contains
    elif isinstance(target, NumberSchema) and isinstance(s, NumberSchema):
        for attr in ("minimum", "maximum", "exclusive_minimum_limit", "exclusive_maximum_limit", "multiple_of"):
            if getattr(s, attr) is not None:
                setattr(target, attr, getattr(s, attr))
        target.requires_number = target.requires_number or s.requires_number
        target.requires_integer = target.requires_integer or s.requires_integer
    elif isinstance(target, StringSchema) and isinstance(s, StringSchema):
        for attr in ("min_length", "max_length", "pattern", "format"):
            if getattr(s, attr) is not None:
                setattr(target, attr, getattr(s, attr))
        target.requires_string = target.requires_string or s.requires_string


def _fresh(schema: Schema) -> Schema:
    """``SchemaUtils.toBuilder(s)``: a copy; for the mergeable types one that requires nothing
    more than ``s`` does."""
    if isinstance(schema, ObjectSchema):
        copy: Schema = ObjectSchema(requires_object=False)
    elif isinstance(schema, ArraySchema):
        copy = ArraySchema(requires_array=False)
    elif isinstance(schema, NumberSchema):
        copy = NumberSchema(requires_number=False)
    elif isinstance(schema, StringSchema):
        copy = StringSchema(requires_string=False)
    elif isinstance(schema, CombinedSchema):
        copy = CombinedSchema(criterion=schema.criterion, subschemas=list(schema.subschemas),
                              generated=schema.generated)
    elif isinstance(schema, EnumSchema):
        copy = EnumSchema(values=list(schema.values))
    elif isinstance(schema, ConstSchema):
        copy = ConstSchema(value=schema.value)
    elif isinstance(schema, NotSchema):
        copy = NotSchema(must_not_match=schema.must_not_match)
    elif isinstance(schema, ReferenceSchema):
        copy = ReferenceSchema(ref=schema.ref, knot=schema.knot)
    elif isinstance(schema, ConditionalSchema):
        copy = ConditionalSchema(if_schema=schema.if_schema, then_schema=schema.then_schema,
                                 else_schema=schema.else_schema)
    else:
        copy = type(schema)()
    _merge_into(copy, schema)
    return copy


def _merged(a: Schema, b: Schema) -> Schema:
    result = _fresh(a)
    _merge_into(result, b)
    return result


def _accumulate(product: list[Schema], current: Schema) -> list[Schema]:
    for i, schema in enumerate(product):
        if type(schema) is type(current) and isinstance(schema, _MERGEABLE):
            product[i] = _merged(schema, current)
            return product
    product.append(current)
    return product


def _flatten(schema: Schema) -> list[Schema]:
    if _generated(schema, "allOf"):
        assert isinstance(schema, CombinedSchema)
        return list(schema.subschemas)
    return [schema]


def _join(previous: Schema, current: Schema, parent: str | None) -> Schema:
    """``SchemaTranslator.SchemaContext.join``; ``parent`` is "allOf"/"anyOf"/"oneOf" while the
    subschemas of that keyword are joined, else None."""
    if type(previous) is type(current) and isinstance(previous, _MERGEABLE):
        return _merged(previous, current)
    if _generated(previous, "anyOf") and any(_same_type(s, current) for s in previous.subschemas):  # type: ignore[attr-defined]
        return CombinedSchema(criterion="anyOf", generated=True,
                              subschemas=_accumulate(list(previous.subschemas), current))  # type: ignore[attr-defined]
    if _generated(current, "anyOf") and any(_same_type(s, previous) for s in current.subschemas):  # type: ignore[attr-defined]
        return CombinedSchema(criterion="anyOf", generated=True,
                              subschemas=_accumulate(list(current.subschemas), previous))  # type: ignore[attr-defined]
    if parent is not None and isinstance(previous, CombinedSchema):
        return CombinedSchema(criterion=parent, subschemas=[*previous.subschemas, *_flatten(current)])
    product: list[Schema] = []
    for schema in [*_flatten(previous), *_flatten(current)]:
        product = _accumulate(product, schema)
    return CombinedSchema(criterion="allOf", subschemas=product, generated=True)


def _accumulated(previous: Schema | None, current: Schema | None) -> Schema | None:
    if previous is None:
        return current
    if current is None:
        return previous
    return _join(previous, current, None)


def _nothing() -> Schema:
    # what the translator makes of a keyword it ignores (format, readOnly, writeOnly)
    return CombinedSchema(criterion="allOf", generated=True)


def _type_schema(name: str) -> Schema:
    if name == "string":
        return StringSchema()
    if name == "integer":
        return NumberSchema(requires_integer=True)
    if name == "number":
        return NumberSchema()
    if name == "boolean":
        return BooleanSchema()
    if name == "null":
        return NullSchema()
    if name == "array":
        return ArraySchema()
    if name == "object":
        return ObjectSchema()
    raise InvalidSchemaError(f"unknown type: [{name}]")


class ModernLoader(_Loader):
    """Drafts 2019-09 and 2020-12, as json-sKema plus Confluent's SchemaTranslator."""

    def load(self, value: Any, resolver: Resolver[Any]) -> Schema:
        if isinstance(value, bool):
            return TrueSchema() if value else FalseSchema()
        if not isinstance(value, dict):
            raise InvalidSchemaError(f"a schema must be a boolean or an object, found {_json_type(value)}")
        return self._load_object(value, resolver)

    def load_root(self, value: Any, resolver: Resolver[Any]) -> Schema:
        # json-sKema loads the root as the target of a "#" reference: a "$ref": "#" inside is it
        if isinstance(value, dict):
            return self.reference("#", resolver).referred
        return self.load(value, resolver)

    def _load_object(self, o: dict[str, Any], resolver: Resolver[Any]) -> Schema:
        result: Schema | None = None
        for keyword, value in o.items():
            result = _accumulated(result, self._keyword(keyword, value, o, resolver))
        if result is None:
            result = _nothing()
        properties = _object(o.get("properties", {}), "properties")
        joined: Schema | None = None
        for name, value in properties.items():
            joined = _accumulated(joined, ObjectSchema(requires_object=False,
                                                       properties={name: self.child(value, resolver)}))
        result = _join(result, joined, None) if joined is not None else result
        joined = None
        for pattern, value in _object(o.get("patternProperties", {}), "patternProperties").items():
            joined = _accumulated(joined, ObjectSchema(requires_object=False, pattern_properties=[
                pattern_property(_string(pattern, "patternProperties"), self.child(value, resolver))]))
        result = _join(result, joined, None) if joined is not None else result
        if "unevaluatedItems" in o:
            result = _join(result, ArraySchema(requires_array=False, unprocessed={
                "unevaluatedItems": self.child(o["unevaluatedItems"], resolver)}), None)
        if "unevaluatedProperties" in o:
            result = _join(result, ObjectSchema(requires_object=False, unprocessed={
                "unevaluatedProperties": self.child(o["unevaluatedProperties"], resolver)}), None)
        if _generated(result, "allOf"):
            assert isinstance(result, CombinedSchema)
            if not result.subschemas:
                result = EmptySchema()
            elif len(result.subschemas) == 1:
                result = _fresh(result.subschemas[0])
        # (json-sKema never passes ``$id`` on to the schema: no ID_CHANGED in these drafts)
        if "title" in o:
            result.title = _string(o["title"], "title")
        if "description" in o:
            result.description = _string(o["description"], "description")
        if "default" in o and o["default"] is not None:
            result.default = o["default"]
        unprocessed = {k: v for k, v in o.items() if k not in _KNOWN_KEYWORDS}
        if "$defs" in o:
            unprocessed["$defs"] = {name: self.child(value, resolver)
                                    for name, value in _object(o["$defs"], "$defs").items()}
        if unprocessed:
            result.unprocessed = unprocessed
        return result

    def _keyword(self, keyword: str, value: Any, o: dict[str, Any], resolver: Resolver[Any]) -> Schema | None:
        if keyword in ("$ref", "$dynamicRef"):
            return self.reference(_string(value, keyword), resolver)
        if keyword == "type":
            if isinstance(value, list):
                return CombinedSchema(criterion="anyOf", generated=True,
                                      subschemas=[_type_schema(_string(t, "type")) for t in value])
            return _type_schema(_string(value, "type"))
        if keyword in ("allOf", "anyOf", "oneOf"):
            combined: Schema = CombinedSchema(criterion=keyword)
            for subschema in _array(value, keyword):
                combined = _join(combined, self.child(subschema, resolver), keyword)
            return combined
        if keyword == "not":
            return NotSchema(must_not_match=self.child(value, resolver))
        if keyword == "enum":
            return EnumSchema(values=list(_array(value, "enum")))
        if keyword == "const":
            return ConstSchema(value=value)
        if keyword in ("format", "readOnly", "writeOnly"):
            if keyword == "format":
                _string(value, keyword)
            else:
                _boolean(value, keyword)
            return _nothing()
        if keyword == "if":
            return ConditionalSchema(
                if_schema=self.child(value, resolver),
                then_schema=self.child(o["then"], resolver) if "then" in o else None,
                else_schema=self.child(o["else"], resolver) if "else" in o else None)
        return (self._string_keyword(keyword, value) or self._number_keyword(keyword, value)
                or self._object_keyword(keyword, value, resolver) or self._array_keyword(keyword, value, o, resolver))

    def _string_keyword(self, keyword: str, value: Any) -> Schema | None:
        if keyword == "minLength":
            return StringSchema(requires_string=False, min_length=_integer(value, keyword))
        if keyword == "maxLength":
            return StringSchema(requires_string=False, max_length=_integer(value, keyword))
        if keyword == "pattern":
            return StringSchema(requires_string=False, pattern=self.pattern(value, keyword))
        return None

    def _number_keyword(self, keyword: str, value: Any) -> Schema | None:
        attr = {"minimum": "minimum", "maximum": "maximum", "exclusiveMinimum": "exclusive_minimum_limit",
                "exclusiveMaximum": "exclusive_maximum_limit", "multipleOf": "multiple_of"}.get(keyword)
        if attr is None:
            return None
        schema = NumberSchema(requires_number=False)
        setattr(schema, attr, _number(value, keyword))
        return schema

    def _object_keyword(self, keyword: str, value: Any, resolver: Resolver[Any]) -> Schema | None:
        if keyword == "additionalProperties":
            additional = self.child(value, resolver)
            if isinstance(additional, FalseSchema):
                return ObjectSchema(requires_object=False, additional_properties=False)
            if isinstance(additional, TrueSchema):
                return ObjectSchema(requires_object=False)
            return ObjectSchema(requires_object=False, schema_of_additional_properties=additional)
        if keyword == "required":
            return ObjectSchema(requires_object=False,
                                required=[_string(name, keyword) for name in _array(value, keyword)])
        if keyword == "minProperties":
            return ObjectSchema(requires_object=False, min_properties=_integer(value, keyword))
        if keyword == "maxProperties":
            return ObjectSchema(requires_object=False, max_properties=_integer(value, keyword))
        if keyword == "dependentRequired":
            deps: dict[str, list[str]] = {}
            for name, names in _object(value, keyword).items():
                for dependency in _array(names, keyword):
                    bucket = deps.setdefault(name, [])
                    if _string(dependency, keyword) not in bucket:
                        bucket.append(dependency)
            return ObjectSchema(requires_object=False, property_dependencies=deps)
        if keyword == "dependentSchemas":
            return ObjectSchema(requires_object=False, schema_dependencies={
                name: self.child(s, resolver) for name, s in _object(value, keyword).items()})
        if keyword == "propertyNames":
            return ObjectSchema(requires_object=False, property_name_schema=self.child(value, resolver))
        return None

    def _array_keyword(self, keyword: str, value: Any, o: dict[str, Any], resolver: Resolver[Any]) -> Schema | None:
        if keyword == "minItems":
            return ArraySchema(requires_array=False, min_items=_integer(value, keyword))
        if keyword == "maxItems":
            return ArraySchema(requires_array=False, max_items=_integer(value, keyword))
        if keyword == "uniqueItems":
            return ArraySchema(requires_array=False, unique_items=_boolean(value, keyword))
        if keyword == "prefixItems":
            return ArraySchema(requires_array=False,
                               item_schemas=[self.child(s, resolver) for s in _array(value, keyword)])
        if keyword == "items":
            if not isinstance(value, (bool, dict)):
                raise InvalidSchemaError(f"items: expected a boolean or an object (a schema), found {_json_type(value)}")
            items = self.child(value, resolver)
            if isinstance(items, FalseSchema):
                return ArraySchema(requires_array=False, additional_items=False)
            if isinstance(items, TrueSchema):
                return ArraySchema(requires_array=False)
            prefix = o.get("prefixItems")
            if isinstance(prefix, list) and prefix:
                return ArraySchema(requires_array=False, schema_of_additional_items=items)
            return ArraySchema(requires_array=False, all_item_schema=items)
        if keyword == "contains":
            limits: dict[str, Any] = {"minContains": _number_or(o.get("minContains"), 1)}
            if _number_or(o.get("maxContains"), None) is not None:
                limits["maxContains"] = o["maxContains"]
            return ArraySchema(requires_array=False, contains=self.child(value, resolver), unprocessed=limits)
        return None


def _number_or(value: Any, default: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return _number(value, "")
    except InvalidSchemaError:
        return default
