"""Data survives clean and hard (SIGKILL) broker restarts and reads back identical."""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def _produce(bootstrap, topic, n, start=0):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i * 10, partition=i % 2)
    assert p.flush(20) == 0


def _read(bootstrap, topic, expected):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(2)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append((m.partition(), m.offset(), m.key(), m.value()))
    c.close()
    return sorted(out)


@pytest.mark.parametrize("hard", [False, True], ids=["clean", "sigkill"])
def test_data_survives_restart(fresh_broker, hard):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("durable", 2, 1)])["durable"].result(10)
    _produce(fresh_broker.bootstrap, "durable", 1000)
    before = _read(fresh_broker.bootstrap, "durable", 1000)
    assert len(before) == 1000
    fresh_broker.restart(hard=hard)
    after = _read(fresh_broker.bootstrap, "durable", 1000)
    assert after == before
    # and the log continues where it left off
    _produce(fresh_broker.bootstrap, "durable", 10, start=1000)
    assert len(_read(fresh_broker.bootstrap, "durable", 1010)) == 1010
