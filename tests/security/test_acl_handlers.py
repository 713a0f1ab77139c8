"""The handlers' ACL checks at the wire level (the exact answers Kafka's KafkaApis and
AclApis give), on one SASL_PLAINTEXT broker with a StandardAuthorizer (admin is the super
user, alice has only what each test grants her), plus the pure host formatting of
broker/security/access.py."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.security.access import java_host
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.krait_harness import BrokerProcess
from tests.security.secure_broker import call, frame, raw_connect, sasl_plain_login, wait_closed

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
CAROL = ("carol", "carol-secret")  # no ACL at all until a test grants her one

# Kafka's wire codes
TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, CREATE, DESCRIBE, ALL = 3, 4, 5, 8, 2
ALLOW = 3


# ---------------------------------------------------------------- pure


@pytest.mark.parametrize("given, java", [
    ("127.0.0.1", "127.0.0.1"),
    ("::1", "0:0:0:0:0:0:0:1"),
    ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
    ("2001:db8:0:0:1::ab", "2001:db8:0:0:1:0:0:ab"),
    ("::ffff:10.1.2.3", "10.1.2.3"),  # Java makes an IPv4-mapped address an Inet4Address
    ("not-an-ip", "not-an-ip"),
])
def test_client_host_is_written_as_java_writes_it(given: str, java: str) -> None:
    assert java_host(given) == java


# ---------------------------------------------------------------- the broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    users = dict([ADMIN, ALICE, CAROL])
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    b = BrokerProcess(str(tmp_path_factory.mktemp("acl-handlers") / "logs"))
    b.overrides.update({
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{b.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="admin-secret" {entries};',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    b.start()
    yield b
    b.stop()


def login(broker: BrokerProcess, user: tuple[str, str], source: str | None = None) -> socket.socket:
    sock = raw_connect(broker.port, source=source)
    assert sasl_plain_login(sock, user) == 0
    return sock


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[socket.socket]:
    sock = login(broker, ADMIN)
    yield sock
    sock.close()


@pytest.fixture(scope="module")
def alice(broker: BrokerProcess) -> Iterator[socket.socket]:
    sock = login(broker, ALICE)
    yield sock
    sock.close()


def acl(rtype: int, name: str, op: int, pattern: int = LITERAL, principal: str = "User:alice",
        host: str = "*") -> dict[str, Any]:
    return dict(resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal,
                host=host, operation=op, permission_type=ALLOW)


def grant(admin: socket.socket, *acls: dict[str, Any]) -> None:
    r = call(admin, ApiKey.CREATE_ACLS, 3, creations=list(acls))
    assert [x.error_code for x in r.results] == [ErrorCode.none] * len(acls)


def new_topic(admin: socket.socket, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    r = call(admin, ApiKey.CREATE_TOPICS, 7, topics=[dict(name=name, num_partitions=2, replication_factor=1,
                                                          assignments=[], configs=[])], timeout=10000,
             validate_only=False)
    assert r.topics[0].error_code == ErrorCode.none
    return name


def test_create_acls_answers_as_kafka(broker: BrokerProcess, admin: socket.socket, alice: socket.socket) -> None:
    # a CLUSTER resource must be named kafka-cluster: INVALID_REQUEST for that binding only
    r = call(admin, ApiKey.CREATE_ACLS, 3, creations=[acl(CLUSTER, "other", ALL), acl(TOPIC, "ok-t", READ)])
    assert [(x.error_code, x.error_message) for x in r.results] == [
        (ErrorCode.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.none, None)]
    # MATCH is a filter's pattern type: Kafka's binding constructor throws, the whole
    # request fails as UNKNOWN_SERVER_ERROR without a message
    r = call(admin, ApiKey.CREATE_ACLS, 3, creations=[acl(TOPIC, "x", READ, pattern=MATCH), acl(TOPIC, "y", READ)])
    assert [(x.error_code, x.error_message) for x in r.results] == [(ErrorCode.unknown_server_error, None)] * 2
    # not ALTER on the cluster
    r = call(alice, ApiKey.CREATE_ACLS, 3, creations=[acl(TOPIC, "z", READ)])
    assert r.results[0].error_code == ErrorCode.cluster_authorization_failed
    # an UNKNOWN code fails the request's parsing: Kafka closes the connection
    sock = login(broker, ADMIN)
    sock.sendall(frame(ApiKey.CREATE_ACLS, 3, creations=[acl(0, "x", READ)]))
    assert wait_closed(sock) == b""
    # DescribeAcls groups the bindings by resource pattern
    r = call(admin, ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=TOPIC, resource_name_filter="ok-t",
             pattern_type_filter=ANY, principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)
    assert r.error_code == ErrorCode.none
    assert [(x.resource_name, x.pattern_type, [(a.principal, a.operation) for a in x.acls]) for x in r.resources] \
        == [("ok-t", LITERAL, [("User:alice", READ)])]


def test_metadata_hides_and_refuses_and_reports_operations(admin: socket.socket, alice: socket.socket) -> None:
    seen, hidden = new_topic(admin, "md-seen"), new_topic(admin, "md-hidden")
    grant(admin, acl(TOPIC, seen, WRITE))
    everything = dict(topics=None, allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                      include_topic_authorized_operations=True)
    r = call(alice, ApiKey.METADATA, 10, **everything)
    names = {t.name for t in r.topics}
    assert seen in names and hidden not in names
    (t,) = [t for t in r.topics if t.name == seen]
    assert t.topic_authorized_operations == (1 << WRITE) | (1 << DESCRIBE)  # WRITE implies DESCRIBE
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    # the super user asks the same question (same bytes): the cache must not answer alice's
    r = call(admin, ApiKey.METADATA, 10, **everything)
    assert {seen, hidden} <= {t.name for t in r.topics}
    assert r.cluster_authorized_operations > 0

    ghost = f"md-ghost-{uuid.uuid4().hex[:6]}"
    r = call(alice, ApiKey.METADATA, 12, topics=[dict(name=hidden, topic_id=None), dict(name=ghost, topic_id=None)],
             allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [
        (hidden, ErrorCode.topic_authorization_failed, ()), (ghost, ErrorCode.topic_authorization_failed, ())]


def test_produce_fetch_and_list_offsets_per_topic(admin: socket.socket, alice: socket.socket) -> None:
    mine, other = new_topic(admin, "pf-mine"), new_topic(admin, "pf-other")
    grant(admin, acl(TOPIC, mine, DESCRIBE))
    r = call(alice, ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        dict(name=other, partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=-1)]),
        dict(name=mine, partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    # Kafka answers the refused topics after the others
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
        (mine, ErrorCode.none), (other, ErrorCode.topic_authorization_failed)]
    r = call(alice, ApiKey.FETCH, 11, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                 dict(topic=t, partitions=[dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                log_start_offset=-1, partition_max_bytes=1 << 20)])
                 for t in (mine, other)])
    assert [(t.topic, t.partitions[0].error_code) for t in r.responses] == [
        (mine, ErrorCode.topic_authorization_failed), (other, ErrorCode.topic_authorization_failed)]
    grant(admin, acl(TOPIC, mine, READ))
    r = call(alice, ApiKey.FETCH, 11, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                 dict(topic=mine, partitions=[dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                   log_start_offset=-1, partition_max_bytes=1 << 20)])])
    assert r.responses[0].partitions[0].error_code == ErrorCode.none


def test_groups_offsets_and_coordinators(admin: socket.socket, alice: socket.socket) -> None:
    topic = new_topic(admin, "grp")
    mine, other = f"g-mine-{uuid.uuid4().hex[:6]}", f"g-other-{uuid.uuid4().hex[:6]}"
    grant(admin, acl(GROUP, mine, READ), acl(TOPIC, topic, READ))
    r = call(alice, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=[mine, other])
    assert [c.error_code for c in r.coordinators] == [ErrorCode.none, ErrorCode.group_authorization_failed]
    r = call(alice, ApiKey.OFFSET_COMMIT, 8, group_id=mine, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[
                 dict(name=topic, partitions=[dict(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                   committed_metadata="")]),
                 dict(name="g-secret", partitions=[dict(partition_index=0, committed_offset=5,
                                                        committed_leader_epoch=-1, committed_metadata="")])])
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {
        topic: ErrorCode.none, "g-secret": ErrorCode.topic_authorization_failed}
    r = call(alice, ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[
        dict(group_id=other, topics=None),
        dict(group_id=mine, topics=[dict(name=topic, partition_indexes=[0]), dict(name="g-secret",
                                                                                 partition_indexes=[0])])])
    assert r.groups[0].group_id == other and r.groups[0].error_code == ErrorCode.group_authorization_failed
    got = {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in r.groups[1].topics}
    assert got == {topic: (5, ErrorCode.none), "g-secret": (-1, ErrorCode.topic_authorization_failed)}
    r = call(alice, ApiKey.JOIN_GROUP, 9, group_id=other, session_timeout=10000, rebalance_timeout=10000,
             member_id="", group_instance_id=None, protocol_type="consumer", protocols=[], reason=None)
    assert r.error_code == ErrorCode.group_authorization_failed and r.generation_id == -1
    r = call(alice, ApiKey.DESCRIBE_GROUPS, 5, groups=[mine, other], include_authorized_operations=True)
    # Kafka lists the refused groups first
    assert [(g.group_id, g.error_code) for g in r.groups] == [
        (other, ErrorCode.group_authorization_failed), (mine, ErrorCode.none)]
    assert r.groups[1].authorized_operations == (1 << READ) | (1 << DESCRIBE)


def test_configs_transactions_and_cluster_apis(broker: BrokerProcess, admin: socket.socket,
                                               alice: socket.socket) -> None:
    topic = new_topic(admin, "cfg")
    r = call(alice, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False, resources=[
        dict(resource_type=2, resource_name=topic, configuration_keys=None),
        dict(resource_type=4, resource_name="", configuration_keys=None)])
    assert [(x.resource_name, x.error_code, x.error_message) for x in r.results] == [
        (topic, ErrorCode.topic_authorization_failed, "Topic authorization failed."),
        ("", ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")]
    r = call(alice, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
        dict(resource_type=2, resource_name=topic, configs=[dict(name="retention.ms", config_operation=0,
                                                                 value="1000")])])
    assert (r.responses[0].error_code, r.responses[0].error_message) == (ErrorCode.topic_authorization_failed, None)

    # an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    carol = login(broker, CAROL)
    try:
        init = dict(transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
        assert call(carol, ApiKey.INIT_PRODUCER_ID, 4, **init).error_code == ErrorCode.cluster_authorization_failed
        r = call(carol, ApiKey.INIT_PRODUCER_ID, 4, **{**init, "transactional_id": "tx-a"})
        assert r.error_code == ErrorCode.transactional_id_authorization_failed
        grant(admin, acl(TOPIC, "cfg-w", WRITE, pattern=PREFIXED, principal="User:carol"))
        assert call(carol, ApiKey.INIT_PRODUCER_ID, 4, **init).error_code == ErrorCode.none
    finally:
        carol.close()

    assert call(alice, ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None).error_code == ErrorCode.cluster_authorization_failed
    r = call(alice, ApiKey.DELETE_RECORDS, 2, timeout=5000, topics=[
        dict(name=topic, partitions=[dict(partition_index=0, offset=0)])])
    assert r.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed

    # hosts: an ACL for another client address does not apply to this one
    grant(admin, acl(TOPIC, topic, DESCRIBE, host="127.0.0.2"))
    r = call(alice, ApiKey.METADATA, 12, topics=[dict(name=topic, topic_id=None)], allow_auto_topic_creation=False,
             include_topic_authorized_operations=False)
    assert r.topics[0].error_code == ErrorCode.topic_authorization_failed
    try:
        other_host = login(broker, ALICE, source="127.0.0.2")
    except OSError:
        pytest.skip("127.0.0.2 is not a usable source address here")
    try:
        r = call(other_host, ApiKey.METADATA, 12, topics=[dict(name=topic, topic_id=None)],
                 allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        assert r.topics[0].error_code == ErrorCode.none
    finally:
        other_host.close()
