"""Client-compatibility behaviours seen from real clients: authorized operations reported
without an authorizer (through confluent-kafka's AdminClient and Metadata v8-v10 on the
wire). Transactions with real clients are tested in tests/transactions/."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from broker.tools.wire import WireClient
from protocol.apis import ApiKey

TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
             AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
               AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
GROUP_OPS = {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}
NOT_REQUESTED = -(1 << 31)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ authorized operations
def test_authorized_operations_through_confluent_admin(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic, group = _name("ops"), _name("ops-g")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)

    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    assert admin.describe_cluster(include_authorized_operations=False).result(10).authorized_operations is None

    desc = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(10)
    assert set(desc.authorized_operations) == TOPIC_OPS
    plain = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=False)[topic].result(10)
    assert plain.authorized_operations is None

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 20
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        g = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(10)
        assert set(g.authorized_operations) == GROUP_OPS
    finally:
        c.close()


def _request(broker, api_key: int, version: int, **fields):
    with WireClient("127.0.0.1", broker.port, timeout=10) as c:
        return c.request(api_key, version, **fields)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_v8_to_v10_cluster_and_topic_operations(broker, version):
    """Metadata v8-10 carries cluster operations (librdkafka and kafka-python use them
    against older brokers); topic operations from v8 on."""
    topic = _name("ops-md")
    Producer({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10)  # auto-creates
    t = [dict(name=topic)]
    asked = _request(broker, ApiKey.METADATA, version, topics=t, allow_auto_topic_creation=False,
                     include_cluster_authorized_operations=True, include_topic_authorized_operations=True)
    assert asked.cluster_authorized_operations == sum(1 << o.value for o in CLUSTER_OPS)
    assert asked.topics[0].topic_authorized_operations == sum(1 << o.value for o in TOPIC_OPS)
    # not asked: Kafka's "not requested" marker, also after the asked-for reply was cached
    plain = _request(broker, ApiKey.METADATA, version, topics=t, allow_auto_topic_creation=False,
                     include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    assert plain.cluster_authorized_operations == NOT_REQUESTED
    assert plain.topics[0].topic_authorized_operations == NOT_REQUESTED
