"""Zombies and dead producers: a second producer with the same transactional.id fences the
first (its next produce or commit fails with a fatal fenced error; its open transaction is
aborted), and the transaction of a producer SIGKILLed mid-transaction is aborted by the
broker once transaction.timeout.ms has passed (or at once when a new producer with its
transactional.id initialises), after which read_committed consumers move on."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.krait_harness import REPO, BrokerProcess

from .helpers import (
    READ_COMMITTED,
    consume_all,
    create_topic,
    describe_transactions,
    list_offset,
    list_transactions,
    name,
    wait_for,
)

KILLABLE = Path(__file__).with_name("killable_producer.py")
FENCED_CODES = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
#: the killed producer's transaction.timeout.ms
TXN_TIMEOUT_MS = 5000


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """A broker that looks for timed-out transactions every 500 ms (Kafka: 10 s)."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("fencing") / "logs"), overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}).start()
    yield b
    b.stop()


def _producer(broker, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 10000, "linger.ms": 5, **conf})
    p.init_transactions(15)
    return p


def _commit(broker, topic: str, values: list[bytes]) -> None:
    p = _producer(broker, name("other"))
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=0)
    p.commit_transaction(15)


def test_confluent_zombie_is_fenced(txn_broker):
    topic = create_topic(txn_broker, name("fence"))
    tid = name("zombie")
    zombie = _producer(txn_broker, tid)
    zombie.begin_transaction()
    zombie.produce(topic, b"z1")
    assert zombie.flush(10) == 0
    before = describe_transactions(txn_broker, tid)[tid]
    assert before.state == "Ongoing" and before.partitions == {topic: [0]}

    successor = _producer(txn_broker, tid)  # bumps the epoch, aborts the zombie's transaction
    after = describe_transactions(txn_broker, tid)[tid]
    assert (after.producer_id, after.state) == (before.producer_id, "Empty")
    assert after.producer_epoch > before.producer_epoch
    assert list_offset(txn_broker, topic, isolation=READ_COMMITTED) == list_offset(txn_broker, topic) == 2

    zombie.produce(topic, b"z2")
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(15)
    err: KafkaError = info.value.args[0]
    assert err.code() in FENCED_CODES and err.fatal(), err
    with pytest.raises(KafkaException):  # fatal: the zombie can do nothing more
        zombie.begin_transaction()

    successor.begin_transaction()
    successor.produce(topic, b"s1")
    successor.commit_transaction(15)
    rc = consume_all(txn_broker, topic, "read_committed", settle=0.3)
    assert rc.values == [b"s1"]
    assert b"z2" not in consume_all(txn_broker, topic, "read_uncommitted").values  # never written


def test_aiokafka_zombie_is_fenced(txn_broker):
    import aiokafka
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    topic = create_topic(txn_broker, name("aio-fence"))
    tid = name("aio-zombie")

    async def run():
        zombie = aiokafka.AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid)
        successor = aiokafka.AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=tid)
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait(topic, b"z1", partition=0)
            await successor.start()
            with pytest.raises((ProducerFenced, InvalidProducerEpoch)):
                await zombie.send_and_wait(topic, b"z2", partition=0)
                await zombie.commit_transaction()
            async with successor.transaction():
                await successor.send_and_wait(topic, b"s1", partition=0)
        finally:
            await zombie.stop()
            await successor.stop()

    asyncio.run(run())
    assert consume_all(txn_broker, topic, "read_committed", settle=0.3).values == [b"s1"]


def _start_killable(broker, tid: str, topic: str, n: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(KILLABLE), broker.bootstrap, tid, str(TXN_TIMEOUT_MS), topic, str(n)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"the producer exited with {proc.wait()} before producing")
    assert json.loads(line) == {"produced": n}
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_killed_producer_transaction_times_out(txn_broker):
    topic = create_topic(txn_broker, name("killed"))
    tid = name("killed-tx")
    proc = _start_killable(txn_broker, tid, topic, 3)
    _kill(proc)
    open_ = describe_transactions(txn_broker, tid)[tid]
    assert open_.state == "Ongoing" and open_.partitions == {topic: [0]} and open_.timeout_ms == TXN_TIMEOUT_MS
    assert list_transactions(txn_broker, states=["Ongoing"]).get(tid) == (open_.producer_id, "Ongoing")

    # committed data from another producer, after the dead transaction's records: held back
    _commit(txn_broker, topic, [b"after-0", b"after-1"])
    assert list_offset(txn_broker, topic) == 6  # killed-0..2, after-0, after-1, commit marker
    assert list_offset(txn_broker, topic, isolation=READ_COMMITTED) == 0
    assert consume_all(txn_broker, topic, "read_committed", settle=0.3).values == []
    assert time.time() * 1000 < open_.start_time_ms + TXN_TIMEOUT_MS, "too slow to see the open transaction"

    # the broker aborts it after the timeout (checked every 500 ms here)
    wait_for(lambda: list_offset(txn_broker, topic, isolation=READ_COMMITTED) == 7, timeout=TXN_TIMEOUT_MS / 1000 + 10,
             interval=0.05, what="the abort of the timed-out transaction")
    assert time.time() * 1000 >= open_.start_time_ms + TXN_TIMEOUT_MS
    assert list_offset(txn_broker, topic) == 7  # its abort marker
    done = describe_transactions(txn_broker, tid)[tid]
    assert (done.state, done.producer_id) == ("CompleteAbort", open_.producer_id)
    assert done.producer_epoch == open_.producer_epoch + 1  # Kafka fences the dead producer's epoch

    rc = consume_all(txn_broker, topic, "read_committed", settle=0.3)
    assert rc.records == [(0, 3, b"after-0"), (0, 4, b"after-1")] and rc.positions == {0: 7}
    assert consume_all(txn_broker, topic, "read_uncommitted").values == [
        b"killed-0", b"killed-1", b"killed-2", b"after-0", b"after-1"]


def test_killed_producer_transaction_aborted_by_its_successor(txn_broker):
    """A new producer with the dead one's transactional.id need not wait for the timeout."""
    topic = create_topic(txn_broker, name("killed-succ"))
    tid = name("killed-succ-tx")
    _kill(_start_killable(txn_broker, tid, topic, 2))
    assert list_offset(txn_broker, topic, isolation=READ_COMMITTED) == 0
    t0 = time.monotonic()
    successor = _producer(txn_broker, tid)
    assert time.monotonic() - t0 < TXN_TIMEOUT_MS / 1000
    assert list_offset(txn_broker, topic, isolation=READ_COMMITTED) == list_offset(txn_broker, topic) == 3
    successor.begin_transaction()
    successor.produce(topic, b"next", partition=0)
    successor.commit_transaction(15)
    rc = consume_all(txn_broker, topic, "read_committed", settle=0.3)
    assert rc.records == [(0, 3, b"next")] and rc.positions == {0: 5}


def test_live_producer_past_its_timeout_is_fenced(txn_broker):
    """A producer that outlives transaction.timeout.ms finds its transaction aborted by the
    broker and its epoch fenced: the commit fails fatally, nothing of it is visible."""
    topic = create_topic(txn_broker, name("slow"))
    tid = name("slow-tx")
    p = _producer(txn_broker, tid, **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"late", partition=0)
    assert p.flush(10) == 0
    wait_for(lambda: describe_transactions(txn_broker, tid)[tid].state == "CompleteAbort", timeout=10,
             what="the abort of the timed-out transaction")
    assert list_offset(txn_broker, topic, isolation=READ_COMMITTED) == list_offset(txn_broker, topic) == 2
    p.produce(topic, b"later", partition=0)
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(15)
    err: KafkaError = info.value.args[0]
    assert err.code() in FENCED_CODES and err.fatal(), err
    assert consume_all(txn_broker, topic, "read_committed", settle=0.3).values == []
    assert consume_all(txn_broker, topic, "read_uncommitted").values == [b"late"]
