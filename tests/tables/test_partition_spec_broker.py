"""krait.iceberg.partition.spec on a real broker process: a topic created with
``(day(timestamp))`` gets a table partitioned by day holding exactly the records produced;
a spec changed with IncrementalAlterConfigs evolves the table at the next commit, the older
files keeping theirs; a bad spec is refused with INVALID_CONFIG at CreateTopics and at
IncrementalAlterConfigs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tables.catalog import open_catalog, table_identifier
from tests.krait_harness import BrokerProcess
from tests.tables.test_table_topics import _wait_for

KEY = "krait.iceberg.partition.spec"
DAY_MS = 86_400_000
#: 2024-03-01T10:00:00Z: records of three days in the past (CreateTime, accepted: no
#: message.timestamp.before.max.ms)
T0 = int(datetime(2024, 3, 1, 10, tzinfo=UTC).timestamp() * 1000)


def _produce(bootstrap: str, topic: str, records: list[tuple[int, str, int]]) -> dict[int, int]:
    """(partition, value, timestamp ms) each, key ``k<value>``; partition -> end offset."""
    ends: dict[int, int] = {}

    def done(err, msg):
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for partition, value, ts in records:
        p.produce(topic, key=f"k{value}".encode(), value=value.encode(), partition=partition, timestamp=ts,
                  on_delivery=done)
    assert p.flush(30) == 0
    return ends


def _alter(admin: AdminClient, topic: str, value: str) -> None:
    res = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        KEY, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def _table(log_dir: str, topic: str):
    return open_catalog(log_dir).load_table(table_identifier(topic))


def _spec(table) -> list[tuple[str, str, str]]:
    schema = table.schema()
    return [(f.name, str(f.transform), schema.find_column_name(f.source_id)) for f in table.spec().fields]


def test_a_topic_with_a_day_spec_and_a_change_of_spec(tmp_path):
    log_dir = str(tmp_path / "logs")
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "300",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "events"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1, config={"krait.iceberg.mode": "key_value",
                                                           KEY: "(day(timestamp))"})])[topic].result(30)
        res = ConfigResource("topic", topic)
        assert admin.describe_configs([res])[res].result(30)[KEY].value == "(day(timestamp))"

        # 60 records, 20 a day over three days, both partitions
        sent = [(i % 2, f"v{i}", T0 + (i // 20) * DAY_MS + i * 1000) for i in range(60)]
        ends = _produce(b.bootstrap, topic, sent)
        rows = _wait_for(log_dir, topic, ends)
        assert sorted((r["partition"], r["value"].decode(), int(r["timestamp"].timestamp() * 1000)) for r in rows) \
            == sorted(sent)
        assert len({(r["partition"], r["offset"]) for r in rows}) == 60
        table = _table(log_dir, topic)
        assert _spec(table) == [("timestamp_day", "day", "timestamp")]
        dirs = {t.file.file_path.split("/data/")[1].rsplit("/", 1)[0] for t in table.scan().plan_files()}
        assert dirs == {"timestamp_day=2024-03-01", "timestamp_day=2024-03-02", "timestamp_day=2024-03-03"}

        # a new spec: the next commit evolves the table, then appends with it
        _alter(admin, topic, "(partition, bucket(2, key))")
        more = [(i % 2, f"w{i}", T0 + i * 1000) for i in range(20)]
        ends = _produce(b.bootstrap, topic, more)
        rows = _wait_for(log_dir, topic, {p: e for p, e in ends.items()})
        assert sorted(r["value"].decode() for r in rows) == sorted(v for _, v, _ in [*sent, *more])
        assert len({(r["partition"], r["offset"]) for r in rows}) == 80
        table = _table(log_dir, topic)
        assert _spec(table) == [("partition", "identity", "partition"), ("key_bucket_2", "bucket[2]", "key")]
        by_spec: dict[int, int] = {}
        for t in table.scan().plan_files():
            by_spec[t.file.spec_id] = by_spec.get(t.file.spec_id, 0) + t.file.record_count
        assert by_spec == {0: 60, 1: 20}  # the files written before keep the day spec

        # a bad spec is refused, and the topic's spec stays
        with pytest.raises(KafkaException) as ei:
            _alter(admin, topic, "(partition, bucket(key))")
        err = ei.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG and KEY in err.str()
        assert admin.describe_configs([res])[res].result(30)[KEY].value == "(partition, bucket(2, key))"
    finally:
        b.kill()


def test_a_bad_spec_is_refused_at_create_topics(tmp_path):
    b = BrokerProcess(str(tmp_path / "logs"))
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for bad in ("(day(timestamp)", "(fortnight(timestamp))", "day(timestamp)"):
            with pytest.raises(KafkaException) as ei:
                admin.create_topics([NewTopic("bad", 1, 1, config={"krait.iceberg.mode": "key_value", KEY: bad})]
                                    )["bad"].result(30)
            err = ei.value.args[0]
            assert err.code() == KafkaError.INVALID_CONFIG, err
            assert KEY in err.str() and bad in err.str()
        assert "bad" not in admin.list_topics(timeout=30).topics
    finally:
        b.kill()
