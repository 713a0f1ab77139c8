"""The PROTOBUF schema type against what Confluent's registry does: canonical strings
(``ProtobufSchemaUtils.toString``), normalisation, what its parser (Square Wire's) refuses,
references and the well-known types, ``SchemaDiff`` with Confluent's ``Difference`` messages,
and the schemas confluent-kafka's Python serializer registers and its deserializer reads back.
Expected values marked "Confluent's test" are taken from confluentinc/schema-registry's
ProtobufSchemaTest and protobuf-provider/src/test/resources/diff-schema-examples.json."""

from __future__ import annotations

import base64

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _schema_to_str, _str_to_proto
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from schema_registry import protobuf_diff
from schema_registry.protobuf import parse
from schema_registry.schema_types import PARSERS, InvalidSchemaError, ParsedSchema
from tests.krait_harness import BrokerProcess, free_port

from .registry_http import call

P3 = 'syntax = "proto3";\n'
P2 = 'syntax = "proto2";\n'


def diffs(old: str, new: str, old_refs: dict[str, str] | None = None,
          new_refs: dict[str, str] | None = None) -> list[str]:
    """Confluent's SchemaDiff.compare(old, new), as its tests write it: "TYPE #/path"."""
    original, update = parse(old, old_refs or {}), parse(new, new_refs or {})
    return [f"{kind} {path}" for kind, path in protobuf_diff.compare(original._side(), update._side())]


def errors(old: str, new: str, old_refs: dict[str, str] | None = None,
           new_refs: dict[str, str] | None = None) -> list[str]:
    return parse(new, new_refs or {}).is_backward_compatible(parse(old, old_refs or {}))


def test_registered_as_protobuf() -> None:
    assert PARSERS["PROTOBUF"] is parse
    schema = parse(P3 + "message A { int32 a = 1; }", {})
    assert isinstance(schema, ParsedSchema) and schema.schema_type == "PROTOBUF"
    assert schema.name() == "A"


# --- parsing ----------------------------------------------------------------------------------

FULL_PROTO3 = """
// leading comment
syntax = "proto3";
package com.acme.v1;

import "google/protobuf/timestamp.proto";
import public "other.proto";

option java_package = "com.acme.v1";
option (my.file_opt).nested = { a: 1, b: "x" list: [1, 2] };

message Outer {
  option deprecated = true;
  reserved 2, 15, 9 to 11, 40 to max;
  reserved "foo", "bar";
  message Inner { int64 ival = 1; }
  enum Kind {
    option allow_alias = true;
    K0 = 0;
    K1 = 1;
    K1_ALIAS = 1 [deprecated = true];
    reserved 5;
  }
  oneof choice { string s = 3; Inner inner = 4; }
  map<string, Inner> by_name = 5;
  repeated int32 nums = 6 [packed = true];
  optional string opt = 7;
  google.protobuf.Timestamp ts = 8 [json_name = "tsx"];
  .com.acme.v1.Outer.Kind kind = 12;
  other.Thing thing = 13;
}
service Svc {
  rpc Get (Outer) returns (stream Outer) { option deprecated = true; }
}
"""

FULL_PROTO3_CANONICAL = """syntax = "proto3";
package com.acme.v1;

import "google/protobuf/timestamp.proto";
import public "other.proto";

option java_package = "com.acme.v1";
option (my.file_opt).nested = {
  a: 1,
  b: "x",
  list: [
    1,
    2
  ]
};

message Outer {
  reserved 2, 15, 9 to 11, 40 to max;
  reserved "foo", "bar";

  option deprecated = true;

  map<string, Inner> by_name = 5;
  repeated int32 nums = 6 [packed = true];
  optional string opt = 7;
  google.protobuf.Timestamp ts = 8 [json_name = "tsx"];
  .com.acme.v1.Outer.Kind kind = 12;
  other.Thing thing = 13;

  oneof choice {
    string s = 3;
    Inner inner = 4;
  }

  message Inner {
    int64 ival = 1;
  }
  enum Kind {
    reserved 5;
    option allow_alias = true;
    K0 = 0;
    K1 = 1;
    K1_ALIAS = 1 [deprecated = true];
  }
}

service Svc {
  rpc Get (Outer) returns (stream Outer) {
    option deprecated = true;
  };
}
"""

OTHER = 'syntax = "proto3";\npackage other;\nmessage Thing { string id = 1; }\n'


def test_proto3_file_with_every_element() -> None:
    schema = parse(FULL_PROTO3, {"other.proto": OTHER})
    assert schema.canonical_string() == FULL_PROTO3_CANONICAL
    assert schema.name() == "com.acme.v1.Outer"


def test_proto2_groups_extensions_defaults() -> None:
    text = P2 + """package p2;
message M {
  required string a = 1;
  optional int32 b = 2 [default = -5];
  repeated group G = 3 { optional int32 x = 1; }
  optional double d = 4 [default = inf];
  optional string s = 5 [default = "q\\"uote"];
  extensions 100 to 199;
}
extend M { optional int32 ext = 100; }
"""
    assert parse(text, {}).canonical_string() == P2 + """package p2;

message M {
  required string a = 1;
  optional int32 b = 2 [default = -5];
  optional double d = 4 [default = inf];
  optional string s = 5 [default = "q\\"uote"];

  repeated group G = 3 {
    optional int32 x = 1;
  }

  extensions 100 to 199;
}

extend M {
  optional int32 ext = 100;
}
"""


@pytest.mark.parametrize("variant", [
    P3 + "message A{int32 a=1;string b=2[deprecated=true];}enum E{X=0;}",
    "// header\n" + P3 + "\n\n/* block */ message A {\n  int32 a = 1; // trailing\n"
    "  string /* in a field */ b = 2 [ deprecated /* c */ = true ];\n}\n\nenum E {\n  X = 0;\n}\n",
    P3 + "message A {\r\n\tint32 a = 0x1;\r\n\tstring b = 2 [deprecated = true];\r\n}\r\nenum E { X = 0; ; }\r\n",
])
def test_canonical_ignores_whitespace_and_comments(variant: str) -> None:
    assert parse(variant, {}).canonical_string() == (
        P3 + "\nmessage A {\n  int32 a = 1;\n  string b = 2 [deprecated = true];\n}\nenum E {\n  X = 0;\n}\n")


# Confluent's test (ProtobufSchemaTest.testRanges): canonical and normalized forms
RANGES = """
message Money {
  reserved 5000 to 6000;
  reserved 10000 to 10001;
  reserved 20000 to 20000;

  optional int64 cents = 1;

  extensions 100 to 200;
  extensions 1000 to 1001;
  extensions 2000 to 2000;

  enum MoneyEnum {
    reserved 100 to 200;
    reserved 1000 to 1001;
    reserved 2000 to 2000;
    NONE = 0;
    CENTS = 1;
    DOLLARS = 2;
  }
}
"""


def test_confluent_ranges() -> None:
    schema = parse(RANGES, {})
    assert schema.canonical_string() == RANGES
    normalized = RANGES.replace("20000 to 20000", "20000").replace("2000 to 2000", "2000")
    assert schema.normalize().canonical_string() == normalized


def test_confluent_enum_reserved() -> None:
    """Confluent's test (testEnumReserved): an enum before its use; no syntax (proto2)."""
    text = ('\nimport "google/protobuf/descriptor.proto";\n\nmessage FooOptions {\n'
            '  optional string name = 1;\n  optional FooParameterType type = 2;\n}\n'
            'enum FooParameterType {\n  reserved 20, 100 to max;\n  reserved 10;\n  reserved 1 to 3;\n'
            '  reserved "BAD", "OLD";\n  NUMBER = 1;\n  STRING = 2;\n}\n')
    schema = parse(text, {})
    assert schema.canonical_string() == text
    assert schema.normalize().canonical_string() == (
        '\nimport "google/protobuf/descriptor.proto";\n\nmessage FooOptions {\n'
        '  optional string name = 1;\n  optional .FooParameterType type = 2;\n}\n'
        'enum FooParameterType {\n  reserved 1 to 3;\n  reserved 10;\n  reserved 20;\n  reserved 100 to max;\n'
        '  reserved "BAD";\n  reserved "OLD";\n  NUMBER = 1;\n  STRING = 2;\n}\n')


def test_messages_before_enums_and_option_escapes() -> None:
    """Confluent's test (testEnumAfterMessage, testOptionEscape): top-level messages are
    printed before enums; strings are escaped as Confluent's escapeChars does."""
    text = P3 + 'option a = "back\\\\slash \\"q\\" \\x41\\101 \\n\\t" \'x\';\nenum E { Z = 0; }\nmessage M {}\n'
    assert parse(text, {}).canonical_string() == (
        P3 + '\noption a = "back\\\\slash \\"q\\" AA \\n\\tx";\n\nmessage M {}\nenum E {\n  Z = 0;\n}\n')


def test_option_literals_kept_as_written() -> None:
    text = P3 + "option a = 0x1F;\noption b = 1e5;\noption c = -inf;\noption d = SPEED;\noption (e).(f.g).h = 1.50;\n"
    schema = parse(text, {})
    assert schema.canonical_string() == P3 + (
        "\noption a = 0x1F;\noption b = 1e5;\noption c = -inf;\noption d = SPEED;\noption (e).(f.g).h = 1.50;\n")


def test_list_valued_options() -> None:
    """Wire (and so Confluent) reads an option set to a list, and prints it so; Confluent's
    test (testComplexCustomOptions)."""
    text = (P3 + 'import "confluent/meta.proto";\n'
            'option (confluent.file_meta).tags = ["PII", "PRIVATE"];\n'
            'message User { string first_name = 1 [(confluent.field_meta).tags = ["a"]]; }\n')
    assert parse(text, {}).canonical_string() == P3 + (
        '\nimport "confluent/meta.proto";\n\noption (confluent.file_meta).tags = [\n  "PII",\n  "PRIVATE"\n];\n\n'
        'message User {\n  string first_name = 1 [(confluent.field_meta).tags = ["a"]];\n}\n')


# --- normalize --------------------------------------------------------------------------------

def test_normalize() -> None:
    """Confluent's normalize: imports sorted, options by name, fields by number, type names
    fully qualified, a map's entry message back to ``map<K, V>``, oneofs by first number,
    enum constants by number then name; message order kept (message indexes count it)."""
    text = P3 + """package my.pkg;
import "google/protobuf/timestamp.proto";
import "confluent/type/decimal.proto";
option java_package = "my.pkg";
option go_package = "go.pkg";
message B {
  google.protobuf.Timestamp ts = 2;
  Inner inner = 1;
  repeated InnerEntry legacy_map = 3;
  map<string, Inner> m = 4 [json_name = "mm", deprecated = true];
  oneof second { string z = 11; }
  oneof first { string y = 10; }
  message Inner { confluent.type.Decimal d = 1; }
  message InnerEntry { option map_entry = true; string key = 1; Inner value = 2; }
  enum E { option allow_alias = true; TWO = 2; ONE = 1; UNO = 1; }
}
message A {}
"""
    schema = parse(text, {})
    normalized = schema.normalize()
    assert normalized.canonical_string() == P3 + """package my.pkg;

import "confluent/type/decimal.proto";
import "google/protobuf/timestamp.proto";

option go_package = "go.pkg";
option java_package = "my.pkg";

message B {
  .my.pkg.B.Inner inner = 1;
  .google.protobuf.Timestamp ts = 2;
  map<string, .my.pkg.B.Inner> legacy_map = 3;
  map<string, .my.pkg.B.Inner> m = 4 [
    deprecated = true,
    json_name = "mm"
  ];

  oneof first {
    string y = 10;
  }
  oneof second {
    string z = 11;
  }

  message Inner {
    .confluent.type.Decimal d = 1;
  }
  enum E {
    option allow_alias = true;
    ONE = 1;
    UNO = 1;
    TWO = 2;
  }
}
message A {}
"""
    assert normalized.normalize().canonical_string() == normalized.canonical_string()
    assert normalized.is_backward_compatible(schema) == []


def test_normalize_drops_proto2_syntax_and_reformats_numbers() -> None:
    schema = parse(P2 + "message M { optional double d = 1 [default = 1.2345e2]; optional int32 i = 2 "
                   "[default = 0x10]; optional float f = 3 [default = 010]; }", {})
    assert schema.normalize().canonical_string() == (
        "\nmessage M {\n  optional double d = 1 [default = 123.45];\n  optional int32 i = 2 [default = 16];\n"
        "  optional float f = 3 [default = 8];\n}\n")


def test_confluent_normalization_of_custom_options() -> None:
    """Confluent's test (testComplexCustomOptions2): repeated settings of a custom option
    print as written, and merge when normalized."""
    text = (P3 + 'package com.example;\nimport "confluent/meta.proto";\nmessage R {\n'
            '  int32 f1 = 1 [(confluent.field_meta).tags = "foo", (confluent.field_meta).tags = "bar"];\n'
            '  string f2 = 2 [(confluent.field_meta) = { tags: ["foo"] }, (confluent.field_meta).tags = "bar"];\n}\n')
    assert parse(text, {}).normalize().canonical_string() == P3 + (
        'package com.example;\n\nimport "confluent/meta.proto";\n\nmessage R {\n'
        '  int32 f1 = 1 [(confluent.field_meta) = {\n    tags: [\n      "foo",\n      "bar"\n    ]\n  }];\n'
        '  string f2 = 2 [(confluent.field_meta) = {\n    tags: [\n      "foo",\n      "bar"\n    ]\n  }];\n}\n')


# --- refused ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    (P3 + "message A { int32 a = 1 }", "Syntax error at line 2, column 25"),
    (P3 + "mesage A {}", "Syntax error"),
    (P3 + "message A { int32 a = 1; } }", "Syntax error"),
    (P3 + "message A { int32 test_int32 = 8.01; }", "Syntax error"),  # Confluent's test: invalidSchemaString
    (P3 + "message A { Missing m = 1; }", "Could not resolve type: Missing"),
    (P3 + "message A { B.C m = 1; } message B {}", "Could not resolve type: B.C"),
    (P3 + "service S { rpc R (A) returns (Nope); } message A {}", "Could not resolve type: Nope"),
    (P3 + "message A { int32 a = 1; string b = 1; }", 'A.b: Field number 1 has already been used in "A" by field "a"'),
    (P3 + "message A { int32 a = 1; oneof o { string b = 1; } }", "Field number 1 has already been used"),
    (P3 + "message A { int32 a = 1; string a = 2; }", '"a" is already defined in "A"'),
    (P3 + "message A { message B { int32 a = 1; int32 c = 1; } }", 'A.B.c: Field number 1'),
    (P3 + "message A { int32 a = 0; }", "Field numbers must be positive"),
    (P3 + "message A { int32 a = 19500; }", "reserved for the protocol buffer library"),
    (P2 + "message A { int32 a = 1; }", "unexpected label: int32"),
    ("message A { int32 a = 1; }", "unexpected label: int32"),
    (P3 + "message A { required int32 a = 1; }", "'required' label forbidden in proto3"),
    (P3 + "message A { map<double, string> m = 1; }", "Syntax error"),
    (P3 + "message A { map<E, string> m = 1; } enum E { Z = 0; }", "Syntax error"),
    (P3 + "message A {} message A {}", "A is already defined"),
    (P2 + "message A { repeated E m = 1; message E { option map_entry = true; optional bytes key = 1; "
          "optional int32 value = 2; } }",
     "map key must be non-byte, non-floating point scalar: bytes"),
    ('syntax = "proto4"; message A {}', "unexpected syntax: proto4"),
    ('edition = "2023"; message A {}', "edition is not currently supported"),
    (P3 + "option (a) = { m < x: 1 > };", "does not read '<...>'"),
    ("", None),
    ("not base64 and not proto", "Could not parse Protobuf - Syntax error"),
])
def test_invalid(text: str, message: str | None) -> None:
    if message is None:  # an empty file is a valid .proto file
        assert parse(text, {}).canonical_string() == ""
        return
    with pytest.raises(InvalidSchemaError) as exc:
        parse(text, {})
    assert message in str(exc.value)


def test_invalid_reference() -> None:
    with pytest.raises(InvalidSchemaError, match="Invalid reference other.proto: .*Syntax error"):
        parse(P3 + 'import "other.proto"; message A {}', {"other.proto": "message {"})


# --- references and well-known types ----------------------------------------------------------

def test_references_resolve_imports() -> None:
    base = P3 + "package base;\nmessage Money { int64 cents = 1; }\n"
    mid = P3 + 'package mid;\nimport "base.proto";\nmessage Price { base.Money amount = 1; }\n'
    top = P3 + 'import "mid.proto";\nmessage Order { mid.Price price = 1; base.Money tip = 2; }\n'
    schema = parse(top, {"base.proto": base, "mid.proto": mid})
    assert schema.normalize().canonical_string() == (
        P3 + '\nimport "mid.proto";\n\nmessage Order {\n  .mid.Price price = 1;\n  .base.Money tip = 2;\n}\n')
    with pytest.raises(InvalidSchemaError, match="Could not resolve type: mid.Price"):
        parse(top, {})


def test_well_known_and_common_types_need_no_reference() -> None:
    text = P3 + """import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/type/date.proto";
import "google/type/money.proto";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
message A {
  google.protobuf.Timestamp ts = 1;
  google.protobuf.StringValue s = 2;
  google.protobuf.Struct st = 3;
  google.type.Date d = 4;
  google.type.Money m = 5;
  confluent.type.Decimal dec = 6 [(confluent.field_meta) = { params: [{ key: "precision", value: "8" }] }];
  google.protobuf.DescriptorProto desc = 7;
}
"""
    assert parse(text, {}).normalize().canonical_string().count(".google.") == 6


def test_confluent_package_prefix_resolution() -> None:
    """Confluent's test (testNormalizationWithPackagePrefix): ``type.Decimal`` in package
    ``confluent.package`` resolves against the enclosing package's parents."""
    text = P3 + 'package confluent.package;\n\nimport "confluent/type/decimal.proto";\n\n' \
                'message Nested {\n  type.Decimal test_cflt_decimal = 1;\n}\n'
    schema = parse(text, {})
    assert schema.canonical_string() == text
    assert schema.normalize().canonical_string() == text.replace("  type.Decimal", "  .confluent.type.Decimal")


# --- compatibility: Confluent's SchemaDiff ----------------------------------------------------

MSG = P3 + "message TestMessage {\n  string test_string = 1;\n%s}\n"
ONEOF_B, ONEOF_BC = "  oneof o { string b = 2; }\n", "  oneof o { string b = 2; string c = 3; }\n"

#: (old, new, Confluent's differences, compatible); from Confluent's test
#: (diff-schema-examples.json) unless marked otherwise
CASES = {
    "field added": (MSG % "", MSG % "  string test_string2 = 2;\n", ["FIELD_ADDED #/TestMessage/2"], True),
    "field removed": (MSG % "  string test_string2 = 2;\n", MSG % "", ["FIELD_REMOVED #/TestMessage/2"], True),
    "field renamed": (MSG % "  int32 a = 2;\n", MSG % "  int32 b = 2;\n", ["FIELD_NAME_CHANGED #/TestMessage/2"], True),
    "field number changed": (P3 + "message TestMessage { string test_string = 1; }",
                             P3 + "message TestMessage { string test_string = 2; }",
                             ["FIELD_REMOVED #/TestMessage/1", "FIELD_ADDED #/TestMessage/2"], True),
    "int32 to int64": (MSG % "  int32 test_int = 2;\n", MSG % "  int64 test_int = 2;\n", [], True),
    "string to bytes": (MSG % "  string s2 = 2;\n", MSG % "  bytes s2 = 2;\n", [], True),
    "int32 to enum": (MSG % "  int32 test_int = 2;\n",
                      MSG % "  Status test_int = 2;\n" + "enum Status { ACTIVE = 0; INACTIVE = 1; }",
                      ["ENUM_ADDED #/Status"], True),
    "scalar kind changed": (MSG % "  int32 a = 2;\n", MSG % "  string a = 2;\n",
                            ["FIELD_SCALAR_KIND_CHANGED #/TestMessage/2"], False),
    "sint32 to int32": (MSG % "  sint32 a = 2;\n", MSG % "  int32 a = 2;\n",
                        ["FIELD_SCALAR_KIND_CHANGED #/TestMessage/2"], False),
    "scalar to message": (MSG % "  string a = 2;\n",
                          MSG % "  TestMessage2 a = 2;\n" + "message TestMessage2 { string x = 1; }",
                          ["MESSAGE_ADDED #/TestMessage2", "FIELD_KIND_CHANGED #/TestMessage/2"], False),
    "message type changed": (MSG % "  TestMessage2 a = 2;\n" + "message TestMessage2 { string x = 1; }",
                             MSG % "  TestMessage3 a = 2;\n" + "message TestMessage3 { string x = 1; }",
                             ["MESSAGE_REMOVED #/TestMessage2", "MESSAGE_ADDED #/TestMessage3",
                              "FIELD_NAMED_TYPE_CHANGED #/TestMessage/2"], False),
    "name qualification changed": (MSG % "  Status s = 2;\n  message Status { string x = 1; }\n",
                                   MSG % "  .TestMessage.Status s = 2;\n  message Status { string x = 1; }\n",
                                   [], True),
    "map value qualification changed": (
        MSG % "  map<string, Status> m = 2;\n  message Status { string x = 1; }\n",
        MSG % "  map<string, .TestMessage.Status> m = 2;\n  message Status { string x = 1; }\n", [], True),
    "map value kind changed (ours)": (MSG % "  map<string, int32> m = 2;\n", MSG % "  map<string, string> m = 2;\n",
                                      ["FIELD_SCALAR_KIND_CHANGED #/TestMessage/2"], False),
    "repeated string to string": (P3 + "message TestMessage { repeated string a = 1; }",
                                  P2 + "message TestMessage { optional string a = 1; }",
                                  ["FIELD_STRING_OR_BYTES_LABEL_CHANGED #/TestMessage/1"], True),
    "repeated int32 to optional": (P3 + "message TestMessage { repeated int32 a = 1; }",
                                   P2 + "message TestMessage { optional int32 a = 1; }",
                                   ["FIELD_NUMERIC_LABEL_CHANGED #/TestMessage/1"], False),
    "proto3 optional added (ours)": (MSG % "  int32 a = 2;\n", MSG % "  optional int32 a = 2;\n", [], True),
    "required field added": (P2 + "message TestMessage { optional string a = 1; }",
                             P2 + "message TestMessage { optional string a = 1; required string b = 2; }",
                             ["REQUIRED_FIELD_ADDED #/TestMessage/2"], False),
    "required field removed": (P2 + "message TestMessage { optional string a = 1; required string b = 2; }",
                               P2 + "message TestMessage { optional string a = 1; }",
                               ["REQUIRED_FIELD_REMOVED #/TestMessage/2"], False),
    "message added": (MSG % "", MSG % "" + "message TestMessage2 {}", ["MESSAGE_ADDED #/TestMessage2"], True),
    "message removed": (MSG % "" + "message TestMessage2 {}", MSG % "", ["MESSAGE_REMOVED #/TestMessage2"], False),
    "message added before": (MSG % "", P3 + "message TestMessage2 {}\n" + (MSG % "")[len(P3):],
                             ["MESSAGE_ADDED #/TestMessage2", "MESSAGE_MOVED #/TestMessage"], True),
    "messages swapped": (MSG % "" + "message TestMessage2 {}", P3 + "message TestMessage2 {}\n" + (MSG % "")[len(P3):],
                         ["MESSAGE_MOVED #/TestMessage2", "MESSAGE_MOVED #/TestMessage"], True),
    "nested field added": (P3 + "message Wrapper { message TestMessage { string a = 1; } }",
                           P3 + "message Wrapper { message TestMessage { string a = 1; string b = 2; } }",
                           ["FIELD_ADDED #/Wrapper/TestMessage/2"], True),
    "package changed": (P3 + "package foo; message TestMessage { string a = 1; }",
                        P3 + "package bar; message TestMessage { string a = 1; }", ["PACKAGE_CHANGED #/"], False),
    "enum const changed": (P3 + "enum Status { ACTIVE = 0; INACTIVE = 1; }",
                           P3 + "enum Status { ACTIVE = 0; DISABLED = 1; }", ["ENUM_CONST_CHANGED #/Status/1"], True),
    "enum const added (ours)": (P3 + "enum Status { ACTIVE = 0; }", P3 + "enum Status { ACTIVE = 0; GONE = 1; }",
                                ["ENUM_CONST_ADDED #/Status/1"], True),
    "enum const removed (ours)": (P3 + "enum Status { ACTIVE = 0; GONE = 1; }", P3 + "enum Status { ACTIVE = 0; }",
                                  ["ENUM_CONST_REMOVED #/Status/1"], True),
    "enum removed": (MSG % "  Status s = 2;\n" + "enum Status { A = 0; }", MSG % "  int32 s = 2;\n",
                     ["ENUM_REMOVED #/Status"], True),
    "field moved to new oneof": (MSG % "  string s2 = 2;\n",
                                 MSG % "  oneof new_oneof { string s2 = 2; string s3 = 3; }\n",
                                 ["ONEOF_ADDED #/TestMessage/new_oneof", "ONEOF_FIELD_ADDED #/TestMessage/new_oneof/3"],
                                 True),
    "fields moved to new oneof": (P3 + "message TestMessage { string a = 1; string b = 2; }",
                                  P3 + "message TestMessage { oneof new_oneof { string a = 1; string b = 2; "
                                       "string c = 3; } }",
                                  ["MULTIPLE_FIELDS_MOVED_TO_ONEOF #/TestMessage/new_oneof",
                                   "ONEOF_ADDED #/TestMessage/new_oneof",
                                   "ONEOF_FIELD_ADDED #/TestMessage/new_oneof/3"], False),
    "field moved to existing oneof": (MSG % "  oneof new_oneof { string b = 2; }\n  string c = 3;\n",
                                      MSG % "  oneof new_oneof { string b = 2; string c = 3; }\n",
                                      ["FIELD_MOVED_TO_EXISTING_ONEOF #/TestMessage/new_oneof"], False),
    "oneof field added": (MSG % ONEOF_B, MSG % ONEOF_BC, ["ONEOF_FIELD_ADDED #/TestMessage/o/3"], True),
    "oneof field removed": (MSG % ONEOF_BC, MSG % ONEOF_B, ["ONEOF_FIELD_REMOVED #/TestMessage/o/3"], False),
    "oneof renamed": (P3 + "message Message { oneof oldOneOf { string a = 1; int32 b = 2; } }",
                      P3 + "message Message { oneof renamedOneOf { string a = 1; int32 b = 2; } }",
                      ["ONEOF_REMOVED #/Message/oldOneOf", "ONEOF_ADDED #/Message/renamedOneOf"], True),
    "type change hidden by oneof rename": (P3 + "message Message { oneof oldOneOf { string a = 1; int32 b = 2; } }",
                                           P3 + "message Message { oneof renamedOneOf { string a = 1; "
                                                "string b = 2; } }",
                                           ["ONEOF_REMOVED #/Message/oldOneOf", "ONEOF_ADDED #/Message/renamedOneOf",
                                            "FIELD_SCALAR_KIND_CHANGED #/Message/renamedOneOf/2"], False),
    "oneof field moved to top level": (P3 + "message Message { oneof o { string a = 1; int32 b = 2; } }",
                                       P3 + "message Message { oneof o { string a = 1; } int32 b = 2; }",
                                       ["ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/Message/2"], True),
    "whole oneof removed (ours)": (P3 + "message Message { oneof o { string a = 1; int32 b = 2; } }",
                                   P3 + "message Message {}", ["ONEOF_REMOVED #/Message/o"], True),
}


@pytest.mark.parametrize(("old", "new", "expected", "compatible"), CASES.values(), ids=CASES.keys())
def test_schema_diff(old: str, new: str, expected: list[str], compatible: bool) -> None:
    assert diffs(old, new) == expected
    incompatible = [d.split()[0] for d in expected if d.split()[0] not in protobuf_diff.COMPATIBLE_CHANGES]
    messages = errors(old, new)
    assert [m.split('"')[1] for m in messages] == incompatible
    assert (not messages) is compatible


def test_compatible_changes_are_confluents() -> None:
    assert protobuf_diff.COMPATIBLE_CHANGES == {
        "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"}


def test_differences_in_javas_hash_order() -> None:
    """Confluent walks messages (and enum numbers) in java.util.HashSet order, and so do the
    messages it returns: here Java's String.hashCode puts "Zeta" before "Alpha"."""
    old = P3 + "message Alpha { int32 a = 1; } message Zeta { int32 a = 1; } message Mid {}"
    new = P3 + "message Alpha { string a = 1; } message Zeta { string a = 1; } message Mid {}"
    assert diffs(old, new) == ["FIELD_SCALAR_KIND_CHANGED #/Zeta/1", "FIELD_SCALAR_KIND_CHANGED #/Alpha/1"]
    old_enum = P3 + "enum E { A = 0; B = 16; C = 1; }"
    assert diffs(old_enum, P3 + "enum E { A = 0; }") == ["ENUM_CONST_REMOVED #/E/16", "ENUM_CONST_REMOVED #/E/1"]


GOOGLE = P3 + "package google;\nmessage GoogleHome { %s id = 1; }\n"


def test_referenced_type_changed() -> None:
    """Confluent's test ("Detect incompatible import change with different remote package
    nested name"): a change inside an imported message is reported at its own path, then as
    FIELD_NAMED_TYPE_CHANGED on the field that uses it."""
    text = P3 + 'import "google.proto";\nmessage TestMessage { google.GoogleHome home = 1; }\n'
    old_refs, new_refs = {"google.proto": GOOGLE % "string"}, {"google.proto": GOOGLE % "int32"}
    assert diffs(text, text, old_refs, new_refs) == [
        "FIELD_SCALAR_KIND_CHANGED #/GoogleHome/1", "FIELD_NAMED_TYPE_CHANGED #/TestMessage/1"]
    assert diffs(text, text, old_refs, old_refs) == []


def test_message_moved_to_a_reference() -> None:
    """Confluent's test ("Detect moving to import"): the message is gone from the schema."""
    old = P3 + "package google;\nmessage TestMessage { GoogleHome home = 1; }\nmessage GoogleHome { string id = 1; }\n"
    new = P3 + 'package google;\nimport "google.proto";\nmessage TestMessage { GoogleHome home = 1; }\n'
    assert diffs(old, new, {}, {"google.proto": GOOGLE % "string"}) == ["MESSAGE_REMOVED #/GoogleHome"]
    assert diffs(new, old, {"google.proto": GOOGLE % "string"}, {}) == ["MESSAGE_ADDED #/GoogleHome"]


def test_confluent_message_format() -> None:
    """Difference.toString(), the description filled as SchemaValidatorBuilder fills it."""
    old, new = MSG % "  int32 a = 2;\n", MSG % "  string a = 2;\n"
    path = "#/TestMessage/2"
    assert errors(old, new) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        f"'{path}' in the new schema does not match its kind in the old schema\"}}"]
    assert parse(old, {}).is_backward_compatible(parse(new, {}), reader="old", writer="new") == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        f"'{path}' in the old schema does not match its kind in the new schema\"}}"]
    assert parse(new, {}).compatibility_templates(parse(old, {})) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
        f"'{path}' in the %s schema does not match its kind in the %s schema\"}}"]


@pytest.mark.parametrize(("old", "new", "description"), [
    (MSG % "" + "message B {}", MSG % "", "The new schema is missing a MESSAGE type at path '#/B' in the old schema"),
    (P3 + "package a; message M {}", P3 + "package b; message M {}",
     "The package at '#/' in the new schema does not match the package in the old schema"),
    (P2 + "message M { optional int32 a = 1; }", P2 + "message M { optional int32 a = 1; required int32 b = 2; }",
     "A required field  at path '#/M/2' in the new schema is missing in the old schema"),
    (P3 + "message M { int32 a = 1; int32 b = 2; }", P3 + "message M { oneof o { int32 a = 1; int32 b = 2; } }",
     "Multiple fields in the oneof at path '#/M/o' in the new schema are outside a oneof in the old schema"),
])
def test_confluent_descriptions(old: str, new: str, description: str) -> None:
    assert [m.split('description:"')[1][:-2] for m in errors(old, new)] == [description]


def test_other_schema_type() -> None:
    class Other(ParsedSchema):
        schema_type = "AVRO"
        canonical_string = normalize = is_backward_compatible = None  # type: ignore[assignment]

    assert parse(MSG % "", {}).is_backward_compatible(Other()) == ["Incompatible because of different schema type"]


# --- confluent-kafka's serializer and deserializer ----------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def _user_classes() -> tuple[type, type]:
    """Generated-code-like classes for two files: common.proto (Address) and user.proto (User,
    importing it and google/protobuf/timestamp.proto), as protoc would describe them."""
    common = descriptor_pb2.FileDescriptorProto(name="krait/common.proto", package="krait.common", syntax="proto3")
    address = common.message_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="city")
    user = descriptor_pb2.FileDescriptorProto(name="krait/user.proto", package="krait.users", syntax="proto3",
                                              dependency=["krait/common.proto", "google/protobuf/timestamp.proto"])
    msg = user.message_type.add(name="User")
    msg.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="home", number=2, type=F.TYPE_MESSAGE, type_name=".krait.common.Address",
                  label=F.LABEL_OPTIONAL)
    msg.field.add(name="created", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                  label=F.LABEL_OPTIONAL)
    msg.field.add(name="labels", number=4, type=F.TYPE_MESSAGE, type_name=".krait.users.User.LabelsEntry",
                  label=F.LABEL_REPEATED)
    entry = msg.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.oneof_decl.add(name="_nick")
    msg.field.add(name="nick", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0,
                  proto3_optional=True)
    msg.field.add(name="role", number=6, type=F.TYPE_ENUM, type_name=".krait.users.Role", label=F.LABEL_OPTIONAL)
    role = user.enum_type.add(name="Role")
    role.value.add(name="ROLE_UNSPECIFIED", number=0)
    role.value.add(name="ADMIN", number=1)
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    pool.Add(common)
    pool.Add(user)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("krait.users.User")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("krait.common.Address")))


@pytest.fixture(scope="module")
def registry_url():
    port = free_port()
    b = BrokerProcess(overrides={"krait.schema.registry.listener": f"127.0.0.1:{port}"}).start()
    yield f"http://127.0.0.1:{port}"
    b.stop()


def test_confluent_kafka_serializer_schemas_parse(registry_url) -> None:
    """Confluent's ProtobufSerializer against Krait's registry: it registers base64
    FileDescriptorProtos (the import first, as its own subject, then the message's schema
    with a reference to it); the registry reads them as Confluent does and stores the
    canonical .proto text, and the deserializer, asking for format=serialized, reads the
    record back."""
    user_class, address_class = _user_classes()
    registry = SchemaRegistryClient({"url": registry_url})
    conf = {"use.deprecated.format": False, "subject.name.strategy": topic_subject_name_strategy}
    serializer = ProtobufSerializer(user_class, registry, conf)
    ctx = SerializationContext("users", MessageField.VALUE)
    user = user_class(name="ann", home=address_class(city="Oslo"), labels={"a": "b"}, nick="an", role=1)
    user.created.seconds = 7
    data = serializer(user, ctx)
    assert registry.get_subjects() == ["krait/common.proto", "users-value"]
    base64.b64decode(serializer._schema.schema_str, validate=True)  # what was registered is base64
    stored = call(f"{registry_url}/subjects/users-value/versions/1")[1]
    assert stored["references"] == [{"name": "krait/common.proto", "subject": "krait/common.proto", "version": 1}]
    assert stored["schema"] == P3 + """package krait.users;

import "krait/common.proto";
import "google/protobuf/timestamp.proto";

message User {
  string name = 1;
  .krait.common.Address home = 2;
  .google.protobuf.Timestamp created = 3;
  repeated .krait.users.User.LabelsEntry labels = 4;
  optional string nick = 5;
  .krait.users.Role role = 6;

  message LabelsEntry {
    option map_entry = true;
  \n    string key = 1;
    string value = 2;
  }
}
enum Role {
  ROLE_UNSPECIFIED = 0;
  ADMIN = 1;
}
"""
    deserializer = ProtobufDeserializer(user_class, conf, registry)
    assert deserializer(data, ctx) == user
    # and a new client, with nothing cached, reads it too
    fresh = SchemaRegistryClient({"url": registry_url})
    assert ProtobufDeserializer(user_class, conf, fresh)(data, ctx) == user


def test_serialized_format_round_trip() -> None:
    """format=serialized from .proto text (maps as entry messages, proto3 optional in a
    synthetic oneof, Confluent's meta options kept) is a FileDescriptorProto protobuf's
    runtime accepts, and reads back as the same schema."""
    text = P3 + """package shop;
import "confluent/meta.proto";
import "google/protobuf/timestamp.proto";
message Order {
  map<string, Item> items = 1;
  optional int64 total = 2 [(confluent.field_meta).tags = "PII"];
  google.protobuf.Timestamp at = 3;
  oneof pay { string card = 4; Kind kind = 5; }
  message Item { string sku = 1; }
  enum Kind { CASH = 0; }
}
"""
    schema = parse(text, {})
    proto = _str_to_proto("shop.proto", schema.formatted_string("serialized"))
    pool = descriptor_pool.DescriptorPool()
    _init_pool(pool)
    order = message_factory.GetMessageClass(pool.Add(proto).message_types_by_name["Order"])
    record = order(total=5, card="x")
    record.items["a"].sku = "s"
    assert order.FromString(record.SerializeToString()) == record
    back = parse(schema.formatted_string("serialized"), {})
    assert back.is_backward_compatible(schema) == [] and schema.is_backward_compatible(back) == []
    assert "(confluent.field_meta) = {\n    tags: [\n      \"PII\"" in back.canonical_string()
    assert back.normalize().canonical_string() == schema.normalize().canonical_string()


def test_serializer_schema_text_without_registry() -> None:
    """What ProtobufSerializer builds from a generated class (``_schema_to_str``) parses,
    given the file it imports."""
    user_class, _ = _user_classes()
    text = _schema_to_str(user_class.DESCRIPTOR.file)
    with pytest.raises(InvalidSchemaError, match="Could not resolve type: .krait.common.Address"):
        parse(text, {})
    common = _schema_to_str(user_class.DESCRIPTOR.file.dependencies[0])
    assert parse(text, {"krait/common.proto": common}).name() == "krait.users.User"


def test_ignore_extensions_format() -> None:
    text = (P3 + 'import "confluent/meta.proto";\nmessage M {\n'
            '  int32 a = 1 [(custom.opt) = 1, (confluent.field_meta).doc = "d", deprecated = true];\n}\n')
    assert parse(text, {}).formatted_string("ignore_extensions") == (
        P3 + '\nimport "confluent/meta.proto";\n\nmessage M {\n'
        '  int32 a = 1 [\n    (confluent.field_meta).doc = "d",\n    deprecated = true\n  ];\n}\n')
