"""ZkSecurityStore against a real ZooKeeper (the session's `zookeeper` fixture, a chroot per
test): what one broker's store writes, in Kafka's ZooKeeper layout (the znode paths and
JSON of AclAuthorizer and AdminZkClient), another broker's store sees through the change
notifications, on its event loop; a new store reloads everything; the last ACL of a
resource takes its znode with it, an emptied quota entity its nodes; nodes and
notifications written as Kafka writes them are read."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import threading
import time

import pytest
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.security.acls import AclBinding, AclPermissionType, PatternType, binding_to_dict
from broker.security.operations import AclOperation, ResourceType
from broker.security.store import entity_path
from broker.security.zk_store import (
    ZkSecurityStore,
    acl_node_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    storable_name,
)
from protocol.errors import ErrorCode, KafkaError

CRED = "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"


def row(rtype: ResourceType, name: str, principal: str = "User:alice", op: AclOperation = AclOperation.READ,
        pattern: PatternType = PatternType.LITERAL, perm: AclPermissionType = AclPermissionType.ALLOW,
        host: str = "*") -> dict[str, str]:
    return binding_to_dict(AclBinding.of(rtype, name, pattern, principal, host, op, perm))


def _wait(cond, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def doc(client: KazooClient, path: str):
    data, _ = client.get(path)
    assert b" " not in data and b"\n" not in data  # Jackson's compact form
    return json.loads(data)


def notifications(client: KazooClient, root: str) -> list[bytes]:
    return [client.get(f"{root}/{c}")[0] for c in sorted(client.get_children(root))]


# --- pure: Kafka's names and JSON -------------------------------------------------------------------
def test_paths_are_kafkas():
    assert acl_node_path(("TOPIC", "orders", "LITERAL")) == "/kafka-acl/Topic/orders"
    assert acl_node_path(("GROUP", "app-", "PREFIXED")) == "/kafka-acl-extended/prefixed/Group/app-"
    assert acl_node_path(("TRANSACTIONAL_ID", "tx", "LITERAL")) == "/kafka-acl/TransactionalId/tx"
    assert acl_node_path(("DELEGATION_TOKEN", "t", "LITERAL")) == "/kafka-acl/DelegationToken/t"
    assert acl_node_path(("CLUSTER", "kafka-cluster", "LITERAL")) == "/kafka-acl/Cluster/kafka-cluster"


def test_acl_json_is_kafkas():
    data = encode_acls([("User:alice", "*", "READ", "ALLOW"), ("User:bob", "10.0.0.1", "CLUSTER_ACTION", "DENY"),
                        ("User:*", "*", "IDEMPOTENT_WRITE", "ALLOW"), ("User:c", "*", "DESCRIBE_CONFIGS", "ALLOW")])
    assert b" " not in data
    parsed = json.loads(data)
    assert parsed["version"] == 1
    assert sorted(parsed["acls"], key=lambda a: a["principal"]) == [
        {"principal": "User:*", "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction", "host": "10.0.0.1"},
        {"principal": "User:c", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]
    # ZkData's example, as Jackson-era Kafka documents it (spaces and all)
    kafka = b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny","operation": "Read","principal": "User:alice"}]}'
    assert decode_acls(kafka) == {("User:alice", "host1", "READ", "DENY")}
    assert decode_acls(encode_acls([("User:x", "*", "ALL", "ALLOW")])) == {("User:x", "*", "ALL", "ALLOW")}
    assert decode_acls(b'{"version":2,"acls":[]}') == frozenset()  # AclEntry.fromBytes requires version 1


def test_acl_change_notifications_are_kafkas():
    assert encode_acl_change(("TOPIC", "orders", "LITERAL")) == b"TOPIC:orders"
    assert encode_acl_change(("TRANSACTIONAL_ID", "tx", "LITERAL")) == b"TRANSACTIONAL_ID:tx"
    assert json.loads(encode_acl_change(("GROUP", "app-", "PREFIXED"))) == {
        "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
    # LiteralAclStoreTest.shouldDecodeResourceUsingTwoPartLogic
    name = "PREFIXED:this, including the PREFIXED part, is a valid two part group name"
    assert decode_acl_change("/kafka-acl-changes", f"GROUP:{name}".encode()) == ("GROUP", name, "LITERAL")
    assert decode_acl_change("/kafka-acl-extended-changes", encode_acl_change(("TOPIC", "t-", "PREFIXED"))) == (
        "TOPIC", "t-", "PREFIXED")
    with pytest.raises(ValueError):
        decode_acl_change("/kafka-acl-changes", b"no-separator")


def test_storable_names():
    assert storable_name("orders") and storable_name("team/app") and storable_name("a:b c")
    for bad in ("", "a//b", "x/", "/x", ".", "a/../b", "bell\x07", "smile\U0001F600"):
        assert not storable_name(bad), bad


# --- against ZooKeeper ------------------------------------------------------------------------------
@pytest.fixture
def connect(zookeeper, zk_connect):
    root = KazooClient(hosts=zookeeper.connect)
    root.start(10)
    root.ensure_path("/" + zk_connect.partition("/")[2])
    root.stop()
    root.close()
    return zk_connect


@pytest.fixture
def loop():
    """The brokers' event loop, on a thread of its own (as a broker's)."""
    lp = asyncio.new_event_loop()
    thread = threading.Thread(target=lp.run_forever, daemon=True)
    thread.start()
    lp.thread = thread
    yield lp
    lp.call_soon_threadsafe(lp.stop)
    thread.join(5)
    lp.close()


def on_loop(lp, fn, *args):
    """Run fn on the loop (where a broker's handlers call the store) and return its result
    (a coroutine's, for the store's writes)."""
    fut: concurrent.futures.Future = concurrent.futures.Future()

    async def run():
        try:
            result = fn(*args)
            fut.set_result(await result if inspect.isawaitable(result) else result)
        except BaseException as exc:
            fut.set_exception(exc)

    asyncio.run_coroutine_threadsafe(run(), lp)
    return fut.result(15)


@pytest.fixture
def cluster(connect, loop):
    """make() -> a broker's store on a kazoo session of its own, loaded on the loop; .raw: a
    plain client (an operator's, or a Kafka broker's)."""
    made: list[tuple[KazooClient, ZkSecurityStore | None]] = []

    def client() -> KazooClient:
        c = KazooClient(hosts=connect)
        c.start(10)
        made.append((c, None))
        return c

    def make(on=None, **kw) -> ZkSecurityStore:
        c = client()
        store = ZkSecurityStore(c, on or loop, **kw)
        store.calls = []
        store.listeners.append(lambda: store.calls.append(threading.current_thread()))
        on_loop(on or loop, store.load)
        made.append((c, store))
        return store

    make.raw = client()
    yield make
    for c, store in reversed(made):
        if store is not None:
            store.stop()
        else:
            c.stop()
            c.close()


def view(lp, store: ZkSecurityStore):
    return on_loop(lp, lambda: ([dict(r) for r in store.acls], {p: dict(c) for p, c in store.entities.items()}))


def test_acls_written_by_one_broker_are_seen_by_another(cluster, loop):
    a, b = cluster(), cluster()
    raw = cluster.raw
    rows = [row(ResourceType.TOPIC, "orders"),
            row(ResourceType.TOPIC, "orders", "User:bob", AclOperation.WRITE, host="10.0.0.1"),
            row(ResourceType.GROUP, "app-", pattern=PatternType.PREFIXED, perm=AclPermissionType.DENY),
            row(ResourceType.CLUSTER, "kafka-cluster", "User:admin", AclOperation.CLUSTER_ACTION)]
    on_loop(loop, a.set_acls, rows)
    assert sorted(map(str, view(loop, a)[0])) == sorted(map(str, rows))
    _wait(lambda: view(loop, b)[0] == view(loop, a)[0])
    # b's listeners ran on the loop's thread; a's own notifications change nothing more
    assert b.calls and set(b.calls) == {loop.thread}
    assert a.calls == [loop.thread]
    topic = doc(raw, "/kafka-acl/Topic/orders")
    assert topic["version"] == 1
    assert sorted(topic["acls"], key=lambda e: e["principal"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "10.0.0.1"}]
    assert doc(raw, "/kafka-acl-extended/prefixed/Group/app-") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Deny", "operation": "Read", "host": "*"}]}
    assert doc(raw, "/kafka-acl/Cluster/kafka-cluster")["acls"][0]["operation"] == "ClusterAction"
    # one sequential notification per resource, in Kafka's two formats
    assert sorted(raw.get_children("/kafka-acl-changes")) == ["acl_changes_0000000000", "acl_changes_0000000001"]
    assert sorted(notifications(raw, "/kafka-acl-changes")) == [b"CLUSTER:kafka-cluster", b"TOPIC:orders"]
    assert [json.loads(n) for n in notifications(raw, "/kafka-acl-extended-changes")] == [
        {"version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}]
    # Kafka's createAclPaths: a directory per resource type under both stores
    assert set(raw.get_children("/kafka-acl")) == {"Topic", "Group", "Cluster", "TransactionalId",
                                                    "DelegationToken", "User"}
    assert "Topic" in raw.get_children("/kafka-acl-extended/prefixed")


def test_the_last_acl_of_a_resource_takes_its_znode(cluster, loop):
    a, b = cluster(), cluster()
    raw = cluster.raw
    alice, bob = row(ResourceType.TOPIC, "t"), row(ResourceType.TOPIC, "t", "User:bob")
    on_loop(loop, a.set_acls, [alice, bob])
    on_loop(loop, a.set_acls, [bob])
    assert [e["principal"] for e in doc(raw, "/kafka-acl/Topic/t")["acls"]] == ["User:bob"]
    _wait(lambda: view(loop, b)[0] == [bob])
    on_loop(loop, a.set_acls, [])
    assert raw.exists("/kafka-acl/Topic/t") is None
    assert raw.exists("/kafka-acl/Topic") is not None
    _wait(lambda: view(loop, b)[0] == [])
    assert notifications(raw, "/kafka-acl-changes") == [b"TOPIC:t"] * 3


def test_a_concurrent_change_to_the_same_resource_is_kept(cluster, loop):
    """Kafka's read-modify-write on the znode: what another broker wrote meanwhile (its
    notification not yet seen) stays."""
    a = cluster()
    raw = cluster.raw
    raw.create("/kafka-acl/Topic/t", encode_acls([("User:bob", "*", "WRITE", "ALLOW")]))  # no notification
    alice = row(ResourceType.TOPIC, "t")
    on_loop(loop, a.set_acls, [alice])
    assert {e["principal"] for e in doc(raw, "/kafka-acl/Topic/t")["acls"]} == {"User:alice", "User:bob"}
    bob = row(ResourceType.TOPIC, "t", "User:bob", AclOperation.WRITE)
    _wait(lambda: sorted(map(str, view(loop, a)[0])) == sorted(map(str, [alice, bob])))
    on_loop(loop, a.set_acls, [bob])  # alice's removed: bob's stays
    assert doc(raw, "/kafka-acl/Topic/t")["acls"] == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}]


def test_brokers_racing_on_one_resource_lose_nothing(cluster, loop):
    """Two brokers (two event loops) adding ACLs to one resource at once: the conditional
    writes retry, every ACL lands, both views converge."""
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        a, b = cluster(), cluster(on=other)

        def add(lp, store, principal):
            for i in range(8):
                on_loop(lp, lambda i=i: store.set_acls([*store.acls, row(ResourceType.TOPIC, "hot", f"{principal}{i}")]))

        racers = [threading.Thread(target=add, args=(loop, a, "User:a")),
                  threading.Thread(target=add, args=(other, b, "User:b"))]
        for t in racers:
            t.start()
        for t in racers:
            t.join(30)
        assert len(doc(cluster.raw, "/kafka-acl/Topic/hot")["acls"]) == 16
        _wait(lambda: len(view(loop, a)[0]) == 16 and view(other, b)[0] == view(loop, a)[0])
    finally:
        for store in (a, b):
            store.stop()
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()


def test_scram_credentials_and_quotas_are_seen_by_another_broker(cluster, loop):
    a, b = cluster(), cluster()
    raw = cluster.raw
    on_loop(loop, a.alter_entity, "users/alice", {"SCRAM-SHA-256": CRED, "producer_byte_rate": "1024"})
    on_loop(loop, a.alter_entity, "users/alice/clients/app", {"consumer_byte_rate": "2048"})
    on_loop(loop, a.alter_entity, "clients/<default>", {"request_percentage": "50"})
    on_loop(loop, a.alter_entity, "users/<default>", {"producer_byte_rate": "10"})
    dn = entity_path({"user": "CN=a,O=b"})
    on_loop(loop, a.alter_entity, dn, {"SCRAM-SHA-512": CRED})
    assert doc(raw, "/config/users/alice") == {"version": 1, "config": {"SCRAM-SHA-256": CRED,
                                                                         "producer_byte_rate": "1024"}}
    assert doc(raw, "/config/users/alice/clients/app") == {"version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert doc(raw, "/config/clients/<default>") == {"version": 1, "config": {"request_percentage": "50"}}
    assert doc(raw, "/config/users/<default>") == {"version": 1, "config": {"producer_byte_rate": "10"}}
    assert doc(raw, "/config/users/CN%3Da%2CO%3Db") == {"version": 1, "config": {"SCRAM-SHA-512": CRED}}
    changes = sorted(raw.get_children("/config/changes"))
    assert changes == [f"config_change_{i:010d}" for i in range(5)]
    assert [json.loads(n) for n in notifications(raw, "/config/changes")] == [
        {"version": 2, "entity_path": p} for p in
        ("users/alice", "users/alice/clients/app", "clients/<default>", "users/<default>", "users/CN%3Da%2CO%3Db")]
    _wait(lambda: view(loop, b)[1] == view(loop, a)[1])
    assert len(view(loop, a)[1]) == 5
    assert on_loop(loop, b.entity_config, "users/alice")["SCRAM-SHA-256"] == CRED
    assert on_loop(loop, b.entity_config, dn) == {"SCRAM-SHA-512": CRED}
    # a change of one key: the rest of the node stays, the other broker follows
    on_loop(loop, a.alter_entity, "users/alice", {"producer_byte_rate": None})
    assert doc(raw, "/config/users/alice") == {"version": 1, "config": {"SCRAM-SHA-256": CRED}}
    _wait(lambda: on_loop(loop, b.entity_config, "users/alice") == {"SCRAM-SHA-256": CRED})


def test_a_concurrent_change_to_the_same_entity_is_kept(cluster, loop):
    a = cluster()
    raw = cluster.raw
    on_loop(loop, a.alter_entity, "users/alice", {"SCRAM-SHA-256": CRED})
    # another broker's write whose notification has not arrived
    raw.set("/config/users/alice", zk.encode_config({"SCRAM-SHA-256": CRED, "SCRAM-SHA-512": CRED}))
    on_loop(loop, a.alter_entity, "users/alice", {"producer_byte_rate": "9"})
    assert doc(raw, "/config/users/alice")["config"] == {"SCRAM-SHA-256": CRED, "SCRAM-SHA-512": CRED,
                                                         "producer_byte_rate": "9"}
    assert on_loop(loop, a.entity_config, "users/alice")["SCRAM-SHA-512"] == CRED


def test_emptied_entities_are_cleaned_as_kafka_does(cluster, loop):
    a, b = cluster(), cluster()
    raw = cluster.raw
    on_loop(loop, a.alter_entity, "users/bob/clients/app", {"producer_byte_rate": "1"})
    assert raw.get("/config/users/bob")[0] in (b"", None)  # a parent made by createRecursive
    on_loop(loop, a.alter_entity, "users/alice", {"SCRAM-SHA-256": CRED})
    on_loop(loop, a.alter_entity, "users/alice/clients/app", {"producer_byte_rate": "1"})
    on_loop(loop, a.alter_entity, "users/alice/clients/other", {"producer_byte_rate": "2"})
    _wait(lambda: len(view(loop, b)[1]) == 4)
    # bob: nothing left at all, the user's node goes too
    on_loop(loop, a.alter_entity, "users/bob/clients/app", {"producer_byte_rate": None})
    assert raw.exists("/config/users/bob") is None
    # alice: one of two clients goes, then the other with the clients node; alice stays
    on_loop(loop, a.alter_entity, "users/alice/clients/app", {"producer_byte_rate": None})
    assert raw.get_children("/config/users/alice/clients") == ["other"]
    on_loop(loop, a.alter_entity, "users/alice/clients/other", {"producer_byte_rate": None})
    assert raw.exists("/config/users/alice/clients") is None
    assert doc(raw, "/config/users/alice") == {"version": 1, "config": {"SCRAM-SHA-256": CRED}}
    on_loop(loop, a.alter_entity, "users/alice", {"SCRAM-SHA-256": None})
    assert raw.get_children("/config/users") == []
    _wait(lambda: view(loop, b)[1] == {})


def test_a_user_with_clients_keeps_an_empty_node(cluster, loop):
    """tryCleanQuotaNodes deletes only a node without children: an emptied user with a
    <user, client-id> quota keeps its node, config empty."""
    a = cluster()
    raw = cluster.raw
    on_loop(loop, a.alter_entity, "users/carol", {"producer_byte_rate": "5"})
    on_loop(loop, a.alter_entity, "users/carol/clients/app", {"producer_byte_rate": "1"})
    on_loop(loop, a.alter_entity, "users/carol", {"producer_byte_rate": None})
    assert doc(raw, "/config/users/carol") == {"version": 1, "config": {}}
    assert view(loop, a)[1] == {"users/carol/clients/app": {"producer_byte_rate": "1"}}


def test_a_new_store_reloads_everything(cluster, loop):
    a = cluster()
    rows = [row(ResourceType.TOPIC, "orders"), row(ResourceType.GROUP, "team/app"),  # nested znodes
            row(ResourceType.TRANSACTIONAL_ID, "tx-", "User:*", AclOperation.WRITE, PatternType.PREFIXED),
            row(ResourceType.USER, "bob", "User:alice", AclOperation.CREATE_TOKENS)]
    on_loop(loop, a.set_acls, rows)
    on_loop(loop, a.alter_entity, "users/alice", {"SCRAM-SHA-256": CRED})
    on_loop(loop, a.alter_entity, "users/alice/clients/app", {"producer_byte_rate": "1"})
    on_loop(loop, a.alter_entity, "clients/app", {"consumer_byte_rate": "2"})
    assert cluster.raw.exists("/kafka-acl/Group/team/app") is not None
    acls, entities = view(loop, a)
    a.stop()
    c = cluster()  # a restarted broker: a new session, a new store
    assert view(loop, c) == (acls, entities)
    assert sorted(map(str, acls)) == sorted(map(str, rows))
    assert entities == {"users/alice": {"SCRAM-SHA-256": CRED}, "users/alice/clients/app": {"producer_byte_rate": "1"},
                        "clients/app": {"consumer_byte_rate": "2"}}


def test_nodes_and_notifications_written_by_kafka_are_read(cluster, loop):
    a = cluster()
    raw = cluster.raw
    raw.create("/config/users/carol", b'{"version":1,"config":{"consumer_byte_rate":"2048"}}')
    raw.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/carol"}', sequence=True)
    # version 1 notifications (entity_type / entity_name) and other entity types
    raw.create("/config/clients/app", b'{"version":1,"config":{"producer_byte_rate":"7"}}')
    raw.create("/config/changes/config_change_",
               b'{"version":1,"entity_type":"clients","entity_name":"app"}', sequence=True)
    raw.create("/config/changes/config_change_", zk.encode_config_change("topics/orders"), sequence=True)
    raw.create("/kafka-acl/Group/g", b'{"version": 1, "acls": [ { "host":"*", "permissionType": "Deny",'
                                     b'"operation": "Describe","principal": "User:carol"}]}')
    raw.create("/kafka-acl-changes/acl_changes_", b"GROUP:g", sequence=True)
    raw.create("/kafka-acl-extended/prefixed/Topic/logs-",
               encode_acls([("User:carol", "*", "READ", "ALLOW")]))
    raw.create("/kafka-acl-extended-changes/acl_changes_",
               b'{"version":1,"resourceType":"TOPIC","name":"logs-","patternType":"PREFIXED"}', sequence=True)
    _wait(lambda: len(view(loop, a)[0]) == 2 and len(view(loop, a)[1]) == 2)
    acls, entities = view(loop, a)
    assert entities == {"users/carol": {"consumer_byte_rate": "2048"}, "clients/app": {"producer_byte_rate": "7"}}
    assert row(ResourceType.GROUP, "g", "User:carol", AclOperation.DESCRIBE, perm=AclPermissionType.DENY) in acls
    assert row(ResourceType.TOPIC, "logs-", "User:carol", pattern=PatternType.PREFIXED) in acls
    # a notification of a deletion: the node is gone, so is the view's entry
    raw.delete("/kafka-acl/Group/g")
    raw.create("/kafka-acl-changes/acl_changes_", b"GROUP:g", sequence=True)
    _wait(lambda: len(view(loop, a)[0]) == 1)


def test_a_name_zookeeper_cannot_hold_is_refused(cluster, loop):
    a = cluster()
    on_loop(loop, a.set_acls, [row(ResourceType.TOPIC, "t")])
    calls = len(a.calls)
    with pytest.raises(KafkaError) as err:
        on_loop(loop, a.set_acls, [row(ResourceType.TOPIC, "t"), row(ResourceType.GROUP, "a//b")])
    assert err.value.error_code == ErrorCode.invalid_request
    assert view(loop, a)[0] == [row(ResourceType.TOPIC, "t")]
    assert len(a.calls) == calls + 1  # the authorizer reloads what the store holds
    assert cluster.raw.get_children("/kafka-acl/Group") == []


def test_expired_notifications_are_purged(cluster, loop):
    """ZkNodeChangeNotificationListener purges what is older than changeExpirationMs (15
    minutes; here 0, so every processed notification goes)."""
    a = cluster(change_expiration_ms=0)
    b = cluster()
    raw = cluster.raw
    on_loop(loop, b.alter_entity, "users/alice", {"SCRAM-SHA-256": CRED})
    on_loop(loop, b.set_acls, [row(ResourceType.TOPIC, "t")])
    _wait(lambda: view(loop, a) == view(loop, b))
    _wait(lambda: not raw.get_children("/config/changes") and not raw.get_children("/kafka-acl-changes"))
    assert raw.exists("/config/users/alice") is not None and raw.exists("/kafka-acl/Topic/t") is not None
