"""Failover with real brokers, a real ZooKeeper and a producer in its own process:
SIGKILL of a leader under an idempotent acks=all producer loses and duplicates nothing,
the killed broker truncates and rejoins; a frozen leader is replaced and cannot
acknowledge acks=all writes once it wakes; SIGTERM moves leadership away first."""

from __future__ import annotations

import subprocess
import sys
import time

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.records import build_batch
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.test_replication import consume_all, produce
from tests.krait_harness import REPO


def _start_producer(bootstrap: str, topic: str, count: int, per_second: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.cluster.producer_proc", bootstrap, topic, str(count),
                             str(per_second)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _acked(proc: subprocess.Popen, timeout: float = 200) -> tuple[list[tuple[int, int, int]], str]:
    """The producer's delivery reports as (partition, offset, value). The offset is -1
    when librdkafka acknowledged a record implicitly (rd_kafka_dr_implicit_ack): the
    response to its batch was lost with a broker's connection, but a later batch of the
    same idempotent producer was accepted, which proves the earlier one is in the log;
    the offset is then unknown to the client, as it would be against Kafka."""
    out, err = proc.communicate(timeout=timeout)
    rows = [tuple(-1 if x == "None" else int(x) for x in line.split()) for line in out.splitlines() if line.strip()]
    return rows, err


def test_sigkill_leader_under_idempotent_producer(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect, **{"min.insync.replicas": "2"}) as cl:
        cl.create_topic("pay", partitions=1, rf=3)
        proc = _start_producer(cl.bootstrap, "pay", 3000, 400)
        time.sleep(2.5)
        leader = cl.leader("pay", 0)
        epoch = cl.state("pay", 0)["leader_epoch"]
        cl.brokers[leader].kill()
        wait_for(lambda: cl.state("pay", 0)["leader"] not in (-1, leader), 20, what="a new leader")
        assert cl.state("pay", 0)["leader_epoch"] > epoch
        acked, err = _acked(proc)
        assert proc.returncode == 0 and "ERROR" not in err, err
        assert len(acked) == 3000, err[-2000:]
        # the killed broker comes back, truncates to the new leader's log and rejoins the ISR
        cl.brokers[leader].start()
        cl.wait_isr("pay", 0, 3, timeout=40)
        got = consume_all(cl.bootstrap, "pay", 3000)
        values = [int(v) for _, _, v in sorted(got, key=lambda r: r[1])]
        assert values == list(range(3000)), "every acked record exactly once, in order"
        # the acknowledged offsets are where the records are
        by_offset = {o: int(v) for _, o, v in got}
        assert all(by_offset[o] == v for _, o, v in acked if o >= 0)
        # and the returning broker's replica ends up holding the same records
        produce(cl.bootstrap, "pay", [b"after"], partition=0)
        cl.wait_isr("pay", 0, 3)
    logs = [(tmp_path / f"broker-{i}" / "pay-0").glob("*.log") for i in (1, 2, 3)]
    contents = [b"".join(p.read_bytes() for p in sorted(g)) for g in logs]
    assert contents[0] == contents[1] == contents[2]


def test_frozen_leader_is_replaced_and_fenced(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("frozen", partitions=1, rf=3)
        produce(cl.bootstrap, "frozen", [b"before"])
        old = cl.leader("frozen", 0)
        cl.freeze(old)
        try:
            wait_for(lambda: cl.leader("frozen", 0) not in (-1, old), 30, what="a new leader")
            produce(",".join(b.bootstrap for i, b in cl.brokers.items() if i != old), "frozen", [b"during"])
        finally:
            cl.thaw(old)
        # right after waking, the old leader may still believe it leads: an acks=all write
        # sent straight to it must not be acknowledged
        with WireClient("127.0.0.1", cl.brokers[old].port) as c:
            r = c.request(ApiKey.PRODUCE, acks=-1, timeout=5000, transactional_id=None, topic_data=[dict(
                name="frozen", partition_data=[dict(index=0, records=build_batch([(b"k", b"stale")]))])])
        code = r.responses[0].partition_responses[0].error_code
        assert code != 0, "a stale leader acknowledged an acks=all write"
        cl.wait_isr("frozen", 0, 3, timeout=40)
        got = consume_all(cl.bootstrap, "frozen", 2)
        assert [v for _, _, v in got] == [b"before", b"during"]


def test_sigterm_moves_leadership_first(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("calm", partitions=3, rf=3)
        led = [p for p in range(3) if cl.leader("calm", p) == 2]
        assert led
        epochs = {p: cl.state("calm", p)["leader_epoch"] for p in range(3)}
        assert cl.brokers[2].stop() == 0
        for p in range(3):
            st = cl.state("calm", p)
            assert st["leader"] in (1, 3) and 2 not in st["isr"], st
            # one change per partition (found by the chaos harness: a broker shutting down
            # kept fetching, leaders took it back into their ISRs and the controlled shutdown
            # took it out again, epoch after epoch, until the broker exited)
            assert st["leader_epoch"] - epochs[p] <= 1, (p, epochs[p], st)
        log = cl.brokers[2].log_text()
        assert "controlled shutdown" in log
        produce(cl.bootstrap, "calm", [b"x"] * 10)
        cl.brokers[2].start()
        for p in range(3):
            cl.wait_isr("calm", p, 3)


def test_zookeeper_restart_under_load(tmp_path):
    """ZooKeeper stops for longer than the session timeout while an idempotent acks=all
    producer writes to an rf=3 topic, then comes back on its data: the brokers keep
    serving, reconnect (resuming or re-registering), and nothing acked is lost."""
    from tests.cluster.zk_harness import ZooKeeperProcess

    zkp = ZooKeeperProcess().start()
    try:
        with Cluster(tmp_path, zkp.connect + "/krait") as cl:
            cl.create_topic("steady", partitions=1, rf=3)
            proc = _start_producer(cl.bootstrap, "steady", 3000, 200)
            time.sleep(2)
            cl.close_zk()  # the test's own session, not the brokers'
            zkp.stop(keep_data=True)
            time.sleep(8)  # past zookeeper.session.timeout.ms (6 s)
            zkp.start()
            acked, err = _acked(proc)
            assert proc.returncode == 0 and "ERROR" not in err, err[-2000:]
            assert len(acked) == 3000
            wait_for(lambda: cl.live_ids() == [1, 2, 3], 40, what="all brokers registered again")
            cl.wait_isr("steady", 0, 3, timeout=40)
            got = consume_all(cl.bootstrap, "steady", 3000)
            assert sorted(int(v) for _, _, v in got) == list(range(3000))
    finally:
        zkp.stop()


def test_group_coordinator_broker_killed(tmp_path, zk_connect):
    """The group's coordinator runs on the leader of its __consumer_offsets partition;
    SIGKILL that broker: the group continues on the new leader with its committed offsets."""
    from confluent_kafka import Consumer, TopicPartition

    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("work", partitions=1, rf=3)
        produce(cl.bootstrap, "work", [f"m{i}".encode() for i in range(100)])
        conf = {"bootstrap.servers": cl.bootstrap, "group.id": "g1", "auto.offset.reset": "earliest",
                "enable.auto.commit": False}
        c = Consumer(conf)
        c.subscribe(["work"])
        seen = []
        wait_for(lambda: seen.extend(m for m in c.consume(100, 0.5) if m.error() is None) or len(seen) >= 50, 60,
                 interval=0)
        c.commit(offsets=[TopicPartition("work", 0, 50)], asynchronous=False)
        c.close()
        with WireClient("127.0.0.1", cl.brokers[1].port) as w:
            coordinator = w.request(ApiKey.FIND_COORDINATOR, 3, key="g1", key_type=0).node_id
        offsets_rf = len(cl.assignment("__consumer_offsets")[0])
        assert offsets_rf == 3
        cl.brokers[coordinator].kill()
        wait_for(lambda: all(cl.state("__consumer_offsets", p)["leader"] not in (-1, coordinator) for p in range(3)),
                 30, what="new leaders for __consumer_offsets")
        c2 = Consumer(conf)
        c2.subscribe(["work"])
        rest = []
        try:
            wait_for(lambda: rest.extend(m for m in c2.consume(100, 0.5) if m.error() is None) or len(rest) >= 50,
                     60, interval=0)
            committed = c2.committed([TopicPartition("work", 0)], timeout=10)[0].offset
        finally:
            c2.close()
        assert [m.offset() for m in rest] == list(range(50, 100))
        assert committed == 50
        with WireClient("127.0.0.1", cl.brokers[[i for i in (1, 2, 3) if i != coordinator][0]].port) as w:
            assert w.request(ApiKey.FIND_COORDINATOR, 3, key="g1", key_type=0).node_id != coordinator


def test_rolling_restart_under_load(tmp_path, zk_connect):
    """SIGTERM each broker in turn (controlled shutdown), waiting for the ISR to fill again,
    while an idempotent acks=all producer writes: no error reaches the application, and
    every record is there exactly once."""
    with Cluster(tmp_path, zk_connect, **{"min.insync.replicas": "2"}) as cl:
        cl.create_topic("roll", partitions=1, rf=3)
        proc = _start_producer(cl.bootstrap, "roll", 4000, 150)
        for b in (1, 2, 3):
            time.sleep(2)
            assert cl.brokers[b].stop() == 0
            time.sleep(1)
            cl.brokers[b].start()
            cl.wait_isr("roll", 0, 3, timeout=40)
        acked, err = _acked(proc)
        assert proc.returncode == 0 and "ERROR" not in err, err[-2000:]
        assert len(acked) == 4000
        got = consume_all(cl.bootstrap, "roll", 4000)
        assert [int(v) for _, _, v in sorted(got, key=lambda r: r[1])] == list(range(4000))


def test_stale_and_future_leader_epochs(tmp_path, zk_connect):
    """KIP-320 for clients: a fetch naming an older leader epoch gets FENCED_LEADER_EPOCH,
    a newer one UNKNOWN_LEADER_EPOCH; OffsetForLeaderEpoch answers from the epoch cache."""
    with Cluster(tmp_path, zk_connect) as cl:
        cl.create_topic("epochs", partitions=1, rf=3)
        produce(cl.bootstrap, "epochs", [b"a", b"b"], partition=0)
        first = cl.leader("epochs", 0)
        cl.brokers[first].stop()
        leader = wait_for(lambda: (lead := cl.leader("epochs", 0)) not in (-1, first) and lead, 30)
        produce(cl.bootstrap, "epochs", [b"c"], partition=0)
        epoch = cl.state("epochs", 0)["leader_epoch"]
        assert epoch >= 1

        def fetch(current: int) -> int:
            with WireClient("127.0.0.1", cl.brokers[leader].port) as c:
                r = c.request(ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                              rack_id="", topics=[dict(topic="epochs", partitions=[dict(
                                  partition=0, current_leader_epoch=current, fetch_offset=0, last_fetched_epoch=-1,
                                  log_start_offset=-1, partition_max_bytes=1 << 20)])])
            return r.responses[0].partitions[0].error_code

        assert fetch(epoch) == 0
        assert fetch(epoch - 1) == 74  # FENCED_LEADER_EPOCH
        assert fetch(epoch + 1) == 75  # UNKNOWN_LEADER_EPOCH
        with WireClient("127.0.0.1", cl.brokers[leader].port) as c:
            r = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[dict(topic="epochs", partitions=[
                dict(partition=0, current_leader_epoch=epoch, leader_epoch=0)])])
        p = r.topics[0].partitions[0]
        # epoch 0 ended where the new leader's first epoch started: after "a" and "b"
        assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 2)
        cl.brokers[first].start()
