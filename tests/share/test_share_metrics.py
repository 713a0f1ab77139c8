"""Share groups on /metrics: per share-partition in-flight records and batches (Kafka's
SharePartitionMetrics) and the records acquired, delivered again and archived, after a
librdkafka share consumer released and rejected some."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.test_metrics_http import scrape, value
from tests.krait_harness import BrokerProcess, free_port
from tests.share.share_members import Member


def test_share_partition_metrics(tmp_path):
    port = free_port()
    b = BrokerProcess(str(tmp_path / "logs"), {"krait.http.listener": f"127.0.0.1:{port}"}).start()
    try:
        topic = f"sm-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        p = Producer({"bootstrap.servers": b.bootstrap})
        # 8 accepted; rel3: two releases then accepted (2 redeliveries); rej: archived
        for v in [*(f"v{i}" for i in range(8)), "rel3:a", "rej:b"]:
            p.produce(topic, v.encode(), partition=0)
        assert p.flush(10) == 0
        m = Member(None, b.bootstrap, "gm", topic, idle_exit_ms=3000)
        m.wait()
        assert sorted(r["v"] for r in m.records if r["a"] == "ACCEPT") == sorted(
            [*(f"v{i}" for i in range(8)), "rel3:a"])
        s = scrape(port)
        labels = dict(group="gm", topic=topic, partition="0")
        assert value(s, "krait_share_partition_acquired_records_total", **labels) == 12  # 10 + 2 again
        assert value(s, "krait_share_partition_redelivered_records_total", **labels) == 2
        assert value(s, "krait_share_partition_archived_records_total", **labels) == 1
        # everything acknowledged: nothing in flight any more
        assert value(s, "kafka_server_sharepartitionmetrics_inflightmessagecount", **labels) == 0
        assert ("kafka_server_sharepartitionmetrics_inflightbatchcount", frozenset(labels.items())) in s
    finally:
        b.stop()
