"""Admin across a real cluster: CreateTopics limits, CreatePartitions, DeleteTopics on
every replica, ElectLeaders on the controller, partition reassignment onto other brokers
(AlterPartitionReassignments / ListPartitionReassignments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.test_replication import consume_all, produce


def _request(cl: Cluster, broker_id: int, api: int, version: int | None = None, **fields):
    with WireClient("127.0.0.1", cl.brokers[broker_id].port) as c:
        return c.request(api, version, **fields)


def _controller(cl: Cluster) -> int:
    return cl.metadata(1).controller_id


def test_create_partitions_delete_and_limits(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        r = _request(cl, 2, ApiKey.CREATE_TOPICS, timeout=30000, validate_only=False, topics=[dict(
            name="big", num_partitions=1, replication_factor=4, assignments=[], configs=[])])
        assert r.topics[0].error_code == 38  # INVALID_REPLICATION_FACTOR
        assert "only 3 broker(s) are registered" in r.topics[0].error_message
        cl.create_topic("grow", partitions=1, rf=3)
        r = _request(cl, 3, ApiKey.CREATE_PARTITIONS, 3, timeout=30000, validate_only=False, topics=[dict(
            name="grow", count=3, assignments=None)])
        assert r.results[0].error_code == 0, r.results[0].error_message
        for p in range(3):
            cl.wait_isr("grow", p, 3)
        assert sorted(len(r) for r in cl.assignment("grow").values()) == [3, 3, 3]
        produce(cl.bootstrap, "grow", [f"{i}".encode() for i in range(30)])
        dirs = [Path(tmp_path, f"broker-{i}", f"grow-{p}") for i in (1, 2, 3) for p in range(3)]
        assert all(d.is_dir() for d in dirs)
        r = _request(cl, 1, ApiKey.DELETE_TOPICS, 4, timeout_ms=30000, topic_names=["grow"])
        assert r.responses[0].error_code == 0
        wait_for(lambda: not any(d.exists() for d in dirs), 20, what="every replica's files deleted")
        assert not cl.zk.exists("/brokers/topics/grow") and not cl.zk.exists("/config/topics/grow")


def test_elect_preferred_leader(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, **{"auto.leader.rebalance.enable": "false"}) as cl:
        cl.create_topic("pref", partitions=1, rf=3)
        preferred = cl.assignment("pref")[0][0]
        assert cl.leader("pref", 0) == preferred
        cl.brokers[preferred].kill()
        wait_for(lambda: cl.leader("pref", 0) not in (-1, preferred), 30, what="failover")
        cl.brokers[preferred].start()
        cl.wait_isr("pref", 0, 3)
        assert cl.leader("pref", 0) != preferred  # no automatic move back: rebalance is off
        controller = _controller(cl)
        other = next(b for b in (1, 2, 3) if b != controller)
        r = _request(cl, other, ApiKey.ELECT_LEADERS, 2, election_type=0, timeout=30000,
                     topic_partitions=[dict(topic="pref", partitions=[0])])
        assert r.replica_election_results[0].partition_result[0].error_code == 41  # NOT_CONTROLLER
        r = _request(cl, controller, ApiKey.ELECT_LEADERS, 2, election_type=0, timeout=30000,
                     topic_partitions=[dict(topic="pref", partitions=[0])])
        assert r.replica_election_results[0].partition_result[0].error_code == 0
        assert cl.leader("pref", 0) == preferred
        r = _request(cl, controller, ApiKey.ELECT_LEADERS, 2, election_type=0, timeout=30000,
                     topic_partitions=[dict(topic="pref", partitions=[0])])
        assert r.replica_election_results[0].partition_result[0].error_code == 84  # ELECTION_NOT_NEEDED
        produce(cl.bootstrap, "pref", [b"ok"])


def test_reassign_partition_onto_other_brokers(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        r = _request(cl, 1, ApiKey.CREATE_TOPICS, timeout=30000, validate_only=False, topics=[dict(
            name="move", num_partitions=-1, replication_factor=-1, configs=[],
            assignments=[dict(partition_index=0, broker_ids=[1])])])
        assert r.topics[0].error_code == 0, r.topics[0].error_message
        cl.wait_isr("move", 0, 1)
        values = [f"r{i}".encode() for i in range(500)]
        produce(cl.bootstrap, "move", values)
        controller = _controller(cl)
        r = _request(cl, controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout=30000, topics=[dict(
            name="move", partitions=[dict(partition_index=0, replicas=[2, 3])])])
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        wait_for(lambda: cl.assignment("move")[0] == [2, 3] and sorted(cl.state("move", 0)["isr"]) == [2, 3], 60,
                 what="reassignment completed")
        assert cl.leader("move", 0) in (2, 3)
        r = _request(cl, controller, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout=30000, topics=None)
        assert r.error_code == 0 and r.topics == ()
        wait_for(lambda: not Path(tmp_path, "broker-1", "move-0").exists(), 20, what="the old replica deleted")
        got = consume_all(cl.bootstrap, "move", 500)
        assert sorted(v for _, _, v in got) == sorted(values)
        produce(cl.bootstrap, "move", [b"after"])
        # nothing to cancel now
        r = _request(cl, controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout=30000, topics=[dict(
            name="move", partitions=[dict(partition_index=0, replicas=None)])])
        assert r.responses[0].partitions[0].error_code == 85  # NO_REASSIGNMENT_IN_PROGRESS
        r = _request(cl, controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout=30000, topics=[dict(
            name="move", partitions=[dict(partition_index=0, replicas=[2, 9])])])
        assert r.responses[0].partitions[0].error_code == 39  # INVALID_REPLICA_ASSIGNMENT


def test_topic_configs_reach_every_broker(tmp_path, zk_connect):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("cfg", partitions=1, rf=3)
        admin = AdminClient({"bootstrap.servers": cl.brokers[1].bootstrap})
        res = ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=[
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(20)
        assert json.loads(cl.zk.get("/config/topics/cfg")[0])["config"] == {"max.message.bytes": "2000"}
        assert cl.zk.get_children("/config/changes")
        for b in (2, 3):
            other = AdminClient({"bootstrap.servers": cl.brokers[b].bootstrap})
            described = other.describe_configs([ConfigResource(ResourceType.TOPIC, "cfg")])
            entries = next(iter(described.values())).result(20)
            assert entries["max.message.bytes"].value == "2000"
        # the leader enforces it
        with pytest.raises(KafkaException):
            produce(cl.bootstrap, "cfg", [b"x" * 5000], timeout=20, **{"message.timeout.ms": 10000})
        produce(cl.bootstrap, "cfg", [b"small"])
