"""Share groups under the authorizer, as Kafka checks them: READ on the group (else the
member gets GROUP_AUTHORIZATION_FAILED) and READ on the topic; librdkafka's share consumer
over SASL_PLAINTEXT with ACLs created by the admin user."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.security.test_acl_matrix import admin, broker, conf, name  # noqa: F401 (broker: a fixture)


def _allow(b, rtype: ResourceType, resource: str, user: str, op: AclOperation) -> None:
    acl = AclBinding(rtype, resource, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                     AclPermissionType.ALLOW)
    for f in admin(b).create_acls([acl]).values():
        f.result(10)


def _poll_until(c: ShareConsumer, n: int, timeout: float) -> tuple[list[bytes], list[str]]:
    got, errors = [], []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < n:
        try:
            for m in c.poll(0.5):
                if m.error() is None:
                    got.append(m.value())
                else:
                    errors.append(m.error().name())
        except KafkaException as exc:
            errors.append(exc.args[0].name())
            if len(errors) > 3:
                break
    return got, errors


def test_share_group_needs_read_on_group_and_topic(broker):  # noqa: F811
    topic, group = name("share-acl"), name("share-acl-g")
    admin(broker).create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer(conf(broker, "admin"))
    _allow(broker, ResourceType.TOPIC, topic, "alice", AclOperation.READ)
    # alice may read the topic but not the group: refused, nothing delivered
    c = ShareConsumer(conf(broker, "alice", **{"group.id": group}))
    c.subscribe([topic])
    for i in range(5):
        p.produce(topic, b"early-%d" % i)
    p.flush(10)
    got, errors = _poll_until(c, 1, 8)
    c.close()
    assert got == []
    assert "GROUP_AUTHORIZATION_FAILED" in errors, errors

    _allow(broker, ResourceType.GROUP, group, "alice", AclOperation.READ)
    c = ShareConsumer(conf(broker, "alice", **{"group.id": group}))
    c.subscribe([topic])
    _poll_until(c, 1, 3)  # joined; a new share group starts at the log end
    for i in range(5):
        p.produce(topic, b"late-%d" % i)
    p.flush(10)
    got, errors = _poll_until(c, 5, 20)
    c.close()
    assert sorted(got) == [b"late-%d" % i for i in range(5)], errors
