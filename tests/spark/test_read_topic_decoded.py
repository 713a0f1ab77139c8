"""``read_topic`` over a decoded table (``krait.iceberg.mode=value_schema_id_prefix``) of a
real broker whose built-in registry served Confluent's AvroSerializer: the table's value
columns and the log's tail decoded the same way give every record once, Spark SQL queries
the decoded fields, and a tail is refused without a registry URL (``tail=False`` reads the
table alone)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_jobs.tables import read_topic
from tests.krait_harness import BrokerProcess, free_port
from tests.tables.test_decoded_broker import _wait_for

USER = json.dumps({"type": "record", "name": "User", "namespace": "krait.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}, {"name": "city", "type": "string"}]})
TOPIC = "users"


def _produce(bootstrap: str, registry: str, users: list[dict]) -> dict[int, int]:
    ser = AvroSerializer(SchemaRegistryClient({"url": registry}), USER)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    ends: dict[int, int] = {}

    def done(err, msg):
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for u in users:
        p.produce(TOPIC, key=u["name"].encode(), value=ser(u, ctx), partition=0, on_delivery=done)
    assert p.flush(30) == 0
    return ends


def test_read_topic_decodes_the_table_and_its_tail(tmp_path, spark):
    log_dir = str(tmp_path / "logs")
    port = free_port()
    registry = f"http://127.0.0.1:{port}"
    b = BrokerProcess(log_dir, {"krait.schema.registry.listener": f"127.0.0.1:{port}",
                                "krait.iceberg.commit.interval.ms": "300"})
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"krait.iceberg.mode": "value_schema_id_prefix"})])[
            TOPIC].result(30)
        first = [{"name": f"u{i}", "age": 10 + i % 50, "city": ("Oslo", "Lima", "Pune")[i % 3]} for i in range(120)]
        _wait_for(log_dir, TOPIC, _produce(b.bootstrap, registry, first))
        # the table stops here (mode disabled live); what comes next is the log's tail only
        res = ConfigResource("topic", TOPIC, incremental_configs=[ConfigEntry(
            "krait.iceberg.mode", "disabled", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        time.sleep(1.0)
        tail = [{"name": f"t{i}", "age": 70, "city": "Lima"} for i in range(30)]
        _produce(b.bootstrap, registry, tail)
        time.sleep(0.5)  # the high watermark checkpoint names the tail's end

        df = read_topic(spark, TOPIC, log_dir, schema_registry_url=registry)
        assert "value" not in df.columns and {"name", "age", "city", "offset", "key"} <= set(df.columns)
        got = sorted((r["offset"], r["name"], r["age"], r["city"]) for r in df.collect())
        want = [(i, u["name"], u["age"], u["city"]) for i, u in enumerate(first + tail)]
        assert got == want

        # Spark SQL on the decoded fields
        df.createOrReplaceTempView("users")
        by_city = {r["city"]: (r["n"], r["oldest"]) for r in spark.sql(
            "SELECT city, count(*) AS n, max(age) AS oldest FROM users GROUP BY city").collect()}
        assert by_city["Lima"][0] == 40 + 30 and by_city["Lima"][1] == 70

        with pytest.raises(ValueError, match="schema_registry_url"):
            read_topic(spark, TOPIC, log_dir)
        table_only = read_topic(spark, TOPIC, log_dir, tail=False)
        assert sorted(r["offset"] for r in table_only.select("offset").collect()) == list(range(120))
    finally:
        b.kill()
