"""Data produced through the real broker (confluent-kafka, every codec, headers, null keys and
values) read back by the data source equal to what a consumer reads from the broker."""

from __future__ import annotations

import pytest

from tests.spark.helpers import df_rows

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 400


def produce(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1, config={"segment.bytes": "16384"})]).values():
        f.result(15)
    for codec in CODECS:
        p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         "batch.size": 4096})
        for i in range(PER_CODEC):
            p.produce(topic, partition=i % 2,
                      key=None if i % 7 == 0 else f"{codec}-k{i % 13}".encode(),
                      value=None if i % 11 == 0 else (f"{codec}-{i}-".encode() * (i % 9)),
                      headers=[("h", f"{i}".encode()), ("null", None)] if i % 3 == 0 else None)
        assert p.flush(30) == 0


def consume(bootstrap: str, topic: str, expect: int) -> list[dict]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-compare", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, p, 0) for p in (0, 1)])
    rows = []
    try:
        idle = 0
        while len(rows) < expect and idle < 20:
            msgs = c.consume(1000, timeout=0.5)
            idle = 0 if msgs else idle + 1
            for m in msgs:
                assert m.error() is None, m.error()
                ts_type, ts = m.timestamp()
                rows.append({"key": m.key(), "value": m.value(), "topic": m.topic(), "partition": m.partition(),
                             "offset": m.offset(), "timestamp_ms": ts, "timestampType": 1 if ts_type == 2 else 0,
                             "headers": list(m.headers() or [])})
    finally:
        c.close()
    rows.sort(key=lambda r: (r["partition"], r["offset"]))
    return rows


def test_broker_produced_data_equals_consumed(spark, fresh_broker):
    topic = "spark-compare"
    produce(fresh_broker.bootstrap, topic)
    consumed = consume(fresh_broker.bootstrap, topic, len(CODECS) * PER_CODEC)
    assert len(consumed) == len(CODECS) * PER_CODEC

    def read(**opts: str) -> list[dict]:
        r = spark.read.format("kafka-segments").option("log.dirs", fresh_broker.log_dir) \
            .option("subscribe", topic).option("includeHeaders", "true")
        for k, v in opts.items():
            r = r.option(k, v)
        return df_rows(r.load())

    # while the broker runs: whatever the high watermark checkpoint allows, a prefix per partition
    live = read()
    for p in (0, 1):
        got = [r for r in live if r["partition"] == p]
        assert got == [r for r in consumed if r["partition"] == p][: len(got)]
    assert read(highWatermark="ignore") == consumed
    fresh_broker.stop()
    assert read() == consumed
