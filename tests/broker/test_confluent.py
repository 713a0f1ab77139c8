"""confluent-kafka (librdkafka) against a real Krait broker over a socket."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)


def _topic(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(admin, name, partitions=1, config=None):
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})])
    fs[name].result(10)


def _consume_all(bootstrap, topic, partitions, expected, timeout=20.0, **conf):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic, "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(m.error())
        out.append(m)
    c.close()
    return out


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_every_codec_and_acks(broker, admin, acks, codec):
    topic = _topic(f"codec-{codec}")
    _create(admin, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "compression.type": codec,
                  "linger.ms": 5, "enable.idempotence": False})
    delivered = []
    n = 500
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 3, partition=i % 2,
                  headers=[("h", f"{i}".encode())], on_delivery=lambda e, m: delivered.append(e))
    assert p.flush(20) == 0
    assert len(delivered) == n and all(e is None for e in delivered)
    msgs = _consume_all(broker.bootstrap, topic, 2, n)
    assert len(msgs) == n
    got = sorted((m.key(), m.value(), m.headers()) for m in msgs)
    want = sorted((f"k{i}".encode(), f"value-{i}".encode() * 3, [("h", f"{i}".encode())]) for i in range(n))
    assert got == want
    for part in (0, 1):
        offs = [m.offset() for m in msgs if m.partition() == part]
        assert offs == list(range(len(offs)))  # exactly the append order, no gaps


def test_idempotent_producer(broker, admin):
    topic = _topic("idem")
    _create(admin, topic, 3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    errors = []
    for i in range(3000):
        p.produce(topic, value=str(i).encode(), partition=i % 3, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0
    assert all(e is None for e in errors)
    msgs = _consume_all(broker.bootstrap, topic, 3, 3000)
    per_part = {}
    for m in msgs:
        per_part.setdefault(m.partition(), []).append(int(m.value()))
    for part, values in per_part.items():
        assert values == sorted(values) and values == [v for v in range(3000) if v % 3 == part]


def test_consume_by_subscribe_and_auto_create(broker):
    topic = _topic("auto")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(20)]


def test_admin_topics_configs_partitions(broker, admin):
    topic = _topic("admin")
    _create(admin, topic, 2, {"retention.ms": "12345", "cleanup.policy": "delete"})
    md = admin.list_topics(timeout=10)
    assert topic in md.topics and len(md.topics[topic].partitions) == 2
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "12345"
    assert cfg["segment.bytes"].value == "1073741824"
    # incremental alter then describe again
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    res2 = ConfigResource(ConfigResource.Type.TOPIC, topic,
                          incremental_configs=[ConfigEntry("retention.ms", "999", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res2])[res2].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "999"
    # bad config value is refused with a clear error
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic,
                         incremental_configs=[ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="retention.ms"):
        admin.incremental_alter_configs([bad])[bad].result(10)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5
    with pytest.raises(Exception) as ei:
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    assert "INVALID_PARTITIONS" in str(ei.value) or "partitions" in str(ei.value).lower()
    with pytest.raises(Exception) as ei:
        _create(admin, topic, 1)
    assert "TOPIC_ALREADY_EXISTS" in str(ei.value) or "already exists" in str(ei.value)
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_list_offsets_by_timestamp_and_delete_records(broker, admin):
    topic = _topic("offsets")
    _create(admin, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        p.produce(topic, value=b"x", timestamp=base + i * 1000, partition=0)
        p.flush(10)
    tp = TopicPartition(topic, 0)
    r = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 4500)})[tp].result(10)
    assert r.offset == 5
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset == 0
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset == 10
    mx = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert mx.offset == 9 and mx.timestamp == base + 9000
    deleted = admin.delete_records([TopicPartition(topic, 0, 4)])[TopicPartition(topic, 0, 4)].result(10)
    assert deleted.low_watermark == 4
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset == 4
    msgs = _consume_all(broker.bootstrap, topic, 1, 6, **{"auto.offset.reset": "earliest"})
    assert [m.offset() for m in msgs] == [4, 5, 6, 7, 8, 9]


def test_producing_to_internal_topic_is_refused(broker, admin):
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 5000})
    errs = []
    p.produce("__consumer_offsets", value=b"garbage", partition=0, on_delivery=lambda e, m: errs.append(e))
    p.flush(10)
    assert errs and errs[0] is not None
