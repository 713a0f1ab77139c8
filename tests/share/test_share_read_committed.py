"""share.isolation.level=read_committed: a share group is given the records of committed
transactions and non-transactional records, never those of aborted transactions (Kafka
archives them); read_uncommitted gives them all. librdkafka's share consumer, a
transactional confluent-kafka producer."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.tools.admin_client import RESOURCE_GROUP
from broker.tools.admin_client import AdminClient as KraitAdmin
from tests.share.share_members import Member


def test_read_committed_share_group_skips_aborted_transactions(fresh_broker):
    b = fresh_broker
    topic = f"srtx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(15)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        assert p.flush(15) == 0  # written before the abort (an abort purges what is unsent)
        if outcome == "commit":
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(topic, b"plain", partition=0)
    assert plain.flush(10) == 0

    with KraitAdmin(b.bootstrap) as krait_admin:  # raises if refused
        krait_admin.incremental_alter_configs(RESOURCE_GROUP, "rc", {"share.isolation.level": "read_committed"})
    committed = Member(None, b.bootstrap, "rc", topic, idle_exit_ms=3000)
    uncommitted = Member(None, b.bootstrap, "ru", topic, idle_exit_ms=3000)
    committed.wait()
    uncommitted.wait()
    got = sorted(r["v"] for r in committed.records)
    assert got == sorted([*[f"commit-{i}" for i in range(5)] * 2, "plain"])
    assert not any(v.startswith("abort") for v in got)
    assert sum(r["v"].startswith("abort") for r in uncommitted.records) == 5, sorted((r["v"], r["o"]) for r in uncommitted.records)
