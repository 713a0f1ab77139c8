"""A cluster whose only listener is SASL_SSL: brokers replicate and answer clients over TLS
with SASL PLAIN between themselves (inter.broker.listener.name,
sasl.mechanism.inter.broker.protocol), the authorizer on and the brokers' principal a super
user, as a Kafka operator would set it up. SCRAM credentials and ACLs written through one
broker live in ZooKeeper (Kafka's /config/users and /kafka-acl) and hold on every broker.
A real ZooKeeper, real brokers, librdkafka."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.cluster.cluster_harness import Cluster, wait_for
from tests.security.secure_broker import plain_jaas
from tests.security.tls_ca import make_cert_files

USERS = {"broker": "broker-secret", "alice": "alice-secret"}


def _client(certs, port_list: str, **extra) -> dict:
    return {"bootstrap.servers": port_list, "security.protocol": "SASL_SSL", "ssl.ca.location": certs.ca_cert,
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret", **extra}


def _consume(conf: dict, topic: str, n: int, timeout: float = 30) -> list[int]:
    c = Consumer(conf)
    c.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while len(seen) < n and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            seen.append(int(m.value()))
    c.close()
    return seen


def test_cluster_replicates_over_sasl_ssl(tmp_path, zk_connect):
    certs = make_cert_files(tmp_path / "certs")
    cluster = Cluster(tmp_path, zk_connect, n=3, **{
        "listener.security.protocol.map": "INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": plain_jaas(USERS, ("broker", "broker-secret")),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:alice",
        "offsets.topic.replication.factor": "3", "min.insync.replicas": "2"})
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"INTERNAL://127.0.0.1:{b.port}"
    with cluster:
        bootstrap = cluster.bootstrap
        p = Producer(_client(certs, bootstrap, **{"enable.idempotence": True, "acks": "all"}))
        admin = AdminClient(_client(certs, bootstrap))
        admin.create_topics([NewTopic("secure", 2, 3)])["secure"].result(30)
        for part in range(2):
            cluster.wait_isr("secure", part, 3)
        acked = []
        for i in range(200):
            p.produce("secure", str(i).encode(), partition=i % 2,
                      on_delivery=lambda err, m: acked.append(m.offset()) if err is None else None)
        assert p.flush(30) == 0
        assert len(acked) == 200
        # every replica caught up over SASL_SSL: the ISR stays full and the followers' logs end where the leader's does
        for part in range(2):
            state = cluster.wait_isr("secure", part, 3)
            assert sorted(state["isr"]) == [1, 2, 3]

        def replica_ends() -> set[int]:
            ends = set()
            for b in cluster.brokers.values():
                d = tmp_path / f"broker-{b.overrides['node.id']}" / "secure-0"
                ends.add(sum(f.stat().st_size for f in d.glob("*.log")))
            return ends

        wait_for(lambda: len(replica_ends()) == 1, what="replicas of secure-0 byte-equal in size")
        seen = _consume(_client(certs, bootstrap, **{"group.id": "g", "auto.offset.reset": "earliest"}), "secure", 200)
        assert sorted(seen) == list(range(200))

        # a SCRAM user and its ACLs, written through broker 1 only
        via1 = AdminClient(_client(certs, cluster.brokers[1].bootstrap))
        via1.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")])["carol"].result(30)
        acls = [AclBinding(ResourceType.TOPIC, "secure", ResourcePatternType.LITERAL, "User:carol", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, "carols", ResourcePatternType.PREFIXED, "User:carol", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)]
        for f in via1.create_acls(acls).values():
            f.result(30)
        assert cluster.zk.exists("/config/users/carol") and cluster.zk.exists("/kafka-acl/Topic/secure")
        carol = {**_client(certs, ""), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
                 "sasl.password": "carol-secret", "group.id": "carols-app", "auto.offset.reset": "earliest"}
        # every broker knows carol (she logs in to whichever leads her partitions)
        for b in cluster.brokers.values():
            node = b.overrides["node.id"]
            # a group of her own per broker (the prefixed ACL covers them): a new group reads from the start
            seen = wait_for(lambda b=b, node=node: sorted(_consume(
                {**carol, "bootstrap.servers": b.bootstrap, "group.id": f"carols-{node}-{time.monotonic()}"},
                "secure", 200, 10)) == list(range(200)), timeout=40, what=f"carol reads through broker {node}")
            assert seen
        # and the ACLs hold everywhere: carol may not write
        p2 = Producer({**carol, "bootstrap.servers": cluster.brokers[3].bootstrap})
        failed = []
        p2.produce("secure", b"1", on_delivery=lambda err, m: failed.append(err))
        p2.flush(15)
        assert failed and failed[0] is not None and failed[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
