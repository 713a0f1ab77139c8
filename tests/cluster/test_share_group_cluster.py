"""A share group (KIP-932) on a three-broker cluster: the Java KafkaShareConsumer as separate
processes while the leader of a partition and then the share coordinator of the other are
SIGKILLed and restarted. Every produced record is delivered, and no record is delivered
again once its acceptance was confirmed (its delivery count survives in
__share_group_state, so a redelivery would show a higher count)."""

from __future__ import annotations

import time
import uuid

import pytest

from share_coordinator import partition_for
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.groups.members import SteadyProducer
from tests.share.share_members import Member, compile_worker

GROUP = "sg-failover"
TOPIC = "sg-in"
FAST_SHARE = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "5000"}


@pytest.fixture(scope="module")
def worker_program(tmp_path_factory):
    return compile_worker(tmp_path_factory.mktemp("share-worker"))


def _confirmed_since(members: list[Member], t0_count: list[int]) -> bool:
    return all(any(r["ok"] for r in m.records[n:]) for m, n in zip(members, t0_count, strict=True))


def test_share_group_survives_leader_and_share_coordinator_sigkill(tmp_path, zk_connect, worker_program):
    with Cluster(tmp_path, zk_connect, **FAST_SHARE) as cl:
        cl.create_topic(TOPIC, partitions=2, rf=3)
        topic_id = uuid.UUID(str(cl.metadata(1, [TOPIC]).topics[0].topic_id))
        members = [Member(worker_program, cl.bootstrap, GROUP, TOPIC, idle_exit_ms=20000) for _ in range(2)]
        producer = SteadyProducer(cl.bootstrap, TOPIC, 2, interval=0.01)
        try:
            for m in members:
                assert m.ready.wait(60)
            time.sleep(3)
            producer.start()
            wait_for(lambda: sum(r["ok"] for m in members for r in m.records) > 50, 60,
                     what="the group consuming")

            # the leader of partition 0 dies and comes back on its log dir
            leader = cl.leader(TOPIC, 0)
            cl.brokers[leader].kill()
            marks = [len(m.records) for m in members]
            wait_for(lambda: _confirmed_since(members, marks), 60, what="acknowledgements confirmed after the kill")
            cl.brokers[leader].start()

            # then the share coordinator of partition 1's share-partition
            state_partition = partition_for(GROUP, topic_id, 1, 50)
            coordinator = cl.leader("__share_group_state", state_partition)
            cl.brokers[coordinator].kill()
            marks = [len(m.records) for m in members]
            wait_for(lambda: _confirmed_since(members, marks), 60,
                     what="acknowledgements confirmed after the coordinator's kill")
            cl.brokers[coordinator].start()
            time.sleep(2)
        finally:
            producer.stop()
        produced = {(p, o) for _t, p, o in producer.acked}
        for m in members:
            m.wait(120)

    delivered = [r for m in members for r in m.records]
    seen = {(r["p"], r["o"]) for r in delivered}
    missing = sorted(produced - seen)
    assert not missing, f"{len(missing)} produced records never delivered, e.g. {missing[:10]}"
    accepted_at: dict[tuple[int, int], int] = {}
    for r in delivered:
        if r["ok"] and r["a"] == "ACCEPT":
            key = (r["p"], r["o"])
            accepted_at[key] = min(accepted_at.get(key, r["d"]), r["d"])
    again = sorted(k for r in delivered if (k := (r["p"], r["o"])) in accepted_at and r["d"] > accepted_at[k])
    assert not again, f"delivered again after a confirmed acceptance: {again[:10]}"
    assert len(accepted_at) > 0.9 * len(produced)


def test_group_configs_are_the_clusters(tmp_path, zk_connect):
    """A group config set through one broker is in force on every broker: group configs live
    in ZooKeeper (/config/groups/<group>), and the others follow its change notification."""
    from broker.tools.admin_client import RESOURCE_GROUP, AdminClient

    def describe(broker_id: int) -> dict[str, tuple[str, int]]:
        # one broker's own answer: the admin client bootstraps from that broker only
        with AdminClient(f"127.0.0.1:{cl.brokers[broker_id].port}") as admin:
            configs = admin.describe_configs(RESOURCE_GROUP, "g-cfg", ["share.auto.offset.reset"])
        return {c.name: (c.value, c.config_source) for c in configs}

    with Cluster(tmp_path, zk_connect) as cl:
        with AdminClient(f"127.0.0.1:{cl.brokers[1].port}") as admin:  # raises if refused
            admin.incremental_alter_configs(RESOURCE_GROUP, "g-cfg", {"share.auto.offset.reset": "earliest"})
        for b in (1, 2, 3):
            # 8: DYNAMIC_GROUP_CONFIG
            wait_for(lambda b=b: describe(b) == {"share.auto.offset.reset": ("earliest", 8)}, 15,
                     what=f"broker {b} to see the group config")
        assert b"earliest" in cl.zk.get("/config/groups/g-cfg")[0]
