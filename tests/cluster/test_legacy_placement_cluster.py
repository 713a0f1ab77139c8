"""Cluster mode: a group (a transactional id) that Krait's former placement (``hashCode &
0x7fffffff``) wrote into a ``__consumer_offsets`` (``__transaction_state``) partition led by
another broker than the one Kafka's placement names. The broker leading its own partition
fetches the former partition from its leader (it holds no replica of it), serves it (the
committed offsets, the producer id), copies it into its partition and produces the
tombstones to the former partition's leader."""

from __future__ import annotations

import confluent_kafka as ck

from broker.tools.wire import WireClient
from coordinator.consumer.records import decode_any_key
from coordinator.placement import legacy_partition, legacy_partition_for_key, partition_for_key
from coordinator.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from protocol.records import build_batch
from tests.cluster.cluster_harness import Cluster, wait_for
from txn_coordinator.records import TransactionLogValue, encode_key, encode_value

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
N = 5  # partitions pair up as 0-3 and 1-2 under the former rule (4 keeps its own)


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([ck.TopicPartition("t", 0), ck.TopicPartition("t", 1)],
                                                             timeout=30)}
    finally:
        c.close()


def _last_offsets(bootstrap: str, partition: int, group: str) -> dict[tuple[str, int], bool]:
    """(topic, partition) -> whether the group's last offset record in __consumer_offsets-p is live."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                     "enable.partition.eof": True})
    out: dict[tuple[str, int], bool] = {}
    try:
        c.assign([ck.TopicPartition(OFFSETS, partition, ck.OFFSET_BEGINNING)])
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                return out
            key = decode_any_key(m.key())
            if isinstance(key, OffsetCommitKey) and key.group == group:
                out[(key.topic, key.partition)] = m.value() is not None
    finally:
        c.close()


def test_a_group_in_a_former_partition_led_elsewhere_is_moved(tmp_path, zk_connect) -> None:
    with Cluster(tmp_path, zk_connect, n=2, **{"offsets.topic.num.partitions": str(N),
                                               "offsets.topic.replication.factor": "1"}) as cl:
        cl.create_topic("t", partitions=2, rf=2)
        with WireClient("127.0.0.1", cl.brokers[1].port, timeout=15) as w:
            wait_for(lambda: w.request(ApiKey.FIND_COORDINATOR, 3, key="x", key_type=0).error_code == 0, 30,
                     what="__consumer_offsets")
        leaders = {p: wait_for(lambda p=p: cl.leader(OFFSETS, p) > 0 and cl.leader(OFFSETS, p), 30) for p in range(N)}
        # a group whose two partitions have different leaders (one replica each)
        group = next(g for g in (f"group-{i}" for i in range(10_000))
                     if legacy_partition_for_key(g, N) != partition_for_key(g, N)
                     and leaders[partition_for_key(g, N)] != leaders[legacy_partition_for_key(g, N)])
        home, former = partition_for_key(group, N), legacy_partition_for_key(group, N)
        assert legacy_partition(home, N) == former
        # the coordinator has loaded the group's partition (and found nothing in the former
        # one) before the old-placement records go in; otherwise a slow load would find them
        assert wait_for(lambda: _committed(cl.bootstrap, group) == {0: -1001, 1: -1001} or None, 60,
                        what="the group's partition loaded")
        values = {0: OffsetCommitValue(42, "", 1_700_000_000_000), 1: OffsetCommitValue(7, "", 1_700_000_000_000)}
        records = [(encode_offset_commit_key(group, "t", p), encode_offset_commit_value(v)) for p, v in values.items()]
        with WireClient("127.0.0.1", cl.brokers[leaders[former]].port, timeout=15, client_id="__admin_client") as w:
            r = w.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=10_000, topic_data=[dict(
                name=OFFSETS, partition_data=[dict(index=former, records=bytes(build_batch(records, timestamp=1)))])])
        assert r.responses[0].partition_responses[0].error_code == E.none
        assert _committed(cl.bootstrap, group) == {0: -1001, 1: -1001}  # loaded before they were written

        # the group's coordinator loads its partition again: it fetches the former one
        cl.brokers[leaders[home]].restart()
        wait_for(lambda: cl.leader(OFFSETS, home) == leaders[home], 30, what="the partition led again")
        assert wait_for(lambda: _committed(cl.bootstrap, group) == {0: 42, 1: 7} or None, 60,
                        what="the committed offsets")
        assert _last_offsets(cl.bootstrap, home, group) == {("t", 0): True, ("t", 1): True}
        wait_for(lambda: _last_offsets(cl.bootstrap, former, group) == {("t", 0): False, ("t", 1): False}, 30,
                 what="tombstones in the former partition")
        log = cl.brokers[leaders[home]].log_text()
        assert f"moved 1 groups from partition {former}" in log


def test_a_transactional_id_in_a_former_partition_led_elsewhere_is_moved(tmp_path, zk_connect) -> None:
    with Cluster(tmp_path, zk_connect, n=2, **{"transaction.state.log.num.partitions": str(N),
                                               "transaction.state.log.replication.factor": "1",
                                               "transaction.state.log.min.isr": "1"}) as cl:
        with WireClient("127.0.0.1", cl.brokers[1].port, timeout=15) as w:
            wait_for(lambda: w.request(ApiKey.FIND_COORDINATOR, 3, key="x", key_type=1).error_code == 0, 30,
                     what="__transaction_state")
        leaders = {p: wait_for(lambda p=p: cl.leader(TXN_STATE, p) > 0 and cl.leader(TXN_STATE, p), 30)
                   for p in range(N)}
        tid = next(t for t in (f"txn-{i}" for i in range(10_000))
                   if legacy_partition_for_key(t, N) != partition_for_key(t, N)
                   and leaders[partition_for_key(t, N)] != leaders[legacy_partition_for_key(t, N)])
        home, former = partition_for_key(tid, N), legacy_partition_for_key(tid, N)
        value = TransactionLogValue(producer_id=4242, producer_epoch=4, transaction_timeout_ms=60_000,
                                    transaction_status=0, partitions=None, last_update_timestamp_ms=1, start_timestamp_ms=-1)
        with WireClient("127.0.0.1", cl.brokers[leaders[former]].port, timeout=15, client_id="__admin_client") as w:
            r = w.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=10_000, topic_data=[dict(
                name=TXN_STATE, partition_data=[dict(index=former, records=bytes(build_batch(
                    [(encode_key(tid), encode_value(value))], timestamp=1)))])])
        assert r.responses[0].partition_responses[0].error_code == E.none

        cl.brokers[leaders[home]].restart()
        wait_for(lambda: cl.leader(TXN_STATE, home) == leaders[home], 30, what="the partition led again")

        def init() -> tuple[int, int] | None:
            with WireClient("127.0.0.1", cl.brokers[leaders[home]].port, timeout=15) as w:
                r = w.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=60_000,
                              producer_id=-1, producer_epoch=-1)
            return (r.producer_id, r.producer_epoch) if r.error_code == 0 else None

        assert wait_for(init, 60, what="InitProducerId") == (4242, 5)
        assert "moved 1 transactional ids from partition" in cl.brokers[leaders[home]].log_text()
