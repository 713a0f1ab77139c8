"""Consume-transform-produce with the consumed offsets sent to the transaction
(AddOffsetsToTxn + TxnOffsetCommit): every input appears exactly once in the output under
read_committed, although one round is deliberately aborted after its records and offsets
were sent, and processing resumes from the group's committed offsets (with librdkafka: a new
consumer and a new producer with the same transactional.id, as after a crash; with
aiokafka: a seek back to the committed offsets, as an application does after an abort).
read_uncommitted shows the aborted round's duplicates: they were in the log."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from .helpers import consume_all, create_topic, name, wire

N_INPUT = 40
PARTITIONS = 2
ROUND = 7  # records per transaction


@pytest.fixture
def eos_topics(broker):
    src, dst = create_topic(broker, name("eos-in"), PARTITIONS), create_topic(broker, name("eos-out"), PARTITIONS)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(N_INPUT):
        p.produce(src, f"in{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(10) == 0
    return src, dst


def _check_output(broker, dst: str) -> None:
    rc = consume_all(broker, dst, "read_committed", PARTITIONS, settle=0.3)
    want = Counter(f"out-in{i}".encode() for i in range(N_INPUT))
    assert Counter(rc.values) == want, "each input exactly once under read_committed"
    # each input went to the output partition of its input partition, in order
    for q in range(PARTITIONS):
        assert [v for p, _, v in rc.records if p == q] == [f"out-in{i}".encode() for i in range(q, N_INPUT, PARTITIONS)]
    ru = consume_all(broker, dst, "read_uncommitted", PARTITIONS)
    dup = Counter(ru.values) - want
    assert dup and set(dup) <= set(want), "the aborted round's records are in the log"


def _committed(broker, group: str, src: str) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(src, q) for q in range(PARTITIONS)], timeout=10)]
    finally:
        c.close()


def test_confluent_consume_transform_produce_exactly_once(broker, eos_topics):
    src, dst = eos_topics
    group, tid = name("eos-g"), name("eos-tx")

    def start():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                      "fetch.wait.max.ms": 100})
        c.subscribe([src])
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5,
                      "transaction.timeout.ms": 10000})
        p.init_transactions(15)
        return c, p

    consumer, producer = start()
    done = rounds = aborted = 0
    deadline = time.monotonic() + 60
    try:
        while done < N_INPUT:
            assert time.monotonic() < deadline, f"only {done} of {N_INPUT} inputs processed"
            msgs = [m for m in consumer.consume(num_messages=ROUND, timeout=0.5) if not m.error()]
            if not msgs:
                continue
            rounds += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, b"out-" + m.value(), partition=m.partition())
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 15)
            if rounds == 2:
                assert producer.flush(15) == 0  # the records reach the log: only the abort hides them
                producer.abort_transaction(15)
                aborted += len(msgs)
                # as after a crash: a new instance resumes from the group's committed offsets
                consumer.close()
                consumer, producer = start()
                continue
            producer.commit_transaction(15)
            done += len(msgs)
    finally:
        consumer.close()
    assert aborted > 0 and done == N_INPUT
    assert _committed(broker, group, src) == [N_INPUT // PARTITIONS] * PARTITIONS
    _check_output(broker, dst)


def test_aiokafka_consume_transform_produce_exactly_once(broker, eos_topics):
    import aiokafka

    src, dst = eos_topics
    group = name("aio-eos-g")

    async def run() -> int:
        consumer = aiokafka.AIOKafkaConsumer(src, bootstrap_servers=broker.bootstrap, group_id=group,
                                             isolation_level="read_committed", enable_auto_commit=False,
                                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=name("aio-eos-tx"))
        await consumer.start()
        await producer.start()
        done = rounds = aborted = 0
        deadline = time.monotonic() + 60
        try:
            while done < N_INPUT:
                assert time.monotonic() < deadline, f"only {done} of {N_INPUT} inputs processed"
                batches = await consumer.getmany(timeout_ms=500, max_records=ROUND)
                if not any(batches.values()):
                    continue
                rounds += 1
                await producer.begin_transaction()
                offsets = {}
                for tp, msgs in batches.items():
                    for m in msgs:
                        await producer.send(dst, b"out-" + m.value, partition=tp.partition)
                    offsets[tp] = msgs[-1].offset + 1
                await producer.send_offsets_to_transaction(offsets, group)
                if rounds == 2:
                    await producer.flush()
                    await producer.abort_transaction()
                    aborted += sum(len(m) for m in batches.values())
                    for tp in consumer.assignment():  # back to the committed offsets
                        committed = await consumer.committed(tp)
                        consumer.seek(tp, committed if committed is not None else 0)
                    continue
                await producer.commit_transaction()
                done += sum(len(m) for m in batches.values())
        finally:
            await producer.stop()
            await consumer.stop()
        assert aborted > 0
        return done

    assert asyncio.run(run()) == N_INPUT
    assert _committed(broker, group, src) == [N_INPUT // PARTITIONS] * PARTITIONS
    _check_output(broker, dst)


def _offset_fetch(broker, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """OffsetFetch v8 for partition 0: (error code, committed offset)."""
    with wire(broker) as c:
        r = c.request(ApiKey.OFFSET_FETCH, 8, require_stable=require_stable, groups=[dict(
            group_id=group, topics=[dict(name=topic, partition_indexes=[0])])])
    p = r.groups[0].topics[0].partitions[0]
    return p.error_code, p.committed_offset


def test_offsets_sent_to_a_transaction_are_pending_until_it_ends(broker):
    """TxnOffsetCommit's offsets are invisible until the commit (OffsetFetch with
    require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile, and a read_committed
    librdkafka consumer waits), then replace the committed offset; an abort drops them."""
    src, dst = create_topic(broker, name("pend-in")), create_topic(broker, name("pend-out"))
    group = name("pend-g")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        c.commit(offsets=[TopicPartition(src, 0, 3)], asynchronous=False)
        metadata = c.consumer_group_metadata()
    finally:
        c.close()
    assert _offset_fetch(broker, group, src, True) == (0, 3)

    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name("pend-tx"), "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(dst, b"x")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], metadata, 15)
    assert _offset_fetch(broker, group, src, False) == (0, 3)
    assert _offset_fetch(broker, group, src, True) == (ErrorCode.unstable_offset_commit, -1)

    seen: list[int] = []

    def read_committed_offset() -> None:
        waiting = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed"})
        try:
            seen.append(waiting.committed([TopicPartition(src, 0)], timeout=20)[0].offset)
        finally:
            waiting.close()

    reader = threading.Thread(target=read_committed_offset)
    reader.start()
    time.sleep(1.0)  # the consumer asks, and retries, while the transaction is open
    assert not seen
    p.commit_transaction(15)
    reader.join(25)
    assert seen == [7]
    assert _offset_fetch(broker, group, src, True) == (0, 7)

    p.begin_transaction()
    p.produce(dst, b"y")
    p.send_offsets_to_transaction([TopicPartition(src, 0, 9)], metadata, 15)
    p.abort_transaction(15)
    assert _offset_fetch(broker, group, src, True) == (0, 7)
