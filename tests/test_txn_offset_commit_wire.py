"""TxnOffsetCommit over real sockets: the broker's checks, the offsets pending in
__consumer_offsets as an open transaction until the COMMIT/ABORT marker (WriteTxnMarkers),
OffsetFetch's UNSTABLE_OFFSET_COMMIT, the replay of transactional batches and markers after
a restart, the KIP-890 verification with the transaction coordinator, and librdkafka's
``send_offsets_to_transaction`` end to end."""

from __future__ import annotations

import uuid

import pytest

from broker.tools.wire import WireClient
from coordinator import partition_for_group
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from tests.krait_harness import BrokerProcess

OFFSETS = "__consumer_offsets"
NO_VERIFY = {"transaction.partition.verification.enable": "false"}


def _wire(b: BrokerProcess) -> WireClient:
    return WireClient("127.0.0.1", b.port, timeout=15)


def _create(b: BrokerProcess, topic: str, partitions: int = 2) -> None:
    with _wire(b) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 5, timeout=10_000, validate_only=False, topics=[
            dict(name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])])
    assert r.topics[0].error_code == E.none, r


def _txn_commit(c: WireClient, group: str, offsets: dict[tuple[str, int], int], *, v: int = 4, pid: int = 777,
                epoch: int = 0, txn_id: str = "tx", **member: object) -> dict[tuple[str, int], E]:
    topics: dict[str, list[dict]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(dict(partition_index=p, committed_offset=o, committed_metadata="m"))
    r = c.request(ApiKey.TXN_OFFSET_COMMIT, v, transactional_id=txn_id, group_id=group, producer_id=pid,
                  producer_epoch=epoch, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()], **member)
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def _fetch(c: WireClient, group: str, parts: list[tuple[str, int]], stable: bool) -> dict[tuple[str, int], tuple]:
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = c.request(ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=stable,
                  topics=[dict(name=t, partition_indexes=ps) for t, ps in topics.items()])
    assert r.error_code == E.none, r
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in r.topics for p in t.partitions}


def _open_txns(c: WireClient, partition: int) -> dict[int, int]:
    """DescribeProducers: producer id -> start offset of its open transaction in __consumer_offsets-p."""
    r = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[dict(name=OFFSETS, partition_indexes=[partition])])
    (p,) = r.topics[0].partitions
    assert p.error_code == E.none, p
    return {a.producer_id: a.current_txn_start_offset for a in p.active_producers if a.current_txn_start_offset >= 0}


def _marker(c: WireClient, partition: int, pid: int, commit: bool, epoch: int = 0) -> E:
    r = c.request(ApiKey.WRITE_TXN_MARKERS, 1, markers=[dict(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=0,
        topics=[dict(name=OFFSETS, partition_indexes=[partition])])])
    return r.markers[0].topics[0].partitions[0].error_code


@pytest.fixture(scope="module")
def unverified():
    """A broker that does not verify transactions (transaction.partition.verification.enable=false)."""
    b = BrokerProcess(overrides=NO_VERIFY).start()
    yield b
    b.stop()


def test_served_versions(unverified) -> None:
    with _wire(unverified) as c:
        r = c.request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)


def test_checks(unverified) -> None:
    _create(unverified, "checks")
    with _wire(unverified) as c:
        for v in range(5):
            assert _txn_commit(c, "", {("checks", 0): 1, ("nope", 0): 1, ("checks", 9): 1}, v=v) == {
                ("checks", 0): E.invalid_group_id, ("nope", 0): E.unknown_topic_or_partition,
                ("checks", 9): E.unknown_topic_or_partition}
        assert _txn_commit(c, "fresh", {("checks", 0): 1}, v=3, generation_id=3, member_id="m") == {
            ("checks", 0): E.illegal_generation}
        assert _txn_commit(c, "fresh", {("checks", 0): 1}, v=3, generation_id=-1, member_id="m") == {
            ("checks", 0): E.none}


def test_pending_until_the_marker_and_across_restarts(tmp_path) -> None:
    b = BrokerProcess(str(tmp_path / "logs"), overrides=NO_VERIFY).start()
    try:
        _create(b, "w")
        group = f"g-{uuid.uuid4().hex[:6]}"
        p = partition_for_group(group, 50)
        parts = [("w", 0), ("w", 1)]
        with _wire(b) as c:
            assert c.request(ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                             group_instance_id=None, topics=[dict(name="w", partitions=[dict(
                                 partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                 committed_metadata="")])]).topics[0].partitions[0].error_code == E.none
            assert _txn_commit(c, group, {("w", 0): 42, ("w", 1): 43}) == {("w", 0): E.none, ("w", 1): E.none}
            assert _fetch(c, group, parts, stable=False) == {("w", 0): (5, E.none), ("w", 1): (-1, E.none)}
            assert _fetch(c, group, parts, stable=True) == {
                ("w", 0): (-1, E.unstable_offset_commit), ("w", 1): (-1, E.unstable_offset_commit)}
            # the offsets went in as a transactional batch: an open transaction on the partition
            assert 777 in _open_txns(c, p)
        b.stop()
        b.start()
        with _wire(b) as c:  # replayed as pending
            assert _fetch(c, group, parts, stable=True) == {
                ("w", 0): (-1, E.unstable_offset_commit), ("w", 1): (-1, E.unstable_offset_commit)}
            assert _marker(c, p, 777, commit=True) == E.none
            assert _fetch(c, group, parts, stable=True) == {("w", 0): (42, E.none), ("w", 1): (43, E.none)}
            # an aborted transaction leaves them as they were
            assert _txn_commit(c, group, {("w", 0): 100}, pid=778) == {("w", 0): E.none}
            assert _fetch(c, group, [("w", 0)], stable=True) == {("w", 0): (-1, E.unstable_offset_commit)}
            assert _marker(c, p, 778, commit=False) == E.none
            assert _fetch(c, group, parts, stable=True) == {("w", 0): (42, E.none), ("w", 1): (43, E.none)}
            assert _open_txns(c, p) == {}
        b.stop()
        b.start()
        with _wire(b) as c:  # markers replayed
            assert _fetch(c, group, parts, stable=True) == {("w", 0): (42, E.none), ("w", 1): (43, E.none)}
    finally:
        b.kill()


@pytest.fixture(scope="module")
def verified():
    """A broker with its defaults: transactions verified with the transaction coordinator (KIP-890)."""
    b = BrokerProcess().start()
    yield b
    b.stop()


def test_verification_refuses_a_transaction_the_coordinator_does_not_know(verified) -> None:
    _create(verified, "v")
    group = f"g-{uuid.uuid4().hex[:6]}"
    with _wire(verified) as c:
        # the transaction coordinator (and __transaction_state) comes up on first use
        r = c.request(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=["ghost"])
        assert r.coordinators[0].error_code == E.none, r
        assert _txn_commit(c, group, {("v", 0): 1}, txn_id="ghost", pid=123456) == {
            ("v", 0): E.invalid_producer_id_mapping}
        assert _fetch(c, group, [("v", 0)], stable=True) == {("v", 0): (-1, E.none)}
        assert _open_txns(c, partition_for_group(group, 50)) == {}


def test_send_offsets_to_transaction_with_librdkafka(verified) -> None:
    ck = pytest.importorskip("confluent_kafka")
    _create(verified, "rk")
    group = f"g-{uuid.uuid4().hex[:6]}"
    producer = ck.Producer({"bootstrap.servers": verified.bootstrap, "transactional.id": f"t-{group}"})
    consumer = ck.Consumer({"bootstrap.servers": verified.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        producer.init_transactions(15)
        for commit, offset in ((True, 42), (False, 99)):
            producer.begin_transaction()
            producer.produce("rk", b"x", partition=0)
            producer.send_offsets_to_transaction([ck.TopicPartition("rk", 0, offset)],
                                                 consumer.consumer_group_metadata(), 15)
            if commit:
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)
            # librdkafka reads committed offsets with require_stable (read_committed by default)
            (tp,) = consumer.committed([ck.TopicPartition("rk", 0)], timeout=15)
            assert tp.error is None and tp.offset == 42, (commit, tp)
    finally:
        consumer.close()
        producer.flush(5)
