"""The table upkeep as the broker runs it (broker/tables/driver.py over tables/upkeep.py), on
a real broker process: with a short upkeep interval, small files are compacted and old
snapshots expired while records keep coming, and the table still holds every committed
record exactly once, its offsets intact."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

from tables.catalog import open_catalog, table_identifier
from tests.krait_harness import BrokerProcess
from tests.tables.test_table_topics import _log_ends, _produce, _wait_for


def _history(log_dir: str, topic: str) -> tuple[list[str], int, int]:
    table = open_catalog(log_dir).load_table(table_identifier(topic))
    ops = [s.summary.operation.value for s in table.metadata.snapshots if s.summary is not None]
    files = len(list(table.scan().plan_files()))
    return ops, len(table.metadata.snapshots), files


def test_the_broker_compacts_and_expires_while_writing(tmp_path):
    log_dir = str(tmp_path / "logs")
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "200", "krait.iceberg.upkeep.interval.ms": "1500",
                                "krait.iceberg.compaction.min.input.files": "4",
                                "krait.iceberg.snapshot.retention.ms": "0",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "kept"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1, config={"krait.iceberg.mode": "key_value"})])[topic].result(30)
        sent: list[str] = []
        deadline = time.monotonic() + 90
        compacted = False
        while time.monotonic() < deadline and not compacted:
            batch = [f"v{len(sent) + i}" for i in range(50)]
            _produce(b.bootstrap, topic, batch)
            sent += batch
            time.sleep(0.3)  # about one commit (one small file per partition) per round
            ops, _, _ = _history(log_dir, topic) if sent else ([], 0, 0)
            compacted = "replace" in ops
        assert compacted, "no compaction within 90 s"
        rows = _wait_for(log_dir, topic, _log_ends(b.bootstrap, topic))
        assert sorted(r["value"].decode() for r in rows) == sorted(sent)
        assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows)
        # expiry (retention 0) keeps the history short, and the writer still resumes exactly
        time.sleep(3.5)  # two more upkeeps
        ops, snapshots, files = _history(log_dir, topic)
        assert snapshots < len(sent) // 50, (snapshots, ops)
        more = [f"w{i}" for i in range(100)]
        _produce(b.bootstrap, topic, more)
        rows = _wait_for(log_dir, topic, _log_ends(b.bootstrap, topic))
        assert sorted(r["value"].decode() for r in rows) == sorted([*sent, *more])
        assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows)
    finally:
        b.kill()
