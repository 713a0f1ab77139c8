"""The decoded table modes, pure (no broker, no sockets): Avro and JSON Schema values of two
schema versions into columns, the table's schema evolving, every kind of bad input to the
DLQ table, exactly-once across the two tables through a crash between their commits, mode
changes on one table, and the decode rate."""

from __future__ import annotations

import io
import json
import struct
import time

import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_writer

from protocol.records import build_batch
from tables.catalog import open_catalog, table_identifier
from tables.decoded import RegistrySchema, ValueDecoder, base_schema
from tables.modes import KEY_VALUE, VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST
from tables.records import region_to_arrow
from tables.topic_table import TopicTable
from tables.writer import snapshot_offsets

TS = 1_700_000_000_000

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "region", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}},
    {"name": "offset", "type": "int"},  # a metadata column's name: becomes value_offset
]}
# v2: an optional top-level field and an optional nested one (BACKWARD compatible)
ORDER_V2 = {**ORDER_V1, "fields": [
    *ORDER_V1["fields"][:4],
    {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}},
    ORDER_V1["fields"][5],
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "counts", "type": {"type": "map", "values": "long"}, "default": {}},
]}
# region as an int: cannot be a string column's
ORDER_CLASH = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "region", "type": "int"}]}
USER_JSON = {"type": "object", "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    "attrs": {"type": "object", "additionalProperties": {"type": "string"}},
    "extra": {},
}}
USER_JSON_V2 = {**USER_JSON, "properties": {**USER_JSON["properties"], "score": {"type": ["number", "null"]}}}


class Registry:
    """A SchemaSource over dicts."""

    def __init__(self) -> None:
        self.by_id: dict[int, RegistrySchema] = {}
        self.subjects: dict[str, list[int]] = {}

    def add(self, schema_id: int, schema: dict | str, schema_type: str = "AVRO", subject: str | None = None) -> int:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        self.by_id[schema_id] = RegistrySchema(schema_type, text)
        if subject:
            self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id

    def schema_by_id(self, schema_id: int) -> RegistrySchema | None:
        return self.by_id.get(schema_id)

    def latest_id(self, subject: str) -> int | None:
        ids = self.subjects.get(subject)
        return ids[-1] if ids else None

    def max_id(self) -> int:
        return max(self.by_id, default=0)


def avro(schema: dict, value: dict, schema_id: int | None = None) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), value)
    return buf.getvalue() if schema_id is None else b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def json_value(value: object, schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + json.dumps(value).encode()


def order(i: int, v2: bool = False) -> dict:
    o = {"id": i, "region": f"r{i % 3}", "amount": i * 1.5, "tags": [f"t{i}"], "addr": {"city": f"c{i}"},
         "offset": -i}
    if v2:
        o["addr"]["zip"] = f"z{i}"
        o["note"] = f"n{i}"
        o["counts"] = {"a": i}
    return o


def region(partition: int, values: list[bytes | None], start: int = 0):
    batch = build_batch([(b"k%d" % (start + i), v, [("h", b"x")]) for i, v in enumerate(values)],
                        base_offset=start, timestamp=[TS + (start + i) * 1000 for i in range(len(values))])
    return region_to_arrow(batch, partition, start_offset=start)


def rows_of(writer) -> list[dict]:
    return writer.refresh().scan().to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")]).to_pylist()


@pytest.fixture
def catalog(tmp_path):
    return open_catalog(str(tmp_path / "logs"))


def test_avro_two_versions_evolve_the_table(catalog):
    reg = Registry()
    reg.add(1, ORDER_V1, subject="orders-value")
    reg.add(2, ORDER_V2, subject="orders-value")
    t = TopicTable(catalog, "orders", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [avro(ORDER_V1, order(i), 1) for i in range(5)] + [None])
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 6}
    schema1 = t.main.table.schema()
    assert [f.name for f in schema1.fields] == ["partition", "offset", "timestamp", "timestamp_type", "key",
                                                "headers", "id", "region", "amount", "tags", "addr", "value_offset"]
    assert all(not f.required for f in schema1.fields[6:])
    ids1 = {n: schema1.find_field(n).field_id for n in ("id", "region", "addr", "addr.city", "value_offset")}
    got = rows_of(t.main)
    assert [(g["offset"], g["id"], g["region"], g["addr"], g["value_offset"]) for g in got[:2]] == [
        (0, 0, "r0", {"city": "c0"}, 0), (1, 1, "r1", {"city": "c1"}, -1)]
    assert got[3]["tags"] == ["t3"] and got[3]["amount"] == 4.5 and got[3]["key"] == b"k3"
    assert got[3]["headers"] == [{"key": "h", "value": b"x"}]
    tomb = got[5]
    assert tomb["offset"] == 5 and tomb["id"] is None and tomb["key"] == b"k5"  # a tombstone: a row, no error
    # v2 records and v1 records mixed: the table gains note, counts and addr.zip, ids kept
    vals = [avro(ORDER_V2, order(i, v2=True), 2) if i % 2 else avro(ORDER_V1, order(i), 1) for i in range(6, 10)]
    r = region(0, vals, start=6)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 10}
    schema2 = t.main.refresh().schema()
    assert {n: schema2.find_field(n).field_id for n in ids1} == ids1
    assert [f.name for f in schema2.fields][-2:] == ["note", "counts"]
    assert schema2.find_field("addr.zip").required is False
    got = rows_of(t.main)
    assert len(got) == 10
    assert (got[6]["note"], got[6]["addr"]) == (None, {"city": "c6", "zip": None})
    assert (got[7]["note"], got[7]["addr"], got[7]["counts"]) == ("n7", {"city": "c7", "zip": "z7"}, [("a", 7)])
    assert got[0]["note"] is None  # rows written before the column existed
    assert not catalog.table_exists(table_identifier("orders~dlq"))  # nothing went wrong
    # the next commit with the same schemas changes nothing in the schema
    r = region(0, [avro(ORDER_V2, order(10, v2=True), 2)], start=10)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    assert t.main.refresh().schema() == schema2


def test_json_schema_values_two_versions(catalog):
    reg = Registry()
    reg.add(7, USER_JSON, "JSON")
    reg.add(8, USER_JSON_V2, "JSON")
    t = TopicTable(catalog, "users", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    v1 = {"id": 1, "name": "ann", "items": [{"sku": "a", "qty": 2}], "attrs": {"x": "y"}, "extra": {"any": [1]},
          "ignored": True}
    v2 = {"id": 2, "name": "bob", "items": [], "score": 2.5}
    bad = {"id": "three", "name": "cy"}  # id is not an integer
    r = region(3, [json_value(v1, 7), json_value(v2, 8), json_value(bad, 7), json_value({"id": 1.5}, 7)])
    assert t.append({3: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {3: 4}
    got = rows_of(t.main)
    assert len(got) == 2
    assert {k: got[0][k] for k in ("partition", "id", "name", "items", "attrs", "extra", "score")} == {
        "partition": 3, "id": 1, "name": "ann", "items": [{"sku": "a", "qty": 2}], "attrs": [("x", "y")],
        "extra": '{"any":[1]}', "score": None}
    assert (got[1]["id"], got[1]["score"], got[1]["items"]) == (2, 2.5, [])
    dlq = rows_of(t.dlq)
    assert [(d["offset"], d["error"]) for d in dlq] == [
        (2, 'the value does not match its schema: "three" is not an integer'),
        (3, "the value does not match its schema: 1.5 is not an integer")]
    assert dlq[0]["value"] == json_value(bad, 7)


def test_every_kind_of_bad_input_goes_to_the_dlq(catalog):
    reg = Registry()
    reg.add(1, ORDER_V1)
    reg.add(3, ORDER_CLASH)
    reg.add(4, 'syntax = "proto3"; message M { int32 a = 1; } message N { string b = 1; }', "PROTOBUF")
    # a recursive record: no Iceberg type
    reg.add(5, {"type": "record", "name": "U", "fields": [{"name": "next", "type": ["null", "U"]}]})
    good = avro(ORDER_V1, order(0), 1)
    values = [
        good,
        b"plain text",  # no magic byte
        b"\x00\x00\x01",  # shorter than the prefix
        b"\x00" + struct.pack(">I", 99) + b"\x02",  # an id the registry does not have
        b"\x00" + struct.pack(">I", 1) + b"\xff\xff\xff",  # bytes that are not an Order
        good + b"\x00",  # trailing bytes
        avro(ORDER_CLASH, {"id": 1, "region": 5}, 3),  # region int: clashes with the string column
        b"\x00" + struct.pack(">I", 4) + b"\x02\x0a\x0a\x01x",  # Protobuf message indexes [5]: no such message
        avro({"type": "record", "name": "U", "fields": [{"name": "next", "type": ["null", "U"]}]}, {"next": None}, 5),
        good,
    ]
    t = TopicTable(catalog, "shop.orders", reg, mode=VALUE_SCHEMA_ID_PREFIX, grace_s=0)
    # the clashing schema must meet a table that has region as a string: commit the good one first
    r = region(0, values[:1])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    r = region(0, values[1:], start=1)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 10}
    assert [g["offset"] for g in rows_of(t.main)] == [0, 9]
    dlq = rows_of(t.dlq)
    assert t.dlq.identifier == ("krait", "shop_orders~dlq")
    errors = {d["offset"]: d["error"] for d in dlq}
    assert sorted(errors) == list(range(1, 9))
    assert "magic byte" in errors[1]
    assert "shorter than" in errors[2]
    assert errors[3] == "schema id 99 is not in the schema registry"
    assert "cannot be decoded" in errors[4]
    assert "bytes left after the Avro value" in errors[5]
    assert errors[6] == "schema id 3 does not fit the table: column region is string in the table, int in the " \
                        "record's schema"
    assert "message indexes [5] name no message of the Protobuf schema" in errors[7]
    assert "recursive" in errors[8]
    assert {d["offset"]: d["value"] for d in dlq}[1] == b"plain text"
    assert all(d["key"] == b"k%d" % d["offset"] and d["partition"] == 0 for d in dlq)
    assert snapshot_offsets(t.dlq.table) == {0: 10}
    # a schema registered later decodes the records that come after it
    reg.add(99, ORDER_V1)
    r = region(0, [b"\x00" + struct.pack(">I", 99) + avro(ORDER_V1, order(1))], start=10)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    assert [g["offset"] for g in rows_of(t.main)] == [0, 9, 10]


def test_an_id_above_the_registrys_highest_is_held_back_for_a_while(catalog):
    """A follower's replica of _schemas may not have a new registration yet: records of an
    id above the highest it knows wait (the region ends before them) for grace_s, then go
    to the DLQ; an id at or below it goes at once."""
    reg = Registry()
    reg.add(1, ORDER_V1)
    reg.add(3, ORDER_V1)
    now = [100.0]
    t = TopicTable(catalog, "late", reg, mode=VALUE_SCHEMA_ID_PREFIX, grace_s=10)
    t.decoder.clock = lambda: now[0]
    vals = [avro(ORDER_V1, order(0), 1), avro(ORDER_V1, order(1), 2), avro(ORDER_V1, order(2), 4),
            avro(ORDER_V1, order(3), 1)]
    r = region(0, vals)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 2}
    # id 2 (below the highest, 3) went to the DLQ at once; id 4 holds the region at offset 2
    assert [g["offset"] for g in rows_of(t.main)] == [0]
    assert [(d["offset"], d["error"]) for d in rows_of(t.dlq)] == [(1, "schema id 2 is not in the schema registry")]
    now[0] += 5
    r = region(0, vals[2:], start=2)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) is None  # still waiting
    reg.add(4, ORDER_V1)  # the replica catches up
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 4}
    assert [g["offset"] for g in rows_of(t.main)] == [0, 2, 3]
    # an id that never comes: the DLQ once the grace is over, and the topic goes on
    r = region(0, [avro(ORDER_V1, order(4), 9), avro(ORDER_V1, order(5), 1)], start=4)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) is None
    now[0] += 11
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 6}
    assert [d["offset"] for d in rows_of(t.dlq)] == [1, 4]
    assert [g["offset"] for g in rows_of(t.main)] == [0, 2, 3, 5]


def test_avro_general_unions_become_structs_of_their_members(catalog):
    point = {"type": "record", "name": "Point", "namespace": "geo", "fields": [{"name": "x", "type": "int"}]}
    schema = {"type": "record", "name": "Shape", "namespace": "geo", "fields": [
        {"name": "v", "type": ["null", "int", "string", point, {"type": "array", "items": "long"}]},
        {"name": "opt", "type": ["null", "Point"]},  # a nullable named type: read as (name, value) here
        {"name": "m", "type": {"type": "map", "values": ["null", "string", "Point"]}},
        {"name": "color", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["R", "G"]}, "string"]},
    ]}
    reg = Registry()
    reg.add(1, schema)
    values = [
        {"v": 7, "opt": {"x": 1}, "m": {"a": "s", "b": {"x": 2}, "c": None}, "color": "G"},
        {"v": "seven", "opt": None, "m": {}, "color": None},
        {"v": {"x": 3}, "opt": None, "m": {}, "color": "G"},
        {"v": [1, 2], "opt": None, "m": {}, "color": None},
        {"v": None, "opt": None, "m": {}, "color": None},
    ]
    # a string and an enum symbol differ on the wire only: write one of each explicitly
    values[2]["color"] = ("geo.Color", "G")
    values[0]["color"] = "plain"
    t = TopicTable(catalog, "shapes", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [avro(schema, v, 1) for v in values])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    v_type = t.main.table.schema().find_field("v").field_type
    assert [f.name for f in v_type.fields] == ["int", "string", "Point", "array"]
    got = rows_of(t.main)
    assert [g["v"] for g in got] == [
        {"int": 7, "string": None, "Point": None, "array": None},
        {"int": None, "string": "seven", "Point": None, "array": None},
        {"int": None, "string": None, "Point": {"x": 3}, "array": None},
        {"int": None, "string": None, "Point": None, "array": [1, 2]},
        None]
    assert got[0]["opt"] == {"x": 1} and got[1]["opt"] is None
    assert got[0]["m"] == [("a", {"string": "s", "Point": None}), ("b", {"string": None, "Point": {"x": 2}}),
                           ("c", None)]
    assert [g["color"] for g in got[:3]] == [{"Color": None, "string": "plain"}, None,
                                             {"Color": "G", "string": None}]
    assert not catalog.table_exists(table_identifier("shapes~dlq"))


def test_value_schema_latest_decodes_bare_payloads_with_the_subjects_latest(catalog):
    reg = Registry()
    t = TopicTable(catalog, "events", reg, mode=VALUE_SCHEMA_LATEST)
    r = region(0, [avro(ORDER_V1, order(0))])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)  # no subject yet: DLQ
    assert [d["error"] for d in rows_of(t.dlq)] == ["subject events-value has no schema in the registry"]
    reg.add(11, ORDER_V1, subject="events-value")
    r = region(0, [avro(ORDER_V1, order(1)), avro(ORDER_V1, order(2), 11)], start=1)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)
    got = rows_of(t.main)
    assert [g["id"] for g in got] == [1]  # the prefixed one is not a bare Order
    assert [d["offset"] for d in rows_of(t.dlq)] == [0, 2]
    reg.add(12, ORDER_V2, subject="events-value")
    r = region(0, [avro(ORDER_V2, order(3, v2=True))], start=3)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)
    assert rows_of(t.main)[-1]["note"] == "n3"


def test_exactly_once_across_a_crash_between_the_two_commits(catalog):
    reg = Registry()
    reg.add(1, ORDER_V1)
    mode = VALUE_SCHEMA_ID_PREFIX
    vals = [avro(ORDER_V1, order(i), 1) if i % 3 else b"bad%d" % i for i in range(30)]
    r0, r1 = region(0, vals[:20]), region(1, vals[20:])
    t = TopicTable(catalog, "crashy", reg, mode=mode)
    r = region(0, vals[:3])
    t.append({0: (r.table, r.next_offset)}, mode)  # one of each before the crash
    assert t.committed_offsets() == {0: 3} and snapshot_offsets(t.dlq.table) == {0: 3}

    def crash(*a, **k):
        raise RuntimeError("SIGKILL between the DLQ commit and the main commit")

    t.main.append = crash
    with pytest.raises(RuntimeError):
        t.append({0: (r0.table, r0.next_offset), 1: (r1.table, r1.next_offset)}, mode)
    # the DLQ table moved, the main table did not
    assert snapshot_offsets(t.dlq.refresh()) == {0: 20, 1: 10}
    assert t.committed_offsets() == {0: 3}
    # a restart: new writers, the log read again from the main table's offsets, further this time
    t2 = TopicTable(catalog, "crashy", reg, mode=mode)
    start = t2.committed_offsets()
    assert start == {0: 3}
    more = [avro(ORDER_V1, order(i), 1) if i % 3 else b"bad%d" % i for i in range(30, 36)]
    r0b = region(0, vals[3:20] + more, start=3)
    r1b = region(1, vals[20:])
    assert t2.append({0: (r0b.table, r0b.next_offset), 1: (r1b.table, r1b.next_offset)}, mode) == {0: 26, 1: 10}
    main = [(g["partition"], g["offset"]) for g in rows_of(t2.main)]
    dlq = [(d["partition"], d["offset"]) for d in rows_of(t2.dlq)]
    assert len(main) == len(set(main)) and len(dlq) == len(set(dlq))  # nothing twice
    assert sorted(main + dlq) == sorted([(0, o) for o in range(26)] + [(1, o) for o in range(10)])  # no gap
    assert dlq == [(0, o) for o in (*range(0, 20, 3), 20, 23)] + [(1, o) for o in range(10) if (o + 20) % 3 == 0]
    # and a retry of what is all committed changes nothing
    assert t2.append({0: (r0b.table, r0b.next_offset)}, mode) is None


def test_mode_changes_on_one_table(catalog):
    reg = Registry()
    reg.add(1, ORDER_V1)
    t = TopicTable(catalog, "switch", reg, mode=KEY_VALUE)
    r = region(0, [avro(ORDER_V1, order(0), 1)])
    t.append({0: (r.table, r.next_offset)}, KEY_VALUE)
    assert "id" not in t.main.table.schema().column_names
    r = region(0, [avro(ORDER_V1, order(1), 1)], start=1)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    got = rows_of(t.main)
    # key_value -> decoded: the decoded columns are added, the value column kept and filled
    assert [(g["id"], g["value"] is not None) for g in got] == [(None, True), (1, True)]
    # a table created decoded has no value column; key_value adds it
    t2 = TopicTable(catalog, "switch2", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    assert "value" not in t2.main.table.schema().column_names
    t2.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [b"raw"], start=2)
    t2.append({0: (r.table, r.next_offset)}, KEY_VALUE)
    got = rows_of(t2.main)
    assert [(g["offset"], g["id"], g["value"]) for g in got] == [(1, 1, None), (2, None, b"raw")]
    assert base_schema().find_field("offset").field_id == 2


def test_decode_rate():
    """The records/s figure of tables.decoded's module doc (a floor here, the figure printed)."""
    reg = Registry()
    reg.add(1, ORDER_V1)
    n = 100_000
    vals = [avro(ORDER_V1, order(i), 1) for i in range(2000)] * (n // 2000)
    rows = region_to_arrow(b"".join(build_batch([(b"k", v) for v in vals[b:b + 500]], base_offset=b)
                                    for b in range(0, n, 500)), 0).table
    dec = ValueDecoder("t", reg)
    dec.decode(rows.slice(0, 100), base_schema(), VALUE_SCHEMA_ID_PREFIX)
    t0 = time.perf_counter()
    got = dec.decode(rows, base_schema(), VALUE_SCHEMA_ID_PREFIX)
    avro_rate = n / (time.perf_counter() - t0)
    assert got.rows.num_rows == n and got.dlq.num_rows == 0
    reg.add(7, USER_JSON, "JSON")
    jvals = [json_value({"id": i, "name": "n", "items": [{"sku": "s", "qty": 1}], "attrs": {"a": "b"}}, 7)
             for i in range(2000)] * (n // 2000)
    jrows = rows.set_column(5, "value", pa.array(jvals, pa.binary()))
    t0 = time.perf_counter()
    got = dec.decode(jrows, base_schema(), VALUE_SCHEMA_ID_PREFIX)
    json_rate = n / (time.perf_counter() - t0)
    assert got.rows.num_rows == n
    reg.add(21, ORDER_PROTO, "PROTOBUF")
    cls = proto_class(ORDER_PROTO)
    pvals = []
    for i in range(2000):
        m = cls(id=i, region="eu", tags=["a", "b"], counts={"n": i}, kind=1)
        m.addr.city = "Oslo"
        pvals.append(b"\x00" + struct.pack(">I", 21) + b"\x00" + m.SerializeToString())
    prows = rows.set_column(5, "value", pa.array(pvals * (n // 2000), pa.binary()))
    t0 = time.perf_counter()
    got = dec.decode(prows, base_schema(), VALUE_SCHEMA_ID_PREFIX)
    proto_rate = n / (time.perf_counter() - t0)
    assert got.rows.num_rows == n
    print(f"decode: Avro {avro_rate:,.0f} records/s, JSON {json_rate:,.0f} records/s, "
          f"Protobuf {proto_rate:,.0f} records/s")
    assert avro_rate > 20_000 and json_rate > 10_000 and proto_rate > 10_000


ORDER_PROTO = '''syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string region = 2;
  repeated string tags = 3;
  map<string, int64> counts = 4;
  Addr addr = 5;
  Kind kind = 6;
  google.protobuf.Timestamp at = 7;
  uint64 big = 8;
  message Addr { string city = 1; }
  enum Kind { PLAIN = 0; RUSH = 1; }
}
'''
ORDER_PROTO_V2 = ORDER_PROTO.replace("  uint64 big = 8;", "  uint64 big = 8;\n  optional string note = 9;")


def proto_class(text: str):
    """The message class of a schema's first message, as a producer would have it."""
    import base64

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from schema_registry.protobuf import parse
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(parse(text, {}).formatted_string("serialized")))
    fdp.name = "test.proto"
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName("google/protobuf/timestamp.proto").CopyToProto(ts)
    pool.Add(ts)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_values_into_columns(catalog):
    reg = Registry()
    reg.add(21, ORDER_PROTO, "PROTOBUF", subject="pb-value")
    reg.add(22, ORDER_PROTO_V2, "PROTOBUF", subject="pb-value")
    v1, v2 = proto_class(ORDER_PROTO), proto_class(ORDER_PROTO_V2)
    a = v1(id=1, region="eu", tags=["x", "y"], counts={"n": 3}, kind=1, big=2**63 - 1)
    a.addr.city = "Oslo"
    a.at.seconds = 1_700_000_000
    b = v2(id=2, note="hi")  # proto3 defaults for the rest, no addr
    too_big = v1(id=3, big=2**64 - 1)  # uint64 past a long
    prefix = b"\x00" + struct.pack(">I", 21) + b"\x00"
    t = TopicTable(catalog, "pb", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [prefix + a.SerializeToString(),
                   b"\x00" + struct.pack(">I", 22) + b"\x00" + b.SerializeToString(),
                   prefix + too_big.SerializeToString(),
                   prefix + b"\xff\xff\xff"])
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 4}
    got = rows_of(t.main)
    assert [f.name for f in t.main.table.schema().fields][6:] == ["id", "region", "tags", "counts", "addr", "kind",
                                                                  "at", "big", "note"]
    assert {k: got[0][k] for k in ("id", "region", "tags", "counts", "addr", "kind", "at", "big", "note")} == {
        "id": 1, "region": "eu", "tags": ["x", "y"], "counts": [("n", 3)], "addr": {"city": "Oslo"},
        "kind": "RUSH", "at": {"seconds": 1_700_000_000, "nanos": 0}, "big": 2**63 - 1, "note": None}
    assert (got[1]["id"], got[1]["region"], got[1]["addr"], got[1]["kind"], got[1]["note"]) == (2, "", None,
                                                                                                "PLAIN", "hi")
    errors = {d["offset"]: d["error"] for d in rows_of(t.dlq)}
    assert sorted(errors) == [2, 3]
    assert "does not fit its columns" in errors[2] and "cannot be decoded" in errors[3]
    # value_schema_latest: the bare payload, no prefix and no message indexes
    r = region(0, [a.SerializeToString()], start=4)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)
    assert rows_of(t.main)[-1]["id"] == 1


def test_protobuf_values_of_other_messages_than_the_first(catalog):
    """Confluent's serializer names the value's message by its index path in the file: [1]
    the second top-level message, [1, 0] the first one nested in it. Each is decoded as that
    message; its fields join the table's columns as another schema's would."""
    text = ('syntax = "proto3"; package p;\n'
            "message First { int32 a = 1; }\n"
            "message Second { string b = 1; message Inner { int64 c = 1; } Inner inner = 2; }\n")
    reg = Registry()
    reg.add(31, text, "PROTOBUF", subject="multi-value")
    t = TopicTable(catalog, "multi", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    head = b"\x00" + struct.pack(">I", 31)
    first = head + b"\x00" + b"\x08\x05"  # [0] (the single byte 0): First{a: 5}
    second = head + b"\x02\x02" + b"\x0a\x02hi" + b"\x12\x02\x08\x07"  # [1]: Second{b: "hi", inner{c: 7}}
    inner = head + b"\x04\x02\x00" + b"\x08\x09"  # [1, 0]: Second.Inner{c: 9}
    nowhere = head + b"\x04\x02\x02" + b"\x08\x09"  # [1, 1]: Second has one nested message
    r = region(0, [second, first, inner, nowhere])
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX) == {0: 4}
    got = {g["offset"]: g for g in rows_of(t.main)}
    assert sorted(got) == [0, 1, 2]
    cols = [f.name for f in t.main.table.schema().fields][6:]
    assert set(cols) == {"a", "b", "inner", "c"}, cols
    assert (got[0]["b"], got[0]["inner"], got[0]["a"], got[0]["c"]) == ("hi", {"c": 7}, None, None)
    assert (got[1]["a"], got[1]["b"]) == (5, None)
    assert (got[2]["c"], got[2]["b"], got[2]["a"]) == (9, None, None)
    errors = {d["offset"]: d["error"] for d in rows_of(t.dlq)}
    assert list(errors) == [3] and "message indexes [1, 1] name no message" in errors[3], errors


def test_value_schema_latest_with_a_subject_and_a_protobuf_message(catalog):
    """value_schema_latest:subject=S,protobuf_name=M: bare values decoded with the latest
    schema of S (not <topic>-value) as message M (not the file's first)."""
    text = ('syntax = "proto3"; package p;\n'
            "message First { int32 a = 1; }\n"
            "message Second { string b = 1; message Inner { int64 c = 1; } }\n")
    reg = Registry()
    reg.add(41, ORDER_V1, subject="events-value")  # the default subject: Avro, not used
    reg.add(42, text, "PROTOBUF", subject="shared")
    t = TopicTable(catalog, "events", reg, mode=VALUE_SCHEMA_LATEST)
    r = region(0, [b"\x0a\x02hi", b"\x0a\x03bye"])
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST, subject="shared",
                    protobuf_name="p.Second") == {0: 2}
    assert [(g["b"], g.get("a")) for g in rows_of(t.main)] == [("hi", None), ("bye", None)]
    # a nested message by its full name; a name the schema lacks sends the values to the DLQ
    r = region(0, [b"\x08\x07"], start=2)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST, subject="shared", protobuf_name="p.Second.Inner")
    assert rows_of(t.main)[-1]["c"] == 7
    r = region(0, [b"\x08\x07"], start=3)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST, subject="shared", protobuf_name="p.Third")
    assert [(d["offset"], d["error"]) for d in rows_of(t.dlq)] == [
        (3, "schema id 42: the Protobuf schema has no message p.Third")]
    # without options: the default subject's latest (the Avro one)
    r = region(0, [avro(ORDER_V1, order(4))], start=4)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)
    assert rows_of(t.main)[-1]["offset"] == 4 and rows_of(t.main)[-1]["id"] is not None


def test_avro_logical_types_and_a_widened_column(catalog):
    import datetime
    import decimal
    import uuid as uuidlib
    logical = {"type": "record", "name": "L", "fields": [
        {"name": "n", "type": "int"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}},
        {"name": "ratio", "type": "float"},
    ]}
    # v2 widens n (int -> long) and ratio (float -> double): Iceberg's promotions
    wide = {**logical, "fields": [{"name": "n", "type": "long"}, *logical["fields"][1:-1],
                                  {"name": "ratio", "type": "double"}]}
    reg = Registry()
    reg.add(1, logical)
    reg.add(2, wide)
    at = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)
    uid = uuidlib.UUID(int=7)
    value = {"n": 5, "day": datetime.date(2024, 5, 1), "at": at, "local": datetime.datetime(2024, 5, 1, 8, 0),
             "tod": datetime.time(7, 15), "price": decimal.Decimal("12.34"), "uid": str(uid), "color": "BLUE",
             "hash": b"\x01\x02", "ratio": 0.5}
    t = TopicTable(catalog, "logical", reg, mode=VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [avro(logical, value, 1)])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    schema = t.main.table.schema()
    assert [str(schema.find_field(c).field_type) for c in ("n", "day", "at", "local", "tod", "price", "uid", "color",
                                                         "hash", "ratio")] == [
        "int", "date", "timestamptz", "timestamp", "time", "decimal(9, 2)", "string", "string", "binary", "float"]
    n_id = schema.find_field("n").field_id
    r = region(0, [avro(wide, {**value, "n": 2**40}, 2), avro(logical, value, 1)], start=1)
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    schema = t.main.refresh().schema()
    assert (str(schema.find_field("n").field_type), schema.find_field("n").field_id) == ("long", n_id)
    assert str(schema.find_field("ratio").field_type) == "double"
    got = rows_of(t.main)
    assert [g["n"] for g in got] == [5, 2**40, 5]
    g = got[0]
    assert (g["day"], g["at"], g["local"], g["tod"], g["price"], g["uid"], g["color"], g["hash"], g["ratio"]) == (
        datetime.date(2024, 5, 1), at, datetime.datetime(2024, 5, 1, 8, 0), datetime.time(7, 15),
        decimal.Decimal("12.34"), str(uid), "BLUE", b"\x01\x02", 0.5)
    assert not catalog.table_exists(table_identifier("logical~dlq"))
