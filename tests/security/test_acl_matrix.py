"""ACLs end to end: one broker with a SASL_PLAINTEXT listener (PLAIN users admin, alice and
bob; admin is the super user; ``allow.everyone.if.no.acl.found`` is false, Kafka's
default), real clients (confluent-kafka's AdminClient, Producer and Consumer, kafka-python's
KafkaAdminClient and KafkaConsumer) and Kafka's handler checks: ACLs created, described and
deleted through the admin APIs, literal and prefixed patterns, DENY over ALLOW, hosts,
implied DESCRIBE, Metadata hiding what a principal may not describe, DescribeGroups'
authorized operations, and ACLs that outlive a restart.

Each test uses its own topic / group names (prefixed by the test) so that the tests of the
module share one broker without seeing each other's ACLs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.krait_harness import BrokerProcess

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def _jaas() -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="admin-secret" {entries};')


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(str(tmp_path_factory.mktemp("acl-matrix") / "logs"))
    b.overrides.update({
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas(),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "true",
    })
    b.start()
    yield b
    # the kept AdminClients would otherwise retry the stopped broker for the rest of the run
    for key in [k for k in _ADMINS if k[0] == b.port]:
        del _ADMINS[key]
    b.stop()


def conf(broker: BrokerProcess, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra}


_ADMINS: dict[tuple[int, str], AdminClient] = {}


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One AdminClient per user, kept alive: librdkafka fails the futures of a client that
    is garbage-collected before they complete."""
    key = (broker.port, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(broker: BrokerProcess, *names: str) -> None:
    for fut in admin(broker).create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=15).values():
        fut.result(timeout=15)


def allow(rtype: ResourceType, rname: str, principal: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL, host: str = "*",
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, rname, pattern, principal, host, op, permission)


def add_acls(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for fut in admin(broker).create_acls(list(bindings), request_timeout=15).values():
        fut.result(timeout=15)


def produce(broker: BrokerProcess, user: str, topic: str, n: int = 1) -> list[KafkaError | None]:
    """Send ``n`` records; the delivery error of each (None when delivered)."""
    errors: list[KafkaError | None] = []
    p = Producer(conf(broker, user, **{"message.timeout.ms": 8000, "enable.idempotence": False}))
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, _msg: errors.append(err))
    p.flush(15)
    return errors


def wait_for(pred, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


# ---------------------------------------------------------------- the admin APIs


def test_acls_created_described_deleted_with_confluent_admin(broker: BrokerProcess) -> None:
    topic = name("adm")
    b1 = allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ)
    b2 = allow(ResourceType.TOPIC, topic[:5], "User:alice", AclOperation.WRITE, ResourcePatternType.PREFIXED)
    b3 = allow(ResourceType.GROUP, topic, "User:bob", AclOperation.READ, permission=AclPermissionType.DENY)
    add_acls(broker, b1, b2, b3)

    a = admin(broker)
    got = a.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                           AclOperation.ANY, AclPermissionType.ANY), request_timeout=15).result()
    assert {b1, b2, b3} <= set(got)
    # MATCH: the patterns that apply to the topic (the literal and the prefixed one)
    match = a.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                                             AclOperation.ANY, AclPermissionType.ANY), request_timeout=15).result()
    assert {b1, b2} <= set(match) and b3 not in match

    # a principal without ALTER on the cluster may neither create nor delete, nor DESCRIBE list them
    alice = admin(broker, "alice")
    with pytest.raises(KafkaException) as exc:
        for fut in alice.create_acls([allow(ResourceType.TOPIC, "x", "User:alice", AclOperation.ALL)],
                                     request_timeout=15).values():
            fut.result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        for fut in alice.delete_acls([AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                       AclOperation.ANY, AclPermissionType.ANY)],
                                     request_timeout=15).values():
            fut.result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # invalid bindings answer Kafka's per-binding errors, the valid ones are created
    bad = allow(ResourceType.BROKER, "x", "User:alice", AclOperation.ALL)  # BROKER: not an ACL resource type
    futs = a.create_acls([allow(ResourceType.TOPIC, topic, "User:carol", AclOperation.READ), bad],
                         request_timeout=15)
    results = {}
    for binding, fut in futs.items():
        try:
            fut.result(timeout=15)
            results[binding] = None
        except KafkaException as e:
            results[binding] = e.args[0].code()
    assert results[bad] is not None and list(results.values()).count(None) == 1

    deleted = a.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                                              AclOperation.ANY, AclPermissionType.ANY)], request_timeout=15)
    (matched,) = [f.result(timeout=15) for f in deleted.values()]
    assert b1 in matched and b2 not in matched and len(matched) == 2  # alice's READ and carol's READ
    left = a.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                                            AclOperation.ANY, AclPermissionType.ANY), request_timeout=15).result()
    assert left == []


def test_acls_with_kafka_python_admin(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as PT
    from kafka.admin import ResourceType as RT
    from kafka.errors import ClusterAuthorizationFailedError

    topic = name("kpy")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="admin",
                              sasl_plain_password=USERS["admin"], request_timeout_ms=15000)
    try:
        acl = ACL("User:bob", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                  ResourcePattern(RT.TOPIC, topic, PT.LITERAL))
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(RT.TOPIC, topic, PT.ANY))
        acls, err = client.describe_acls(flt)
        assert err.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:bob", ACLOperation.DESCRIBE, topic)]
        deleted = client.delete_acls([flt])
        assert len(deleted[0][1]) == 1
        assert client.describe_acls(flt)[0] == []
    finally:
        client.close()
    # DescribeAcls needs DESCRIBE on the cluster (checked here: librdkafka drops the
    # top-level error of a DescribeAcls response)
    alice = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password=USERS["alice"], request_timeout_ms=15000)
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(flt)
    finally:
        alice.close()


# ---------------------------------------------------------------- produce, consume, groups


def test_produce_and_consume_need_topic_and_group_acls(broker: BrokerProcess) -> None:
    prefix = name("pc")
    mine, secret, group = f"{prefix}-mine", f"{prefix}-secret", f"{prefix}-g"
    create_topics(broker, mine, secret)
    add_acls(broker,
             allow(ResourceType.TOPIC, f"{prefix}-m", "User:alice", AclOperation.WRITE, ResourcePatternType.PREFIXED),
             allow(ResourceType.TOPIC, mine, "User:alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ))

    assert produce(broker, "alice", mine, 3) == [None, None, None]
    (err,) = produce(broker, "alice", secret)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (err,) = produce(broker, "bob", mine)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    c = Consumer(conf(broker, "alice", **{"group.id": group, "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
    try:
        c.subscribe([mine])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert sorted(got) == [b"v0", b"v1", b"v2"]
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(mine, 0)], timeout=10)
        assert committed[0].offset == 3
    finally:
        c.close()

    # bob: no READ on the group
    c = Consumer(conf(broker, "bob", **{"group.id": group, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([mine])
        errors = []
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                errors.append(m.error().code())
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    finally:
        c.close()


def test_deny_wins_over_allow_and_hosts_must_match(broker: BrokerProcess) -> None:
    prefix = name("deny")
    open_, closed, far = f"{prefix}-open", f"{prefix}-closed", f"{prefix}-far"
    create_topics(broker, open_, closed, far)
    add_acls(broker,
             allow(ResourceType.TOPIC, prefix, "User:alice", AclOperation.WRITE, ResourcePatternType.PREFIXED),
             allow(ResourceType.TOPIC, closed, "User:*", AclOperation.WRITE, permission=AclPermissionType.DENY),
             allow(ResourceType.TOPIC, far, "User:bob", AclOperation.WRITE, host="10.9.9.9"))
    assert produce(broker, "alice", open_) == [None]
    (err,) = produce(broker, "alice", closed)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # bob's ALLOW names another host: from 127.0.0.1 he has nothing
    (err,) = produce(broker, "bob", far)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- what a principal sees


def test_metadata_hides_topics_and_implies_describe(broker: BrokerProcess) -> None:
    prefix = name("meta")
    readable, hidden = f"{prefix}-r", f"{prefix}-h"
    create_topics(broker, readable, hidden)
    # READ implies DESCRIBE: alice sees the topic she may read, not the other one
    add_acls(broker, allow(ResourceType.TOPIC, readable, "User:alice", AclOperation.READ))

    topics = admin(broker, "alice").list_topics(timeout=10).topics
    assert readable in topics and hidden not in topics
    assert readable in admin(broker).list_topics(timeout=10).topics  # the super user sees all
    assert {readable, hidden} & set(admin(broker, "bob").list_topics(timeout=10).topics) == set()

    # named: TOPIC_AUTHORIZATION_FAILED, whether the topic exists or not (no existence leak)
    md = admin(broker, "alice").list_topics(topic=hidden, timeout=10)
    assert md.topics[hidden].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    ghost = f"{prefix}-ghost"
    md = admin(broker, "bob").list_topics(topic=ghost, timeout=10)
    assert md.topics[ghost].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert ghost not in admin(broker).list_topics(timeout=10).topics  # and it was not auto-created

    # auto-creation needs CREATE on the cluster or the topic
    add_acls(broker, allow(ResourceType.TOPIC, f"{prefix}-auto", "User:alice", AclOperation.ALL,
                           ResourcePatternType.PREFIXED))
    auto = f"{prefix}-auto1"
    md = wait_for(lambda: (m := admin(broker, "alice").list_topics(topic=auto, timeout=10)).topics[auto].error is None
                  and m)
    assert md and auto in admin(broker).list_topics(timeout=10).topics


def test_describe_groups_and_cluster_authorized_operations(broker: BrokerProcess) -> None:
    prefix = name("ops")
    topic, group = f"{prefix}-t", f"{prefix}-g"
    create_topics(broker, topic)
    add_acls(broker,
             allow(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ),
             allow(ResourceType.GROUP, group, "User:alice", AclOperation.DELETE))
    c = Consumer(conf(broker, "alice", **{"group.id": group, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        wait_for(lambda: c.poll(0.5) is None and bool(c.assignment()))
        fut = admin(broker, "alice").describe_consumer_groups([group], include_authorized_operations=True,
                                                              request_timeout=15)[group]
        desc = fut.result(timeout=15)
        assert set(desc.authorized_operations) == {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE}
        # bob may not describe it
        with pytest.raises(KafkaException) as exc:
            admin(broker, "bob").describe_consumer_groups([group], request_timeout=15)[group].result(timeout=15)
        assert exc.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        # ListGroups: only the groups one may describe
        listed = admin(broker, "bob").list_consumer_groups(request_timeout=15).result(timeout=15)
        assert group not in {g.group_id for g in listed.valid}
        listed = admin(broker, "alice").list_consumer_groups(request_timeout=15).result(timeout=15)
        assert group in {g.group_id for g in listed.valid}
    finally:
        c.close()

    cluster = admin(broker).describe_cluster(include_authorized_operations=True, request_timeout=15).result()
    assert AclOperation.ALTER in set(cluster.authorized_operations)
    cluster = admin(broker, "alice").describe_cluster(include_authorized_operations=True,
                                                      request_timeout=15).result()
    assert not cluster.authorized_operations  # no DESCRIBE on the cluster: 0


def test_topic_admin_needs_create_delete_alter(broker: BrokerProcess) -> None:
    prefix = name("tadm")
    a = admin(broker, "alice")
    fut = a.create_topics([NewTopic(f"{prefix}-x", 1, 1)], request_timeout=15)[f"{prefix}-x"]
    with pytest.raises(KafkaException) as exc:
        fut.result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(broker, allow(ResourceType.TOPIC, prefix, "User:alice", AclOperation.CREATE,
                           ResourcePatternType.PREFIXED))
    a.create_topics([NewTopic(f"{prefix}-x", 1, 1)], request_timeout=15)[f"{prefix}-x"].result(timeout=15)
    # no DELETE yet
    with pytest.raises(KafkaException) as exc:
        a.delete_topics([f"{prefix}-x"], request_timeout=15)[f"{prefix}-x"].result(timeout=15)
    assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    add_acls(broker, allow(ResourceType.TOPIC, f"{prefix}-x", "User:alice", AclOperation.DELETE))
    a.delete_topics([f"{prefix}-x"], request_timeout=15)[f"{prefix}-x"].result(timeout=15)


# ---------------------------------------------------------------- persistence (last: restarts)


def test_acls_survive_a_restart(broker: BrokerProcess) -> None:
    prefix = name("rst")
    topic = f"{prefix}-t"
    create_topics(broker, topic)
    binding = allow(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE)
    add_acls(broker, binding)
    assert produce(broker, "bob", topic) == [None]
    broker.restart()
    got = admin(broker).describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None,
                                                       None, AclOperation.ANY, AclPermissionType.ANY),
                                      request_timeout=15).result()
    assert got == [binding]
    assert produce(broker, "bob", topic) == [None]
    (err,) = produce(broker, "alice", topic)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
