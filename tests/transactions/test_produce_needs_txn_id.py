"""Transactional records in a Produce without a transactional id: Kafka refuses the whole
request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no coordinator could ever end such a
transaction, and the partition's LSO would stay behind it); nothing is written."""

from __future__ import annotations

import uuid

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch


def test_transactional_records_without_transactional_id_are_refused(broker):
    topic = f"notxnid-{uuid.uuid4().hex[:8]}"
    with WireClient("127.0.0.1", broker.port) as c:
        c.request(ApiKey.CREATE_TOPICS, topics=[dict(name=topic, num_partitions=2, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=10000)
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=-1,
                      producer_id=-1, producer_epoch=-1)
        txn = build_batch([(None, b"x")], producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                          base_sequence=0, transactional=True)
        plain = build_batch([(None, b"y")])
        resp = c.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
            dict(name=topic, partition_data=[dict(index=0, records=txn), dict(index=1, records=plain)])])
        codes = {p.index: p.error_code for t in resp.responses for p in t.partition_responses}
        assert codes == {0: ErrorCode.transactional_id_authorization_failed,
                         1: ErrorCode.transactional_id_authorization_failed}
        for iso in (0, 1):
            lo = c.request(ApiKey.LIST_OFFSETS, 4, replica_id=-1, isolation_level=iso, topics=[
                dict(name=topic, partitions=[dict(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                                             for p in (0, 1)])])
            assert [p.offset for t in lo.topics for p in t.partitions] == [0, 0]
