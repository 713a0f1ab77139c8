"""The AVRO schema type against what Confluent's registry does with Avro's Java library:
canonical strings (``Schema.toString()``), normalisation (``AvroSchemaUtils.toNormalizedString``),
Avro's parse errors, and ``SchemaCompatibility`` with Confluent's ``Difference`` messages.
Expected values marked "Confluent's test" or "Avro's test" are copied from
confluentinc/schema-registry's AvroSchemaTest / AvroSchemaValidateNamesTest and from Avro's
TestSchemaCompatibility* tests."""

from __future__ import annotations

import json

import pytest

from schema_registry import avro_json
from schema_registry.avro import AvroSchema, parse
from schema_registry.avro_normalize import normalized_text
from schema_registry.schema_types import PARSERS, InvalidSchemaError, ParsedSchema


def rec(*fields: dict, name: str = "r", **attrs: object) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **attrs})


def field(name: str, type_: object, **attrs: object) -> dict:
    return {"name": name, "type": type_, **attrs}


def enum(name: str, *symbols: str, **attrs: object) -> dict:
    return {"type": "enum", "name": name, "symbols": list(symbols), **attrs}


def problems(new: str, old: str) -> list[tuple[str, str, str]]:
    """(errorType, path, additionalInfo) of each reason ``new`` cannot read ``old``'s data."""
    reader, writer = parse(new, {}), parse(old, {})
    return [(i.type, i.path, i.message) for i in reader.incompatibilities(writer)]


def test_registered_as_avro() -> None:
    assert PARSERS["AVRO"] is parse
    assert isinstance(parse('"string"', {}), ParsedSchema)


# -- BACKWARD: can the new schema (reader) read data written with the old one (writer) --

BASE = rec(field("f1", "string"))
E_AB = enum("E", "A", "B")

COMPATIBLE = {
    "identical": (BASE, BASE),
    "add a field with a default": (rec(field("f1", "string"), field("f2", "string", default="foo")), BASE),
    "add a nullable field defaulting to null": (rec(field("f1", "string"), field("f2", ["null", "int"], default=None)),
                                                 BASE),
    "remove a field": (rec(), BASE),
    "int to long": (rec(field("a", "long")), rec(field("a", "int"))),
    "int to float": (rec(field("a", "float")), rec(field("a", "int"))),
    "int to double": (rec(field("a", "double")), rec(field("a", "int"))),
    "long to float": (rec(field("a", "float")), rec(field("a", "long"))),
    "long to double": (rec(field("a", "double")), rec(field("a", "long"))),
    "float to double": (rec(field("a", "double")), rec(field("a", "float"))),
    "string to bytes": (rec(field("a", "bytes")), rec(field("a", "string"))),
    "bytes to string": (rec(field("a", "string")), rec(field("a", "bytes"))),
    "add an enum symbol": (rec(field("e", enum("E", "A", "B", "C"))), rec(field("e", E_AB))),
    "remove a symbol, reader has an enum default": (rec(field("e", enum("E", "A", default="A"))),
                                                     rec(field("e", E_AB))),
    "add a union branch": (rec(field("u", ["null", "string", "int"])), rec(field("u", ["null", "string"]))),
    "a type becomes a union holding it": (rec(field("f1", ["null", "string"])), BASE),
    "a union branch promoted": (rec(field("u", ["null", "long"])), rec(field("u", ["null", "int"]))),
    "rename a field with an alias": (rec(field("f1_new", "string", aliases=["f1"])), BASE),
    "rename a record with an alias": (rec(field("f1", "string"), name="r2", aliases=["r"]), BASE),
    "change the namespace (Avro compares unqualified names)": (rec(field("f1", "string"), namespace="b"),
                                                               rec(field("f1", "string"), namespace="a")),
    "nested record gains a defaulted field": (
        rec(field("n", json.loads(rec(field("x", "int"), field("y", "int", default=0), name="N")))),
        rec(field("n", json.loads(rec(field("x", "int"), name="N"))))),
    "array items promoted": (rec(field("a", {"type": "array", "items": "long"})),
                             rec(field("a", {"type": "array", "items": "int"}))),
    "map values promoted": (rec(field("m", {"type": "map", "values": "double"})),
                            rec(field("m", {"type": "map", "values": "float"}))),
    "fixed of the same size": (rec(field("f", {"type": "fixed", "name": "F", "size": 4})),
                               rec(field("f", {"type": "fixed", "name": "F", "size": 4}))),
    "recursive type, promoted field": (
        rec(field("v", "long"), field("next", ["null", "L"], default=None), name="L"),
        rec(field("v", "int"), field("next", ["null", "L"], default=None), name="L")),
    "doc and custom attributes do not matter": (rec(field("f1", "string", doc="d"), doc="x", foo=1), BASE),
}


@pytest.mark.parametrize(("new", "old"), COMPATIBLE.values(), ids=COMPATIBLE.keys())
def test_backward_compatible(new: str, old: str) -> None:
    assert parse(new, {}).is_backward_compatible(parse(old, {})) == []


INCOMPATIBLE = {
    "add a field without a default": (
        rec(field("f1", "string"), field("f2", "string")), BASE,
        [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "f2")]),
    "string to int": (
        rec(field("f1", "int")), BASE,
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: INT not compatible with writer type: STRING")]),
    "long to int": (
        rec(field("a", "int")), rec(field("a", "long")),
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: INT not compatible with writer type: LONG")]),
    "double to float": (
        rec(field("a", "float")), rec(field("a", "double")),
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: FLOAT not compatible with writer type: DOUBLE")]),
    "remove an enum symbol the writer has": (
        rec(field("e", enum("E", "A"))), rec(field("e", enum("E", "A", "B", "C"))),
        [("MISSING_ENUM_SYMBOLS", "/fields/0/type/symbols", "[B, C]")]),
    "narrow a union": (
        rec(field("u", ["null", "string"])), rec(field("u", ["null", "string", "int"])),
        [("MISSING_UNION_BRANCH", "/fields/0/type/2", "reader union lacking writer type: INT")]),
    "a union becomes one of its branches": (
        rec(field("f1", "string")), rec(field("f1", ["null", "string"])),
        [("TYPE_MISMATCH", "/fields/0/type/0", "reader type: STRING not compatible with writer type: NULL")]),
    "reader union lacks the writer's type": (
        rec(field("a", ["null", "string"])), rec(field("a", "long")),
        [("MISSING_UNION_BRANCH", "/fields/0/type", "reader union lacking writer type: LONG")]),
    "rename a record without an alias": (
        rec(field("f1", "string"), name="r2"), BASE,
        [("NAME_MISMATCH", "/name", "expected: r")]),
    "rename a nested enum": (
        rec(field("e", enum("E2", "A", "B"))), rec(field("e", E_AB)),
        [("NAME_MISMATCH", "/fields/0/type/name", "expected: E")]),
    "fixed size change": (
        rec(field("f", {"type": "fixed", "name": "F", "size": 4})),
        rec(field("f", {"type": "fixed", "name": "F", "size": 8})),
        [("FIXED_SIZE_MISMATCH", "/fields/0/type/size", "expected: 8, found: 4")]),
    "array items": (
        rec(field("a", {"type": "array", "items": "int"})), rec(field("a", {"type": "array", "items": "string"})),
        [("TYPE_MISMATCH", "/fields/0/type/items", "reader type: INT not compatible with writer type: STRING")]),
    "map values": (
        rec(field("m", {"type": "map", "values": "int"})), rec(field("m", {"type": "map", "values": "long"})),
        [("TYPE_MISMATCH", "/fields/0/type/values", "reader type: INT not compatible with writer type: LONG")]),
    "array to map": (
        rec(field("m", {"type": "map", "values": "int"})), rec(field("m", {"type": "array", "items": "int"})),
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: MAP not compatible with writer type: ARRAY")]),
    "recursive type": (
        rec(field("v", "string"), field("next", ["null", "L"], default=None), name="L"),
        rec(field("v", "int"), field("next", ["null", "L"], default=None), name="L"),
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: STRING not compatible with writer type: INT")]),
    "nested field added without default": (
        rec(field("n", json.loads(rec(field("x", "int"), field("y", "int"), name="N")))),
        rec(field("n", json.loads(rec(field("x", "int"), name="N")))),
        [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1", "y")]),
    # Avro checks an enum-with-default field missing from the writer against the writer's record
    "enum field with an enum default, missing in the writer": (
        rec(field("e", enum("E", "A", default="A"))), rec(),
        [("TYPE_MISMATCH", "/fields/0/type", "reader type: ENUM not compatible with writer type: RECORD")]),
    # a named type compared once: its incompatibility is reported where it was first met, twice
    "an enum used by two fields": (
        rec(field("a", enum("E", "A")), field("b", "E")), rec(field("a", E_AB), field("b", "E")),
        [("MISSING_ENUM_SYMBOLS", "/fields/0/type/symbols", "[B]")] * 2),
}


@pytest.mark.parametrize(("new", "old", "expected"), INCOMPATIBLE.values(), ids=INCOMPATIBLE.keys())
def test_backward_incompatible(new: str, old: str, expected: list[tuple[str, str, str]]) -> None:
    assert problems(new, old) == expected
    messages = parse(new, {}).is_backward_compatible(parse(old, {}))
    assert [m.split("'")[1] for m in messages] == [e[0] for e in expected]


def test_multiple_incompatibilities_in_avros_order() -> None:
    """Avro's test (TestSchemaCompatibilityMultiple): types, details and locations."""
    def sub(reader: bool) -> dict:
        fixed = {"type": "fixed", "name": "fixed_length_mismatch_type", "size": 4 if reader else 8}
        fields = [field("identical_1_field", "long", default=42)]
        if reader:
            fields.append(field("extra_no_default_field", "long"))
        fields += [
            field("fixed_length_mismatch_field", fixed),
            field("union_missing_branches_field", ["boolean"] if reader else ["boolean", "double", "string"]),
            field("reader_union_does_not_support_type_field", ["boolean"] if reader else "long"),
            field("record_fqn_mismatch_field", {
                "type": "record", "name": "recordA", "namespace": "not_nsA" if reader else "nsA", "fields": [
                    field("A_field_0", "boolean", default=True),
                    field("array_type_mismatch_field", {"type": "array", "items": "string" if reader else "boolean"}),
                ]}),
        ]
        return {"type": "record", "name": "sub_record_type", "fields": fields}

    reader = rec(
        field("check_enum_symbols_field", enum("check_enum_symbols_type", "A", "C")),
        field("check_enum_name_field", enum("check_enum_name_type", "A", "B", "C", "D")),
        field("type_mismatch_field", "string"), field("sub_record", sub(True)), name="base")
    writer = rec(
        field("check_enum_symbols_field", enum("check_enum_symbols_type", "A", "B", "C", "D")),
        field("check_enum_name_field", enum("check_enum_name_type_ERR", "A", "B", "C", "D")),
        field("type_mismatch_field", "long"), field("sub_record", sub(False)), name="base")
    assert problems(reader, writer) == [
        ("MISSING_ENUM_SYMBOLS", "/fields/0/type/symbols", "[B, D]"),
        ("NAME_MISMATCH", "/fields/1/type/name", "expected: check_enum_name_type_ERR"),
        ("TYPE_MISMATCH", "/fields/2/type", "reader type: STRING not compatible with writer type: LONG"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/3/type/fields/1", "extra_no_default_field"),
        ("FIXED_SIZE_MISMATCH", "/fields/3/type/fields/2/type/size", "expected: 8, found: 4"),
        ("MISSING_UNION_BRANCH", "/fields/3/type/fields/3/type/1", "reader union lacking writer type: DOUBLE"),
        ("MISSING_UNION_BRANCH", "/fields/3/type/fields/3/type/2", "reader union lacking writer type: STRING"),
        ("MISSING_UNION_BRANCH", "/fields/3/type/fields/4/type", "reader union lacking writer type: LONG"),
        ("TYPE_MISMATCH", "/fields/3/type/fields/5/type/fields/1/type/items",
         "reader type: STRING not compatible with writer type: BOOLEAN"),
    ]


@pytest.mark.parametrize(("reader", "writer", "path", "info"), [
    # Avro's tests (TestSchemaCompatibilityTypeMismatch / MissingUnionBranch), top-level types
    ('"null"', '"int"', "/", "reader type: NULL not compatible with writer type: INT"),
    ('"int"', '"long"', "/", "reader type: INT not compatible with writer type: LONG"),
    ('"float"', '["int","long","float","double"]', "/3", "reader type: FLOAT not compatible with writer type: DOUBLE"),
    ('"long"', '["int","float"]', "/1", "reader type: LONG not compatible with writer type: FLOAT"),
    ('["int"]', '["int","string"]', "/1", "reader union lacking writer type: STRING"),
    ('["string"]', '["int","string"]', "/0", "reader union lacking writer type: INT"),
])
def test_top_level_locations(reader: str, writer: str, path: str, info: str) -> None:
    [(_, got_path, got_info)] = problems(reader, writer)
    assert (got_path, got_info) == (path, info)


def test_confluent_message_format() -> None:
    """Confluent's Difference.toString, with the new schema in the reader's role."""
    new = parse(rec(field("f1", "string"), field("f2", "string")), {})
    assert new.is_backward_compatible(parse(BASE, {})) == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'f2'}"]


@pytest.mark.parametrize(("new", "old", "message"), [
    (rec(field("f", {"type": "fixed", "name": "F", "size": 4})), rec(field("f", {"type": "fixed", "name": "F", "size": 8})),
     "{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/fields/0/type/size' in "
     "the new schema does not match with the old schema', additionalInfo:'expected: 8, found: 4'}"),
    (rec(field("f1", "int")), BASE,
     "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new schema does "
     "not match with the old schema', additionalInfo:'reader type: INT not compatible with writer type: STRING'}"),
    (rec(field("f1", "string"), name="r2"), BASE,
     "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
     "additionalInfo:'expected: r'}"),
    (rec(field("e", enum("E", "A"))), rec(field("e", E_AB)),
     "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[B]' at path "
     "'/fields/0/type/symbols' in the old schema', additionalInfo:'[B]'}"),
    (rec(field("u", ["null"])), rec(field("u", ["null", "int"])),
     "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union field at path "
     "'/fields/0/type/1' in the old schema', additionalInfo:'reader union lacking writer type: INT'}"),
])
def test_confluent_descriptions(new: str, old: str, message: str) -> None:
    assert parse(new, {}).is_backward_compatible(parse(old, {})) == [message]


def test_forward_roles_and_raw_templates() -> None:
    """Confluent's isBackwardCompatible returns templates; its validator puts "old" in the
    reader's role when the previous schema reads the new one (FORWARD)."""
    old, new = parse(rec(field("f1", "string"), field("f2", "string")), {}), parse(BASE, {})
    [template] = old.compatibility_templates(new)
    assert "in the %s schema has no default value and is missing in the %s schema" in template
    [message] = old.is_backward_compatible(new, reader="old", writer="new")
    assert "in the old schema has no default value and is missing in the new schema" in message


def test_other_schema_type() -> None:
    class Other(ParsedSchema):
        schema_type = "JSON"

        def canonical_string(self) -> str:
            return "{}"

        def normalize(self) -> ParsedSchema:
            return self

        def is_backward_compatible(self, previous: ParsedSchema) -> list[str]:
            return []

    assert parse(BASE, {}).is_backward_compatible(Other()) == ["Incompatible because of different schema type"]


def test_field_matching_two_writer_fields() -> None:
    """Avro throws; Confluent answers with the exception's message."""
    new = parse(rec(field("a", "int", aliases=["b"])), {})
    old = parse(rec(field("a", "int"), field("b", "int")), {})
    assert new.is_backward_compatible(old) == [
        "Unexpected exception during compatibility check: Reader record field a type:INT pos:0 matches multiple "
        'fields in writer record schema {"type":"record","name":"r","fields":[{"name":"a","type":"int"},'
        '{"name":"b","type":"int"}]}']


# -- canonical strings -------------------------------------------------------------------


def canonical(text: str, refs: dict[str, str] | None = None) -> str:
    return parse(text, refs or {}).canonical_string()


def test_canonical_ignores_whitespace_and_attribute_order() -> None:
    expected = '{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}'
    assert canonical('{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}') == expected
    assert canonical('\n { "fields" : [ { "type" : "int" ,\t"name" : "a" } ] ,\n "name" : "r", "type":"record" } ') \
        == expected


@pytest.mark.parametrize(("text", "expected"), [
    ('"string"', '"string"'),
    ('{"type": "string"}', '"string"'),
    ('["null", {"type": "string"}]', '["null","string"]'),
    ('{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}',
     '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}'),
    ('{"logicalType":"timestamp-millis","type":"long"}', '{"type":"long","logicalType":"timestamp-millis"}'),
    ('{"type":"array","items":"int","default":[]}', '{"type":"array","items":"int","default":[]}'),
    ('{"values":{"type":"map","values":"long"},"type":"map"}', '{"type":"map","values":{"type":"map","values":"long"}}'),
    ('{"size":16,"type":"fixed","name":"md5","namespace":"x","aliases":["x.old","y.other"],"doc":"d"}',
     '{"type":"fixed","name":"md5","namespace":"x","doc":"d","size":16,"aliases":["old","y.other"]}'),
    ('{"type":"enum","symbols":["A","B"],"name":"E","default":"A","x":1}',
     '{"type":"enum","name":"E","symbols":["A","B"],"default":"A","x":1}'),
    # nested names: the namespace written only where it changes, "" back to the null namespace
    ('{"type":"record","name":"a.b.R","fields":[{"name":"x","type":{"type":"record","name":"In","fields":[]}},'
     '{"name":"y","type":"In"},{"name":"z","type":{"type":"enum","name":"c.E","symbols":["A"]}},'
     '{"name":"w","type":{"type":"fixed","name":"F","namespace":"","size":3}}]}',
     '{"type":"record","name":"R","namespace":"a.b","fields":[{"name":"x","type":{"type":"record","name":"In",'
     '"fields":[]}},{"name":"y","type":"In"},{"name":"z","type":{"type":"enum","name":"E","namespace":"c",'
     '"symbols":["A"]}},{"name":"w","type":{"type":"fixed","name":"F","namespace":"","size":3}}]}'),
    # field attributes in Avro's order, custom ones kept in theirs; numbers as Java prints them
    ('{"type":"error","name":"Err","fields":[{"x-b":2,"default":1E10,"aliases":["q","q"],"order":"descending",'
     '"type":"double","name":"d","doc":"fd","x-a":{"z":1,"a":[1.50,null]}},'
     '{"name":"f","type":"float","default":"NaN"},{"name":"g","type":"float","default":0.0001},'
     '{"name":"h","type":"long","default":-0}]}',
     '{"type":"error","name":"Err","fields":[{"name":"d","type":"double","doc":"fd","default":1.0E10,'
     '"order":"descending","aliases":["q"],"x-b":2,"x-a":{"z":1,"a":[1.5,null]}},'
     '{"name":"f","type":"float","default":"NaN"},{"name":"g","type":"float","default":1.0E-4},'
     '{"name":"h","type":"long","default":0}]}'),
    # a name used before its definition in the same text (Avro 1.12)
    ('{"type":"record","name":"A","fields":[{"name":"b","type":"B"},{"name":"c","type":{"type":"fixed","name":"B",'
     '"size":2}}]}',
     '{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"fixed","name":"B","size":2}},'
     '{"name":"c","type":"B"}]}'),
    # the same type defined twice identically is accepted, and written once
    ('{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"record","name":"X","fields":[]}},'
     '{"name":"c","type":{"type":"record","name":"X","fields":[]}}]}',
     '{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"record","name":"X","fields":[]}},'
     '{"name":"c","type":"X"}]}'),
    ('{"type":"record","name":"r",/* a comment */"fields":[]}', '{"type":"record","name":"r","fields":[]}'),
    ('{"type":"record","name":"r","doc":"tab\\there \\u0001 é","fields":[]}',
     '{"type":"record","name":"r","doc":"tab\\there \\u0001 é","fields":[]}'),
])
def test_canonical_string(text: str, expected: str) -> None:
    assert canonical(text) == expected
    assert canonical(expected) == expected


CONFLUENT_NORMALIZATION = (
    '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
    '[{"type":"string","name":"f1","doc":"bye\\"now"}]}',
    '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
    '[{"name":"f1","type":"string","doc":"bye\\"now"}]}')

CONFLUENT_METADATA = (
    '{"connect.name": "some.scope.Envelope","fields": [{"default": null,"name": "before","type": ["null",'
    '{"connect.name": "some.scope.Value","fields": [{"name": "created_at","type": {"connect.name": '
    '"io.debezium.time.Timestamp","connect.version": 1,"type": "long"}},{"name":"normal_long","type":"long"}],'
    '"name": "Value","type": "record"}]},{"default": null,"name": "after","type": ["null","Value"]}],'
    '"name": "Envelope","namespace": "some.scope","type": "record"}',
    '{"type":"record","name":"Envelope","namespace":"some.scope","fields":[{"name":"before","type":["null",'
    '{"type":"record","name":"Value","fields":[{"name":"created_at","type":{"type":"long","connect.name":'
    '"io.debezium.time.Timestamp","connect.version":1}},{"name":"normal_long","type":"long"}],"connect.name":'
    '"some.scope.Value"}],"default":null},{"name":"after","type":["null","Value"],"default":null}],'
    '"connect.name":"some.scope.Envelope"}')


@pytest.mark.parametrize(("text", "expected"), [CONFLUENT_NORMALIZATION, CONFLUENT_METADATA],
                         ids=["testNormalization", "testNormalizationPreservesMetadataForPrimitiveTypes"])
def test_confluent_canonical_and_normalized(text: str, expected: str) -> None:
    """Confluent's tests (AvroSchemaTest): canonicalString() and normalize().canonicalString()."""
    schema = parse(text, {})
    assert schema.canonical_string() == expected
    assert schema.normalize().canonical_string() == expected


# -- references --------------------------------------------------------------------------

ADDRESS = '{"type":"record","name":"Address","namespace":"com.x","fields":[{"name":"street","type":"string"}]}'
COUNTRY = '{"type":"enum","name":"Country","namespace":"com.x","symbols":["NL","FR"]}'
ADDRESS2 = ('{"type":"record","name":"Address2","namespace":"com.x","fields":[{"name":"street","type":"string"},'
            '{"name":"country","type":"Country"}]}')


def test_reference_written_by_name() -> None:
    text = ('{"type":"record","name":"Person","namespace":"com.x","fields":[{"name":"home","type":"Address"},'
            '{"name":"work","type":["null","com.x.Address"]}]}')
    schema = parse(text, {"com.x.Address": ADDRESS})
    expected = ('{"type":"record","name":"Person","namespace":"com.x","fields":[{"name":"home","type":"Address"},'
                '{"name":"work","type":["null","Address"]}]}')
    assert schema.canonical_string() == expected
    assert schema.normalize().canonical_string() == expected
    other_ns = parse('{"type":"record","name":"P","fields":[{"name":"a","type":"com.x.Address"}]}',
                     {"com.x.Address": ADDRESS})
    assert other_ns.canonical_string() == '{"type":"record","name":"P","fields":[{"name":"a","type":"com.x.Address"}]}'


def test_transitive_references_in_dependency_order() -> None:
    refs = {"com.x.Country": COUNTRY, "com.x.Address2": ADDRESS2}
    schema = parse('{"type":"record","name":"P","fields":[{"name":"a","type":"com.x.Address2"},'
                   '{"name":"c","type":"com.x.Country"}]}', refs)
    assert schema.canonical_string() == ('{"type":"record","name":"P","fields":[{"name":"a","type":"com.x.Address2"},'
                                         '{"name":"c","type":"com.x.Country"}]}')
    with pytest.raises(InvalidSchemaError, match="Undefined schema: com.x.Country"):
        parse('"com.x.Address2"', {"com.x.Address2": ADDRESS2, "com.x.Country": COUNTRY})


def test_reference_needed_and_not_redefined() -> None:
    with pytest.raises(InvalidSchemaError, match="Undefined schema: com.x.Address"):
        parse('{"type":"record","name":"P","fields":[{"name":"a","type":"com.x.Address"}]}', {})
    with pytest.raises(InvalidSchemaError, match="Can't redefine: com.x.Address"):
        parse(ADDRESS.replace('"string"', '"int"'), {"com.x.Address": ADDRESS})
    # the same definition again is accepted, and written by name as the reference
    assert parse(ADDRESS, {"com.x.Address": ADDRESS}).canonical_string() == '"com.x.Address"'


def test_compatibility_through_references() -> None:
    old = parse('{"type":"record","name":"P","fields":[{"name":"c","type":"com.x.Country"}]}',
                {"com.x.Country": COUNTRY})
    fewer = COUNTRY.replace(',"FR"', "")
    new = parse('{"type":"record","name":"P","fields":[{"name":"c","type":"com.x.Country"}]}',
                {"com.x.Country": fewer})
    assert [m.split("'")[1] for m in new.is_backward_compatible(old)] == ["MISSING_ENUM_SYMBOLS"]
    assert old.is_backward_compatible(new) == []


# -- invalid schemas ---------------------------------------------------------------------

INVALID = {
    "not JSON": ("non-avro schema string", "Expecting value"),
    "truncated": ('{"type":"record","name":"r",', "Expecting property name"),
    "NaN literal": ('{"type":"record","name":"r","fields":[{"name":"a","type":"double","default":NaN}]}',
                    "Non-standard token 'NaN'"),
    "dangling content": ('{"type":"record","name":"r","fields":[]} x', "dangling content after end of schema: x"),
    "a number": ("5", "Schema not yet supported: 5"),
    "unknown type": ('{"type":"recrd","name":"r"}', "Undefined schema: recrd"),
    "unknown name": (rec(field("a", "Nope")), "Undefined schema: Nope"),
    "no type": ('{"name":"r"}', 'No type: {"name":"r"}'),
    "record without fields": ('{"type":"record","name":"r"}', 'Record has no fields: {"type":"record","name":"r"}'),
    "record without name": ('{"type":"record","fields":[]}', "No name in schema: "),
    "field without name": ('{"type":"record","name":"r","fields":[{"type":"int"}]}', 'No field name: {"type":"int"}'),
    "field without type": ('{"type":"record","name":"r","fields":[{"name":"a"}]}', 'No field type: {"name":"a"}'),
    "duplicate field": (rec(field("a", "int"), field("a", "string")),
                        "Duplicate field a in record r: a type:STRING pos:1 and a type:INT pos:0."),
    "enum without symbols": ('{"type":"enum","name":"E"}', "Enum has no symbols: "),
    "duplicate symbol": (json.dumps(enum("E", "A", "A")), "Duplicate enum symbol: A"),
    "enum default not a symbol": (json.dumps(enum("E", "A", default="B")),
                                  "The Enum Default: B is not in the enum symbol set: [A]"),
    "fixed without size": ('{"type":"fixed","name":"F"}', "Invalid or no size: "),
    "array without items": ('{"type":"array"}', 'Array has no items type: {"type":"array"}'),
    "map without values": ('{"type":"map"}', 'Map has no values type: {"type":"map"}'),
    "duplicate in union": ('["int","int"]', "Duplicate in union:int"),
    "two records of one name in a union": ('[{"type":"record","name":"X","fields":[]},"X"]', "Duplicate in union:X"),
    "nested union": ('[["int"]]', "Nested union: "),
    "named after a primitive": ('{"type":"record","name":"int","fields":[]}',
                                "Schemas may not be named after primitives: int"),
    "illegal name": ('{"type":"record","name":"r-x","fields":[]}', "Illegal character in: r-x"),
    "illegal initial": ('{"type":"record","name":"1r","fields":[]}', "Illegal initial character: 1r"),
    "illegal field name": (rec(field("a-b", "int")), "Illegal character in: a-b"),
    "illegal symbol": (json.dumps(enum("E", "A", "B-C")), "Illegal character in: B-C"),
    "non-ASCII name (strict)": ('{"type":"record","name":"été","fields":[]}', "Illegal initial character: été"),
    "illegal namespace": ('{"type":"record","name":"r","namespace":"a-b","fields":[]}',
                          'Namespace part "a-b" is invalid: Illegal character in: a-b'),
    "redefined type": ('{"type":"record","name":"A","fields":[{"name":"b","type":{"type":"record","name":"X",'
                       '"fields":[]}},{"name":"c","type":{"type":"record","name":"X","fields":[{"name":"q",'
                       '"type":"int"}]}}]}', "Can't redefine: X"),
    "bad order": (rec(field("a", "int", order="up")), "No enum constant org.apache.avro.Schema.Field.Order.UP"),
    "aliases not an array": (rec(field("a", "int"), aliases="x"), "aliases not an array: "),
    "bad default int": (rec(field("a", "int", default="x")), 'Invalid default for field a: "x" not a "int"'),
    "int default out of range": (rec(field("a", "int", default=2**31)),
                                 'Invalid default for field a: 2147483648 not a "int"'),
    "int default as a float": (rec(field("a", "int", default=1.0)), 'Invalid default for field a: 1.0 not a "int"'),
    "bad default null": (rec(field("a", "string", default=None)), 'Invalid default for field a: null not a "string"'),
    "union default fits no branch": (rec(field("a", ["null", "int"], default="x")),
                                     'Invalid default for field a: "x" not a ["null","int"]'),
    "bad array default": (rec(field("a", {"type": "array", "items": "int"}, default=["x"])),
                          "Invalid default for field a: "),
    "record default missing a field": (
        rec(field("n", json.loads(rec(field("x", "int"), name="N")), default={})),
        'Invalid default for field n: {} not a {"type":"record","name":"N","fields":[{"name":"x","type":"int"}]}'),
    "bad float default text": (rec(field("a", "float", default="abc")), 'For input string: "abc"'),
    # Avro 1.12 checks the default against the placeholder of a name not defined yet (an
    # empty record): only an object passes there
    "default of a type defined later": (
        rec(field("b", "E", default="x"), field("c", enum("E", "x", "y"))), "Invalid default for field b: "),
    "only a comment": ("/* nothing */", "Cannot parse <null> schema"),
}


@pytest.mark.parametrize(("text", "message"), INVALID.values(), ids=INVALID.keys())
def test_invalid(text: str, message: str) -> None:
    with pytest.raises(InvalidSchemaError) as info:
        parse(text, {})
    assert message in str(info.value)


def test_invalid_reference() -> None:
    with pytest.raises(InvalidSchemaError, match="Record has no fields"):
        parse('"string"', {"com.x.R": '{"type":"record","name":"R","namespace":"com.x"}'})


def test_valid_defaults() -> None:
    """Defaults Avro 1.12 accepts: any union branch, numbers for floats, text for bytes and
    fixed, a record's missing fields filled from their own defaults."""
    nested = json.loads(rec(field("x", "int", default=1), field("y", "string"), name="N"))
    schema = parse(rec(
        field("u", ["null", "string"], default="x"), field("v", ["string", "null"], default=None),
        field("f", "float", default=1), field("d", "double", default="1.5"), field("b", "bytes", default="\u00ff"),
        field("fx", {"type": "fixed", "name": "F", "size": 1}, default="a"), field("n", nested, default={"y": "s"}),
        field("m", {"type": "map", "values": "long"}, default={"k": 2**40}), field("e", enum("E", "A"), default="A"),
    ), {})
    assert '"name":"d","type":"double","default":1.5' in schema.canonical_string()


def test_registered_schemas_parse_as_confluent_reads_them() -> None:
    """Confluent's tests (AvroSchemaValidateNamesTest): a schema read back (validateAsNew
    false) takes lax namespaces and invalid defaults but still refuses bad names."""
    lax = '{"type":"record","name":"MyRec","namespace":"foo-bar.x","fields":[{"name":"f","type":"string"}]}'
    assert parse(lax, {}, validate_as_new=False).name() == "foo-bar.x.MyRec"
    assert parse(lax.replace('"MyRec","namespace":"foo-bar.x"', '"foo-bar.x.MyRec"'), {},
                 validate_as_new=False).name() == "foo-bar.x.MyRec"
    with pytest.raises(InvalidSchemaError):
        parse(lax, {})
    for bad in ('{"type":"record","name":"bad-name","fields":[]}',
                rec(field("bad-field", "string")),
                rec(field("e", enum("E", "OK", "BAD-ONE"))),
                rec(field("inner", json.loads(rec(field("x", "int"), name="bad-inner")))),
                rec(field("f", {"type": "fixed", "name": "bad-fixed", "size": 4}))):
        with pytest.raises(InvalidSchemaError, match="Illegal"):
            parse(bad, {}, validate_as_new=False)
    assert parse(rec(field("a", "int", default="x")), {}, validate_as_new=False).canonical_string() == \
        '{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":"x"}]}'
    assert parse('{"type":"record","name":"été","fields":[]}', {}, validate_as_new=False).name() == "été"


# -- normalize ---------------------------------------------------------------------------

NORMALIZE_CORPUS = [
    BASE, CONFLUENT_NORMALIZATION[0], CONFLUENT_METADATA[0], ADDRESS, COUNTRY, '"string"', '["null","long"]',
    '{"type":"error","name":"E","namespace":"x","doc":"","aliases":["z","a.b"],"zprop":{"b":2,"a":1},"fields":['
    '{"name":"f","type":{"type":"long","logicalType":"timestamp-millis","connect.name":"q"},"aliases":["y","b"],'
    '"default":3},{"name":"g","type":"float","default":1},{"name":"h","type":["null","string"],"default":null},'
    '{"name":"j","type":["null","string"],"default":"x"},{"name":"k","type":{"type":"fixed","name":"F","size":16,'
    '"logicalType":"decimal","precision":10,"scale":0,"a":1}},{"name":"l","type":"long","order":"ignore"}]}',
    rec(field("v", "int"), field("next", ["null", "L"], default=None), name="L", namespace="a.b"),
    '{"type":"long","logicalType":"bogus","b":1}',
    json.dumps(enum("E", "A", "B", default="B", doc="d", aliases=["Old"])),
]


@pytest.mark.parametrize("text", NORMALIZE_CORPUS)
def test_normalize_idempotent(text: str) -> None:
    once = parse(text, {}).normalize()
    assert isinstance(once, AvroSchema)
    assert once.normalize().canonical_string() == once.canonical_string()
    assert parse(once.canonical_string(), {}).normalize().canonical_string() == once.canonical_string()


def test_normalized_text_as_confluent_writes_it() -> None:
    """Full names first, order always written (upper case), aliases and other attributes
    sorted, a union default read with the first branch, an error written as a record."""
    schema = parse(NORMALIZE_CORPUS[7], {})
    assert normalized_text(schema.schema, []) == (
        '{"name":"x.E","type":"record","fields":['
        '{"name":"f","type":{"type":"long","logicalType":"timestamp-millis","connect.name":"q",'
        '"logicalType":"timestamp-millis"},"order":"ASCENDING","aliases":["b","y"],"default":3},'
        '{"name":"g","type":"float","order":"ASCENDING","default":1.0},'
        '{"name":"h","type":["null","string"],"order":"ASCENDING","default":null},'
        '{"name":"j","type":["null","string"],"order":"ASCENDING"},'
        '{"name":"k","type":{"name":"x.F","type":"fixed","size":16,"logicalType":"decimal","precision":10,'
        '"a":1,"logicalType":"decimal","precision":10,"scale":0},"order":"ASCENDING"},'
        '{"name":"l","type":"long","order":"IGNORE"}],"aliases":["a.b","x.z"],"zprop":{"a":1,"b":2}}')
    assert schema.normalize().canonical_string() == (
        '{"type":"record","name":"E","namespace":"x","fields":['
        '{"name":"f","type":{"type":"long","logicalType":"timestamp-millis","connect.name":"q"},"default":3,'
        '"aliases":["b","y"]},{"name":"g","type":"float","default":1.0},'
        '{"name":"h","type":["null","string"],"default":null},{"name":"j","type":["null","string"]},'
        '{"name":"k","type":{"type":"fixed","name":"F","size":16,"logicalType":"decimal","precision":10,"a":1,'
        '"scale":0}},{"name":"l","type":"long","order":"ignore"}],"zprop":{"a":1,"b":2},"aliases":["a.b","z"]}')


def test_normalize_makes_equal_schemas_equal() -> None:
    a = '{"type":"record","name":"R","namespace":"n","fields":[{"name":"f","type":"int","b":1,"a":2}],"y":1,"x":2}'
    b = '{"type":"record","name":"n.R","fields":[{"name":"f","type":"int","a":2,"b":1}],"x":2,"y":1}'
    assert parse(a, {}).canonical_string() != parse(b, {}).canonical_string()
    assert parse(a, {}).normalize().canonical_string() == parse(b, {}).normalize().canonical_string()


# -- Java's number formatting ------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.0"), (100.0, "100.0"), (1e10, "1.0E10"), (1e7, "1.0E7"), (9999999.0, "9999999.0"), (0.001, "0.001"),
    (0.0001, "1.0E-4"), (-1.5e-7, "-1.5E-7"), (123456.789, "123456.789"), (-0.0, "-0.0"), (1e23, "1.0E23"),
])
def test_java_double(value: float, text: str) -> None:
    assert avro_json.java_double(value) == text


@pytest.mark.parametrize(("value", "text"), [(1.0, "1.0"), (0.1, "0.1"), (1.1, "1.1"), (3.4e38, "3.4E38"),
                                             (16777217.0, "1.6777216E7")])
def test_java_float(value: float, text: str) -> None:
    assert avro_json.java_float(value) == text
