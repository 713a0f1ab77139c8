"""Admin APIs that clients call on any Kafka broker and that Krait answered with
"not supported by broker" before: the ACL APIs (answered as Kafka without an authorizer
answers them), ElectLeaders and DescribeProducers. Driven by confluent-kafka's and
kafka-python's admin clients over real sockets."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
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


def _topic(admin: AdminClient, partitions: int = 2) -> str:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _kafka_error(fut) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        fut.result(10)
    return info.value.args[0]


def test_acl_apis_answer_security_disabled_like_kafka_without_authorizer(admin):
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    # librdkafka reads DescribeAcls' top-level error but does not report it (it does the
    # same against Kafka without an authorizer): no ACLs instead of "not supported by broker"
    assert admin.describe_acls(any_filter).result(10) == []
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    (fut,) = admin.create_acls([binding]).values()
    assert _kafka_error(fut).code() == KafkaError.SECURITY_DISABLED
    (fut,) = admin.delete_acls([any_filter]).values()
    assert _kafka_error(fut).code() == KafkaError.SECURITY_DISABLED


def test_kafka_python_describe_acls_gets_security_disabled(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import SecurityDisabledError

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError):
            a.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                      permission_type=ACLPermissionType.ANY,
                                      resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                                             ACLResourcePatternType.ANY)))
    finally:
        a.close()


def test_elect_leaders_reports_election_not_needed(admin):
    topic = _topic(admin)
    res = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 1),
                                                       TopicPartition(topic, 7)]).result(10)
    errors = {tp.partition: (e.code() if e else None) for tp, e in res.items()}
    assert errors == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED,
                      7: KafkaError.UNKNOWN_TOPIC_OR_PART}
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)]).result(10)
    assert [e.code() for e in unclean.values()] == [KafkaError.ELECTION_NOT_NEEDED]
    # all partitions: Kafka leaves out those that already have their leader
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(10) == {}


def test_describe_producers_lists_idempotent_producer_state(broker, admin):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    topic = _topic(admin, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(5):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush(10)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        res = a.describe_producers([KTP(topic, 0)])
    finally:
        a.close()
    (prod,) = res[KTP(topic, 0)].active_producers
    assert prod.producer_id >= 0 and prod.producer_epoch == 0 and prod.last_sequence == 4, prod
    assert prod.last_timestamp > 0 and prod.current_transaction_start_offset == -1, prod
