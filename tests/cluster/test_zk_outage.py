"""A broker whose ZooKeeper hangs or goes away (issue 23, bug 4): the event loop never waits
on ZooKeeper, so requests that do not need it are answered at once; those that do are
answered with the retriable error Kafka gives (COORDINATOR_LOAD_IN_PROGRESS for a producer
id without a block, REQUEST_TIMED_OUT for an admin write), never with a closed
connection; the broker says that it lost ZooKeeper and that it got it back, without a
traceback; and once ZooKeeper is back everything works again."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from kazoo.client import KazooClient

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.cluster.cluster_harness import FAST, wait_for
from tests.cluster.zk_harness import ZooKeeperProcess, zookeeper_missing
from tests.krait_harness import BrokerProcess

#: a loop blocked on ZooKeeper shows as seconds here; a free one answers in milliseconds
PROMPT = 1.0


@pytest.fixture
def zk_broker(tmp_path):
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    zkp = ZooKeeperProcess().start()
    b = BrokerProcess(str(tmp_path / "b1"), {"zookeeper.connect": zkp.connect, "node.id": "1", **FAST})
    try:
        b.start()
        create_topic(b, "existing")
        yield zkp, b
    finally:
        if zkp.proc is not None and zkp.proc.poll() is None:
            os.kill(zkp.proc.pid, signal.SIGCONT)
        b.stop()
        zkp.stop()


def create_topic(b: BrokerProcess, name: str) -> int:
    with WireClient("127.0.0.1", b.port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(name=name, num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])], timeout_ms=30000,
                      validate_only=False)
    return r.topics[0].error_code


def init_producer_id(b: BrokerProcess) -> tuple[int, int, float]:
    """(error code, producer id, seconds) of an idempotent producer's InitProducerId."""
    t0 = time.monotonic()
    with WireClient("127.0.0.1", b.port) as c:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=-1,
                      producer_id=-1, producer_epoch=-1)
    return r.error_code, r.producer_id, time.monotonic() - t0


def alter_quota(b: BrokerProcess, rate: float) -> int:
    with WireClient("127.0.0.1", b.port) as c:
        r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=[{
            "entity": [{"entity_type": "user", "entity_name": "alice"}],
            "ops": [{"key": "producer_byte_rate", "value": rate, "remove": False}]}])
    return r.entries[0].error_code


def quota(b: BrokerProcess) -> float | None:
    with WireClient("127.0.0.1", b.port) as c:
        r = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, strict=True, components=[
            {"entity_type": "user", "match_type": 0, "match": "alice"}])
    assert r.error_code == 0, r
    return next((v.value for e in r.entries for v in e.values if v.key == "producer_byte_rate"), None)


def round_trips(b: BrokerProcess, seconds: float) -> float:
    """The slowest ApiVersions and Metadata round trip over ``seconds``."""
    worst = 0.0
    with WireClient("127.0.0.1", b.port, timeout=10) as c:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            c.request(ApiKey.API_VERSIONS)
            md = c.request(ApiKey.METADATA, topics=[dict(name="existing")], allow_auto_topic_creation=False)
            assert md.topics[0].error_code == 0 and md.topics[0].partitions[0].leader_id == 1
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.05)
    return worst


def produce(b: BrokerProcess, topic: str, *, idempotent: bool) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": idempotent,
                  "acks": "all" if idempotent else "1", "message.timeout.ms": 20000})
    p.produce(topic, b"v")
    assert p.flush(25) == 0


def in_thread(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.append((fn(*args), time.monotonic())), daemon=True)
    t.start()
    return t, out


def assert_clean_log(b: BrokerProcess) -> None:
    text = b.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[-5000:]


def test_hung_zookeeper_never_blocks_the_event_loop(zk_broker):
    """SIGSTOP: the connection looks alive until kazoo's pings time out, so ZooKeeper calls
    are sent and hang. The loop keeps answering; the admin write that waits on ZooKeeper
    is answered with an error once the connection is declared lost."""
    zkp, b = zk_broker
    os.kill(zkp.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    creating, created = in_thread(create_topic, b, "during-hang")
    code, _, took = init_producer_id(b)
    # no producer id block yet, and ZooKeeper cannot give one: retriable, at once
    assert code == ErrorCode.coordinator_load_in_progress and took < PROMPT
    assert round_trips(b, 3.0) < PROMPT
    creating.join(30)
    assert created, "CreateTopics got no answer"
    (code, answered_at), = created
    assert code == ErrorCode.request_timed_out
    assert answered_at - started < 15  # within zookeeper.session.timeout.ms, and a margin
    os.kill(zkp.proc.pid, signal.SIGCONT)
    # the write may have reached ZooKeeper before it froze: then the topic is there
    wait_for(lambda: create_topic(b, "during-hang") in (ErrorCode.none, ErrorCode.topic_already_exists), 60,
             interval=0.5, what="CreateTopics after ZooKeeper thawed")
    wait_for(lambda: init_producer_id(b)[0] == ErrorCode.none, 30, interval=0.2, what="a producer id")
    assert_clean_log(b)


def test_zookeeper_down_then_back(zk_broker):
    """ZooKeeper stopped and started again on its data: meanwhile the broker serves what
    does not need ZooKeeper and answers the rest with retriable errors; afterwards it
    allocates producer ids and writes to ZooKeeper again."""
    zkp, b = zk_broker
    assert alter_quota(b, 1024.0) == ErrorCode.none
    zkp.stop(keep_data=True)
    wait_for(lambda: "ZooKeeper connection lost" in b.log_text(), 20, what="a warning about ZooKeeper")
    idp, idp_answer = in_thread(init_producer_id, b)
    assert round_trips(b, 1.0) < PROMPT
    idp.join(10)
    (code, _, took), _ = idp_answer[0]
    assert code == ErrorCode.coordinator_load_in_progress and took < PROMPT
    t0 = time.monotonic()
    assert create_topic(b, "during-outage") == ErrorCode.request_timed_out
    assert alter_quota(b, 2048.0) == ErrorCode.request_timed_out
    assert time.monotonic() - t0 < 2 * PROMPT
    assert quota(b) == 1024.0  # the quotas last read stay in force
    produce(b, "existing", idempotent=False)  # acks=1 to a partition led here
    zkp.start()
    wait_for(lambda: "ZooKeeper connection re-established" in b.log_text(), 30, what="reconnection logged")
    wait_for(lambda: init_producer_id(b)[0] == ErrorCode.none, 30, interval=0.2, what="a producer id")
    produce(b, "existing", idempotent=True)
    wait_for(lambda: create_topic(b, "after-outage") == ErrorCode.none, 30, interval=0.5, what="CreateTopics")
    assert alter_quota(b, 4096.0) == ErrorCode.none
    assert quota(b) == 4096.0
    assert_clean_log(b)


def test_producer_id_blocks_are_fetched_ahead(zk_broker):
    """Kafka's RPCProducerIdManager: the first InitProducerId finds no block and is told to
    retry while one is fetched; the next block is reserved in ZooKeeper once 90% of the
    current one is handed out, so the ids run on across blocks without a refusal."""
    zkp, b = zk_broker
    first = wait_for(lambda: (r := init_producer_id(b))[0] == ErrorCode.none and r, 10, interval=0.05,
                     what="a producer id")[1]
    assert first == 0

    def take(c: WireClient, n: int) -> list[tuple[int, int]]:
        for _ in range(n):  # pipelined
            c.send(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                   producer_epoch=-1)
        return [(r.error_code, r.producer_id) for r in (c.receive() for _ in range(n))]

    zk = KazooClient(hosts=zkp.connect)
    zk.start(10)
    try:
        with WireClient("127.0.0.1", b.port) as c:
            got = take(c, 950)  # ids 1..950: past the 90% mark of [0, 999]
            wait_for(lambda: json.loads(zk.get("/latest_producer_id_block")[0])["block_start"] == "1000", 10,
                     what="the next block reserved ahead")
            # ZooKeeper holds the block before the broker's thread hands it to the event loop
            wait_for(lambda: "acquired producer id block [1000, 1999]" in b.log_text(), 10,
                     what="the next block in the broker's hands")
            got += take(c, 200)  # across the block boundary
    finally:
        zk.stop()
        zk.close()
    assert {code for code, _ in got} == {ErrorCode.none}
    assert [pid for _, pid in got] == list(range(1, 1151))
