"""Transactional offset commits on a three-broker cluster: the group's coordinator and the
transaction's coordinator are different brokers, so TxnOffsetCommit is verified remotely
(AddPartitionsToTxn v4) and the marker reaches __consumer_offsets with WriteTxnMarkers; and
when the group's coordinator is SIGKILLed with the transaction open, the next leader of its
__consumer_offsets partition loads the offsets as pending from its replica and the
transaction's commit makes them committed there."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from tests.cluster.cluster_harness import Cluster, wait_for

SMALL = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}


def _coordinator(cl: Cluster, key: str, key_type: int) -> int:
    for b in cl.brokers.values():
        if b.proc is None or b.proc.poll() is not None:
            continue
        try:
            with WireClient("127.0.0.1", b.port, timeout=5) as w:
                r = w.request(ApiKey.FIND_COORDINATOR, 3, key=key, key_type=key_type)
        except OSError:
            continue
        return r.node_id if r.error_code == 0 else -1
    return -1


def _stable_offset(cl: Cluster, broker_id: int, group: str) -> tuple[int, int]:
    with WireClient("127.0.0.1", cl.brokers[broker_id].port, timeout=5) as w:
        r = w.request(ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=True,
                      topics=[dict(name="in", partition_indexes=[0])])
    p = r.topics[0].partitions[0] if r.topics else None
    return (p.committed_offset, p.error_code) if p is not None else (-1, r.error_code)


def test_txn_offsets_across_brokers_and_a_killed_group_coordinator(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, **SMALL) as cl:
        cl.create_topic("in", partitions=1, rf=3)
        # a group and a transactional id whose coordinators are different brokers
        wait_for(lambda: _coordinator(cl, "probe", 0) > 0 and _coordinator(cl, "probe", 1) > 0, 30,
                 what="both coordinators")
        for p in range(3):
            cl.wait_isr("__consumer_offsets", p, 3)
        pairs = ((f"g{i}", f"t{j}") for i in range(20) for j in range(20))
        group, txn = next((g, t) for g, t in pairs if _coordinator(cl, g, 0) != _coordinator(cl, t, 1))
        gc = _coordinator(cl, group, 0)
        producer = Producer({"bootstrap.servers": cl.bootstrap, "transactional.id": txn,
                             "transaction.timeout.ms": 60000})
        consumer = Consumer({"bootstrap.servers": cl.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            producer.init_transactions(30)
            meta = consumer.consumer_group_metadata()
            producer.begin_transaction()
            producer.produce("in", b"a", partition=0)
            producer.send_offsets_to_transaction([TopicPartition("in", 0, 42)], meta, 30)
            producer.commit_transaction(30)
            wait_for(lambda: _stable_offset(cl, gc, group) == (42, E.none), 30, what="the committed offset")

            producer.begin_transaction()
            producer.produce("in", b"b", partition=0)
            producer.send_offsets_to_transaction([TopicPartition("in", 0, 77)], meta, 30)
            producer.flush(30)
            assert _stable_offset(cl, gc, group) == (-1, E.unstable_offset_commit)
            cl.brokers[gc].kill()
            wait_for(lambda: _coordinator(cl, group, 0) not in (-1, gc), 40, what="a new group coordinator")
            successor = _coordinator(cl, group, 0)
            # FindCoordinator may name it a moment before it has taken the partition over
            # (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until then: seen once in CI)
            got = wait_for(lambda: (r := _stable_offset(cl, successor, group))[1] not in (
                E.not_coordinator, E.coordinator_load_in_progress) and r, 30, what="the successor serving the group")
            # loaded from its replica: still pending, the committed offset underneath
            assert got == (-1, E.unstable_offset_commit)
            producer.commit_transaction(60)
            wait_for(lambda: _stable_offset(cl, successor, group) == (77, E.none), 30,
                     what="the transaction's offset committed on the successor")
            (tp,) = consumer.committed([TopicPartition("in", 0)], timeout=30)
            assert tp.offset == 77
        finally:
            consumer.close()
            producer.flush(5)
