"""Typed keys and values in kafka-segments reads (``valueFormat`` / ``keyFormat`` avro or
json with ``schema.registry.url``): the Avro and JSON Schema -> Spark type mapping, batch
decoding against fastavro (schema evolution, logical types, unions, broken records), the
registry client and Spark reads over a written log dir, both against Krait's own Schema
Registry (a broker serving it, schemas registered through its REST API; a SASL broker's for
basic auth), and the end to end test: records produced with confluent-kafka's
AvroSerializer through a Krait broker with its Schema Registry, read back typed by Spark."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import random
import struct
import urllib.request
from collections import Counter
from types import SimpleNamespace

import fastavro
import pyarrow as pa
import pytest

from spark_jobs.registry_client import (
    RegisteredSchema,
    RegistryClient,
    RegistryError,
    RegistryUnavailable,
    SchemaNotFound,
)
from spark_jobs.synth import PartitionWriter
from spark_jobs.typed_schema import avro_node, json_node
from spark_jobs.typed_values import TypedColumn, decode_column, wire_prefix
from tests.krait_harness import BrokerProcess, free_port
from tests.schema_registry.registry_http import call
from tests.security.secure_broker import ADMIN, ALICE, PLAIN_USERS, STANDARD_AUTHORIZER, plain_jaas

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "region", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "customer", "type": ["null", "string"], "default": None},
]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"],
                                   {"name": "channel", "type": "string", "default": "web"},
                                   {"name": "discount", "type": ["null", "double"], "default": None}]}
REGIONS = ("eu", "us", "ap", "sa")


def frame(schema_id: int, payload: bytes) -> bytes:
    return b"\0" + struct.pack(">I", schema_id) + payload


def avro_bytes(schema: dict, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def register(url: str, subject: str, schema: dict | str, schema_type: str = "AVRO", *,
             references: list[dict] | None = None, user: str | None = None) -> int:
    """Register a schema through the registry's REST API; the id the registry gives."""
    body: dict = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if references:
        body["references"] = references
    status, answer, _ = call(f"{url}/subjects/{subject}/versions", "POST", body, user=user)
    assert status == 200, (subject, status, answer)
    return answer["id"]


def _user(pair: tuple[str, str]) -> str:
    return f"{pair[0]}:{pair[1]}"


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    """A Krait broker serving its Schema Registry over plain http, without auth (shared by
    the tests of this module, each with its own subjects and topics)."""
    port = free_port()
    b = BrokerProcess(str(tmp_path_factory.mktemp("registry") / "logs"),
                      {"krait.schema.registry.listener": f"127.0.0.1:{port}"}).start()
    b.registry_url = f"http://127.0.0.1:{port}"
    yield b
    b.kill()


@pytest.fixture(scope="module")
def secured_registry(tmp_path_factory):
    """A Krait broker with a SASL_PLAINTEXT listener only (PLAIN users, no certificates) and
    an authorizer: its registry, on plain http, wants HTTP basic auth against those users on
    every request and lets only the super user (ADMIN) write."""
    port = free_port()
    b = BrokerProcess(str(tmp_path_factory.mktemp("secured-registry") / "logs"))
    b.overrides.update({
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:{ADMIN[0]}",
        "allow.everyone.if.no.acl.found": "true",
        "krait.schema.registry.listener": f"http://127.0.0.1:{port}",
    })
    b.start()
    b.registry_url = f"http://127.0.0.1:{port}"
    yield b
    b.kill()


@pytest.fixture(scope="module")
def orders_registry(registry_broker):
    """orders-value (ORDER_V1, then ORDER_V2) and events-value (a JSON Schema) registered in
    the plain broker's registry: its URL and the ids it gave."""
    url = registry_broker.registry_url
    v1 = register(url, "orders-value", ORDER_V1)
    v2 = register(url, "orders-value", ORDER_V2)
    events = register(url, "events-value", {"type": "object", "properties": {
        "user": {"type": "string"}, "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}, "meta": {}}}, "JSON")
    assert len({v1, v2, events}) == 3
    return SimpleNamespace(url=url, v1=v1, v2=v2, events=events, schemas={v1: ORDER_V1, v2: ORDER_V2})


def column(schema: dict | str, sid: int, fmt: str = "avro", subject: str = "t-value") -> TypedColumn:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    node = avro_node(text) if fmt == "avro" else json_node(text)
    return TypedColumn("value", fmt, subject, RegisteredSchema(text, fmt.upper(), id=sid, version=1), node)


# --- type mapping ---------------------------------------------------------------------------


def test_avro_types_map_as_spark_from_avro_maps_them():
    schema = {"type": "record", "name": "All", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "by", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {"name": "arr", "type": {"type": "array", "items": ["null", "int"]}},
        {"name": "m", "type": {"type": "map", "values": "F4"}},
        {"name": "opt", "type": ["null", "string"]}, {"name": "opt2", "type": ["long", "null"]},
        {"name": "il", "type": ["int", "long"]}, {"name": "fd", "type": ["null", "float", "double"]},
        {"name": "u", "type": ["null", "string", "E", {"type": "record", "name": "R", "fields": [
            {"name": "x", "type": "int"}]}]},
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ltms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
        {"name": "fdec", "type": {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal",
                                  "precision": 18, "scale": 0}},
        {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 60, "scale": 0}},
        {"name": "nested", "type": "R"},
    ]}
    got = avro_node(json.dumps(schema)).spark
    assert got.simpleString() == (
        "struct<b:boolean,i:int,l:bigint,f:float,d:double,s:string,by:binary,fx:binary,e:string,arr:array<int>,"
        "m:map<string,binary>,opt:string,opt2:bigint,il:bigint,fd:double,"
        "u:struct<member0:string,member1:string,member2:struct<x:int>>,date:date,tms:timestamp,tus:timestamp,"
        "ltms:timestamp_ntz,dec:decimal(9,3),fdec:decimal(18,0),uuid:string,tm:int,big:binary,nested:struct<x:int>>")
    nullable = {f.name: f.nullable for f in got.fields}
    assert [n for n, v in nullable.items() if v] == ["opt", "opt2", "fd", "u"]
    assert got["arr"].dataType.containsNull and not got["m"].dataType.valueContainsNull
    assert avro_node('"string"').spark.simpleString() == "string"  # a primitive value schema
    with pytest.raises(ValueError, match="recursive"):
        avro_node(json.dumps({"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}))


def test_avro_references_define_named_types():
    inner = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    outer = {"type": "record", "name": "Customer", "namespace": "shop",
             "fields": [{"name": "home", "type": "shop.Address"}, {"name": "work", "type": ["null", "Address"]}]}
    node = avro_node(json.dumps(outer), (("shop.Address", json.dumps(inner)),))
    assert node.spark.simpleString() == "struct<home:struct<city:string>,work:struct<city:string>>"


def test_json_schema_maps_properties():
    schema = {"type": "object", "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}}}},
              "properties": {
                  "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": ["null", "number"]},
                  "b": {"type": "boolean"}, "a": {"type": "array", "items": {"$ref": "#/$defs/pt"}},
                  "m": {"type": "object", "additionalProperties": {"type": "integer"}},
                  "any": {}, "one": {"oneOf": [{"type": "null"}, {"type": "string"}]},
                  "multi": {"type": ["string", "integer"]}, "e": {"enum": ["a", "b"]}}}
    assert json_node(json.dumps(schema)).spark.simpleString() == (
        "struct<s:string,i:bigint,n:double,b:boolean,a:array<struct<x:double>>,m:map<string,bigint>,any:string,"
        "one:string,multi:string,e:string>")


# --- decoding -----------------------------------------------------------------------------------


class StubRegistry:
    """The one method decode_column calls on a registry (``by_id``), answered from a dict,
    in process: it feeds the pure decoding tests below, which pass decode_column schemas
    and framed bytes directly (no HTTP; reads through HTTP use Krait's registry). It
    records the ids asked for, and raises SchemaNotFound for an id it does not hold."""

    def __init__(self, schemas: dict[int, tuple[dict | str, str]]):
        self.schemas = schemas
        self.calls: list[int] = []

    def by_id(self, sid: int) -> RegisteredSchema:
        self.calls.append(sid)
        if sid not in self.schemas:
            raise SchemaNotFound(404, 40403, "Schema not found", "stub")
        s, t = self.schemas[sid]
        return RegisteredSchema(s if isinstance(s, str) else json.dumps(s), t, id=sid)


def order(rng: random.Random, i: int, v2: bool) -> dict:
    r = {"id": i, "region": rng.choice(REGIONS), "qty": rng.randint(-5, 1000),
         "customer": None if rng.random() < 0.2 else f"c{rng.randint(0, 50)}"}
    if v2:
        r.update(channel=rng.choice(("web", "app", "shop")), discount=None if rng.random() < 0.5 else rng.random())
    return r


def test_decoding_matches_fastavro_with_schema_evolution():
    rng = random.Random(5)
    records, values = [], []
    for i in range(3000):
        v2 = rng.random() < 0.5
        rec = order(rng, i, v2)
        values.append(frame(2 if v2 else 1, avro_bytes(ORDER_V2 if v2 else ORDER_V1, rec)))
        records.append((v2, rec))
    reg = StubRegistry({1: (ORDER_V1, "AVRO"), 2: (ORDER_V2, "AVRO")})
    vals, ids, errors = decode_column(column(ORDER_V2, 2), reg, pa.array(values, pa.binary()))
    assert errors.null_count == len(values)
    assert ids.to_pylist() == [2 if v2 else 1 for v2, _ in records]
    reader = fastavro.parse_schema(ORDER_V2)
    expect = [fastavro.schemaless_reader(io.BytesIO(v[5:]), fastavro.parse_schema(ORDER_V2 if v2 else ORDER_V1),
                                         reader) for v, (v2, _) in zip(values, records, strict=True)]
    assert vals.to_pylist() == expect
    v1_rows = [r for r, (v2, _) in zip(vals.to_pylist(), records, strict=True) if not v2]
    assert {r["channel"] for r in v1_rows} == {"web"} and {r["discount"] for r in v1_rows} == {None}
    assert sorted(set(reg.calls)) == [1, 2] and len(reg.calls) == 2  # one lookup per id


def test_logical_types_unions_and_nesting():
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "atus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "fprice", "type": {"type": "fixed", "name": "P", "size": 5, "logicalType": "decimal",
                                    "precision": 10, "scale": 4}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"},
            {"name": "when", "type": {"type": "int", "logicalType": "date"}}]}}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "u", "type": ["string", "long", "Line", {"type": "enum", "name": "K", "symbols": ["A", "B"]}]},
    ]}
    utc = dt.UTC
    recs = [
        {"day": dt.date(2024, 2, 29), "at": dt.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=utc),
         "atus": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc), "price": decimal.Decimal("-0.01"),
         "fprice": decimal.Decimal("123.4567"), "lines": [{"sku": "a", "when": dt.date(1970, 1, 1)}],
         "attrs": {"x": 1, "y": None}, "u": "text"},
        {"day": dt.date(1900, 1, 1), "at": None, "atus": dt.datetime(2038, 1, 19, tzinfo=utc),
         "price": decimal.Decimal("9999999999.99"), "fprice": decimal.Decimal("-999999.9999"), "lines": [],
         "attrs": {}, "u": 7},
        {"day": dt.date(2000, 1, 1), "at": None, "atus": dt.datetime(2000, 1, 1, tzinfo=utc),
         "price": decimal.Decimal("0"), "fprice": decimal.Decimal("0.0001"), "lines": [], "attrs": {},
         "u": ("Line", {"sku": "s", "when": dt.date(2000, 1, 2)})},
        {"day": dt.date(2000, 1, 1), "at": None, "atus": dt.datetime(2000, 1, 1, tzinfo=utc),
         "price": decimal.Decimal("1.5"), "fprice": decimal.Decimal("1"), "lines": [], "attrs": {}, "u": ("K", "B")},
    ]
    values = [frame(3, avro_bytes(schema, r)) for r in recs]
    vals, _, errors = decode_column(column(schema, 3), StubRegistry({3: (schema, "AVRO")}), pa.array(values))
    assert errors.null_count == 4, errors
    got = vals.to_pylist()
    assert [g["day"] for g in got] == [r["day"] for r in recs]
    assert got[0]["at"] == recs[0]["at"] and got[1]["at"] is None
    assert [g["atus"] for g in got] == [r["atus"] for r in recs]
    assert [g["price"] for g in got] == [r["price"] for r in recs]
    assert [g["fprice"] for g in got] == [r["fprice"] for r in recs]
    assert got[0]["lines"] == [{"sku": "a", "when": dt.date(1970, 1, 1)}]
    assert got[0]["attrs"] == [("x", 1), ("y", None)]
    assert [g["u"] for g in got] == [
        {"member0": "text", "member1": None, "member2": None, "member3": None},
        {"member0": None, "member1": 7, "member2": None, "member3": None},
        {"member0": None, "member1": None, "member2": {"sku": "s", "when": dt.date(2000, 1, 2)}, "member3": None},
        {"member0": None, "member1": None, "member2": None, "member3": "B"}]
    assert vals.type == pa.struct([f for f in vals.type])  # one Arrow type, whatever the rows


def test_undecodable_records_are_null_with_the_reason():
    good = avro_bytes(ORDER_V1, {"id": 1, "region": "eu", "qty": 2, "customer": None})
    incompatible = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"}]}
    reg = StubRegistry({1: (ORDER_V1, "AVRO"), 2: (ORDER_V2, "AVRO"), 5: (incompatible, "AVRO"),
                        6: ({"type": "object"}, "JSON")})
    values = [
        frame(1, good),  # fine
        None,  # a tombstone: null, no error
        b"\x01" + good,  # wrong magic byte
        b"\x00\x00\x01",  # shorter than the prefix
        b"",  # empty
        frame(99, good),  # an id the registry does not know
        frame(1, good[:-2]),  # truncated payload
        frame(5, avro_bytes(incompatible, {"id": "x"})),  # the reader schema cannot resolve it
        frame(6, b"{}"),  # a JSON Schema id in an Avro read
        frame(1, good),
    ]
    vals, ids, errors = decode_column(column(ORDER_V2, 2), reg, pa.array(values, pa.binary()))
    v, i, e = vals.to_pylist(), ids.to_pylist(), errors.to_pylist()
    assert v[0]["id"] == 1 and v[0]["channel"] == "web" and e[0] is None and i[0] == 1
    assert v[9] == v[0]
    assert (v[1], i[1], e[1]) == (None, None, None)
    assert [x is None for x in v[2:9]] == [True] * 7
    assert i[2:9] == [None, None, None, 99, 1, 5, 6]
    assert "magic byte 0x01" in e[2]
    assert "3 bytes" in e[3] and "0 bytes" in e[4]
    assert "schema id 99 is not in the schema registry" in e[5]
    assert "truncated" in e[6]
    assert "schema id 5 cannot be read with the reader schema (t-value version 1)" in e[7]
    assert "JSON schema, not AVRO" in e[8]


def _random_flat_schemas(rng: random.Random) -> tuple[dict, dict]:
    """A flat reader schema and a writer schema it can read: fields reordered, dropped
    (they get defaults), added (the reader skips them), promoted."""
    kinds = ["boolean", "int", "long", "float", "double", "string", "bytes", "enum", "fixed", "date", "ts", "dec"]
    promotions = {"long": ["int"], "float": ["int", "long"], "double": ["int", "long", "float"], "string": ["bytes"],
                  "bytes": ["string"]}
    defaults = {"boolean": True, "int": -3, "long": 2**40, "float": 1.5, "double": -2.25, "string": "dflt",
                "bytes": "\u007f\u0000", "enum": "B", "fixed": "abc", "date": 19000, "ts": 1_700_000_000_000,
                "dec": "\u0001"}

    def typ(kind: str) -> object:
        return {"enum": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]},
                "fixed": {"type": "fixed", "name": "F", "size": 3},
                "date": {"type": "int", "logicalType": "date"},
                "ts": {"type": "long", "logicalType": "timestamp-millis"},
                "dec": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}}.get(kind, kind)

    reader_fields, writer_fields, named = [], [], set()
    for i in range(rng.randint(1, 9)):
        kind = rng.choice(kinds)
        if kind in ("enum", "fixed"):
            if kind in named:
                kind = "long"
            named.add(kind)
        nullable = rng.random() < 0.4
        rt = typ(kind)
        field = {"name": f"f{i}", "type": (["null", rt] if rng.random() < 0.5 else [rt, "null"]) if nullable else rt}
        wkind = rng.choice([kind, *promotions.get(kind, [])]) if rng.random() < 0.5 else kind
        wt = typ(wkind)
        wfield = {"name": f"f{i}", "type": (["null", wt] if rng.random() < 0.5 else [wt, "null"]) if nullable else wt}
        roll = rng.random()
        if roll < 0.15:  # the writer does not have it: the reader's default
            if nullable and field["type"][0] == "null":
                field["default"] = None
            else:
                field["default"] = defaults[kind] if not nullable else None
                if nullable:
                    field["type"] = [rt, "null"]
                    field["default"] = defaults[kind]
        else:
            writer_fields.append(wfield)
        reader_fields.append(field)
    for i in range(rng.randint(0, 2)):  # writer-only fields: skipped
        writer_fields.insert(rng.randint(0, len(writer_fields)), {"name": f"extra{i}", "type": rng.choice(
            ["long", "string", ["null", "double"], "boolean"])})
    rng.shuffle(writer_fields)
    return ({"type": "record", "name": "R", "fields": reader_fields},
            {"type": "record", "name": "R", "fields": writer_fields})


def _random_value(rng: random.Random, t: object) -> object:
    if isinstance(t, list):
        return None if rng.random() < 0.3 else _random_value(rng, next(x for x in t if x != "null"))
    if isinstance(t, dict):
        lt = t.get("logicalType")
        if lt == "date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 30000))
        if lt == "timestamp-millis":
            return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=rng.randint(-2**40, 2**42))
        if lt == "decimal":
            return decimal.Decimal(rng.randint(-10**15, 10**15)).scaleb(-3)
        if t["type"] == "enum":
            return rng.choice(t["symbols"])
        if t["type"] == "fixed":
            return rng.randbytes(3)
        t = t["type"]
    return {"boolean": lambda: rng.random() < 0.5, "int": lambda: rng.randint(-2**31, 2**31 - 1),
            "long": lambda: rng.randint(-2**63, 2**63 - 1), "float": lambda: float(rng.randint(-1000, 1000)) / 8,
            "double": lambda: rng.uniform(-1e300, 1e300), "string": lambda: "".join(rng.choice("aé€😀z") for _ in
                                                                                     range(rng.randint(0, 6))),
            "bytes": lambda: rng.randbytes(rng.randint(0, 5))}[t]()


def _plain_rows(arr: pa.StructArray) -> list[dict | None]:
    """Rows with dates and timestamps as their integers (a corrupted record may hold a
    date Python cannot represent, which Arrow and Spark can)."""
    cols = {}
    for i, f in enumerate(arr.type):
        c = arr.field(i)
        if pa.types.is_date32(f.type):
            c = c.view(pa.int32())
        elif pa.types.is_timestamp(f.type):
            c = c.view(pa.int64())
        cols[f.name] = c.to_pylist()
    valid = arr.is_valid().to_pylist()
    return [{k: v[i] for k, v in cols.items()} if valid[i] else None for i in range(len(arr))]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("seed", range(40))
def test_the_numba_kernel_agrees_with_fastavro(seed, monkeypatch):
    """Random flat schemas and evolutions, random records, some of them corrupted: the
    kernel decodes exactly what fastavro decodes (and refuses at least what it refuses)."""
    from spark_jobs import avro_kernel, typed_values

    rng = random.Random(seed)
    reader, writer = _random_flat_schemas(rng)
    col = column(reader, 2)
    assert avro_kernel.plan(writer, reader, list(typed_values._raw_type(
        col.node, typed_values._arrow_type(col.node)))) is not None, (reader, writer)
    values, corrupted = [], []
    parsed = fastavro.parse_schema(writer)
    for _ in range(300):
        rec = {f["name"]: _random_value(rng, f["type"]) for f in writer["fields"]}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        payload = bytearray(buf.getvalue())
        bad = rng.random() < 0.25
        if bad and payload:
            if rng.random() < 0.5:
                payload = payload[:rng.randrange(len(payload))]
            else:
                payload[rng.randrange(len(payload))] = rng.randrange(256)
        values.append(frame(1, bytes(payload)))
        corrupted.append(bad)
    reg = StubRegistry({1: (writer, "AVRO"), 2: (reader, "AVRO")})
    kv, _, ke = decode_column(col, reg, pa.array(values, pa.binary()))
    monkeypatch.setattr(typed_values._Decoder, "_plan", lambda self, w: None)
    fv, _, fe = decode_column(col, StubRegistry(reg.schemas), pa.array(values, pa.binary()))
    assert kv.type == fv.type
    for i, (k, f, kerr, ferr, bad) in enumerate(zip(_plain_rows(kv), _plain_rows(fv), ke.to_pylist(), fe.to_pylist(),
                                                    corrupted, strict=True)):
        if not bad:  # (bytes written, read as string: both refuse what is not UTF-8)
            assert (kerr is None) == (ferr is None) and _same(k, f), (i, k, f, kerr, ferr)
        elif kerr is None:
            assert ferr is None and _same(k, f), (i, k, f, kerr, ferr)


def test_json_values_are_shaped_to_the_schema():
    schema = {"type": "object", "properties": {"user": {"type": "string"}, "n": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"type": "string"}},
                                               "meta": {}}}
    values = [frame(7, json.dumps(x).encode()) for x in (
        {"user": "a", "n": 1, "tags": ["x"], "meta": {"k": [1, 2]}, "extra": True},
        {"user": "b"},
        {"user": "c", "n": "not a number"},
        [1, 2],
    )] + [frame(7, b"{not json")]
    vals, _, errors = decode_column(column(schema, 7, "json"), StubRegistry({7: (schema, "JSON")}), pa.array(values))
    v, e = vals.to_pylist(), errors.to_pylist()
    assert v[0] == {"user": "a", "n": 1, "tags": ["x"], "meta": '{"k":[1,2]}'} and e[0] is None
    assert v[1] == {"user": "b", "n": None, "tags": None, "meta": None} and e[1] is None
    assert v[2] is None and "does not fit" in e[2]
    assert v[3] is None and "does not fit" in e[3]
    assert v[4] is None and "not JSON" in e[4]


def test_wire_prefix_on_a_sliced_array():
    arr = pa.array([b"zz", frame(258, b"p"), None, frame(2**31 + 5, b"")], pa.binary()).slice(1)
    status, ids, *_ = wire_prefix(arr)
    assert status.tolist() == [1, 0, 1] and ids[0] == 258 and ids[2] == -(2**31) + 5


# --- the registry client --------------------------------------------------------------------------


def test_registry_client_failover_auth_references_and_errors(secured_registry, registry_broker, monkeypatch):
    """The client against Krait's registry: a first URL where nothing listens, then the
    secured registry (basic auth); a schema with a reference, registered with it; the
    registry's 404s and 401s as the client raises them."""
    url = secured_registry.registry_url
    inner = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    outer = {"type": "record", "name": "Customer", "fields": [{"name": "home", "type": "Address"}]}
    admin = _user(ADMIN)
    addr_id = register(url, "client-addr", inner, user=admin)
    cust_id = register(url, "client-cust", outer, user=admin,
                       references=[{"name": "Address", "subject": "client-addr", "version": 1}])
    assert addr_id != cust_id

    dead = f"http://127.0.0.1:{free_port()}"
    client = RegistryClient(f"{dead}, {url}/", _user(ALICE), attempts=1)
    latest = client.version("client-cust")
    assert (latest.id, latest.version, latest.schema_type, latest.subject) == (cust_id, 1, "AVRO", "client-cust")
    assert json.loads(latest.schema) == outer
    assert [(name, json.loads(text)) for name, text in latest.references] == [("Address", inner)]
    assert avro_node(latest.schema, latest.references).spark.simpleString() == "struct<home:struct<city:string>>"
    assert client.by_id(cust_id).references == latest.references
    # a schema by id is fetched once per process: count the requests the client sends
    sent = []
    urlopen = urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", lambda req, **kw: sent.append(req.full_url) or urlopen(req, **kw))
    assert client.by_id(cust_id) == client.by_id(cust_id) and sent == []
    assert client.by_id(addr_id).references == () and sent == [f"{url}/schemas/ids/{addr_id}"]
    # ids the registry never gave, a subject and a version it does not have
    with pytest.raises(SchemaNotFound) as exc:
        client.by_id(cust_id + 10_000)
    assert (exc.value.status, exc.value.error_code) == (404, 40403)
    with pytest.raises(SchemaNotFound) as exc:
        client.version("nope")
    assert exc.value.error_code == 40401
    with pytest.raises(SchemaNotFound) as exc:
        client.version("client-cust", 7)
    assert exc.value.error_code == 40402
    # a wrong password, no credentials: the registry's 401
    for user_info in (f"{ALICE[0]}:wrong", None):
        with pytest.raises(RegistryError, match="Unauthorized") as exc:
            RegistryClient(url, user_info).version("client-cust")
        assert (exc.value.status, exc.value.error_code) == (401, 401)
    # the unsecured registry needs none
    plain = RegistryClient(registry_broker.registry_url)
    with pytest.raises(SchemaNotFound):
        plain.version("client-cust")
    with pytest.raises(RegistryUnavailable):
        RegistryClient(dead, attempts=1).version("client-cust")
    with pytest.raises(ValueError, match="http"):
        RegistryClient("localhost:8081")


# --- Spark reads over a written log dir ---------------------------------------------------------------


def write_orders(log_dir: str, ids: tuple[int, int], n: int = 2000,
                 seed: int = 3) -> list[tuple[int, dict | None, bytes | None]]:
    """orders-0/1: v1 and v2 Avro values (framed with ``ids``, the registry's ids of
    ORDER_V1 and ORDER_V2), a few tombstones and broken values; returns (schema id or None,
    record, raw value) per record in (partition, offset) order."""
    rng = random.Random(seed)
    out = []
    for p in (0, 1):
        w = PartitionWriter(log_dir, "orders", p, segment_bytes=64 << 10)
        batch = []
        for i in range(n // 2):
            x = rng.random()
            if x < 0.02:
                sid, rec, value = None, None, None
            elif x < 0.04:
                sid, rec, value = None, None, b"{\"not\": \"avro\"}"
            else:
                v2 = x > 0.5
                rec = order(rng, p * n + i, v2)
                sid = ids[1] if v2 else ids[0]
                value = frame(sid, avro_bytes(ORDER_V2 if v2 else ORDER_V1, rec))
            key = f"k{i % 7}".encode()
            batch.append((key, value, []))
            out.append((sid, rec, value))
            if len(batch) == 50:
                w.append(batch, timestamp=1_700_000_000_000 + i)
                batch = []
        if batch:
            w.append(batch, timestamp=1_700_000_000_000)
        w.close()
    return out


def expected_orders(written: list, schemas: dict[int, dict]) -> list[dict | None]:
    reader = fastavro.parse_schema(ORDER_V2)
    out = []
    for sid, _, value in written:
        if sid is None:
            out.append(None)
        else:
            out.append(fastavro.schemaless_reader(io.BytesIO(value[5:]),
                                                  fastavro.parse_schema(schemas[sid]), reader))
    return out


def read(spark, log_dir: str, url: str, **opts: str):
    r = spark.read.format("kafka-segments").option("log.dirs", log_dir).option("schema.registry.url", url)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_spark_reads_typed_avro_values(spark, tmp_path, orders_registry):
    log_dir = str(tmp_path)
    written = write_orders(log_dir, (orders_registry.v1, orders_registry.v2))
    expected = expected_orders(written, orders_registry.schemas)
    df = read(spark, log_dir, orders_registry.url, subscribe="orders", valueFormat="avro")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                         "valueSchemaId", "valueError"]
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,region:string,qty:int,customer:string,channel:string,discount:double>"
    rows = df.orderBy("partition", "offset").collect()
    assert [r.value.asDict() if r.value else None for r in rows] == expected
    assert [r.valueSchemaId for r in rows] == [sid for sid, _, _ in written]
    broken = [r for r, (sid, _, v) in zip(rows, written, strict=True) if sid is None and v is not None]
    assert broken and all("magic byte 0x7b" in r.valueError for r in broken)
    assert all(r.valueError is None for r, (sid, _, _) in zip(rows, written, strict=True) if sid is not None)
    # a groupBy on a decoded field counts what fastavro decodes
    got = {r["region"]: r["count"] for r in df.groupBy("value.region").count().collect() if r["region"]}
    assert got == Counter(e["region"] for e in expected if e)
    # the same with a narrow schema given by the query (only what it names is decoded)
    narrow = spark.read.format("kafka-segments").schema(
        "offset long, value struct<id:bigint,region:string,qty:int,customer:string,channel:string,discount:double>,"
        " valueError string").option("log.dirs", log_dir).option("subscribe", "orders") \
        .option("valueFormat", "avro").option("schema.registry.url", orders_registry.url).load()
    assert narrow.where("valueError IS NOT NULL").count() == len(broken)
    assert narrow.where("value.channel = 'web'").count() == sum(
        1 for e in expected if e and e["channel"] == "web")
    # an older version as the reader schema
    v1 = read(spark, log_dir, orders_registry.url, subscribe="orders", valueFormat="avro", valueSchemaVersion="1")
    assert "channel" not in v1.schema["value"].dataType.fieldNames()
    assert v1.where("value IS NOT NULL").count() == sum(1 for sid, _, _ in written if sid)


def test_spark_typed_read_refusals(spark, tmp_path, orders_registry):
    log_dir = str(tmp_path)
    write_orders(log_dir, (orders_registry.v1, orders_registry.v2), n=20)
    with pytest.raises(Exception, match="has no version latest"):
        read(spark, log_dir, orders_registry.url, subscribe="orders", keyFormat="avro")
    with pytest.raises(Exception, match="valueFormat must be one of"):
        read(spark, log_dir, orders_registry.url, subscribe="orders", valueFormat="protobuf")
    with pytest.raises(Exception, match="is JSON"):
        read(spark, log_dir, orders_registry.url, subscribe="orders", valueFormat="avro",
             valueSubject="events-value")
    with pytest.raises(Exception, match="needs option schema.registry.url"):
        spark.read.format("kafka-segments").option("log.dirs", log_dir).option("valueFormat", "avro").load()
    with pytest.raises(Exception, match="has type struct"):
        spark.read.format("kafka-segments").schema("value binary").option("log.dirs", log_dir) \
            .option("valueFormat", "avro").option("schema.registry.url", orders_registry.url) \
            .option("subscribe", "orders").load().collect()


def test_spark_decodes_keys_too_with_basic_auth_and_shared_subjects(spark, tmp_path, secured_registry):
    """keyFormat: a primitive Avro key schema (a plain string column, not a struct);
    basic auth on the registry (a SASL broker's: its PLAIN users); two topics read with one
    subject when their subjects' latest schemas are the same, refused when they differ."""
    url, admin = secured_registry.registry_url, _user(ADMIN)
    string_id = register(url, "a-key", '"string"', user=admin)
    assert register(url, "b-key", '"string"', user=admin) == string_id  # one schema, one id
    long_id = register(url, "c-key", '"long"', user=admin)
    order_id = register(url, "a-value", ORDER_V1, user=admin)
    assert register(url, "b-value", ORDER_V1, user=admin) == order_id
    assert len({string_id, long_id, order_id}) == 3
    log_dir = str(tmp_path)
    for topic in ("a", "b", "c"):
        w = PartitionWriter(log_dir, topic, 0)
        w.append([(frame(long_id, avro_bytes("long", i)) if topic == "c" else
                   frame(string_id, avro_bytes("string", f"{topic}-{i}")),
                   frame(order_id, avro_bytes(ORDER_V1, {"id": i, "region": "eu", "qty": i, "customer": None})), [])
                  for i in range(10)], timestamp=1_700_000_000_000)
        w.close()
    auth = {"schema.registry.basic.auth.user.info": _user(ALICE)}  # a reader, not the super user
    df = read(spark, log_dir, url, subscribe="a,b", keyFormat="avro", valueFormat="avro", **auth)
    assert df.columns[-4:] == ["keySchemaId", "keyError", "valueSchemaId", "valueError"]
    assert df.schema["key"].dataType.simpleString() == "string"
    rows = df.orderBy("topic", "offset").collect()
    assert [r.key for r in rows] == [f"{t}-{i}" for t in "ab" for i in range(10)]
    assert {r.keySchemaId for r in rows} == {string_id} and [r.value.qty for r in rows] == list(range(10)) * 2
    with pytest.raises(Exception, match="different key schemas"):
        read(spark, log_dir, url, subscribe="a,c", keyFormat="avro", **auth)
    # keySubject: c's keys read with a-key's schema: its long keys do not resolve to a string
    c = read(spark, log_dir, url, subscribe="c", keyFormat="avro", keySubject="a-key", **auth).collect()
    assert len(c) == 10 and all(r.key is None and r.keySchemaId == long_id and f"schema id {long_id}" in r.keyError
                                for r in c), c[0]
    assert "cannot be read with the reader schema (a-key version 1)" in c[0].keyError
    with pytest.raises(Exception, match="Unauthorized"):
        read(spark, log_dir, url, subscribe="a", keyFormat="avro")


def test_spark_reads_json_values_and_streams(spark, tmp_path, orders_registry):
    log_dir = str(tmp_path / "logs")
    w = PartitionWriter(log_dir, "events", 0)
    events = [{"user": f"u{i % 3}", "n": i, "tags": ["a"] * (i % 3), "meta": {"i": i}} for i in range(30)]
    w.append([(None, frame(orders_registry.events, json.dumps(e).encode()), []) for e in events],
             timestamp=1_700_000_000_000)
    w.close()
    df = read(spark, log_dir, orders_registry.url, subscribe="events", valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == "struct<user:string,n:bigint,tags:array<string>,meta:string>"
    rows = df.orderBy("offset").collect()
    assert [r.value.asDict() for r in rows] == [{**e, "meta": json.dumps(e["meta"], separators=(",", ":"))}
                                                for e in events]
    # a stream decodes the same way
    out = tmp_path / "out"
    q = (spark.readStream.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", "events")
         .option("startingOffsets", "earliest").option("valueFormat", "json")
         .option("schema.registry.url", orders_registry.url).load()
         .selectExpr("value.user AS user", "value.n AS n", "valueSchemaId")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    got = spark.read.parquet(str(out)).orderBy("n").collect()
    assert [(r.user, r.n, r.valueSchemaId) for r in got] == [(e["user"], e["n"], orders_registry.events)
                                                             for e in events]


# --- end to end: Krait's broker and Schema Registry, Confluent's serializer, Spark -----------------------


def test_end_to_end_avro_two_versions_through_krait_registry(spark, registry_broker):
    """Avro values of two schema versions, produced with confluent-kafka's AvroSerializer
    through a Krait broker whose registry assigns the ids, read back by Spark as typed
    columns: v1 records show v2's defaults, a groupBy on a decoded field counts what
    fastavro decodes from the consumed bytes, and a value without the prefix is a null
    with the reason."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    b, topic, n = registry_broker, "orders-e2e", 4000
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    client = SchemaRegistryClient({"url": b.registry_url})
    ser = {1: AvroSerializer(client, json.dumps(ORDER_V1)), 2: AvroSerializer(client, json.dumps(ORDER_V2))}
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    rng = random.Random(11)
    sent = []
    for i in range(n):
        v = 1 if i < n // 4 or rng.random() < 0.4 else 2  # v1 first (it becomes version 1), then mixed
        rec = order(rng, i, v == 2)
        producer.produce(topic, key=str(i).encode(), value=ser[v](rec, ctx), partition=i % 2)
        sent.append((v, rec))
    producer.produce(topic, key=b"bad", value=b"plain text, no schema id", partition=0)
    producer.produce(topic, key=b"tombstone", value=None, partition=1)
    assert producer.flush(30) == 0
    v1_id = client.get_version(f"{topic}-value", 1).schema_id
    v2_id = client.get_latest_version(f"{topic}-value").schema_id
    assert v1_id != v2_id

    # what a consumer reads, decoded with fastavro: writer schema by id, reader = latest
    consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "e2e", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in (0, 1)])
    consumed = []
    try:
        idle = 0
        while len(consumed) < n + 2 and idle < 40:
            msgs = consumer.consume(1000, timeout=0.5)
            idle = 0 if msgs else idle + 1
            consumed += [m.value() for m in msgs if m.error() is None]
    finally:
        consumer.close()
    assert len(consumed) == n + 2
    reader = fastavro.parse_schema(json.loads(client.get_schema(v2_id).schema_str))
    writers = {i: fastavro.parse_schema(json.loads(client.get_schema(i).schema_str)) for i in (v1_id, v2_id)}
    decoded = [fastavro.schemaless_reader(io.BytesIO(v[5:]), writers[struct.unpack(">I", v[1:5])[0]], reader)
               for v in consumed if v and v[:1] == b"\0"]
    assert len(decoded) == n

    df = read(spark, b.log_dir, b.registry_url, subscribe=topic, valueFormat="avro", highWatermark="ignore")
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,region:string,qty:int,customer:string,channel:string,discount:double>"
    rows = {int(r.key): r for r in df.where("valueSchemaId IS NOT NULL").collect()}
    assert len(rows) == n
    for i, (v, rec) in enumerate(sent):
        r = rows[i]
        assert r.valueSchemaId == (v1_id if v == 1 else v2_id) and r.valueError is None
        want = rec if v == 2 else {**rec, "channel": "web", "discount": None}  # v1: v2's defaults
        assert r.value.asDict() == want
    by_region = {r["region"]: r["count"] for r in df.where("value IS NOT NULL").groupBy("value.region").count()
                 .collect()}
    assert by_region == Counter(d["region"] for d in decoded)
    by_channel = {r["channel"]: r["count"] for r in df.groupBy("value.channel").count().collect() if r["channel"]}
    assert by_channel == Counter(d["channel"] for d in decoded)
    bad = df.where("key = 'bad'").collect()[0]
    assert bad.value is None and bad.valueSchemaId is None and "magic byte 0x70" in bad.valueError
    tomb = df.where("key = 'tombstone'").collect()[0]
    assert (tomb.value, tomb.valueSchemaId, tomb.valueError) == (None, None, None)


def test_end_to_end_json_schema_through_krait_registry(spark, registry_broker):
    """JSON values written by confluent-kafka's JSONSerializer (Krait's registry assigns the
    id) read by Spark with valueFormat=json as the struct of the schema's properties."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    b, topic = registry_broker, "events-e2e"
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
              "properties": {"user": {"type": "string"}, "n": {"type": "integer"},
                             "score": {"type": ["null", "number"]},
                             "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["user", "n"]}
    client = SchemaRegistryClient({"url": b.registry_url})
    ser = JSONSerializer(json.dumps(schema), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    events = [{"user": f"u{i % 4}", "n": i, "score": None if i % 3 else i / 2, "tags": ["x"] * (i % 2)}
              for i in range(200)]
    producer = ck.Producer({"bootstrap.servers": b.bootstrap})
    for e in events:
        producer.produce(topic, value=ser(e, ctx))
    assert producer.flush(30) == 0
    sid = client.get_latest_version(f"{topic}-value").schema_id
    df = read(spark, b.log_dir, b.registry_url, subscribe=topic, valueFormat="json", highWatermark="ignore")
    assert df.schema["value"].dataType.simpleString() == "struct<user:string,n:bigint,score:double,tags:array<string>>"
    rows = df.orderBy("offset").collect()
    assert [r.value.asDict() for r in rows] == events
    assert {r.valueSchemaId for r in rows} == {sid} and all(r.valueError is None for r in rows)
    assert {r["user"]: r["count"] for r in df.groupBy("value.user").count().collect()} == \
        Counter(e["user"] for e in events)
