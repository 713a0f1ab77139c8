"""read_committed Fetch and ListOffsets (issue 12): consumers stop at the last stable
offset, get the aborted transactions overlapping what they read, and librdkafka drops the
aborted records with them. The transactional data is written with the storage API (markers
as the transaction coordinator will write them), then served by a real broker over sockets.
The log is tests/txn_log.py's: HW 20, LSO 17, aborted (2000, 6) and (3000, 11)."""

from __future__ import annotations

import asyncio
import datetime
import time
from types import SimpleNamespace

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.handlers.fetch import fetch as fetch_handler
from broker.metrics import BrokerMetrics
from broker.replica.manager import ReplicaManager
from broker.security.quotas import QuotaManager
from broker.tools.wire import WireClient
from broker.topics import TopicRegistry
from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode
from protocol.records import build_batch, iter_headers, iter_records, validate_batches
from storage.config import LogConfig
from storage.manager import LogManager
from tests.krait_harness import BrokerProcess
from tests.leading import lead_every_partition
from tests.txn_log import T0, TxnLog, value_of, write_transactions

TOPIC = "txn"
HW, LSO = 20, 17
ABORTED = [(2000, 6), (3000, 11)]


# --- the ReplicaManager, in process -------------------------------------------------------


@pytest.fixture
def local(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig(segment_bytes=300))
    m.load()
    plog = m.create(TOPIC, 0)
    written = write_transactions(plog)
    rm = ReplicaManager(m)
    lead_every_partition(rm)
    yield rm, plog, written
    m.shutdown()


def _offsets(data: bytes) -> list[int]:
    """Offsets of the data records in ``data`` (control batches left out, as clients do)."""
    return [r.offset for pos, h in iter_headers(data) if not h.is_control for r in iter_records(data, pos)]


def _read_through(rm: ReplicaManager, plog, start: int, **kw) -> tuple[list[int], list[tuple[int, int]], int]:
    """Fetch after fetch from ``start`` until nothing comes: (record offsets, aborted
    transactions of every answer, next offset)."""
    got, aborted, offset = [], [], start
    while True:
        r = rm.read(plog, offset, 1 << 20, min_one_batch=True, **kw)
        assert (r.high_watermark, r.last_stable_offset) == (HW, LSO)
        if not r.records:
            return got, aborted, offset
        got += _offsets(r.records)
        aborted += r.aborted_transactions or []
        offset = [h for _, h in iter_headers(r.records)][-1].next_offset


def test_read_committed_stops_at_the_lso_with_the_aborted_transactions(local):
    rm, plog, written = local
    assert len(plog.segments) > 3  # markers sit in other segments than their data
    got, aborted, end = _read_through(rm, plog, 0, read_committed=True)
    assert end == LSO and got == written.offsets("plain", "committed", "aborted", below=LSO)
    assert aborted == ABORTED == written.aborted
    got, aborted, end = _read_through(rm, plog, 0)
    assert end == HW and got == written.read_uncommitted() and aborted == []
    assert rm.read(plog, 0, 1 << 20, min_one_batch=True).aborted_transactions is None  # null for read_uncommitted


def test_aborted_transactions_cover_exactly_the_batches_returned(local):
    rm, plog, _ = local
    # one batch (offset 10, plain): the aborted transaction starting at 11 is not in range
    r = rm.read(plog, 10, 1, min_one_batch=True, read_committed=True)
    assert _offsets(r.records) == [10] and r.aborted_transactions == []
    r = rm.read(plog, 10, 1 << 20, min_one_batch=True, read_committed=True)
    assert _offsets(r.records) == [10, 11, 12] and r.aborted_transactions == [(3000, 11)]
    # from inside an aborted transaction whose marker is in the next segment
    r = rm.read(plog, 7, 1 << 20, min_one_batch=True, read_committed=True)
    assert r.aborted_transactions == [(2000, 6)]
    # nothing to read at or above the LSO: an empty list, no error, even below the HW
    for offset in (LSO, LSO + 1, HW):
        r = rm.read(plog, offset, 1 << 20, min_one_batch=True, read_committed=True)
        assert r.records == b"" and r.aborted_transactions == []


def test_list_offsets_by_isolation_level(local):
    rm, _, _ = local
    assert rm.list_offset(TOPIC, 0, -1, isolation_level=0) == (HW, -1, 0)
    assert rm.list_offset(TOPIC, 0, -1, isolation_level=1) == (LSO, -1, 0)
    assert rm.list_offset(TOPIC, 0, -1, isolation_level=None) == (HW, -1, 0)  # the log end
    assert rm.list_offset(TOPIC, 0, T0 + 5000, isolation_level=1) == (5, T0 + 5000, 0)
    assert rm.list_offset(TOPIC, 0, T0 + 18000, isolation_level=0) == (18, T0 + 18000, 0)
    assert rm.list_offset(TOPIC, 0, T0 + 18000, isolation_level=1) == (-1, -1, -1)  # beyond the LSO
    assert rm.list_offset(TOPIC, 0, -3, isolation_level=0) == (19, T0 + 19000, 0)  # max timestamp
    assert rm.list_offset(TOPIC, 0, -3, isolation_level=1) == (-1, -1, -1)


def test_parked_read_committed_fetch_wakes_when_a_marker_moves_the_lso(tmp_path):
    registry = TopicRegistry(tmp_path)
    registry.load()
    info = registry.add("w", 1, {})
    m = LogManager([str(tmp_path)], LogConfig())
    m.load()
    plog = m.create("w", 0, topic_id=info.topic_id)
    buf = bytearray(build_batch([(b"k", b"a"), (b"k", b"b")], producer_id=7, producer_epoch=0, base_sequence=0,
                                transactional=True))
    plog.append(buf, validate_batches(buf))
    rm = ReplicaManager(m)
    lead_every_partition(rm)
    broker = SimpleNamespace(registry=registry, replicas=rm, logs=m, stopping=False,
                             authorizer=None, quotas=QuotaManager.from_originals({}), metrics=BrokerMetrics())
    version = 11
    req = make(apis.request_type(ApiKey.FETCH, version), replica_id=-1, max_wait=datetime.timedelta(seconds=10),
               min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_id=0, session_epoch=-1,
               topics=[dict(topic="w", partitions=[dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                        log_start_offset=-1, partition_max_bytes=1 << 20)])],
               forgotten_topics_data=[], rack_id="")
    ctx = SimpleNamespace(version=version, header=SimpleNamespace(correlation_id=3))

    async def run():
        parked = fetch_handler(broker, ctx, req)
        assert asyncio.iscoroutine(parked)  # nothing below the LSO yet: it waits
        task = asyncio.ensure_future(parked)
        await asyncio.sleep(0.05)
        assert not task.done()
        t0 = time.monotonic()
        rm.append_marker("w", 0, 7, 0, 0, True)
        chunks = await asyncio.wait_for(task, 5)
        return chunks, time.monotonic() - t0

    try:
        chunks, took = asyncio.run(run())
    finally:
        m.shutdown()
    assert took < 1
    frame = b"".join(bytes(c) for c in chunks)[4:]
    _, resp = framing.decode_response(ApiKey.FETCH, version, frame)
    p = resp.responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (3, 3, ())
    assert _offsets(p.records) == [0, 1]


# --- a real broker over sockets ------------------------------------------------------------


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """A broker whose topic ``txn`` holds tests/txn_log.py's transactions (segments of 300
    bytes), written while it was down."""
    d = str(tmp_path_factory.mktemp("txn-logs"))
    proc = BrokerProcess(d).start()
    with WireClient("127.0.0.1", proc.port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, 5, topics=[dict(name=TOPIC, num_partitions=1, replication_factor=1,
                                                             assignments=[], configs=[dict(name="segment.bytes",
                                                                                           value="300")])],
                      timeout_ms=10_000, validate_only=False)
        assert r.topics[0].error_code == 0, r
    assert proc.stop() == 0
    b = Broker(BrokerConfig.from_props({"log.dirs": d}))
    b.open_storage()
    written = write_transactions(b.logs.get(TOPIC, 0))
    topic_id = b.registry.get(TOPIC).topic_id
    b.logs.shutdown()
    proc.start()
    yield proc, written, topic_id
    proc.stop()


def _fetch(c: WireClient, version: int, topic_id, offset: int, level: int, max_bytes: int = 1 << 20):
    r = c.request(ApiKey.FETCH, version, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                  isolation_level=level, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                  topics=[dict(topic=TOPIC, topic_id=topic_id, partitions=[
                      dict(partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=max_bytes)])])
    p = r.responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == HW and p.last_stable_offset == LSO
    return p


@pytest.mark.parametrize("version", [4, 11, 12, 16])
@pytest.mark.parametrize("level", [0, 1])
def test_fetch_over_the_wire(txn_broker, version, level):
    proc, written, topic_id = txn_broker
    got, aborted, offset = [], [], 0
    with WireClient("127.0.0.1", proc.port) as c:
        while True:
            p = _fetch(c, version, topic_id, offset, level)
            data = bytes(p.records or b"")
            if level == 0:
                assert p.aborted_transactions is None
            else:
                assert p.aborted_transactions is not None
                aborted += [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
            if not data:
                break
            for pos, h in iter_headers(data):
                if not h.is_control:
                    for r in iter_records(data, pos):
                        assert r.value == value_of(r.offset, h.producer_id if h.is_transactional else None)
                        got.append(r.offset)
                offset = h.next_offset
    if level == 1:
        assert offset == LSO and got == written.offsets("plain", "committed", "aborted", below=LSO)
        assert aborted == ABORTED
    else:
        assert offset == HW and got == written.read_uncommitted() and aborted == []


def test_fetch_of_one_batch_lists_only_its_aborted_transactions(txn_broker):
    proc, _, topic_id = txn_broker
    with WireClient("127.0.0.1", proc.port) as c:
        p = _fetch(c, 11, topic_id, 10, 1, max_bytes=1)
        assert _offsets(bytes(p.records)) == [10] and list(p.aborted_transactions) == []
        p = _fetch(c, 11, topic_id, 10, 1)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(3000, 11)]
        p = _fetch(c, 11, topic_id, LSO + 1, 1)  # between the LSO and the HW: empty, no error
        assert not p.records and list(p.aborted_transactions) == []


@pytest.mark.parametrize("version", [1, 2, 5, 10])
def test_list_offsets_over_the_wire(txn_broker, version):
    proc, _, _ = txn_broker

    def ask(ts: int, level: int, replica_id: int = -1):
        r = c.request(ApiKey.LIST_OFFSETS, version, replica_id=replica_id, isolation_level=level, timeout=1000,
                      topics=[dict(name=TOPIC, partitions=[dict(partition_index=0, timestamp=ts,
                                                                current_leader_epoch=-1)])])
        p = r.topics[0].partitions[0]
        assert p.error_code == ErrorCode.none
        return p.offset

    with WireClient("127.0.0.1", proc.port) as c:
        # v1 has no isolation level: read_uncommitted
        assert ask(-1, 1) == (LSO if version >= 2 else HW)
        assert ask(-1, 0) == HW
        assert ask(T0 + 18000, 0) == 18
        assert ask(T0 + 18000, 1) == (-1 if version >= 2 else 18)
        assert ask(T0 + 3000, 1) == 3


def _consume(bootstrap: str, level: str, expect: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + level, "enable.auto.commit": False,
                  "isolation.level": level, "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[int] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if len(out) >= expect:
                    break  # and nothing more came in one more poll
                continue
            assert m.error() is None, m.error()
            kind = m.value().split(b"-")[0]
            assert m.value() == value_of(m.offset(), None if kind == b"plain" else int(kind[3:]))
            out.append(m.offset())
    finally:
        c.close()
    return out


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_librdkafka_consumer_sees_only_committed_records(txn_broker, level):
    proc, written, _ = txn_broker
    want = written.read_committed() if level == "read_committed" else written.read_uncommitted()
    assert _consume(proc.bootstrap, level, len(want)) == want
    if level == "read_committed":
        assert want == [0, 1, 2, 3, 4, 5, 10, 14, 15]


def test_written_log_is_as_described(txn_broker):
    _, written, _ = txn_broker
    assert isinstance(written, TxnLog)
    assert (written.log_end_offset, written.last_stable_offset, written.aborted) == (HW, LSO, ABORTED)
