"""Commit and abort visibility with real clients (librdkafka through confluent-kafka, and
aiokafka): committed records are delivered under both isolation levels, aborted ones only
under read_uncommitted, control records never; the markers take offsets, so positions end
past them. And an open transaction holds read_committed consumers at the last stable
offset: nothing after its first offset is delivered, not even another producer's
non-transactional records, until it ends; ListOffsets latest under read_committed is the
LSO."""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from .helpers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    consume_all,
    create_topic,
    list_offset,
    name,
)


def _txn_producer(broker, **conf) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name("tx"),
                  "transaction.timeout.ms": 10000, "linger.ms": 5, **conf})
    p.init_transactions(15)
    return p


def test_confluent_commit_and_abort_visibility(broker):
    topic = create_topic(broker, name("vis"), partitions=2)
    p = _txn_producer(broker)
    # committed: c0..c3 over both partitions; aborted: a0..a3 (flushed, so in the log);
    # committed again: d0, d1 on partition 0 only
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"a{i}".encode(), partition=i % 2)
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"d{i}".encode(), partition=0)
    p.commit_transaction(15)

    # partition 0: c0 c2 C | a0 a2 A | d0 d1 C  -> HW 9; partition 1: c1 c3 C | a1 a3 A -> HW 6
    assert [list_offset(broker, topic, p_) for p_ in (0, 1)] == [9, 6]
    assert [list_offset(broker, topic, p_, READ_COMMITTED) for p_ in (0, 1)] == [9, 6]  # nothing open

    rc = consume_all(broker, topic, "read_committed", partitions=2, settle=0.5)
    assert sorted(rc.records) == [(0, 0, b"c0"), (0, 1, b"c2"), (0, 6, b"d0"), (0, 7, b"d1"),
                                  (1, 0, b"c1"), (1, 1, b"c3")]
    assert rc.positions == {0: 9, 1: 6}  # past the last marker

    ru = consume_all(broker, topic, "read_uncommitted", partitions=2, settle=0.5)
    assert sorted(ru.records) == [(0, 0, b"c0"), (0, 1, b"c2"), (0, 3, b"a0"), (0, 4, b"a2"), (0, 6, b"d0"),
                                  (0, 7, b"d1"), (1, 0, b"c1"), (1, 1, b"c3"), (1, 3, b"a1"), (1, 4, b"a3")]
    assert ru.positions == {0: 9, 1: 6}
    # the offsets no record was delivered at are exactly the markers'
    assert {(q, o) for q, o, _ in ru.records} | {(0, 2), (0, 5), (0, 8), (1, 2), (1, 5)} == \
        {(q, o) for q, n in ((0, 9), (1, 6)) for o in range(n)}


def test_confluent_abort_of_unsent_records(broker):
    """librdkafka drops records it had not sent when the transaction aborts: whatever
    reached the log is aborted, nothing of it is visible to read_committed."""
    topic = create_topic(broker, name("vis-purge"))
    p = _txn_producer(broker, **{"linger.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"never")
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, b"kept")
    p.commit_transaction(15)
    rc = consume_all(broker, topic, "read_committed", settle=0.3)
    assert rc.values == [b"kept"]
    assert b"kept" in consume_all(broker, topic, "read_uncommitted").values


def test_open_transaction_holds_read_committed_at_the_lso(broker):
    topic = create_topic(broker, name("lso"))
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    plain.produce(topic, b"n0")
    plain.flush(10)
    p = _txn_producer(broker)
    p.begin_transaction()
    p.produce(topic, b"t1")
    p.produce(topic, b"t2")
    p.flush(10)  # offsets 1, 2: the transaction's first offset is 1
    plain.produce(topic, b"n3")  # another producer, not transactional, after it
    plain.flush(10)

    assert list_offset(broker, topic, isolation=READ_UNCOMMITTED) == 4  # HW
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == 1  # LSO

    rc = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("g"), "isolation.level": "read_committed",
                   "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    try:
        rc.assign([TopicPartition(topic, 0, 0)])
        got, eof = [], False
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # long enough for several fetches
            m = rc.poll(0.1)
            if m is None:
                continue
            if m.error():
                eof = True
                continue
            got.append((m.offset(), m.value()))
        assert got == [(0, b"n0")] and eof
        assert rc.position([TopicPartition(topic, 0)])[0].offset == 1
        # librdkafka's ListOffsets uses the consumer's isolation level: the LSO
        assert rc.get_watermark_offsets(TopicPartition(topic, 0), cached=False) == (0, 1)

        # read_uncommitted sees everything
        assert consume_all(broker, topic, "read_uncommitted").values == [b"n0", b"t1", b"t2", b"n3"]

        p.commit_transaction(15)
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            m = rc.poll(0.1)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
        assert got == [(0, b"n0"), (1, b"t1"), (2, b"t2"), (3, b"n3")]
    finally:
        rc.close()
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == list_offset(broker, topic) == 5


def test_lso_moves_past_an_aborted_transaction(broker):
    """Aborted instead: read_committed delivers the later non-transactional record only."""
    topic = create_topic(broker, name("lso-abort"))
    p = _txn_producer(broker)
    p.begin_transaction()
    p.produce(topic, b"t0")
    p.flush(10)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, b"n1")
    plain.flush(10)
    assert consume_all(broker, topic, "read_committed", settle=0.5).values == []
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == 0
    p.abort_transaction(15)
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == list_offset(broker, topic) == 3
    rc = consume_all(broker, topic, "read_committed", settle=0.3)
    assert rc.records == [(0, 1, b"n1")] and rc.positions == {0: 3}


def test_aiokafka_commit_abort_and_lso(broker):
    import aiokafka

    topic = create_topic(broker, name("aio"))

    async def consume(isolation: str) -> list[tuple[int, bytes]]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                      enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            got = []
            end = (await c.end_offsets([tp]))[tp]  # the LSO under read_committed
            deadline = time.monotonic() + 10
            while await c.position(tp) < end and time.monotonic() < deadline:
                batch = await c.getmany(tp, timeout_ms=200)
                got += [(r.offset, r.value) for r in batch.get(tp, [])]
            got += [(r.offset, r.value) for r in (await c.getmany(tp, timeout_ms=300)).get(tp, [])]
            return got, await c.position(tp), end
        finally:
            await c.stop()

    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=name("aiotx"),
                                      transaction_timeout_ms=10000)
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"c0", partition=0)
                await p.send_and_wait(topic, b"c1", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"a0", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"c2", partition=0)
            # c0 c1 C | a0 A | c2 C
            assert await consume("read_committed") == ([(0, b"c0"), (1, b"c1"), (5, b"c2")], 7, 7)
            assert await consume("read_uncommitted") == ([(0, b"c0"), (1, b"c1"), (3, b"a0"), (5, b"c2")], 7, 7)

            # an open transaction: read_committed's end offset is its first offset
            await p.begin_transaction()
            await p.send_and_wait(topic, b"open", partition=0)
            got, pos, end = await consume("read_committed")
            assert (got[-1], pos, end) == ((5, b"c2"), 7, 7)
            got, pos, end = await consume("read_uncommitted")
            assert (got[-1], pos, end) == ((7, b"open"), 8, 8)
            await p.commit_transaction()
            got, pos, end = await consume("read_committed")
            assert (got[-1], pos, end) == ((7, b"open"), 9, 9)
        finally:
            await p.stop()

    asyncio.run(run())


def test_interleaved_transactions_compressed_and_fetched_in_small_pieces(broker):
    """Two transactional producers and a plain one interleave on one partition, round after
    round; one producer's transactions commit, the other's abort, batches compressed (lz4,
    zstd). A read_committed consumer fetching a few batches at a time (so that many fetches
    start in the middle of an aborted transaction) gets exactly the committed and plain
    records, in log order; read_uncommitted gets them all."""
    topic = create_topic(broker, name("interleave"))
    keep = _txn_producer(broker, **{"compression.type": "lz4", "linger.ms": 0})
    drop = _txn_producer(broker, **{"compression.type": "zstd", "linger.ms": 0})
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    want, everything = [], []
    for r in range(4):
        keep.begin_transaction()
        drop.begin_transaction()
        for i in range(6):
            for prod, tag in ((keep, b"k"), (drop, b"d"), (plain, b"p")):
                if tag == b"p" and i % 3:
                    continue
                v = b"%s%d-%d-" % (tag, r, i) + b"x" * 200
                prod.produce(topic, v, partition=0)
                prod.flush(10)  # one batch each: the producers' batches alternate in the log
                everything.append(v)
                if tag != b"d":
                    want.append(v)
        if r % 2:  # end in both orders
            drop.abort_transaction(15)
            keep.commit_transaction(15)
        else:
            keep.commit_transaction(15)
            drop.abort_transaction(15)
    hw = list_offset(broker, topic)
    assert hw == len(everything) + 2 * 4  # one marker per transaction
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == hw

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("g"), "isolation.level": "read_committed",
                  "enable.partition.eof": True, "fetch.max.bytes": 1024, "message.max.bytes": 1000,
                  "max.partition.fetch.bytes": 600, "receive.message.max.bytes": 1 << 20,
                  "fetch.wait.max.ms": 50})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break  # at the LSO (= HW)
            got.append(m.value())
        assert c.position([TopicPartition(topic, 0)])[0].offset == hw
    finally:
        c.close()
    assert got == want
    assert consume_all(broker, topic, "read_uncommitted").values == everything


def test_lso_is_the_first_offset_of_the_earliest_open_transaction(broker):
    topic = create_topic(broker, name("lso-two"))
    a, b = _txn_producer(broker), _txn_producer(broker)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    plain.produce(topic, b"n0")
    plain.flush(10)
    a.begin_transaction()
    a.produce(topic, b"a1")
    a.flush(10)
    b.begin_transaction()
    b.produce(topic, b"b2")
    b.flush(10)
    a.produce(topic, b"a3")
    a.flush(10)
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == 1
    b.commit_transaction(15)  # the later transaction ends first: a still holds the LSO
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == 1
    assert consume_all(broker, topic, "read_committed", settle=0.3).values == [b"n0"]
    a.abort_transaction(15)
    assert list_offset(broker, topic, isolation=READ_COMMITTED) == list_offset(broker, topic) == 6
    rc = consume_all(broker, topic, "read_committed", settle=0.3)
    assert rc.records == [(0, 0, b"n0"), (0, 2, b"b2")] and rc.positions == {0: 6}


def test_read_committed_from_the_middle_of_an_aborted_transaction(broker):
    """A consumer starting inside an aborted transaction (its first offset is before the
    fetch offset) must still drop the rest of it."""
    topic = create_topic(broker, name("mid-abort"))
    p = _txn_producer(broker, **{"linger.ms": 0})
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"a%d" % i)
        p.flush(10)  # five batches, offsets 0-4
    p.abort_transaction(15)  # marker at 5
    p.begin_transaction()
    p.produce(topic, b"c6")
    p.commit_transaction(15)  # c6 at 6, marker at 7
    for start in (0, 2, 4, 5):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("g"), "isolation.level": "read_committed",
                      "enable.partition.eof": True})
        got = []
        try:
            c.assign([TopicPartition(topic, 0, start)])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    break
                got.append((m.offset(), m.value()))
        finally:
            c.close()
        assert got == [(6, b"c6")], f"from offset {start}"


def test_kafka_python_commit_and_abort(broker):
    import kafka

    topic = create_topic(broker, name("kp"))
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=name("kp-tx"))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"c0", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"a0", partition=0).get(10)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"c1", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=5)
    # c0 C a0 A c1 C
    for isolation, want in (("read_committed", [(0, b"c0"), (4, b"c1")]),
                            ("read_uncommitted", [(0, b"c0"), (2, b"a0"), (4, b"c1")])):
        c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                enable_auto_commit=False, consumer_timeout_ms=1000, fetch_max_wait_ms=100)
        try:
            tp = kafka.TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            assert [(m.offset, m.value) for m in c] == want, isolation
            assert c.position(tp) == 6
            assert c.end_offsets([tp])[tp] == 6
        finally:
            c.close()


def test_commit_after_a_topic_of_the_transaction_was_deleted(broker):
    """Kafka skips the markers of deleted partitions: the commit succeeds and the records on
    the surviving topic become visible."""
    from confluent_kafka.admin import AdminClient

    kept, deleted = create_topic(broker, name("del-kept")), create_topic(broker, name("del-gone"))
    p = _txn_producer(broker, **{"linger.ms": 0})
    p.begin_transaction()
    p.produce(kept, b"k")
    p.produce(deleted, b"d")
    assert p.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([deleted])[deleted].result(15)
    p.commit_transaction(15)
    assert list_offset(broker, kept, isolation=READ_COMMITTED) == list_offset(broker, kept) == 2
    assert consume_all(broker, kept, "read_committed", settle=0.3).values == [b"k"]
    # the producer goes on
    p.begin_transaction()
    p.produce(kept, b"k2")
    p.commit_transaction(15)
    assert consume_all(broker, kept, "read_committed", settle=0.3).values == [b"k", b"k2"]
