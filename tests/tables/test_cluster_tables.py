"""A table topic in a cluster: ZooKeeper and three real brokers sharing one PostgreSQL
catalog (pyiceberg's SQL catalog, a real server) and one warehouse directory, each
appending the partitions it leads every 300 ms, while an idempotent producer writes
numbered records. Meanwhile the leader of a partition is SIGKILLed (the new leader goes on
with the table) and restarted, and another leader is deposed in the middle of a commit: its
catalog update is held at a relay, it is frozen (SIGSTOP) until its ZooKeeper session
expires and another broker has led and committed the partition, then thawed and its update
let through, a zombie's commit after the new leader's. The table must hold every record the
log has, exactly once, no offset missing or twice, the same as a read_committed consumer
reads."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tables.catalog import open_catalog, table_identifier
from tables.writer import OFFSET_PREFIX, WRITER_PROPERTY, snapshot_offsets
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.zk_harness import ZooKeeperProcess
from tests.postgres_harness import PgRelay, PostgresProcess

TOPIC = "events"
PARTITIONS = 3


class _Producer(threading.Thread):
    """Writes numbered records (acks=all, idempotent) until stopped; keeps what was acked."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="numbered-producer", daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "request.timeout.ms": 5000, "message.timeout.ms": 120000})
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list = []
        self.sent = 0
        self._halt = threading.Event()

    def _done(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def run(self) -> None:
        while not self._halt.is_set():
            for _ in range(20):
                i = self.sent
                self.p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, on_delivery=self._done)
                self.sent += 1
            self.p.poll(0.02)  # ~1,000 records/s: enough to cross every leadership change

    def finish(self) -> None:
        self._halt.set()
        self.join(10)
        assert self.p.flush(90) == 0, "records never acknowledged"


def _table(catalog):
    return catalog.load_table(table_identifier(TOPIC))


def _offsets(catalog) -> dict[int, int]:
    try:
        return snapshot_offsets(_table(catalog))
    except Exception:  # not created yet
        return {}


def _history(catalog) -> list[dict[str, str]]:
    """The summary properties of the current snapshot's ancestry, oldest first."""
    table = _table(catalog)
    out = []
    snap = table.current_snapshot()
    while snap is not None:
        out.append(dict(snap.summary.additional_properties) if snap.summary is not None else {})
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return out[::-1]


def _interleaved(writers: list[str | None]) -> bool:
    """Have all three brokers committed at least twice, with at least four changes of writer
    from one snapshot to the next?"""
    counts = Counter(writers)
    return all(counts[str(i)] >= 2 for i in (1, 2, 3)) and \
        sum(a != b for a, b in zip(writers, writers[1:], strict=False)) >= 4


def _table_made(pg: PostgresProcess, database: str) -> bool:
    import psycopg2

    conn = psycopg2.connect(pg.dsn(database), connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM iceberg_tables")
            return cur.fetchone()[0] > 0
    except psycopg2.Error:  # the catalog's tables are not there yet
        return False
    finally:
        conn.close()


def _metadata_leader(cl: Cluster, partition: int) -> int:
    """The leader of a partition as a live broker's Metadata answer gives it."""
    live = next(i for i, b in cl.brokers.items() if b.proc is not None and b.proc.poll() is None)
    md = cl.metadata(live, [TOPIC])
    return next(p.leader_id for p in md.topics[0].partitions if p.partition_index == partition)


def _log_ends(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": "read_committed"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def _read_committed(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    last = {p: -1 for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while any(last[p] + 1 < e for p, e in ends.items()):
            assert time.monotonic() < deadline, f"read up to {last}, the log ends at {ends}"
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out[(m.partition(), m.offset())] = (m.key(), m.value())
                last[m.partition()] = max(last[m.partition()], m.offset())
    finally:
        c.close()
    return out


def test_leaders_share_one_postgres_catalog_through_a_kill_and_a_zombie(tmp_path: Path,
                                                                       table_zookeeper: ZooKeeperProcess,
                                                                       postgres_server: PostgresProcess,
                                                                       postgres_url: str) -> None:
    database = postgres_url.rsplit("/", 1)[1]
    warehouse = str(tmp_path / "warehouse")  # the one warehouse of all three brokers
    relays = {i: PgRelay(postgres_server.port) for i in (1, 2, 3)}
    cl = Cluster(tmp_path, f"{table_zookeeper.connect}/krait-tables-{database}", 3, **{
        "krait.iceberg.commit.interval.ms": "300", "krait.iceberg.warehouse": warehouse,
        "transaction.state.log.num.partitions": "1", "auto.leader.rebalance.enable": "false"})
    for i, b in cl.brokers.items():  # each broker reaches the catalog through its own relay
        b.overrides["krait.iceberg.catalog.uri"] = relays[i].url(database)
    catalog = None
    producer: _Producer | None = None
    frozen: int | None = None
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        cl.start()
        cl.create_topic(TOPIC, PARTITIONS, 3, {"krait.iceberg.mode": "key_value"})
        producer = _Producer(cl.bootstrap)
        producer.start()
        # the test opens the catalog only once a broker has made it: the three brokers'
        # first commits race to create the catalog's tables and then the topic's table
        wait_for(lambda: _table_made(postgres_server, database), 30, what="the topic's table")
        catalog = open_catalog(catalog_uri=postgres_url, warehouse=warehouse)
        # each broker leads a partition and commits it on its own timer: their commits
        # interleave in the one table (the catalog's optimistic concurrency orders them)
        wait_for(lambda: _interleaved([h.get(WRITER_PROPERTY) for h in _history(catalog)]), 30,
                 what="commits of all three brokers, interleaved")

        # SIGKILL the leader of partition 0: the new leader goes on with the table
        victim = _metadata_leader(cl, 0)
        cl.brokers[victim].kill()
        at_kill = _offsets(catalog)[0]
        new = wait_for(lambda: (n := _metadata_leader(cl, 0)) not in (-1, victim) and n, 30, what="a new leader of 0")
        wait_for(lambda: any(h.get(WRITER_PROPERTY) == str(new) and int(h.get(f"{OFFSET_PREFIX}0", 0)) > at_kill
                             for h in _history(catalog)), 30, what=f"broker {new} appending partition 0")
        # it starts and catches up while the zombie below is frozen (checked at the end)
        restart = pool.submit(cl.brokers[victim].start)

        # a zombie: the leader of partition 1 is stopped in the middle of a commit (its
        # catalog update held at its relay), deposed, and then lets the update through
        zombie = _metadata_leader(cl, 1)
        # a successor in sync (the killed broker may still be catching up)
        wait_for(lambda: len(cl.state(TOPIC, 1)["isr"]) >= 2, 30, what="partition 1 with a follower in sync")
        relays[zombie].hold_next(b"UPDATE iceberg_tables")
        assert relays[zombie].held.wait(15), "the leader of partition 1 never committed"
        cl.freeze(zombie)
        frozen = zombie
        at_freeze = _offsets(catalog)[1]
        successor = wait_for(lambda: (n := cl.leader(TOPIC, 1)) not in (-1, zombie) and n, 40,
                             what="a new leader of 1")
        wait_for(lambda: any(h.get(WRITER_PROPERTY) == str(successor)
                             and int(h.get(f"{OFFSET_PREFIX}1", 0)) > at_freeze for h in _history(catalog)), 30,
                 what=f"broker {successor} appending partition 1")
        cl.thaw(zombie)
        frozen = None
        relays[zombie].release()
        assert relays[zombie].answered.wait(15), "the zombie's catalog update never got an answer"
        # the catalog's optimistic concurrency refuses it: the table moved on meanwhile
        assert relays[zombie].outcome == b"UPDATE 0", relays[zombie].outcome
        wait_for(lambda: cl.leader(TOPIC, 1) >= 0 and len(cl.state(TOPIC, 1)["isr"]) >= 2, 30,
                 what="partition 1 led again")
        restart.result(60)
        for p in range(PARTITIONS):  # the killed broker is back in sync, and so is the zombie
            cl.wait_isr(TOPIC, p, 3)
        time.sleep(1)  # the zombie's retry, if any, and more records after it
        producer.finish()
        assert not producer.errors, producer.errors[:3]

        ends = _log_ends(cl.bootstrap)
        wait_for(lambda: all(_offsets(catalog).get(p, 0) >= e for p, e in ends.items()), 30,
                 what=f"the table reaching the log ends {ends}")
        rows = _table(catalog).scan().to_arrow().select(["partition", "offset", "key", "value"]).to_pylist()
        in_table = Counter((r["partition"], r["offset"]) for r in rows)
        assert not [k for k, n in in_table.items() if n > 1], "a (partition, offset) twice in the table"
        table_of = {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in rows}
        for p, e in ends.items():
            got = sorted(o for q, o in table_of if q == p)
            assert got == list(range(e)), f"partition {p}: offsets missing from the table"
        acked = producer.acked
        assert len(acked) == producer.sent
        assert all(table_of.get(k, (None, None))[1] == v for k, v in acked.items()), "an acked record not in the table"
        assert Counter(v for _, v in table_of.values()) == Counter(acked.values()), "a record twice"
        assert table_of == _read_committed(cl.bootstrap, ends)

        # the catalog refused commits made on a table another broker had moved on (the
        # zombie's at least): pyiceberg writes a commit's metadata file before the catalog
        # update, so a refused one leaves a second file of the same version number
        versions = Counter(int(f.name.split("-", 1)[0]) for f in Path(warehouse).rglob("*.metadata.json"))
        assert sum(n - 1 for n in versions.values()) >= 1, versions
    finally:
        if frozen is not None:
            cl.thaw(frozen)
        for r in relays.values():
            r.release()
        if producer is not None and producer.is_alive():
            producer._halt.set()
            producer.join(10)
        pool.shutdown()  # a restart under way ends first: no broker is started after the kills below
        for b in cl.brokers.values():  # SIGKILL: a controlled shutdown is not what this tests, and is slow
            b.kill()
        cl.close_zk()
        for r in relays.values():
            r.stop()
        if catalog is not None:
            catalog.engine.dispose()
