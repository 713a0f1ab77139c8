"""Data survives clean and hard (SIGKILL) broker restarts and reads back identical."""

import time
from pathlib import Path

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


def test_sigterm_answers_parked_fetch_and_exits_cleanly(fresh_broker):
    import threading

    from broker.tools.wire import WireClient
    from protocol.apis import ApiKey

    with WireClient("127.0.0.1", fresh_broker.port) as c:
        c.request(ApiKey.METADATA, 9, topics=[dict(name="parked")], allow_auto_topic_creation=True)
        out = {}

        def fetch():
            try:
                out["resp"] = c.request(ApiKey.FETCH, 11, replica_id=-1, max_wait=30_000, min_bytes=1, max_bytes=1 << 20,
                                        isolation_level=0, session_id=0, session_epoch=-1,
                                        topics=[dict(topic="parked", partitions=[dict(partition=0, fetch_offset=0,
                                                                                       partition_max_bytes=1 << 20)])],
                                        forgotten_topics_data=[], rack_id="")
            except Exception as exc:
                out["error"] = exc

        t = threading.Thread(target=fetch)
        t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        assert fresh_broker.stop() == 0
        took = time.monotonic() - t0
        t.join(5)
    assert took < 5, took
    assert "resp" in out, out  # the parked fetch got its (empty) answer before the broker exited
    assert (Path(fresh_broker.log_dir) / ".kafka_cleanshutdown").exists()


def test_topic_and_broker_configs_persist(fresh_broker):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.create_topics([NewTopic("cfg", 3, 1, config={"cleanup.policy": "compact"})])["cfg"].result(10)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.bytes", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([topic])[topic].result(10)
    brk = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([brk])[brk].result(10)
    fresh_broker.restart()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.bytes"].value == "123456"
    assert cfg["cleanup.policy"].value == "compact"
    # the broker-level change is the new default for topics that do not override it
    assert cfg["retention.ms"].value == "7200000"
    assert cfg["retention.ms"].source == 2  # DYNAMIC_BROKER_CONFIG
    assert len(admin.list_topics("cfg", timeout=10).topics["cfg"].partitions) == 3
