"""Bad transactional input on the wire (WireClient), answered as Kafka answers it, and in
every case nothing written: the log end offset (ListOffsets latest, read_uncommitted) does
not move.

* EndTxn for an unknown transactional id or the wrong producer id: INVALID_PRODUCER_ID_MAPPING;
  with the wrong epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before (KafkaApis
  translates it for old clients); commit of a transaction that has none: INVALID_TXN_STATE.
* AddPartitionsToTxn naming a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION for
  it and OPERATION_NOT_ATTEMPTED for the others, none added.
* A transactional Produce to a partition not added to the transaction (KIP-890
  verification): TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before.
* InitProducerId with a timeout above transaction.max.timeout.ms, or naming a producer id
  and epoch that are not the current ones (KIP-360): INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED.
"""

from __future__ import annotations

import time

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch

from .helpers import create_topic, describe_transactions, list_offset, name, wire

E = ErrorCode


def _init(c, tid: str, timeout_ms: int = 30000) -> tuple[int, int]:
    """InitProducerId with a transactional id (retrying CONCURRENT_TRANSACTIONS while a
    fenced transaction is being aborted, as clients do): (producer id, epoch)."""
    deadline = time.monotonic() + 15
    while True:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=timeout_ms,
                      producer_id=-1, producer_epoch=-1)
        if r.error_code == E.concurrent_transactions and time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        assert r.error_code == E.none, r
        return r.producer_id, r.producer_epoch


def _add_partitions(c, tid: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3):
    r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id=tid,
                  v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                  v3_and_below_topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def _produce(c, version: int, tid: str, pid: int, epoch: int, topic: str, seq: int, values: list[bytes]):
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=True, timestamp=int(time.time() * 1000))
    r = c.request(ApiKey.PRODUCE, version, transactional_id=tid, acks=-1, timeout=5000,
                  topic_data=[dict(name=topic, partition_data=[dict(index=0, records=batch)])])
    return r.responses[0].partition_responses[0]


def _end(c, version: int, tid: str, pid: int, epoch: int, commit: bool = True) -> int:
    return c.request(ApiKey.END_TXN, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                     committed=commit).error_code


@pytest.fixture
def client(broker):
    with wire(broker) as c:
        # the transaction coordinator (and __transaction_state) exists once asked for
        r = c.request(ApiKey.FIND_COORDINATOR, 3, key=name("any"), key_type=1)
        assert r.error_code == E.none and r.port == broker.port
        yield c


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_txn_unknown_transactional_id(broker, client, version):
    assert _end(client, version, name("unknown"), 12345, 0) == E.invalid_producer_id_mapping
    assert _end(client, version, name("unknown"), 12345, 0, commit=False) == E.invalid_producer_id_mapping


def test_end_txn_wrong_producer_or_epoch_changes_nothing(broker, client):
    topic = create_topic(broker, name("w-end"))
    tid = name("w-end-tx")
    pid, epoch = _init(client, tid)
    assert _end(client, 3, tid, pid, epoch) == E.invalid_txn_state  # Empty: nothing to commit
    assert _add_partitions(client, tid, pid, epoch, {topic: [0]}) == {(topic, 0): E.none}
    part = _produce(client, 11, tid, pid, epoch, topic, 0, [b"x", b"y"])
    assert (part.error_code, part.base_offset) == (E.none, 0)
    assert list_offset(broker, topic) == 2

    for version in (0, 1, 2, 3, 4):
        want = E.producer_fenced if version >= 2 else E.invalid_producer_epoch
        for commit in (True, False):
            assert _end(client, version, tid, pid, epoch + 1, commit) == want, version
            assert _end(client, version, tid, pid + 1000, epoch, commit) == E.invalid_producer_id_mapping
    desc = describe_transactions(broker, tid)[tid]
    assert (desc.state, desc.producer_epoch, desc.partitions) == ("Ongoing", epoch, {topic: [0]})
    assert list_offset(broker, topic) == 2  # no marker
    assert list_offset(broker, topic, isolation=1) == 0

    # a new InitProducerId fences the epoch (the abort marker carries epoch + 1), then bumps
    # it again for the new producer once the abort completed, as Kafka does
    pid2, epoch2 = _init(client, tid)
    assert (pid2, epoch2) == (pid, epoch + 2)
    assert list_offset(broker, topic) == 3  # the abort marker
    for version, want in ((1, E.invalid_producer_epoch), (3, E.producer_fenced)):
        assert _end(client, version, tid, pid, epoch, commit=False) == want
    assert list_offset(broker, topic) == 3
    assert describe_transactions(broker, tid)[tid].state == "Empty"


def test_add_partitions_with_a_missing_partition_adds_none(broker, client):
    topic = create_topic(broker, name("w-add"), partitions=2)
    missing_topic = name("w-missing")
    tid = name("w-add-tx")
    pid, epoch = _init(client, tid)
    for version in (0, 3):
        got = _add_partitions(client, tid, pid, epoch, {topic: [0, 1, 7], missing_topic: [0]}, version)
        assert got == {(topic, 0): E.operation_not_attempted, (topic, 1): E.operation_not_attempted,
                       (topic, 7): E.unknown_topic_or_partition, (missing_topic, 0): E.unknown_topic_or_partition}
    desc = describe_transactions(broker, tid)[tid]
    assert (desc.state, desc.partitions) == ("Empty", {})
    # so a transactional write to partition 0 is still refused, and nothing is written
    part = _produce(client, 11, tid, pid, epoch, topic, 0, [b"x"])
    assert part.error_code == E.transaction_abortable
    assert list_offset(broker, topic, 0) == list_offset(broker, topic, 1) == 0
    assert missing_topic not in {t.name for t in client.request(ApiKey.METADATA, 4, topics=None,
                                                                 allow_auto_topic_creation=False).topics}


def test_add_partitions_wrong_producer_or_epoch(broker, client):
    topic = create_topic(broker, name("w-add-ep"))
    tid = name("w-add-ep-tx")
    assert _add_partitions(client, name("unknown"), 1, 0, {topic: [0]}) == {(topic, 0): E.invalid_producer_id_mapping}
    pid, epoch = _init(client, tid)
    assert _add_partitions(client, tid, pid + 1000, epoch, {topic: [0]}) == {(topic, 0): E.invalid_producer_id_mapping}
    assert _add_partitions(client, tid, pid, epoch + 1, {topic: [0]}, 3) == {(topic, 0): E.producer_fenced}
    assert _add_partitions(client, tid, pid, epoch + 1, {topic: [0]}, 1) == {(topic, 0): E.invalid_producer_epoch}
    assert describe_transactions(broker, tid)[tid].state == "Empty"


@pytest.mark.parametrize("version,want", [(3, E.invalid_txn_state), (9, E.invalid_txn_state),
                                          (10, E.invalid_txn_state), (11, E.transaction_abortable)])
def test_transactional_produce_without_add_partitions(broker, client, version, want):
    topic = create_topic(broker, name(f"w-noadd{version}"))
    tid = name("w-noadd-tx")
    pid, epoch = _init(client, tid)
    part = _produce(client, version, tid, pid, epoch, topic, 0, [b"x"])
    assert (part.error_code, part.base_offset) == (want, -1)
    assert list_offset(broker, topic) == 0
    # another partition of the same producer in the transaction does not make this one valid
    other = create_topic(broker, name("w-noadd-other"))
    assert _add_partitions(client, tid, pid, epoch, {other: [0]}) == {(other, 0): E.none}
    part = _produce(client, version, tid, pid, epoch, topic, 0, [b"x"])
    assert part.error_code == want
    assert list_offset(broker, topic) == 0
    assert _end(client, 3, tid, pid, epoch, commit=False) == E.none
    assert list_offset(broker, topic) == 0 and list_offset(broker, other) == 1  # its abort marker only


def test_init_producer_id_transaction_timeout_above_max(broker, client):
    r = client.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=name("w-timeout"), transaction_timeout=900001,
                       producer_id=-1, producer_epoch=-1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.invalid_transaction_timeout, -1, -1)


def test_init_producer_id_with_producer_id_and_epoch(broker, client):
    """KIP-360 re-initialisation (what clients send after an abortable error): the current
    producer id and epoch bump the epoch, a retry of that bump gets the same answer, any
    other id or epoch is fenced (INVALID_PRODUCER_EPOCH before v4)."""
    tid = name("w-kip360")

    def init(version: int, pid: int = -1, epoch: int = -1):
        r = client.request(ApiKey.INIT_PRODUCER_ID, version, transactional_id=tid, transaction_timeout=10000,
                           producer_id=pid, producer_epoch=epoch)
        return r.error_code, r.producer_id, r.producer_epoch

    err, pid, epoch = init(4)
    assert err == E.none
    assert init(4, pid, epoch) == (E.none, pid, epoch + 1)
    assert init(4, pid, epoch) == (E.none, pid, epoch + 1)  # a retry: the bump is not repeated
    assert init(4, pid, epoch + 5) == (E.producer_fenced, -1, -1)
    assert init(3, pid, epoch + 5) == (E.invalid_producer_epoch, -1, -1)
    assert init(4, pid + 1000, 0) == (E.producer_fenced, -1, -1)
    assert init(4) == (E.none, pid, epoch + 2)

