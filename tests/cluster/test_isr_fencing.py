"""Issue 23: a leader's ISR writes whose outcome it does not know, a leader cut off from
ZooKeeper while the controller moves its partitions, and what clients are told meanwhile.
Real brokers, a real ZooKeeper and real clients; each broker reaches ZooKeeper through a
relay of its own (tests/cluster/zk_proxy.py) that the tests use to cut that link only.

The guarantee under test is Kafka's: an acks=all write (and a group's offset commit) is
acknowledged only once every member of the ISR as ZooKeeper records it holds it, so that
whichever of them the controller elects next has it."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.records import build_batch
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.test_failover import _acked, _start_producer
from tests.cluster.test_replication import consume_all, produce
from tests.cluster.zk_proxy import ZkProxy


@pytest.fixture
def proxied(tmp_path, zookeeper):
    """A cluster of 3 whose brokers reach ZooKeeper through a relay each (not started)."""
    chroot = f"/krait-{uuid.uuid4().hex[:8]}"
    proxies = {i: ZkProxy(zookeeper.port).start() for i in (1, 2, 3)}
    cl = Cluster(tmp_path, zookeeper.connect + chroot, **{"min.insync.replicas": "2",
                                                           "offsets.commit.timeout.ms": "2000"})
    for i, b in cl.brokers.items():
        b.overrides["zookeeper.connect"] = proxies[i].connect(chroot)
    cl.chroot = chroot
    cl.proxies = proxies
    try:
        yield cl
    finally:
        cl.stop()
        for p in proxies.values():
            p.stop()


def _create(cl: Cluster, topic: str, replicas: list[int]) -> None:
    with WireClient("127.0.0.1", cl.brokers[1].port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(
            name=topic, num_partitions=-1, replication_factor=-1, configs=[],
            assignments=[dict(partition_index=0, broker_ids=replicas)])], timeout=30000, validate_only=False)
    assert r.topics[0].error_code == 0, r.topics[0].error_message
    cl.wait_isr(topic, 0, len(replicas))


def _produce_to(cl: Cluster, broker: int, topic: str, value: bytes, timeout_ms: int) -> int:
    """One acks=all Produce straight to ``broker``; its error code."""
    with WireClient("127.0.0.1", cl.brokers[broker].port) as c:
        r = c.request(ApiKey.PRODUCE, acks=-1, timeout=timeout_ms, transactional_id=None, topic_data=[dict(
            name=topic, partition_data=[dict(index=0, records=build_batch([(b"k", value)]))])])
    return r.responses[0].partition_responses[0].error_code


def _count(cl: Cluster, broker: int, text: str) -> int:
    return cl.brokers[broker].log_text().count(text)


def _coordinator(cl: Cluster, group: str, via: int) -> int:
    with WireClient("127.0.0.1", cl.brokers[via].port) as w:
        r = w.request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
    return r.node_id if r.error_code == 0 else -1


def _commit(cl: Cluster, broker: int, group: str, topic: str, offset: int) -> int:
    """A standalone consumer's OffsetCommit (no generation) straight to ``broker``."""
    with WireClient("127.0.0.1", cl.brokers[broker].port) as w:
        r = w.request(ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, topics=[dict(name=topic, partitions=[dict(
                          partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                          committed_metadata="")])])
    return r.topics[0].partitions[0].error_code


def _committed(cl: Cluster, broker: int, group: str, topic: str) -> int:
    with WireClient("127.0.0.1", cl.brokers[broker].port) as w:
        r = w.request(ApiKey.OFFSET_FETCH, 8, require_stable=True, groups=[dict(
            group_id=group, topics=[dict(name=topic, partition_indexes=[0])])])
    g = r.groups[0]
    p = g.topics[0].partitions[0]
    assert g.error_code == 0 and p.error_code == 0, r
    return p.committed_offset


def _leaders(cl: Cluster, broker: int, topics: list[str]) -> dict[tuple[str, int], int]:
    """The leaders ``broker`` has applied, as its Metadata answers them."""
    md = cl.metadata(broker, topics)
    return {(t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions}


def _leaders_in_zk(cl: Cluster, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    return {(t, p): cl.leader(t, p) for t, p in partitions}


def _isrs_full(cl: Cluster, topics: list[tuple[str, int]]) -> bool:
    return all(len(cl.state(t, p)["isr"]) == 3 for t, p in topics)


def test_isr_expansion_with_unknown_outcome_counts_the_new_member(proxied):
    """The leader's write taking a follower back into the ISR lands in ZooKeeper, but its
    answer is lost with the connection. ZooKeeper's ISR now has the follower; until the
    leader knows the outcome it must count it (KIP-497's maximal ISR), so with that
    follower stopped nothing more is acknowledged. Then the link heals: the leader learns
    its write landed, without a flood of attempts."""
    cl = proxied.start()
    _create(cl, "t", [1, 2, 3])
    produce(cl.bootstrap, "t", [b"a%d" % i for i in range(10)])
    cl.brokers[3].kill()
    cl.wait_isr("t", 0, 2)
    produce(cl.bootstrap, "t", [b"b%d" % i for i in range(10)])
    state_path = f"{cl.chroot}/brokers/topics/t/partitions/0/state"
    cl.proxies[1].lose_reply_to_write(state_path)
    cl.brokers[3].start()
    assert cl.proxies[1].lost.wait(40), "the leader never wrote the ISR expansion"
    cl.freeze(3)
    try:
        assert sorted(cl.state("t", 0)["isr"]) == [1, 2, 3], "the expansion landed in ZooKeeper"
        code = _produce_to(cl, 1, "t", b"unreplicated", 2000)
        assert code != 0, "acknowledged while an ISR member (as ZooKeeper has it) lacks the record"
    finally:
        cl.thaw(3)
    cl.proxies[1].heal()
    cl.wait_isr("t", 0, 3)
    produce(cl.bootstrap, "t", [b"c"])
    wait_for(lambda: len(consume_all(cl.bootstrap, "t", 21, timeout=10)) >= 21, 30, what="all records")
    assert _count(cl, 1, "expand ISR") <= 4, cl.brokers[1].log_text()[-3000:]


def test_leader_cut_from_zookeeper_acknowledges_nothing_once_replaced(proxied):
    """The group coordinator (the leader of the group's __consumer_offsets partition, and
    of a topic) loses ZooKeeper; its session expires and the controller moves both
    partitions. It does not know yet and goes on answering: neither an offset commit nor an
    acks=all write may be answered as a success, and once it is back the group's committed
    offset is the last one acknowledged."""
    cl = proxied.start()
    others = lambda b: [i for i in (1, 2, 3) if i != b]  # noqa: E731
    coord = wait_for(lambda: _coordinator(cl, "g", 1) > 0 and _coordinator(cl, "g", 1), 40, what="a coordinator")
    _create(cl, "u", [coord, *others(coord)])
    offsets = [("__consumer_offsets", p) for p in range(3)]
    wait_for(lambda: _isrs_full(cl, offsets), 40, what="__consumer_offsets in sync")
    produce(cl.bootstrap, "u", [b"v%d" % i for i in range(10)])
    assert _commit(cl, coord, "g", "u", 10) == 0
    cl.proxies[coord].blackhole()
    try:
        wait_for(lambda: cl.leader("u", 0) not in (-1, coord) and
                 all(cl.state(t, p)["leader"] != coord for t, p in offsets), 40, what="leadership moved")
        # the other brokers follow the new leaders now (before that, their fetches from
        # the old one could still complete its writes, which then are on the new leader too)
        wait_for(lambda: all(_leaders(cl, b, ["u", "__consumer_offsets"]) == _leaders_in_zk(cl, [("u", 0), *offsets])
                             for b in others(coord)), 20, what="the new leaders known")
        assert _coordinator(cl, "g", coord) == coord, "the old coordinator does not know it was replaced"
        assert _commit(cl, coord, "g", "u", 20) != 0, "a commit acknowledged by a replaced coordinator"
        assert _produce_to(cl, coord, "u", b"zombie", 3000) != 0, "a write acknowledged by a replaced leader"
    finally:
        cl.proxies[coord].heal()
    wait_for(lambda: _isrs_full(cl, [("u", 0), *offsets]), 60, what="the old leader back in every ISR")
    now = wait_for(lambda: (c := _coordinator(cl, "g", others(coord)[0])) > 0 and c, 30)
    assert _committed(cl, now, "g", "u") == 10
    got = consume_all(cl.bootstrap, "u", 10, timeout=20)
    assert sorted(v for _, _, v in got) == sorted(b"v%d" % i for i in range(10))


def test_follower_without_a_registration_is_not_taken_back_into_the_isr(proxied):
    """A follower's registration in ZooKeeper is gone while it goes on fetching: the
    controller takes it out of the ISR, and the leader, as Kafka's in ZooKeeper mode,
    takes back only live brokers, instead of the two taking turns for ever."""
    cl = proxied.start()
    _create(cl, "t", [1, 2, 3])
    controller = json.loads(cl.zk.get("/controller")[0])["brokerid"]
    follower = 3 if controller != 3 else 2
    cl.zk.delete(f"/brokers/ids/{follower}")
    wait_for(lambda: follower not in cl.state("t", 0)["isr"], 30, what="the follower out of the ISR")
    produce(cl.bootstrap, "t", [b"x%d" % i for i in range(20)])
    time.sleep(5)
    assert follower not in cl.state("t", 0)["isr"]
    assert _count(cl, 1, "expand ISR") == 0, cl.brokers[1].log_text()[-3000:]
    cl.brokers[follower].kill()
    cl.brokers[follower].start()
    cl.wait_isr("t", 0, 3)
    assert _count(cl, 1, "expand ISR") == 1


def test_parked_write_counts_across_an_epoch_bump_of_the_same_leader(proxied):
    """An acks=all write waits for a stopped ISR member; the controller takes that member
    out (a new leader epoch, the same leader). The write is in the leader's log and soon in
    every remaining ISR member's: it is acknowledged, as Kafka's delayed produce does,
    whose check asks only whether this broker still leads; not refused with
    NOT_LEADER_OR_FOLLOWER, which an idempotent producer takes for not written."""
    cl = proxied.start()
    _create(cl, "t", [1, 2, 3])
    controller = json.loads(cl.zk.get("/controller")[0])["brokerid"]
    follower = 3 if controller != 3 else 2
    epoch = cl.state("t", 0)["leader_epoch"]
    cl.freeze(follower)
    try:
        with WireClient("127.0.0.1", cl.brokers[1].port) as c:
            c.send(ApiKey.PRODUCE, None, acks=-1, timeout=20000, transactional_id=None, topic_data=[dict(
                name="t", partition_data=[dict(index=0, records=build_batch([(b"k", b"parked")]))])])
            time.sleep(0.5)
            cl.zk.delete(f"/brokers/ids/{follower}")
            wait_for(lambda: cl.state("t", 0)["leader_epoch"] > epoch, 20, what="the controller's new epoch")
            r = c.receive()
    finally:
        cl.thaw(follower)
    p = r.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (0, 0)
    assert cl.state("t", 0)["leader"] == 1
    cl.brokers[follower].kill()
    cl.brokers[follower].start()
    cl.wait_isr("t", 0, 3)
    assert [v for _, _, v in consume_all(cl.bootstrap, "t", 1, timeout=20)] == [b"parked"]


def test_idempotent_producer_across_a_leader_cut_from_zookeeper(proxied):
    """An idempotent acks=all producer writes while its partition's leader loses
    ZooKeeper and is replaced: every record is there exactly once and in order, and the
    producer is told of no error (no OUT_OF_ORDER_SEQUENCE_NUMBER, no epoch bump)."""
    cl = proxied.start()
    _create(cl, "pay", [1, 2, 3])
    proc = _start_producer(cl.bootstrap, "pay", 2000, 200)
    time.sleep(2)
    cl.proxies[1].blackhole()
    try:
        wait_for(lambda: cl.leader("pay", 0) not in (-1, 1), 40, what="a new leader")
        time.sleep(2)
    finally:
        cl.proxies[1].heal()
    acked, err = _acked(proc)
    assert proc.returncode == 0 and "ERROR" not in err, err[-3000:]
    assert len(acked) == 2000
    cl.wait_isr("pay", 0, 3, timeout=60)
    got = consume_all(cl.bootstrap, "pay", 2000)
    assert [int(v) for _, _, v in sorted(got, key=lambda r: r[1])] == list(range(2000))


def _fetch_committed(cl: Cluster, broker: int, group: str, topic: str, isolation: str) -> int:
    """What another client's ``Consumer.committed`` reads (OffsetFetch; read_committed asks
    for stable offsets), through ``broker`` only."""
    c = Consumer({"bootstrap.servers": cl.brokers[broker].bootstrap, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


def test_a_commit_the_isr_does_not_have_is_never_fetched(proxied):
    """The followers of the group's __consumer_offsets partition are stopped: a commit
    reaches the coordinator's log only, times out and is answered with an error. Until then
    and after, other clients read the offset committed before it (Kafka's pending offset
    commit), never one a failover could take back; once the followers are back, a new
    commit shows."""
    cl = proxied.start()
    coord = wait_for(lambda: _coordinator(cl, "g", 1) > 0 and _coordinator(cl, "g", 1), 40, what="a coordinator")
    followers = [i for i in (1, 2, 3) if i != coord]
    _create(cl, "u", [coord, *followers])
    offsets = [("__consumer_offsets", p) for p in range(3)]
    wait_for(lambda: _isrs_full(cl, offsets), 40, what="__consumer_offsets in sync")
    produce(cl.bootstrap, "u", [b"v%d" % i for i in range(40)])
    assert _commit(cl, coord, "g", "u", 10) == 0
    assert _fetch_committed(cl, coord, "g", "u", "read_uncommitted") == 10
    for f in followers:
        cl.freeze(f)
    try:
        answer: dict[str, int] = {}
        writer = threading.Thread(target=lambda: answer.setdefault("code", _commit(cl, coord, "g", "u", 30)))
        writer.start()
        time.sleep(0.5)  # the commit is in the coordinator's log, waiting for the ISR
        assert _fetch_committed(cl, coord, "g", "u", "read_uncommitted") == 10, "an unreplicated commit was read"
        writer.join(15)
        assert answer.get("code") in (15, 16), answer  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
        assert _fetch_committed(cl, coord, "g", "u", "read_committed") == 10
        assert _committed(cl, coord, "g", "u") == 10
    finally:
        for f in followers:
            cl.thaw(f)
    wait_for(lambda: _isrs_full(cl, offsets), 60, what="__consumer_offsets in sync again")
    assert wait_for(lambda: _commit(cl, coord, "g", "u", 35) == 0, 30, what="a commit acknowledged")
    assert _fetch_committed(cl, coord, "g", "u", "read_uncommitted") == 35
    assert _fetch_committed(cl, coord, "g", "u", "read_committed") == 35
