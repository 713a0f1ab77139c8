"""``read_topic`` over a real broker's files: the table written by the broker (a
``krait.iceberg.mode=key_value`` topic) plus the log's tail beyond the table's offsets give
exactly the topic's committed records, each once, with the columns of the Kafka source."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_jobs.tables import read_topic
from tests.krait_harness import BrokerProcess
from tests.tables.test_table_topics import _table_rows, _transaction


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v.encode(), key=v.encode())
    assert p.flush(30) == 0


def test_table_plus_tail_is_the_topic_once(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    # a long commit interval: what is produced after the first commit stays in the log's tail
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "1500",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "events"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1, config={"krait.iceberg.mode": "key_value"})])[topic].result(30)
        first = [f"a{i}" for i in range(300)]
        _produce(b.bootstrap, topic, first)
        _transaction(b.bootstrap, topic, ["aborted"], commit=False)
        deadline = time.monotonic() + 30
        while len(_table_rows(log_dir, topic)[0]) < len(first) and time.monotonic() < deadline:
            time.sleep(0.1)
        in_table = len(_table_rows(log_dir, topic)[0])
        assert in_table >= len(first)
        tail = [f"b{i}" for i in range(200)]
        _produce(b.bootstrap, topic, tail)
    finally:
        b.stop()  # a clean stop: the high-watermark checkpoint covers the tail
    rows, offsets = _table_rows(log_dir, topic)
    df = read_topic(spark, topic, log_dir)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    got = sorted(bytes(r.value).decode() for r in df.collect())
    assert got == sorted(first + tail)  # each once: no overlap, no gap, the aborted record left out
    # the table held part of it (the rest came from the log), unless the last commit took it all
    assert 0 < len(rows) <= len(first + tail)
    by_partition = df.groupBy("partition").count().collect()
    assert sum(r["count"] for r in by_partition) == len(first + tail)
