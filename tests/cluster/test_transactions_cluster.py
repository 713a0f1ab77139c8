"""Transactions on a three-broker cluster: the coordinator of a transactional id is the
leader of its __transaction_state partition, markers go to the leaders of the
transaction's partitions (WriteTxnMarkers between brokers), produce verification asks
the coordinator on another broker (AddPartitionsToTxn v4), and a transaction survives
the SIGKILL of its coordinator: the new leader of the __transaction_state partition loads
it and the producer commits there."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.cluster_harness import Cluster, wait_for

TXN = {"transaction.state.log.num.partitions": "3"}


def _consume(bootstrap: str, topic: str, partitions: int, isolation: str, settle: float = 3.0) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{isolation}-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    quiet_until = time.monotonic() + settle
    deadline = time.monotonic() + 60
    while time.monotonic() < min(quiet_until, deadline):
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
            quiet_until = time.monotonic() + settle
    c.close()
    return sorted(got)


def _coordinator(cl: Cluster, transactional_id: str, ask: int = 1) -> int:
    with WireClient("127.0.0.1", cl.brokers[ask].port) as w:
        r = w.request(ApiKey.FIND_COORDINATOR, 3, key=transactional_id, key_type=1)
        assert r.error_code == 0, r
        return r.node_id


def test_commit_and_abort_across_brokers(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, **TXN) as cl:
        cl.create_topic("orders", partitions=3, rf=3)
        # three partitions led by three brokers: markers must travel to two other brokers
        wait_for(lambda: len({cl.leader("orders", p) for p in range(3)}) == 3, 30, what="spread leaders")
        p = Producer({"bootstrap.servers": cl.bootstrap, "transactional.id": "tx-cluster", "linger.ms": 5})
        p.init_transactions(30)
        assert cl.state("__transaction_state", 0)["isr"], "the state log is replicated"
        p.begin_transaction()
        for i in range(30):
            p.produce("orders", f"c{i}".encode(), partition=i % 3)
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(30):
            p.produce("orders", f"a{i}".encode(), partition=i % 3)
        p.flush(30)
        p.abort_transaction(30)
        committed = _consume(cl.bootstrap, "orders", 3, "read_committed")
        assert committed == sorted(f"c{i}" for i in range(30))
        everything = _consume(cl.bootstrap, "orders", 3, "read_uncommitted")
        assert everything == sorted([f"c{i}" for i in range(30)] + [f"a{i}" for i in range(30)])
        # every replica holds the same markers: the leaders' logs were replicated byte for byte
        for part in range(3):
            cl.wait_isr("orders", part, 3)


def test_coordinator_killed_mid_transaction(tmp_path, zk_connect):
    """SIGKILL the coordinator while a transaction is open: the producer finds the new
    coordinator (the next leader of the id's __transaction_state partition, which loads
    the Ongoing transaction from its replica) and commits there; read_committed consumers
    then see all of it."""
    with Cluster(tmp_path, zk_connect, **TXN) as cl:
        cl.create_topic("pay", partitions=2, rf=3)
        p = Producer({"bootstrap.servers": cl.bootstrap, "transactional.id": "tx-failover", "linger.ms": 5,
                      "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        coordinator = _coordinator(cl, "tx-failover")
        p.begin_transaction()
        for i in range(20):
            p.produce("pay", f"v{i}".encode(), partition=i % 2)
        p.flush(30)
        cl.brokers[coordinator].kill()
        alive = next(b for b in cl.brokers if b != coordinator)
        wait_for(lambda: _coordinator(cl, "tx-failover", alive) not in (-1, coordinator), 40,
                 what="a new coordinator")
        p.commit_transaction(60)
        assert _consume(cl.bootstrap, "pay", 2, "read_committed") == sorted(f"v{i}" for i in range(20))
        cl.brokers[coordinator].start()
        for part in range(2):
            cl.wait_isr("pay", part, 3, timeout=40)


def test_state_not_yet_replicated_is_not_answered_from(tmp_path, zk_connect):
    """Found by the chaos harness: an AddPartitionsToTxn whose record could not be
    replicated (its answer an error), retried, was answered 'already added' at once from
    the coordinator's unreplicated state; after the failover the new coordinator had never
    heard of the partition, and the producer's batch failed verification with
    INVALID_TXN_STATE. A coordinator answers only from state its ISR holds, as Kafka's do."""
    with Cluster(tmp_path, zk_connect, **TXN, **{"offsets.commit.timeout.ms": "2000",
                                                 "replica.lag.time.max.ms": "60000"}) as cl:
        cl.create_topic("ledger", partitions=1, rf=3)
        coordinator = wait_for(lambda: _coordinator(cl, "tx-fence"), 30, what="the coordinator")
        cl.wait_isr("__transaction_state", 2, 3)
        with WireClient("127.0.0.1", cl.brokers[coordinator].port) as w:
            # the first InitProducerId may find no producer id block yet (retriable)
            seen = []

            def init_pid():
                r = w.request(ApiKey.INIT_PRODUCER_ID, 1, transactional_id="tx-fence",
                              transaction_timeout=60000)
                seen.append(r.error_code)
                return r.error_code == 0 and r

            try:
                init = wait_for(init_pid, 30, what="a producer id")
            except AssertionError:
                raise AssertionError(f"InitProducerId answers: {seen[:3]}...{seen[-3:]}") from None

            def add() -> int:
                r = w.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="tx-fence",
                              v3_and_below_producer_id=init.producer_id,
                              v3_and_below_producer_epoch=init.producer_epoch,
                              v3_and_below_topics=[dict(name="ledger", partitions=[0])])
                return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

            followers = [b for b in cl.brokers if b != coordinator]
            for b in followers:
                cl.freeze(b)
            try:
                first = add()
                retried = add()
            finally:
                for b in followers:
                    cl.thaw(b)
            assert first != 0, "the record never reached the followers: no success"
            assert retried != 0, "answered from state that only the coordinator's own log holds"
            assert wait_for(lambda: add() == 0, 30, interval=0.5, what="the partition added once replicated") is not None
