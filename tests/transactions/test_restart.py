"""Transaction state survives broker restarts (clean, then SIGKILL): every transactional id
keeps its producer id, epoch, state and partitions (``__transaction_state`` is replayed); a
committed transaction stays committed and an aborted one aborted for read_committed
consumers; an open one still holds the last stable offset; InitProducerId then bumps the
epoch of the same producer id (fencing and aborting the open transaction first), and new
producer ids never reuse old ones."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.krait_harness import BrokerProcess

from .helpers import (
    READ_COMMITTED,
    consume_all,
    create_topic,
    describe_transactions,
    list_offset,
    list_transactions,
    name,
    wire,
)

E = ErrorCode


def _init(c, tid: str) -> tuple[int, int]:
    deadline = time.monotonic() + 15
    while True:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=60000,
                      producer_id=-1, producer_epoch=-1)
        if r.error_code in (E.concurrent_transactions, E.coordinator_load_in_progress) and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        assert r.error_code == E.none, r
        return r.producer_id, r.producer_epoch


@pytest.fixture
def restart_broker(tmp_path):
    b = BrokerProcess(str(tmp_path / "logs")).start()
    yield b
    b.kill()


def _confluent_txn(broker, tid: str, topic: str, values: list[bytes], commit: bool) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(15) == 0
    if commit:
        p.commit_transaction(15)
    else:
        p.abort_transaction(15)


def _snapshot(broker, ids):
    return {tid: (d.error_code, d.state, d.producer_id, d.producer_epoch, d.timeout_ms, d.partitions)
            for tid, d in describe_transactions(broker, *ids).items()}


def test_transaction_state_survives_restarts(restart_broker):
    b = restart_broker
    topic = create_topic(b, name("rs"))
    committed, aborted, ongoing, empty = (name(x) for x in ("rs-commit", "rs-abort", "rs-open", "rs-empty"))
    _confluent_txn(b, committed, topic, [b"c0", b"c1"], commit=True)  # offsets 0, 1, marker 2
    _confluent_txn(b, aborted, topic, [b"a0"], commit=False)  # 3, marker 4
    with wire(b) as c:
        _init(c, empty)
        pid, epoch = _init(c, ongoing)
        r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=ongoing,
                      v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                      v3_and_below_topics=[dict(name=topic, partitions=[0])])
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.none
        batch = build_batch([(None, b"o0")], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True,
                            timestamp=int(time.time() * 1000))
        r = c.request(ApiKey.PRODUCE, 11, transactional_id=ongoing, acks=-1, timeout=5000,
                      topic_data=[dict(name=topic, partition_data=[dict(index=0, records=batch)])])
        assert r.responses[0].partition_responses[0].base_offset == 5  # the open transaction's first offset
    ids = [committed, aborted, ongoing, empty]
    before = _snapshot(b, ids)
    assert [before[t][1] for t in ids] == ["CompleteCommit", "CompleteAbort", "Ongoing", "Empty"]
    assert before[ongoing][5] == {topic: [0]}
    listed = list_transactions(b)

    for hard in (False, True):
        b.restart(hard=hard)
        assert _snapshot(b, ids) == before, f"after a {'hard' if hard else 'clean'} restart"
        assert {t: v for t, v in list_transactions(b).items() if t in ids} == {t: listed[t] for t in ids}
        assert list_offset(b, topic) == 6
        assert list_offset(b, topic, isolation=READ_COMMITTED) == 5  # the open transaction still holds it
        rc = consume_all(b, topic, "read_committed", settle=0.3)
        assert rc.records == [(0, 0, b"c0"), (0, 1, b"c1")] and rc.positions == {0: 5}
        assert consume_all(b, topic, "read_uncommitted").values == [b"c0", b"c1", b"a0", b"o0"]

    with wire(b) as c:
        # same producer ids, bumped epochs; the open transaction is aborted by the fence
        assert _init(c, committed) == (before[committed][2], before[committed][3] + 1)
        assert _init(c, empty) == (before[empty][2], before[empty][3] + 1)
        assert _init(c, ongoing) == (pid, epoch + 2)
        fresh_pid, _ = _init(c, name("rs-new"))
        assert fresh_pid not in {s[2] for s in before.values()}
    assert list_offset(b, topic, isolation=READ_COMMITTED) == list_offset(b, topic) == 7
    desc = describe_transactions(b, ongoing, committed)
    assert desc[ongoing].state == desc[committed].state == "Empty"

    # a real client carries on with the id after the restarts
    _confluent_txn(b, committed, topic, [b"c2"], commit=True)
    rc = consume_all(b, topic, "read_committed", settle=0.3)
    assert rc.values == [b"c0", b"c1", b"c2"] and rc.positions == {0: 9}
    b.restart(hard=True)
    assert describe_transactions(b, committed)[committed].state == "CompleteCommit"
    assert consume_all(b, topic, "read_committed", settle=0.3).values == [b"c0", b"c1", b"c2"]


@pytest.mark.parametrize("hard", [False, True], ids=["clean", "sigkill"])
def test_producer_carries_on_across_a_broker_restart(restart_broker, hard):
    """A restart in the middle of a transaction: the client reconnects, writes more
    (sequence numbers continue on each partition) and commits."""
    b = restart_broker
    topic = create_topic(b, name("rs-live"), 2)
    tid = name("rs-live-tx")
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 0,
                  "transaction.timeout.ms": 30000})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"a%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    b.restart(hard=hard)
    assert describe_transactions(b, tid)[tid].state == "Ongoing"
    for i in range(3):
        p.produce(topic, b"b%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    p.commit_transaction(30)
    assert describe_transactions(b, tid)[tid].state == "CompleteCommit"
    rc = consume_all(b, topic, "read_committed", 2, settle=0.3)
    assert sorted(rc.records) == [(0, 0, b"a0"), (0, 1, b"a2"), (0, 2, b"b0"), (0, 3, b"b2"),
                                  (1, 0, b"a1"), (1, 1, b"b1")]
    assert rc.positions == {0: 5, 1: 3}


def test_transaction_timing_out_across_a_restart_is_aborted(tmp_path):
    """The coordinator's timers start again from the replayed state: a transaction whose
    timeout passes while the broker restarts is aborted soon after."""
    b = BrokerProcess(str(tmp_path / "logs"), overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}).start()
    try:
        topic = create_topic(b, name("rs-timeout"))
        tid = name("rs-timeout-tx")
        with wire(b) as c:
            assert c.request(ApiKey.FIND_COORDINATOR, 3, key=tid, key_type=1).error_code == E.none
            r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=2000,
                          producer_id=-1, producer_epoch=-1)
            assert r.error_code == E.none, r
            pid, epoch = r.producer_id, r.producer_epoch
            r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=tid,
                          v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                          v3_and_below_topics=[dict(name=topic, partitions=[0])])
            assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.none
            batch = build_batch([(None, b"t")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                transactional=True, timestamp=int(time.time() * 1000))
            r = c.request(ApiKey.PRODUCE, 11, transactional_id=tid, acks=-1, timeout=5000,
                          topic_data=[dict(name=topic, partition_data=[dict(index=0, records=batch)])])
            assert r.responses[0].partition_responses[0].error_code == E.none
        b.restart(hard=True)
        deadline = time.monotonic() + 15
        while describe_transactions(b, tid)[tid].state != "CompleteAbort":
            assert time.monotonic() < deadline, describe_transactions(b, tid)[tid]
            time.sleep(0.1)
        assert list_offset(b, topic, isolation=READ_COMMITTED) == list_offset(b, topic) == 2
        assert consume_all(b, topic, "read_committed", settle=0.3).values == []
    finally:
        b.kill()
