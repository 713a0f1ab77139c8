"""A single node's log dir as Krait wrote it before a single node became a one-broker
cluster (commit b480b69: ``krait-metadata.json`` without partition states), started under
the current code: every record, committed offset, transaction and producer id is where
it was, the partitions are led by this broker at the epoch their batches carry (0), and
the metadata document gains the local store's partition states.

The fixture was made by that commit's broker: 100 idempotent records over two partitions
of ``orders``, a committed transaction of ``tx-1`` on partition 0 (and an aborted one,
whose record the client dropped before sending), and
group ``g1`` committing offsets 40 and 50."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import confluent_kafka as ck

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.krait_harness import BrokerProcess

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "single_node_log_dir_b480b69.tar.gz"
#: what the fixture's broker was started with (partition counts of the internal topics)
OVERRIDES = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "2", "node.id": "1"}


def _read_all(bootstrap: str, isolation: str) -> dict[int, list[bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                     "isolation.level": isolation, "enable.partition.eof": True})
    out: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        c.assign([ck.TopicPartition("orders", p, ck.OFFSET_BEGINNING) for p in (0, 1)])
        eof: set[int] = set()
        while len(eof) < 2:
            m = c.poll(10)
            assert m is not None, "no answer from the broker"
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            out[m.partition()].append(m.value())
    finally:
        c.close()
    return out


def test_a_log_dir_of_the_former_single_node_layout_loads_unchanged(tmp_path) -> None:
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(log_dir, filter="data")
    before = json.loads((log_dir / "krait-metadata.json").read_text())
    assert "partition_states" not in before  # the layout this test is about
    bp = BrokerProcess(str(log_dir), OVERRIDES).start()
    try:
        got = _read_all(bp.bootstrap, "read_committed")
        assert got[1] == [f"v{i}".encode() for i in range(1, 100, 2)]
        assert got[0] == [f"v{i}".encode() for i in range(0, 100, 2)] + [b"committed"]

        c = ck.Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "g1", "enable.auto.commit": False})
        try:
            committed = c.committed([ck.TopicPartition("orders", 0), ck.TopicPartition("orders", 1)], timeout=30)
        finally:
            c.close()
        assert {tp.partition: tp.offset for tp in committed} == {0: 40, 1: 50}

        with WireClient("127.0.0.1", bp.port, timeout=15) as w:
            md = w.request(ApiKey.METADATA, 12, topics=[dict(name="orders", topic_id=None)],
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            parts = {p.partition_index: p for p in md.topics[0].partitions}
            assert {i: (p.leader_id, p.leader_epoch, list(p.isr_nodes)) for i, p in parts.items()} == \
                {0: (1, 0, [1]), 1: (1, 0, [1])}
            # the transactional id's state was loaded: the same producer id, the next epoch
            r = w.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id="tx-1", transaction_timeout=60_000,
                          producer_id=-1, producer_epoch=-1)
            assert r.error_code == 0
            fresh = w.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60_000,
                              producer_id=-1, producer_epoch=-1)
            # producer ids come after the blocks the former broker handed out
            assert fresh.error_code == 0 and fresh.producer_id >= before["next_producer_id_block"]
            assert r.producer_id < before["next_producer_id_block"] and r.producer_epoch >= 1

        p = ck.Producer({"bootstrap.servers": bp.bootstrap, "enable.idempotence": True})
        offsets = []
        p.produce("orders", value=b"after", partition=1, on_delivery=lambda e, m: offsets.append((e, m.offset())))
        p.flush(10)
        assert offsets == [(None, 50)]
        assert bp.stop() == 0
    finally:
        bp.kill()
    after = json.loads((log_dir / "krait-metadata.json").read_text())
    assert after["topics"] == before["topics"] and after["cluster_id"] == before["cluster_id"]
    assert after["partition_states"]["orders-1"] == {"leader": 1, "leader_epoch": 0, "isr": [1], "version": 0}
