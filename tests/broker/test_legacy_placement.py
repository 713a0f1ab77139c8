"""Krait used to place groups and transactional ids by ``hashCode & 0x7fffffff`` instead of
Kafka's ``Utils.abs(hashCode)``: a real broker restarted on a log dir laid out that way
finds them in their former partition, serves them (a real client fetches the committed
offsets unchanged, InitProducerId keeps the producer id), moves them into Kafka's
partition and deletes them from the former one.

The former layout is written over the wire into the broker's own internal topics with
Kafka's admin client id (the one client Kafka lets write them), records made by the
coordinators' encoders, exactly where the former rule put them."""

from __future__ import annotations

import confluent_kafka as ck

from broker.tools.wire import WireClient
from coordinator.consumer.records import decode_any_key
from coordinator.placement import legacy_partition_for_key, partition_for_key
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from protocol.records import build_batch
from tests.krait_harness import BrokerProcess
from txn_coordinator.records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
GROUP, TXN_ID = "connect-file-sink", "my-txn"
OLD_G, NEW_G = 27, 21  # partitions of GROUP in __consumer_offsets (50): former rule, Kafka's
OLD_T, NEW_T = 3, 45  # partitions of TXN_ID in __transaction_state (50)
PID, EPOCH = 4242, 4


def _wire(b: BrokerProcess, client_id: str = "krait") -> WireClient:
    return WireClient("127.0.0.1", b.port, timeout=15, client_id=client_id)


def _produce(c: WireClient, topic: str, partition: int, records: list[tuple[bytes, bytes | None]]) -> E:
    r = c.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=10_000, topic_data=[dict(
        name=topic, partition_data=[dict(index=partition, records=bytes(build_batch(records, timestamp=1)))])])
    return E(r.responses[0].partition_responses[0].error_code)


def _read(b: BrokerProcess, topic: str, partition: int) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of an internal topic's partition, read by a real consumer."""
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    try:
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
        out = []
        while True:
            m = c.poll(10)
            assert m is not None, f"no end of {topic}-{partition}"
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                return out
            out.append((m.key(), m.value()))
    finally:
        c.close()


def _last_offsets(records: list[tuple[bytes, bytes | None]], group: str) -> dict[tuple[str, int], bool]:
    """(topic, partition) -> whether the group's last offset record there is live (not a tombstone)."""
    out = {}
    for k, v in records:
        key = decode_any_key(k)
        if isinstance(key, OffsetCommitKey) and key.group == group:
            out[(key.topic, key.partition)] = v is not None
    return out


def _committed(b: BrokerProcess, group: str) -> dict[int, tuple[int, str]]:
    """{partition of t: (offset, metadata)}: the offsets as a real consumer gets them, the
    metadata as OffsetFetch carries it."""
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = {tp.partition: tp.offset for tp in c.committed([ck.TopicPartition("t", 0), ck.TopicPartition("t", 1)],
                                                             timeout=15)}
    finally:
        c.close()
    with _wire(b) as w:
        r = w.request(ApiKey.OFFSET_FETCH, 7, group_id=group, require_stable=True,
                      topics=[dict(name="t", partition_indexes=[0, 1])])
    meta = {p.partition_index: p.metadata for p in r.topics[0].partitions}
    return {p: (o, meta[p]) for p, o in got.items()}


def _init_producer_id(b: BrokerProcess) -> tuple[E, int, int]:
    with _wire(b) as c:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=TXN_ID, transaction_timeout=60_000,
                      producer_id=-1, producer_epoch=-1)
    return E(r.error_code), r.producer_id, r.producer_epoch


def test_the_placement_constants() -> None:
    assert (legacy_partition_for_key(GROUP, 50), partition_for_key(GROUP, 50)) == (OLD_G, NEW_G)
    assert (legacy_partition_for_key(TXN_ID, 50), partition_for_key(TXN_ID, 50)) == (OLD_T, NEW_T)


def test_a_log_dir_of_the_former_placement_is_moved_at_start_up(tmp_path) -> None:
    b = BrokerProcess(str(tmp_path / "logs")).start()
    try:
        with _wire(b) as c:
            r = c.request(ApiKey.CREATE_TOPICS, 5, timeout=10_000, validate_only=False, topics=[
                dict(name="t", num_partitions=2, replication_factor=1, assignments=[], configs=[])])
            assert r.topics[0].error_code == E.none
            for key_type, key in ((0, GROUP), (1, TXN_ID)):  # creates the internal topics
                r = c.request(ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=[key])
                assert r.coordinators[0].error_code == E.none, r
            # only Kafka's admin client id may write internal topics
            assert _produce(c, OFFSETS, OLD_G, [(b"k", b"v")]) == E.invalid_topic_exception
        group = GroupMetadataValue(protocol_type="consumer", generation=3, protocol=None, leader=None,
                                   current_state_timestamp=1_700_000_000_000)
        offsets = {0: OffsetCommitValue(42, "m0", 1_700_000_000_000, -1, -1),
                   1: OffsetCommitValue(7, "m1", 1_700_000_000_000, 5, -1)}
        txn = TransactionLogValue(producer_id=PID, producer_epoch=EPOCH, transaction_timeout_ms=60_000,
                                  transaction_status=0, partitions=None,  # Empty
                                  last_update_timestamp_ms=1_700_000_000_000, start_timestamp_ms=-1)
        with _wire(b, client_id="__admin_client") as c:
            assert _produce(c, OFFSETS, OLD_G, [(encode_group_metadata_key(GROUP), encode_group_metadata_value(group))]
                            + [(encode_offset_commit_key(GROUP, "t", p), encode_offset_commit_value(v))
                               for p, v in offsets.items()]) == E.none
            assert _produce(c, TXN_STATE, OLD_T, [(encode_key(TXN_ID), encode_value(txn))]) == E.none
        # the running coordinator knows nothing of them: Kafka's rule looks in partition 21
        assert _committed(b, GROUP) == {0: (-1001, ""), 1: (-1001, "")}

        b.restart()
        assert _committed(b, GROUP) == {0: (42, "m0"), 1: (7, "m1")}
        # moved: in Kafka's partition now, tombstones in the former one
        moved = _read(b, OFFSETS, NEW_G)
        assert _last_offsets(moved, GROUP) == {("t", 0): True, ("t", 1): True}
        assert any(isinstance(decode_any_key(k), GroupMetadataKey) and v is not None for k, v in moved)
        assert _last_offsets(_read(b, OFFSETS, OLD_G), GROUP) == {("t", 0): False, ("t", 1): False}
        assert [(decode_key(k), v is None) for k, v in _read(b, TXN_STATE, OLD_T)] == [(TXN_ID, False), (TXN_ID, True)]
        [(k, v)] = _read(b, TXN_STATE, NEW_T)
        assert decode_key(k) == TXN_ID and decode_value(v).producer_id == PID

        # the producer keeps its id, with the next epoch
        assert _init_producer_id(b) == (E.none, PID, EPOCH + 1)

        # and everything is where Kafka looks for it: a restart on the new layout alone
        b.restart()
        assert _committed(b, GROUP) == {0: (42, "m0"), 1: (7, "m1")}
        assert _init_producer_id(b) == (E.none, PID, EPOCH + 2)
    finally:
        b.stop()
