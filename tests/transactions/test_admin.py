"""DescribeTransactions and ListTransactions on the wire (confluent-kafka's AdminClient has
neither in the installed version; the Java Admin client's view is in
test_java_client.py): the states a transactional id goes through with a real producer,
and ListTransactions' state, producer id and duration filters."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from .helpers import create_topic, describe_transactions, list_transactions, name, wire

E = ErrorCode


def test_describe_and_list_follow_a_real_producer(broker):
    t1, t2 = create_topic(broker, name("adm-a"), 2), create_topic(broker, name("adm-b"))
    tid, other = name("adm-tx"), name("adm-other")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "transaction.timeout.ms": 12345,
                  "linger.ms": 5})
    p.init_transactions(15)
    q = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": other, "linger.ms": 5})
    q.init_transactions(15)

    d = describe_transactions(broker, tid)[tid]
    assert (d.error_code, d.state, d.timeout_ms, d.start_time_ms, d.partitions) == (0, "Empty", 12345, -1, {})
    pid, epoch = d.producer_id, d.producer_epoch

    t0 = int(time.time() * 1000)
    p.begin_transaction()
    p.produce(t1, b"x", partition=1)
    p.produce(t1, b"x", partition=0)
    p.produce(t2, b"y", partition=0)
    assert p.flush(15) == 0
    d = describe_transactions(broker, tid)[tid]
    assert (d.state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
    assert {t: sorted(ps) for t, ps in d.partitions.items()} == {t1: [0, 1], t2: [0]}
    assert t0 - 1000 <= d.start_time_ms <= int(time.time() * 1000)

    listed = list_transactions(broker)
    assert listed[tid] == (pid, "Ongoing") and listed[other][1] == "Empty"
    ongoing = list_transactions(broker, states=["Ongoing"])
    assert tid in ongoing and other not in ongoing and all(s == "Ongoing" for _, s in ongoing.values())
    assert list_transactions(broker, producer_ids=[pid]) == {tid: (pid, "Ongoing")}
    assert list_transactions(broker, states=["CompleteCommit"], producer_ids=[pid]) == {}
    # v1's duration filter: only transactions running longer than it
    assert tid not in list_transactions(broker, duration_ms=600_000)
    time.sleep(0.05)
    assert tid in list_transactions(broker, duration_ms=1)

    p.commit_transaction(15)
    d = describe_transactions(broker, tid)[tid]
    assert (d.state, d.producer_id, d.producer_epoch, d.partitions) == ("CompleteCommit", pid, epoch, {})
    assert list_transactions(broker, producer_ids=[pid]) == {tid: (pid, "CompleteCommit")}

    p.begin_transaction()
    p.produce(t2, b"z", partition=0)
    assert p.flush(15) == 0
    p.abort_transaction(15)
    assert describe_transactions(broker, tid)[tid].state == "CompleteAbort"

    # several ids in one request, answered in order; an unknown one: TRANSACTIONAL_ID_NOT_FOUND
    unknown = name("adm-unknown")
    got = describe_transactions(broker, other, unknown, tid)
    assert list(got) == [other, unknown, tid]
    assert (got[other].error_code, got[other].state) == (0, "Empty")
    assert got[unknown].error_code == E.transactional_id_not_found
    assert got[tid].state == "CompleteAbort"
    assert unknown not in list_transactions(broker)


def test_list_transactions_unknown_state_filter(broker):
    with wire(broker) as c:
        r = c.request(ApiKey.LIST_TRANSACTIONS, 0, state_filters=["Ongoing", "NoSuchState"], producer_id_filters=[])
    assert r.error_code == E.none
    assert list(r.unknown_state_filters) == ["NoSuchState"]
    assert all(t.transaction_state == "Ongoing" for t in r.transaction_states)


def test_find_coordinator_for_transactional_ids(broker):
    """FindCoordinator key type 1 (TRANSACTION), single key (v3) and batched (v4+, as the
    Java admin client sends it): this broker."""
    ids = [name("fc") for _ in range(3)]
    with wire(broker) as c:
        r = c.request(ApiKey.FIND_COORDINATOR, 3, key=ids[0], key_type=1)
        assert (r.error_code, r.node_id, r.port) == (E.none, 1, broker.port)
        r = c.request(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=ids)
        assert [(k.key, k.error_code, k.node_id, k.port) for k in r.coordinators] == [
            (i, E.none, 1, broker.port) for i in ids]


def test_describe_producers_shows_the_open_transaction(broker):
    """DescribeProducers (kafka-transactions.sh --describe-producers): the transactional
    producer's current transaction start offset while it is open, -1 once it ended."""
    topic = create_topic(broker, name("adm-prod"))
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, b"n0")
    plain.flush(10)
    tid = name("adm-prod-tx")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(15)
    pid = describe_transactions(broker, tid)[tid].producer_id

    def producer_state():
        with wire(broker) as c:
            r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[dict(name=topic, partition_indexes=[0])])
        part = r.topics[0].partitions[0]
        assert part.error_code == E.none
        return {a.producer_id: a for a in part.active_producers}

    p.begin_transaction()
    p.produce(topic, b"t1", partition=0)
    p.produce(topic, b"t2", partition=0)
    assert p.flush(15) == 0
    state = producer_state()[pid]
    assert (state.current_txn_start_offset, state.last_sequence) == (1, 1)
    p.commit_transaction(15)
    state = producer_state()[pid]
    assert state.current_txn_start_offset == -1
    assert state.coordinator_epoch >= 0
