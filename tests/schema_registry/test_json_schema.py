"""The JSON Schema type (schema_registry.json_schema): parsing, canonical and normalised text,
references, invalid schemas, and Confluent's compatibility answers (its SchemaDiff: which
differences a BACKWARD check finds, which of them are allowed, in what words and order).

The expectations are Confluent Schema Registry 8.x's (json-schema-provider): its diff test
cases, its strict/lenient matrix and recursion tests were run against this implementation
while it was written; the cases here are a matrix of their kind in our own words."""

from __future__ import annotations

import json
import re
import sys

import pytest

from schema_registry import schema_types
from schema_registry.json_schema import JsonSchema, dump_json, load_json, parse
from schema_registry.json_schema_difference import (
    COMPATIBLE_CHANGES_LENIENT,
    COMPATIBLE_CHANGES_STRICT,
    DIFFERENCE_TYPES,
    Difference,
)
from schema_registry.json_schema_model import (
    CombinedSchema,
    ObjectSchema,
    ReferenceSchema,
    StringSchema,
    hashmap_order,
    java_string_hash,
)
from schema_registry.schema_types import InvalidSchemaError

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def js(schema: object, references: dict[str, str] | None = None) -> JsonSchema:
    return parse(schema if isinstance(schema, str) else json.dumps(schema), references or {})


def obj(properties: dict, required: list | None = None, additional: object = None, **more) -> dict:
    schema: dict = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    if additional is not None:
        schema["additionalProperties"] = additional
    return {**schema, **more}


def error_types(old: object, new: object, lenient: bool = False) -> list[str]:
    """The errorTypes of the BACKWARD check of ``new`` against ``old``."""
    messages = js(new).is_backward_compatible(js(old), lenient=lenient)
    return [re.match(r'\{errorType:"([A-Z_]+)"', m).group(1) for m in messages]


def differences(old: object, new: object) -> list[tuple[str, str]]:
    return [(d.type, d.path) for d in js(new).differences(js(old))]


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}

# (what, old, new, the incompatible differences Confluent reports)
MATRIX = [
    # content models: closed (additionalProperties false), open (absent or true), partially open
    ("optional property added to a closed model", obj({"a": S}, additional=False),
     obj({"a": S, "b": S}, additional=False), []),
    ("optional property added to an open model", obj({"a": S}), obj({"a": S, "b": S}),
     ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("property with an empty schema added to an open model", obj({"a": S}), obj({"a": S, "b": {}}), []),
    ("required property added to an open model", obj({"a": S}), obj({"a": S, "b": S}, ["b"]),
     ["REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("required property added to a closed model", obj({"a": S}, additional=False),
     obj({"a": S, "b": S}, ["b"], additional=False), ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]),
    ("required property with a default added to a closed model", obj({"a": S}, additional=False),
     obj({"a": S, "b": {**S, "default": "x"}}, ["b"], additional=False), []),
    ("property removed from an open model", obj({"a": S, "b": S}), obj({"a": S}), []),
    ("property removed from a closed model", obj({"a": S, "b": S}, additional=False),
     obj({"a": S}, additional=False), ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    ("property added, covered by the additionalProperties schema", obj({"a": S}, additional=S),
     obj({"a": S, "b": S}, additional=S), []),
    ("property added, not covered by the additionalProperties schema", obj({"a": S}, additional=S),
     obj({"a": S, "b": I}, additional=S), ["TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ("property removed, covered by a pattern property", obj({"a": S, "x_b": S}, additional=False),
     obj({"a": S}, additional=False, patternProperties={"^x_": S}), []),
    ("property removed, not covered by a pattern property", obj({"a": S, "x_b": I}, additional=False),
     obj({"a": S}, additional=False, patternProperties={"^x_": S}),
     ["TYPE_CHANGED", "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]),
    ("additionalProperties false added", obj({"a": S}), obj({"a": S}, additional=False),
     ["ADDITIONAL_PROPERTIES_REMOVED"]),
    ("additionalProperties false removed", obj({"a": S}, additional=False), obj({"a": S}), []),
    # required
    ("property made required", obj({"a": S, "b": S}), obj({"a": S, "b": S}, ["b"]), ["REQUIRED_ATTRIBUTE_ADDED"]),
    ("property made required with a default", obj({"a": S, "b": S}),
     obj({"a": S, "b": {**S, "default": "x"}}, ["b"]), []),
    ("property no longer required", obj({"a": S}, ["a"]), obj({"a": S}), []),
    # types
    ("type changed string to integer", obj({"a": S}), obj({"a": I}), ["TYPE_CHANGED"]),
    ("integer widened to number", obj({"a": I}), obj({"a": N}), []),
    ("number narrowed to integer", obj({"a": N}), obj({"a": I}), ["TYPE_NARROWED"]),
    ("string widened to string or null", obj({"a": S}), obj({"a": {"type": ["string", "null"]}}), []),
    ("string or null narrowed to string", obj({"a": {"type": ["string", "null"]}}), obj({"a": S}), ["TYPE_CHANGED"]),
    ("anything to the empty schema", obj({"a": S}, ["a"]), {}, []),
    ("the empty schema to an object", {}, {"properties": {}}, ["TYPE_CHANGED"]),
    ("Connect's bytes as string then number", {"type": "string", "connect.type": "bytes"},
     {"type": "number", "connect.type": "bytes"}, []),
    # strings
    ("maxLength relaxed", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, []),
    ("maxLength removed", {"type": "string", "maxLength": 5}, S, []),
    ("maxLength added", S, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_ADDED"]),
    ("maxLength decreased", {"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5},
     ["MAX_LENGTH_DECREASED"]),
    ("minLength increased", {"type": "string", "minLength": 1}, {"type": "string", "minLength": 2},
     ["MIN_LENGTH_INCREASED"]),
    ("minLength decreased", {"type": "string", "minLength": 2}, {"type": "string", "minLength": 1}, []),
    ("pattern added", S, {"type": "string", "pattern": "^a"}, ["PATTERN_ADDED"]),
    ("pattern changed", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"},
     ["PATTERN_CHANGED"]),
    ("pattern removed", {"type": "string", "pattern": "^a"}, S, []),
    # numbers
    ("maximum decreased", {"type": "number", "maximum": 10}, {"type": "number", "maximum": 5},
     ["MAXIMUM_DECREASED"]),
    ("maximum increased", {"type": "number", "maximum": 5}, {"type": "number", "maximum": 10}, []),
    ("minimum increased", {"type": "number", "minimum": 1}, {"type": "number", "minimum": 2},
     ["MINIMUM_INCREASED"]),
    ("exclusiveMinimum added", N, {"type": "number", "exclusiveMinimum": 0}, ["EXCLUSIVE_MINIMUM_ADDED"]),
    ("multipleOf reduced", {"type": "number", "multipleOf": 10}, {"type": "number", "multipleOf": 5}, []),
    ("multipleOf expanded", {"type": "number", "multipleOf": 0.5}, {"type": "number", "multipleOf": 10},
     ["MULTIPLE_OF_EXPANDED"]),
    ("multipleOf written with another scale", {"type": "number", "multipleOf": 0.5},
     {"type": "number", "multipleOf": 0.50}, []),
    # enums and const
    ("enum extended", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, []),
    ("enum narrowed", {"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED"]),
    ("enum changed", {"enum": ["a", "b"]}, {"enum": ["a", "c"]}, ["ENUM_ARRAY_CHANGED"]),
    ("enum of 1 is not enum of true", {"enum": [1]}, {"enum": [True]}, ["ENUM_ARRAY_CHANGED"]),
    ("const changed", {"const": "a"}, {"const": "b"}, ["ENUM_ARRAY_CHANGED"]),
    # arrays
    ("items type changed", obj({"tags": {"type": "array", "items": S}}),
     obj({"tags": {"type": "array", "items": I}}), ["TYPE_CHANGED"]),
    ("items schema added", {"type": "array"}, {"type": "array", "items": S}, ["SCHEMA_ADDED"]),
    ("items schema removed", {"type": "array", "items": S}, {"type": "array"}, []),
    ("maxItems decreased", {"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 2},
     ["MAX_ITEMS_DECREASED"]),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ("tuple item added to a closed tuple", {"type": "array", "items": [S], "additionalItems": False},
     {"type": "array", "items": [S, I], "additionalItems": False}, []),
    ("tuple item added to an open tuple", {"type": "array", "items": [S]}, {"type": "array", "items": [S, I]},
     ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("tuple item removed from a closed tuple", {"type": "array", "items": [S, I], "additionalItems": False},
     {"type": "array", "items": [S], "additionalItems": False},
     ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    # combined schemas
    ("oneOf branch added", {"oneOf": [S, I]}, {"oneOf": [S, I, {"type": "boolean"}]}, []),
    ("oneOf branch removed", {"oneOf": [S, I]}, {"oneOf": [S]}, ["SUM_TYPE_NARROWED"]),
    ("oneOf branch changed", {"oneOf": [S, I]}, {"oneOf": [S, {"type": "boolean"}]},
     ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]),
    ("allOf to anyOf", {"allOf": [S, {"maxLength": 3}]}, {"anyOf": [S, {"maxLength": 3}]}, []),
    ("anyOf to allOf", {"anyOf": [S, I]}, {"allOf": [S, I]}, ["COMBINED_TYPE_CHANGED"]),
    ("a schema becomes one branch of a oneOf", S, {"oneOf": [S, I]}, []),
    ("not excludes more", {"not": S}, {"not": {"type": ["string", "integer"]}}, ["NOT_TYPE_EXTENDED"]),
    ("not excludes less", {"not": {"type": ["string", "integer"]}}, {"not": S}, []),
    # dependencies
    ("dependency array added", obj({"a": S, "b": S}), obj({"a": S, "b": S}, dependencies={"a": ["b"]}),
     ["DEPENDENCY_ARRAY_ADDED"]),
    ("dependency array removed", obj({"a": S, "b": S}, dependencies={"a": ["b"]}), obj({"a": S, "b": S}), []),
    # annotations
    ("title, description and default changed", {**S, "title": "a", "description": "a", "default": "a"},
     {**S, "title": "b", "description": "b", "default": "b"}, []),
    # 2020-12: unevaluatedProperties, prefixItems, dependentRequired
    ("2020-12: optional property added to a model closed by unevaluatedProperties",
     {"$schema": D2020, **obj({"a": S}), "unevaluatedProperties": False},
     {"$schema": D2020, **obj({"a": S, "b": S}), "unevaluatedProperties": False}, []),
    ("2020-12: unevaluatedProperties false added",
     {"$schema": D2020, **obj({"a": S})}, {"$schema": D2020, **obj({"a": S}), "unevaluatedProperties": False},
     ["UNEVALUATED_PROPERTIES_REMOVED"]),
    ("2020-12: prefix item added to an open tuple", {"$schema": D2020, "type": "array", "prefixItems": [S]},
     {"$schema": D2020, "type": "array", "prefixItems": [S, I]}, ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ("2020-12: type changed", {"$schema": D2020, **obj({"a": S})}, {"$schema": D2020, **obj({"a": I})},
     ["TYPE_CHANGED"]),
    ("2020-12: $id changed (json-sKema drops it)", {"$schema": D2020, "$id": "a", **S},
     {"$schema": D2020, "$id": "b", **S}, []),
]


@pytest.mark.parametrize(("old", "new", "expected"), [case[1:] for case in MATRIX], ids=[case[0] for case in MATRIX])
def test_backward_compatibility_matrix(old, new, expected):
    assert error_types(old, new) == expected


def test_every_difference_type_is_confluents():
    assert len(DIFFERENCE_TYPES) == len(set(DIFFERENCE_TYPES)) == 132
    assert COMPATIBLE_CHANGES_STRICT < COMPATIBLE_CHANGES_LENIENT <= set(DIFFERENCE_TYPES)
    assert len(COMPATIBLE_CHANGES_STRICT) == 65 and len(COMPATIBLE_CHANGES_LENIENT) == 74
    # deprecated: Confluent 8.0.6+ says which kind of property was added to an open model
    assert "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in DIFFERENCE_TYPES


# Confluent's STRICT vs LENIENT matrix: {add, remove} x {optional, required(, with default)} x
# {closed, open}; (change, closed?, strict compatible?, lenient compatible?)
POLICY_MATRIX = [
    ("add optional", False, True, True),
    ("add optional", True, False, True),
    ("remove optional", False, False, True),
    ("remove optional", True, True, True),
    ("add required", False, False, False),
    ("add required", True, False, False),
    ("add required with default", False, True, True),
    ("add required with default", True, False, True),
    ("remove required", False, False, True),
    ("remove required", True, True, True),
]


@pytest.mark.parametrize(("change", "is_open", "strict", "lenient"), POLICY_MATRIX)
def test_strict_and_lenient_policies(change, is_open, strict, lenient):
    email = {**S, "default": "none"} if change.endswith("with default") else S
    small = obj({"name": S}, ["name"], additional=is_open)
    large = obj({"name": S, "email": email}, ["name", "email"] if "required" in change else ["name"],
                additional=is_open)
    old, new = (small, large) if change.startswith("add") else (large, small)
    assert (error_types(old, new) == []) is strict
    assert (error_types(old, new, lenient=True) == []) is lenient


def test_lenient_allows_an_optional_property_added_inside_allof():
    old = {"type": "object", "allOf": [obj({"name": S}, ["name"]), {"properties": {"age": N}}]}
    new = {"type": "object", "allOf": [obj({"name": S}, ["name"]), {"properties": {"age": N, "email": S}}]}
    assert error_types(old, new) != []
    assert error_types(old, new, lenient=True) == []


def test_messages_are_confluents():
    new, old = js(obj({"a": S, "foo": S})), js(obj({"a": S}))
    expected = ("{errorType:\"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL\", description:\"The %s schema has an "
                "open content model and has a property or item at path '#/properties/foo' which is missing in the "
                "%s schema'}")
    assert new.compatibility_templates(old) == [expected]
    assert new.is_backward_compatible(old) == [expected.replace("%s", "new", 1).replace("%s", "old", 1)]
    # FORWARD: the previous schema reads the new one's data (nothing to report here)
    assert old.is_backward_compatible(new, reader="old", writer="new") == []
    assert Difference("TYPE_CHANGED", "#/properties/a").message() == (
        "{errorType:\"TYPE_CHANGED\", description:\"A type at path '#/properties/a' is different between "
        "the %s schema and the %s schema'}")
    assert Difference("REQUIRED_ATTRIBUTE_ADDED", "#/required/b").message() == (
        "{errorType:\"REQUIRED_ATTRIBUTE_ADDED\", description:\"The keyword at path '#/required/b' in the %s "
        "schema is not present in the %s schema'}")
    assert Difference("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "#/properties/b").message() == (
        "{errorType:\"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL\", description:\"The %s has a closed content "
        "model and is missing a property or item present at path '#/properties/b' in the %s schema'}")
    assert Difference("SCHEMA_ADDED", "#/items").message() == "{errorType:\"SCHEMA_ADDED\", description:\"'}"


def test_a_schema_of_another_type_is_incompatible():
    class Other(schema_types.ParsedSchema):
        schema_type = "AVRO"

        def canonical_string(self):
            return '"string"'

        def normalize(self):
            return self

        def is_backward_compatible(self, previous):
            return []

    assert js(S).is_backward_compatible(Other()) == ["Incompatible because of different schema type"]


def test_differences_carry_paths_and_come_in_confluents_order():
    # Confluent walks property names in java.util.HashSet order: "a" (hash 97) before "b" (98)
    old = obj({"b": S, "a": S}, ["b"], additional=False)
    new = obj({"b": I, "a": I, "c": S}, ["b", "c"], additional=False)
    assert differences(old, new) == [
        ("TYPE_CHANGED", "#/properties/a"),
        ("TYPE_CHANGED", "#/properties/b"),
        ("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "#/properties/c"),
    ]
    assert differences(obj({"x": {"type": "string", "maxLength": 3}}), obj({"x": {"type": "string", "maxLength": 2}})) \
        == [("MAX_LENGTH_DECREASED", "#/properties/x/maxLength")]
    assert differences({"anyOf": [S, I]}, {"anyOf": [S, I, N]}) == [("SUM_TYPE_EXTENDED", "#/")]


def test_java_hash_order():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE, unsigned
    assert hashmap_order(["b", "a", "c"]) == ["a", "b", "c"]
    # "Aa" and "BB" share a hash: same bucket, insertion order
    assert hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]


# ---------------------------------------------------------------------------------------------
# Recursion


def _linked(id_type: str, target: str) -> dict:
    return {"type": "object", "properties": {"id": {"type": id_type},
                                             "next": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}}}


def _cyclic(t0: str, t1: str) -> dict:
    return {"$schema": D7, "type": "object",
            "definitions": {"T0": _linked(t0, "T2"), "T1": _linked(t1, "T2"), "T2": _linked("integer", "T0")},
            "properties": {"root": {"oneOf": [{"$ref": "#/definitions/T0"}, {"$ref": "#/definitions/T1"}]}}}


def test_recursive_schemas_compare():
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    assert differences(tree, tree) == []
    changed = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}, "n": I}}
    # "#" is loaded again as the root's copy, compared once more, then (Confluent's fixpoint
    # pass) once again where the cycle closes
    assert differences(tree, changed) == [
        ("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/children/items/properties/children/items/properties/n"),
        ("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/children/items/properties/n"),
        ("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/n"),
    ]
    # a change behind a cycle (T0 -> T2 -> T0) is not hidden by the comparisons memoised on the way
    assert error_types(_cyclic("integer", "boolean"), _cyclic("integer", "boolean")) == []
    assert error_types(_cyclic("integer", "boolean"), _cyclic("boolean", "number")) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]


def test_many_mutually_recursive_unions_compare_quickly():
    names = [f"T{i}" for i in range(12)]

    def union():
        return {"oneOf": [{"$ref": f"#/definitions/{n}"} for n in names]}

    def trade(id_type="string"):
        definitions = {n: {"type": "object", "properties": {"id": {"type": "string"}, "under": union(),
                                                            "ref": union()}} for n in names}
        definitions["T0"]["properties"]["id"] = {"type": id_type}
        return {"type": "object", "definitions": definitions, "properties": {"product": union()}}

    limit = sys.getrecursionlimit()
    assert error_types(trade(), trade()) == []
    assert error_types(trade(), trade("number")) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]
    assert sys.getrecursionlimit() == limit


# ---------------------------------------------------------------------------------------------
# References


ADDRESS_V1 = json.dumps({"type": "object", "properties": {"street": S, "zip": S}})
ADDRESS_V2 = json.dumps({"type": "object", "properties": {"street": S, "zip": I}})


def test_references_resolve_and_are_compared_through():
    person = {"type": "object", "properties": {"address": {"$ref": "address.json"}}}
    v1 = js(person, {"address.json": ADDRESS_V1})
    v2 = js(person, {"address.json": ADDRESS_V2})
    address = v1.model.properties["address"]
    assert isinstance(address, ReferenceSchema) and isinstance(address.referred, ObjectSchema)
    assert v1.canonical_string() == v2.canonical_string()
    assert v2.is_backward_compatible(v1) == [
        "{errorType:\"TYPE_CHANGED\", description:\"A type at path '#/properties/address/properties/zip' is "
        "different between the new schema and the old schema'}"]
    assert js(person, {"address.json": ADDRESS_V1}).is_backward_compatible(v1) == []


def test_references_by_pointer_by_id_and_between_references():
    assert isinstance(js({"$ref": "defs.json#/definitions/name"},
                         {"defs.json": json.dumps({"definitions": {"name": S}})}).model.referred, StringSchema)
    root = {"$id": "https://example.com/schemas/person.json", "properties": {"a": {"$ref": "address.json"}}}
    assert isinstance(js(root, {"address.json": ADDRESS_V1}).model.properties["a"].referred, ObjectSchema)
    chained = js({"$ref": "a.json"}, {"a.json": json.dumps({"properties": {"b": {"$ref": "b.json"}}}), "b.json": "{}"})
    assert isinstance(chained.model.referred, ObjectSchema)
    # Confluent also finds a top-level "definitions" entry under #/$defs/
    assert isinstance(js({"definitions": {"x": S}, "properties": {"a": {"$ref": "#/$defs/x"}}})
                      .model.properties["a"].referred, StringSchema)
    # the metaschemas are known (at http and https)
    js({"properties": {"schema": {"$ref": "https://json-schema.org/draft-07/schema#"}}})
    js({"$schema": D2020, "properties": {"schema": {"$ref": D2020}}})


def test_every_ref_to_one_definition_shares_its_schema():
    schema = js({"definitions": {"n": S}, "properties": {"a": {"$ref": "#/definitions/n"},
                                                         "b": {"$ref": "#/definitions/n"}}})
    assert schema.model.properties["a"].referred is schema.model.properties["b"].referred


def test_unresolvable_references_are_invalid():
    with pytest.raises(InvalidSchemaError, match="cannot resolve \\$ref 'address.json'"):
        js({"properties": {"a": {"$ref": "address.json"}}})
    with pytest.raises(InvalidSchemaError, match="cannot resolve"):
        js({"properties": {"a": {"$ref": "#/definitions/missing"}}})
    with pytest.raises(InvalidSchemaError, match="cannot resolve"):
        js({"$ref": "https://example.com/not-fetched.json"})
    with pytest.raises(InvalidSchemaError, match="reference 'address.json': Invalid JSON"):
        js({"$ref": "address.json"}, {"address.json": "{not json"})


# ---------------------------------------------------------------------------------------------
# Canonical and normalised text


def test_canonical_string_ignores_whitespace_keeps_key_order():
    a = js('{"type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}')
    b = js('{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}')
    assert a.canonical_string() == b.canonical_string() == \
        '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}'
    assert js('{"properties":{"a":{"type":"integer"}},"type":"object"}').canonical_string() != a.canonical_string()


def test_canonical_string_writes_json_as_jackson_does():
    assert js('{"title": "a", "title": "b", "type": "string"}').canonical_string() == '{"title":"b","type":"string"}'
    assert js('{"type":"number","maximum":1.50,"minimum":1e2,"multipleOf":0.0000001,"default":-0.0}') \
        .canonical_string() == '{"type":"number","maximum":1.50,"minimum":1E+2,"multipleOf":1E-7,"default":0.0}'
    assert js('{"description":"é \\u00e9 😀 \\" \\\\ / \\n \\u0001"}').canonical_string() == \
        '{"description":"é é 😀 \\" \\\\ / \\n \\u0001"}'
    assert js('{"default": NaN, "type": "number"}').canonical_string() == '{"default":"NaN","type":"number"}'
    assert js('{"type":"string"}  and what follows is not read').canonical_string() == '{"type":"string"}'
    assert js("true").canonical_string() == "true"


def test_normalize_sorts_every_object():
    schema = js('{"type":"object","properties":{"b":{"type":"string","enum":[{"z":1,"y":2}]},"a":{"type":"integer"}}}')
    normalized = schema.normalize()
    assert normalized.canonical_string() == (
        '{"properties":{"a":{"type":"integer"},"b":{"enum":[{"y":2,"z":1}],"type":"string"}},"type":"object"}')
    assert normalized.normalize().canonical_string() == normalized.canonical_string()
    assert schema.canonical_string().startswith('{"type":"object"')
    assert normalized.is_backward_compatible(schema) == [] == schema.is_backward_compatible(normalized)
    # Java orders keys by UTF-16 code unit: a supplementary character sorts before U+FFFD
    assert dump_json(load_json('{"\ufffd":1,"😀":2,"a":3}'), sort_keys=True) == '{"a":3,"😀":2,"\ufffd":1}'


# ---------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(("text", "message"), [
    ("", "Invalid JSON"),
    ("{\"type\": ", "Invalid JSON"),
    ("[]", "expected an object or boolean at the root, found ARRAY"),
    ("\"string\"", "expected an object or boolean at the root, found STRING"),
    ("42", "found NUMBER"),
    ('{"type": "text"}', "Invalid JSON schema \\(draft-07\\): .* at \\$.type"),
    ('{"type": "string", "minLength": -1}', "at \\$.minLength"),
    ('{"properties": {"a": "string"}}', "at \\$.properties.a"),
    ('{"required": "a"}', "at \\$.required"),
    ('{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}', "draft-04"),
    ('{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": {}}', "2020-12"),
    ('{"type": "string", "pattern": "(unclosed"}', "invalid regular expression '\\(unclosed'"),
    ('{"patternProperties": {"[": {}}}', "invalid regular expression"),
    # json-sKema, which Confluent loads 2019-09 with, takes only a schema as "items"
    ('{"$schema": "https://json-schema.org/draft/2019-09/schema", "items": [{}]}', "items"),
])
def test_invalid_schemas(text, message):
    with pytest.raises(InvalidSchemaError, match=message):
        parse(text, {})


def test_drafts():
    assert js({"$schema": "http://json-schema.org/draft-04/schema#", **S}).draft == "draft-04"
    assert js({"$schema": "https://json-schema.org/draft-06/schema", **S}).draft == "draft-06"
    assert js({"$schema": "https://json-schema.org/draft/2019-09/schema#", **S}).draft == "2019-09"
    assert js({"$schema": D2020, **S}).draft == "2020-12"
    assert js(S).draft == js({"$schema": "https://example.com/my-dialect", **S}).draft == "draft-07"
    # draft 4: exclusiveMaximum is a flag on maximum; const is no keyword (an unknown one)
    draft4 = js({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 3,
                 "exclusiveMaximum": True, "const": 3})
    assert draft4.model.exclusive_maximum is True and draft4.model.unprocessed == {
        "$schema": "http://json-schema.org/draft-04/schema#", "const": 3}


def test_java_regular_expressions_are_accepted():
    js({"type": "string", "pattern": "^\\p{L}+(?<word>\\w+)\\z"})
    js({"patternProperties": {"^\\p{Lu}": S, "\\Q.*\\E": S}})


def test_the_model_follows_confluents_loaders():
    # "type" lists are an anyOf; keywords of another type make a synthetic allOf
    nullable = js({"type": ["string", "null"], "maxLength": 3}).model
    assert isinstance(nullable, CombinedSchema) and nullable.criterion == "anyOf"
    assert nullable.subschemas[0].max_length == 3
    mixed = js({"type": "object", "maxLength": 3}).model
    assert isinstance(mixed, CombinedSchema) and mixed.criterion == "allOf" and mixed.generated
    # a $ref hides its siblings in draft 7, not in 2020-12
    assert isinstance(js({"definitions": {"a": S}, "$ref": "#/definitions/a", "maxLength": 3}).model, ReferenceSchema)
    joined = js({"$schema": D2020, "$defs": {"a": S}, "$ref": "#/$defs/a", "maxLength": 3}).model
    assert isinstance(joined, CombinedSchema) and joined.criterion == "allOf"


def test_registered_for_json():
    assert schema_types.PARSERS["JSON"] is parse
    assert js(S).schema_type == "JSON"
