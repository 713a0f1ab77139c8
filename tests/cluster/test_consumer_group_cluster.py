"""A KIP-848 consumer group (group.protocol=consumer) on a three-broker cluster whose
coordinator is SIGKILLed: the next leader of the group's __consumer_offsets partition
loads the group from its replica (same epoch, same members, same assignment), the
members carry on with it, and nothing produced is missed or consumed again once
committed."""

from __future__ import annotations

import time

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.groups.members import (
    FAST_CONSUMER_GROUPS,
    Member,
    SteadyProducer,
    all_seen,
    committed_redeliveries,
    exact_cover,
    stop_all,
)


def _coordinator(cl: Cluster, group: str) -> int:
    for b in cl.brokers.values():
        if b.proc is None or b.proc.poll() is not None:
            continue
        try:
            with WireClient("127.0.0.1", b.port, timeout=5) as w:
                r = w.request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
        except OSError:
            continue
        return r.node_id if r.error_code == 0 else -1
    return -1


def _describe(cl: Cluster, broker_id: int, group: str):
    with WireClient("127.0.0.1", cl.brokers[broker_id].port, timeout=5) as w:
        r = w.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group], include_authorized_operations=False)
    (g,) = r.groups
    return g


def _view(g) -> tuple[int, dict[str, tuple[int, list[int]]]]:
    return g.group_epoch, {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                                 for p in tp.partitions)) for m in g.members}


def test_consumer_group_survives_its_coordinator_sigkill(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, **FAST_CONSUMER_GROUPS) as cl:
        cl.create_topic("cg-in", partitions=4, rf=3)
        group = "kip848-failover"
        gc = wait_for(lambda: _coordinator(cl, group) > 0 and _coordinator(cl, group), 30, what="a coordinator")
        for p in range(3):
            cl.wait_isr("__consumer_offsets", p, 3)
        members = [Member(cl.bootstrap, group, f"m{i}", topics=["cg-in"]) for i in range(2)]
        producer = SteadyProducer(cl.bootstrap, "cg-in", 4, interval=0.01)
        try:
            wait_for(lambda: exact_cover(members, 4, per_member=2), 30, what="two partitions for each member")
            producer.start()
            wait_for(lambda: all(len(m.records()) > 10 for m in members), 30, what="both members consuming")
            before = _view(_describe(cl, gc, group))
            assert len(before[1]) == 2

            cl.brokers[gc].kill()
            killed = time.monotonic()
            successor = wait_for(lambda: _coordinator(cl, group) not in (-1, gc) and _coordinator(cl, group), 40,
                                 what="a new coordinator")
            # the successor loaded the group from its replica of __consumer_offsets
            assert _view(_describe(cl, successor, group)) == before
            # and the members carry on with it: both consume again after the kill
            wait_for(lambda: all(any(t > killed + 1 for t, *_ in m.records()) for m in members), 40,
                     what="both members consuming after the failover")
        finally:
            produced = producer.stop()
        try:
            wait_for(lambda: produced <= all_seen(members), 40, what="every produced record consumed")
            assert committed_redeliveries(members) == []
            # the group did not rebalance: same members, same epoch (no member was fenced)
            assert _view(_describe(cl, successor, group)) == before
        finally:
            stop_all(members)
