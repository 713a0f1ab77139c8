"""What a topic's table holds when the log loses records, on a real broker process: the table
is the topic's append-only history as it read it. Records deleted from the log before the
table read them (DeleteRecords, retention) are skipped, never waited for; records the table
already holds stay in it when the log deletes them; a tombstone (null value) is a row with a
null value, as a compacted topic's consumer sees it."""

from __future__ import annotations

import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.krait_harness import BrokerProcess
from tests.tables.test_table_topics import _table_rows, _wait_for


def _set_mode(admin: AdminClient, topic: str, mode: str) -> None:
    res = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        "krait.iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for k, v in items:
        p.produce(topic, key=k, value=v, partition=0)
    assert p.flush(30) == 0


def _delete_records(admin: AdminClient, topic: str, before: int) -> None:
    futures = admin.delete_records([TopicPartition(topic, 0, before)])
    for f in futures.values():
        f.result(30)


def test_deleted_records_are_skipped_and_tombstones_kept(tmp_path):
    log_dir = str(tmp_path / "logs")
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "300",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "history"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact,delete"})])[topic].result(30)
        _produce(b.bootstrap, topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(100)])
        # records 0..39 deleted before the topic is kept as a table
        _delete_records(admin, topic, 40)
        _set_mode(admin, topic, "key_value")
        rows = _wait_for(log_dir, topic, {0: 100})
        assert sorted(r["offset"] for r in rows) == list(range(40, 100))

        # a tombstone is a row with a null value
        _produce(b.bootstrap, topic, [(b"k50", None)])
        rows = _wait_for(log_dir, topic, {0: 101})
        tomb = [r for r in rows if r["offset"] == 100]
        assert tomb and tomb[0]["key"] == b"k50" and tomb[0]["value"] is None

        # the log loses records the table holds: they stay in the table, nothing stalls
        _delete_records(admin, topic, 101)
        _produce(b.bootstrap, topic, [(b"k200", b"after")])
        rows = _wait_for(log_dir, topic, {0: 102})
        assert sorted(r["offset"] for r in rows) == list(range(40, 102))
        assert len({r["offset"] for r in rows}) == len(rows)
        _, offsets = _table_rows(log_dir, topic)
        assert offsets == {0: 102}
        time.sleep(1)  # more commit intervals: nothing is appended twice
        assert sorted(r["offset"] for r in _table_rows(log_dir, topic)[0]) == list(range(40, 102))
    finally:
        b.kill()
