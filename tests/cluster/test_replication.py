"""Replication across real brokers on a real ZooKeeper, driven by real clients
(librdkafka through confluent-kafka): topics in ZooKeeper's layout, acks=all, the high
watermark, byte-identical replicas, min.insync.replicas."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.cluster.cluster_harness import Cluster, wait_for


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int | None = None,
            timeout: float = 60.0, **conf) -> list[tuple[int, int, bytes]]:
    """Send with acks=all and idempotence; (partition, offset, value) of every acked record,
    raising on the first delivery error."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **conf})
    acked, errors = [], []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for v in values:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, v, key=v, on_delivery=cb, **kw)
        p.poll(0)
    left = p.flush(timeout)
    if errors:
        raise KafkaException(errors[0])
    assert left == 0, f"{left} records not delivered"
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    try:
        wait_for(lambda: _poll_into(c, out) or len(out) >= expected, timeout, interval=0, what=f"{expected} records")
        # nothing more than expected arrives
        for _ in range(5):
            _poll_into(c, out, 0.2)
    finally:
        c.close()
    return out


def _poll_into(c: Consumer, out: list, timeout: float = 0.5) -> None:
    for m in c.consume(500, timeout):
        if m.error() is None:
            out.append((m.partition(), m.offset(), m.value()))
        elif m.error().code() != KafkaError._PARTITION_EOF:
            raise KafkaException(m.error())


def test_topic_layout_acks_all_and_byte_identical_replicas(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("orders", partitions=3, rf=3, configs={"min.insync.replicas": "2"})
        # Kafka's ZooKeeper layout, as zookeeper-shell shows it
        topic = json.loads(cl.zk.get("/brokers/topics/orders")[0])
        assert topic["version"] == 3 and len(topic["partitions"]) == 3 and "topic_id" in topic
        assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
        # leaders spread over the brokers as Kafka's assignment spreads them
        assert sorted(cl.leader("orders", p) for p in range(3)) == [1, 2, 3]
        assert json.loads(cl.zk.get("/config/topics/orders")[0])["config"] == {"min.insync.replicas": "2"}
        md = cl.metadata(2, ["orders"])
        assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
        for p in md.topics[0].partitions:
            assert p.error_code == 0 and sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
            assert p.leader_id == cl.leader("orders", p.partition_index)

        values = [f"v{i}".encode() for i in range(3000)]
        acked = produce(cl.bootstrap, "orders", values)
        assert len(acked) == 3000
        got = consume_all(cl.bootstrap, "orders", 3000)
        assert sorted(v for _, _, v in got) == sorted(values)
        # every partition's records in offset order, no gaps
        for part in range(3):
            offsets = [o for p, o, _ in got if p == part]
            assert offsets == list(range(len(offsets)))
    # after a clean stop every replica of every partition holds the same bytes
    for part in range(3):
        logs = [Path(tmp_path, f"broker-{i}", f"orders-{part}", "00000000000000000000.log") for i in (1, 2, 3)]
        assert all(p.stat().st_size > 0 for p in logs)
        assert filecmp.cmp(logs[0], logs[1], shallow=False) and filecmp.cmp(logs[0], logs[2], shallow=False)
        # the epochs of the batches agree (a leader elected at shutdown, with nothing
        # appended since, records its epoch's start in its own checkpoint only)
        epochs = [Path(p.parent, "leader-epoch-checkpoint").read_text().splitlines() for p in logs]
        assert all(e[:3] == ["0", epochs[0][1], "0 0"] or e[2] == "0 0" for e in epochs), epochs


def test_min_insync_replicas(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("strict", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
        leader = cl.leader("strict", 0)
        followers = [b for b in (1, 2, 3) if b != leader]
        produce(cl.bootstrap, "strict", [b"a"])
        cl.brokers[followers[0]].kill()
        cl.wait_isr("strict", 0, 2)
        produce(cl.bootstrap, "strict", [b"b"])  # two in sync: still writable
        cl.brokers[followers[1]].kill()
        cl.wait_isr("strict", 0, 1)
        with pytest.raises(KafkaException) as exc:
            produce(cl.bootstrap, "strict", [b"c"], timeout=20, **{"message.timeout.ms": 5000})
        assert exc.value.args[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), exc.value
        # acks=1 still works: min.insync.replicas binds acks=all only
        p = Producer({"bootstrap.servers": cl.bootstrap, "acks": "1"})
        p.produce("strict", b"d")
        assert p.flush(20) == 0
        cl.brokers[followers[0]].start()
        cl.brokers[followers[1]].start()
        cl.wait_isr("strict", 0, 3)
        produce(cl.bootstrap, "strict", [b"e"])
        got = consume_all(cl.bootstrap, "strict", 4)
        assert [v for _, _, v in got][:2] == [b"a", b"b"] and b"e" in [v for _, _, v in got]
