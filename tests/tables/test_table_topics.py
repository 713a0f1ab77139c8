"""A topic with ``krait.iceberg.mode=key_value`` on a real broker process: its Iceberg table
(read with pyiceberg from the embedded SQLite catalog under the log dir) holds exactly the
committed records, aborted transactions left out, and after a SIGKILL and a restart it goes
on without a gap or a record twice."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tables.catalog import open_catalog, table_identifier
from tables.writer import snapshot_offsets
from tests.krait_harness import BrokerProcess


def _table_rows(log_dir: str, topic: str) -> tuple[list[dict], dict[int, int]]:
    catalog = open_catalog(log_dir)
    try:
        table = catalog.load_table(table_identifier(topic))
    except Exception:
        return [], {}
    return table.scan().to_arrow().to_pylist(), snapshot_offsets(table)


def _wait_for(log_dir: str, topic: str, ends: dict[int, int], timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    rows, offsets = [], {}
    while time.monotonic() < deadline:
        rows, offsets = _table_rows(log_dir, topic)
        if all(offsets.get(p, 0) >= e for p, e in ends.items()):
            return rows
        time.sleep(0.3)
    raise AssertionError(f"table offsets {offsets} never reached {ends}")


def _produce(bootstrap: str, topic: str, values: list[str]) -> dict[int, int]:
    ends: dict[int, int] = {}

    def done(err, msg):
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, key=f"k{i}".encode(), value=v.encode(), headers=[("h", b"x")], on_delivery=done)
    assert p.flush(30) == 0
    return ends


def _transaction(bootstrap: str, topic: str, values: list[str], commit: bool) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode())
    p.flush(30)
    (p.commit_transaction if commit else p.abort_transaction)(30)


def test_table_holds_exactly_the_committed_records_across_a_crash(tmp_path):
    log_dir = str(tmp_path / "logs")
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "300",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "orders"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1, config={"krait.iceberg.mode": "key_value"})])[topic].result(30)
        sent = [f"v{i}" for i in range(400)]
        _produce(b.bootstrap, topic, sent)
        _transaction(b.bootstrap, topic, [f"committed{i}" for i in range(10)], commit=True)
        _transaction(b.bootstrap, topic, [f"aborted{i}" for i in range(10)], commit=False)
        ends = _produce(b.bootstrap, topic, ["after"])
        # the control batch after "after" is not needed: wait for every partition's end
        ends = {p: max(e, ends.get(p, 0)) for p, e in _log_ends(b.bootstrap, topic).items()}
        rows = _wait_for(log_dir, topic, ends)
        values = sorted(r["value"].decode() for r in rows)
        assert values == sorted([*sent, *(f"committed{i}" for i in range(10)), "after"])
        assert all(r["headers"] == [{"key": "h", "value": b"x"}] for r in rows if r["value"].startswith(b"v"))
        assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows)

        b.kill()  # SIGKILL
        b.start()
        more = [f"w{i}" for i in range(200)]
        _produce(b.bootstrap, topic, more)
        rows = _wait_for(log_dir, topic, _log_ends(b.bootstrap, topic))
        values = sorted(r["value"].decode() for r in rows)
        assert values == sorted([*sent, *(f"committed{i}" for i in range(10)), "after", *more])
    finally:
        b.kill()


def _log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": "read_committed"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)}
    finally:
        c.close()
