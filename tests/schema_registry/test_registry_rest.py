"""The built-in Schema Registry against a real broker process, through Confluent's own
Python client (SchemaRegistryClient, AvroSerializer/AvroDeserializer,
JSONSerializer/JSONDeserializer over a real producer and consumer) and plain HTTP for what
the client hides: Confluent's status codes, error codes and content type, deletes, configs,
modes, references, restarts, and bad input that must store nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.krait_harness import BrokerProcess, free_port

from .registry_http import CT, call

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "krait.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "krait.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None}]})
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "krait.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}, {"name": "city", "type": "string"}]})


def _registry_broker(log_dir: str | None = None, port: int | None = None, **overrides: str) -> BrokerProcess:
    port = port or free_port()
    b = BrokerProcess(log_dir, {"krait.schema.registry.listener": f"127.0.0.1:{port}", **overrides})
    b.registry_url = f"http://127.0.0.1:{port}"
    return b


@pytest.fixture(scope="module")
def reg_broker():
    b = _registry_broker().start()
    yield b
    b.stop()


def _subject(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consume(bootstrap: str, topic: str, n: int, deserializer) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    try:
        for _ in range(300):
            if len(out) >= n:
                break
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            out.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        c.close()
    return out


def test_avro_serializer_round_trip(reg_broker):
    """Confluent's AvroSerializer registers the schema in Krait and prefixes each value with
    its id; the AvroDeserializer reads them back, v1 and v2 records alike."""
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": reg_broker.registry_url})
    ser_v1 = AvroSerializer(client, USER_V1)
    ser_v2 = AvroSerializer(client, USER_V2)
    p = Producer({"bootstrap.servers": reg_broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    sent = [{"name": f"u{i}", "age": i} for i in range(5)]
    for rec in sent:
        p.produce(topic, value=ser_v1(rec, ctx))
    sent2 = [{"name": f"v{i}", "age": 100 + i, "email": f"v{i}@x"} for i in range(5)]
    for rec in sent2:
        p.produce(topic, value=ser_v2(rec, ctx))
    assert p.flush(30) == 0
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 2
    got = _consume(reg_broker.bootstrap, topic, 10, AvroDeserializer(client))
    assert got[:5] == sent  # each read with its writer's schema
    assert got[5:] == sent2
    # the two schemas have distinct, increasing global ids; the wire prefix names them
    ids = [client.get_version(f"{topic}-value", v).schema_id for v in (1, 2)]
    assert ids[0] < ids[1]
    # reading v1 data with v2 as the reader schema fills the default
    reader = AvroDeserializer(client, USER_V2)
    assert _consume(reg_broker.bootstrap, topic, 1, reader)[0] == {**sent[0], "email": None}


def test_json_serializer_round_trip(reg_broker):
    topic = f"json-{uuid.uuid4().hex[:8]}"
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
                         "required": ["id"]})
    client = SchemaRegistryClient({"url": reg_broker.registry_url})
    ser = JSONSerializer(schema, client)
    p = Producer({"bootstrap.servers": reg_broker.bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    sent = [{"id": i, "item": f"thing-{i}"} for i in range(5)]
    for rec in sent:
        p.produce(topic, value=ser(rec, ctx))
    assert p.flush(30) == 0
    got = _consume(reg_broker.bootstrap, topic, 5, JSONDeserializer(schema, schema_registry_client=client))
    assert got == sent
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"


def _own(schema: str, subject: str) -> str:
    """``schema`` in a namespace of the test's own, so that its ids are its own too (one
    broker serves the module's tests, and equal schemas share an id across subjects)."""
    return schema.replace('"krait.test"', f'"krait.test.{subject.replace("-", "_")}"')


def test_rest_api_reads_and_writes(reg_broker):
    url = reg_broker.registry_url
    s = _subject("rest")
    v1, v2, bad = (_own(x, s) for x in (USER_V1, USER_V2, USER_BAD))
    status, body, ctype = call(f"{url}/subjects/{s}/versions", "POST", {"schema": v1})
    assert (status, ctype.split(";")[0]) == (200, CT)
    v1_id = body["id"]
    # the same schema again (other whitespace): the same id, no new version
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": json.dumps(json.loads(v1), indent=2)})[1] \
        == {"id": v1_id}
    v2_id = call(f"{url}/subjects/{s}/versions", "POST", {"schema": v2})[1]["id"]
    assert v2_id > v1_id
    assert call(f"{url}/subjects/{s}/versions")[1] == [1, 2]
    status, latest, _ = call(f"{url}/subjects/{s}/versions/latest")
    assert status == 200 and latest["subject"] == s and latest["version"] == 2 and latest["id"] == v2_id
    assert "schemaType" not in latest  # Confluent leaves AVRO out
    # the stored schema is the canonical form; /schema answers its bare text
    assert call(f"{url}/subjects/{s}/versions/1/schema")[1] == json.loads(v1)
    assert call(f"{url}/schemas/ids/{v1_id}")[1] == {"schema": call(f"{url}/subjects/{s}/versions/1")[1]["schema"]}
    assert call(f"{url}/schemas/ids/{v2_id}/subjects")[1] == [s]
    assert call(f"{url}/schemas/ids/{v2_id}/versions")[1] == [{"subject": s, "version": 2}]
    assert set(call(f"{url}/schemas/types")[1]) == {"AVRO", "JSON", "PROTOBUF"}
    assert s in call(f"{url}/subjects")[1]
    # lookup
    status, found, _ = call(f"{url}/subjects/{s}", "POST", {"schema": v1})
    assert status == 200 and (found["version"], found["id"]) == (1, v1_id)
    assert call(f"{url}/subjects/{s}", "POST", {"schema": bad})[:2] == \
        (404, {"error_code": 40403, "message": "Schema not found"})
    # the same schema in another subject keeps its global id
    other = _subject("rest-other")
    assert call(f"{url}/subjects/{other}/versions", "POST", {"schema": v2})[1] == {"id": v2_id}
    assert sorted(call(f"{url}/schemas/ids/{v2_id}/subjects")[1]) == sorted([s, other])


def test_compatibility_refusal_and_configs(reg_broker):
    url = reg_broker.registry_url
    s = _subject("compat")
    call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_V1})
    # BACKWARD (the default): a new field without a default cannot read old data
    status, body, _ = call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_BAD})
    assert status == 409 and body["error_code"] == 409
    assert body["message"].startswith(f'Schema being registered is incompatible with an earlier schema for subject '
                                      f'"{s}"')
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"] and "{oldSchemaVersion: 1}" in body["message"]
    status, body, _ = call(f"{url}/compatibility/subjects/{s}/versions/latest?verbose=true", "POST",
                           {"schema": USER_BAD})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert call(f"{url}/compatibility/subjects/{s}/versions/latest", "POST", {"schema": USER_V2})[1] == \
        {"is_compatible": True}
    # per-subject config: NONE lets it through
    assert call(f"{url}/config/{s}")[:2] == (404, {"error_code": 40408, "message": f"Subject '{s}' does not have "
                                                   f"subject-level compatibility configured"})
    assert call(f"{url}/config/{s}?defaultToGlobal=true")[1] == {"compatibilityLevel": "BACKWARD"}
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": "NONE"})[1] == {"compatibility": "NONE"}
    assert call(f"{url}/config/{s}")[1] == {"compatibilityLevel": "NONE"}
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_BAD})[0] == 200
    assert call(f"{url}/config/{s}", "PUT", {"compatibility": "SIDEWAYS"})[:2] == (422, {
        "error_code": 42203, "message": "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                        "backward_transitive, forward_transitive, and full_transitive"})
    assert call(f"{url}/config/{s}", "DELETE")[1] == {"compatibilityLevel": "NONE"}
    assert call(f"{url}/config")[1] == {"compatibilityLevel": "BACKWARD"}
    # the client's own calls
    client = SchemaRegistryClient({"url": url})
    client.set_compatibility(s, "FULL")
    assert client.get_compatibility(s) == "FULL"
    # the latest version has a field "city" without a default: v2 reads its data, not the other way round
    assert client.test_compatibility(s, Schema(USER_V2, "AVRO")) is False
    client.set_compatibility(s, "BACKWARD")
    assert client.test_compatibility(s, Schema(USER_V2, "AVRO")) is True


def test_deletes_and_references(reg_broker):
    url = reg_broker.registry_url
    s = _subject("del")
    for schema in (USER_V1, USER_V2):
        call(f"{url}/subjects/{s}/versions", "POST", {"schema": schema})
    # a permanent delete needs a soft one first
    assert call(f"{url}/subjects/{s}/versions/1?permanent=true", "DELETE")[:2] == (404, {
        "error_code": 40407, "message": f"Subject '{s}' Version 1 was not deleted first before being permanently "
                                        f"deleted"})
    assert call(f"{url}/subjects/{s}/versions/1", "DELETE")[:2] == (200, 1)
    assert call(f"{url}/subjects/{s}/versions")[1] == [2]
    assert call(f"{url}/subjects/{s}/versions?deleted=true")[1] == [1, 2]
    assert call(f"{url}/subjects/{s}/versions/1")[1]["error_code"] == 40402
    assert call(f"{url}/subjects/{s}/versions/1?deleted=true")[1]["version"] == 1
    assert call(f"{url}/subjects/{s}/versions/1", "DELETE")[1]["error_code"] == 40406
    assert call(f"{url}/subjects/{s}/versions/1?permanent=true", "DELETE")[:2] == (200, 1)
    assert call(f"{url}/subjects/{s}/versions?deleted=true")[1] == [2]
    # a subject: soft, then permanent
    assert call(f"{url}/subjects/{s}?permanent=true", "DELETE")[1]["error_code"] == 40405
    assert call(f"{url}/subjects/{s}", "DELETE")[1] == [2]
    assert s not in call(f"{url}/subjects")[1] and s in call(f"{url}/subjects?deleted=true")[1]
    assert call(f"{url}/subjects/{s}/versions")[1]["error_code"] == 40401
    assert call(f"{url}/subjects/{s}", "DELETE")[1]["error_code"] == 40404
    assert call(f"{url}/subjects/{s}?permanent=true", "DELETE")[1] == [2]
    assert s not in call(f"{url}/subjects?deleted=true")[1]
    # references: a schema naming another subject's type; the referenced version cannot go
    addr = _subject("ref-address")
    client = SchemaRegistryClient({"url": url})
    address = json.dumps({"type": "record", "name": "Address", "namespace": "krait.test",
                          "fields": [{"name": "street", "type": "string"}]})
    client.register_schema(addr, Schema(address, "AVRO"))
    person = json.dumps({"type": "record", "name": "Person", "namespace": "krait.test",
                         "fields": [{"name": "home", "type": "krait.test.Address"}]})
    pid = client.register_schema(_subject("ref-person"), Schema(
        person, "AVRO", [SchemaReference("krait.test.Address", addr, 1)]))
    assert call(f"{url}/subjects/{addr}/versions/1/referencedby")[1] == [pid]
    status, body, _ = call(f"{url}/subjects/{addr}/versions/1", "DELETE")
    assert status == 422 and body["error_code"] == 42206
    got = call(f"{url}/schemas/ids/{pid}")[1]
    assert got["references"] == [{"name": "krait.test.Address", "subject": addr, "version": 1}]


def test_modes(reg_broker):
    url = reg_broker.registry_url
    s = _subject("mode")
    assert call(f"{url}/mode")[1] == {"mode": "READWRITE"}
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "READONLY"})[1] == {"mode": "READONLY"}
    status, body, _ = call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_V1})
    assert status == 422 and body["error_code"] == 42205
    assert call(f"{url}/mode/{s}", "PUT", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert call(f"{url}/mode/{s}", "DELETE")[1] == {"mode": "READONLY"}
    assert call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_V1})[0] == 200


def test_bad_input_stores_nothing(reg_broker):
    """Malformed schemas, unknown types, wrong content types, huge bodies, unknown subjects
    and ids: Confluent's codes, JSON bodies, never a 500; nothing stored."""
    url = reg_broker.registry_url
    s = _subject("bad")
    before = call(f"{url}/subjects?deleted=true")[1]
    cases = [
        (call(f"{url}/subjects/{s}/versions", "POST", {"schema": '{"type": "record", "name": "x"'}), 422, 42201),
        (call(f"{url}/subjects/{s}/versions", "POST", {"schema": '{"type": "no-such-type"}'}), 422, 42201),
        (call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_V1, "schemaType": "XML"}), 422, 42201),
        (call(f"{url}/subjects/{s}/versions", "POST", {"schema": '{"type": 7}', "schemaType": "JSON"}), 422, 42201),
        (call(f"{url}/subjects/{s}/versions", "POST", {"nothing": 1}), 422, 42201),
        (call(f"{url}/subjects/{s}/versions", "POST", raw=b"{not json"), 400, 400),
        (call(f"{url}/subjects/{s}/versions", "POST", {"schema": USER_V1}, content_type="text/plain"), 415, 415),
        (call(f"{url}/subjects/{s}/versions", "POST", raw=b'{"schema": "' + b"x" * (17 << 20) + b'"}'), 413, 413),
        (call(f"{url}/subjects/{s}/versions"), 404, 40401),
        (call(f"{url}/subjects/{s}/versions/3"), 404, 40401),
        (call(f"{url}/subjects/{s}/versions/-7"), 422, 42202),
        (call(f"{url}/subjects/{s}/versions/banana"), 422, 42202),
        (call(f"{url}/schemas/ids/987654"), 404, 40403),
        (call(f"{url}/no/such/path"), 404, 404),
        (call(f"{url}/subjects", "PATCH", {}), 405, 405),
        (call(f"{url}/config", "PUT", {"compatibility": 3}), 422, 42203),
    ]
    for (status, body, ctype), want_status, want_code in cases:
        assert (status, body["error_code"]) == (want_status, want_code), body
        assert isinstance(body["message"], str) and "Traceback" not in body["message"]
        assert ctype.split(";")[0] == CT
    assert call(f"{url}/subjects?deleted=true")[1] == before
    # the client raises Confluent's codes
    client = SchemaRegistryClient({"url": url})
    with pytest.raises(SchemaRegistryError) as err:
        client.get_latest_version(s)
    assert err.value.error_code == 40401


def test_restart_keeps_ids_and_versions(tmp_path):
    b = _registry_broker(str(tmp_path / "logs")).start()
    try:
        url = b.registry_url
        ids = {}
        for i in range(6):
            s = f"restart-{i % 3}"
            schema = json.dumps({"type": "record", "name": "R", "fields": [
                {"name": f"f{j}", "type": "int", "default": 0} for j in range(i // 3 + 1)]})
            ids[(s, i // 3 + 1)] = call(f"{url}/subjects/{s}/versions", "POST", {"schema": schema})[1]["id"]
        before = {k: call(f"{url}/subjects/{k[0]}/versions/{k[1]}")[1] for k in ids}
        b.stop()
        b.start()
        after = {k: call(f"{url}/subjects/{k[0]}/versions/{k[1]}")[1] for k in ids}
        assert after == before
        new = call(f"{url}/subjects/restart-9/versions", "POST", {"schema": '"string"'})[1]["id"]
        assert new == max(ids.values()) + 1
        b.kill()  # and after a crash
        b.start()
        assert {k: call(f"{url}/subjects/{k[0]}/versions/{k[1]}")[1] for k in ids} == before
        assert call(f"{url}/subjects/restart-9/versions/1")[1]["id"] == new
    finally:
        b.kill()


def test_taken_port_stops_start_up(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path / 'logs'}",
                              "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "krait.http.listener=",
                              "--override", f"krait.schema.registry.listener=127.0.0.1:{taken}"],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert f"krait.schema.registry.listener=127.0.0.1:{taken}" in out.stderr and "already in use" in out.stderr


def test_metrics(tmp_path):
    """/metrics reports the registry: subjects, schemas, the writer role, requests by status."""
    http_port = free_port()
    b = _registry_broker(str(tmp_path / "logs"), **{"krait.http.listener": f"127.0.0.1:{http_port}"}).start()
    try:
        call(f"{b.registry_url}/subjects/m-value/versions", "POST", {"schema": '"string"'})
        call(f"{b.registry_url}/subjects/nope/versions")
        text = call(f"http://127.0.0.1:{http_port}/metrics")[1]
        lines = set(text.splitlines())
        assert "krait_schema_registry_subjects 1.0" in lines
        assert "krait_schema_registry_schemas 1.0" in lines
        assert "krait_schema_registry_writer 1.0" in lines
        assert 'krait_schema_registry_requests_total{method="POST",status="200"} 1.0' in lines
        assert 'krait_schema_registry_requests_total{method="GET",status="404"} 1.0' in lines
    finally:
        b.stop()
