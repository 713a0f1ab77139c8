"""Shared by the real-client transaction tests: topics, consuming a whole topic with either
isolation level, ListOffsets over the wire, and the transaction admin APIs decoded from the
raw response (kio's decoder refuses DescribeTransactions' TransactionStartTimeMs -1, which
Kafka answers for a transactional id with no transaction started)."""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.tools.wire import WireClient
from protocol.apis import ApiKey

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST, EARLIEST = -1, -2


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker, topic: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


def wire(broker, timeout: float = 15) -> WireClient:
    return WireClient("127.0.0.1", broker.port, timeout=timeout)


def list_offset(broker, topic: str, partition: int = 0, isolation: int = READ_UNCOMMITTED,
                timestamp: int = LATEST) -> int:
    """ListOffsets v5 as a consumer (replica id -1) with the given isolation level."""
    with wire(broker) as c:
        r = c.request(ApiKey.LIST_OFFSETS, 5, replica_id=-1, isolation_level=isolation, topics=[dict(
            name=topic, partitions=[dict(partition_index=partition, timestamp=timestamp, current_leader_epoch=-1)])])
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


@dataclass
class Consumed:
    """What a consumer delivered: (partition, offset, value) in delivery order, and its
    final position per partition."""

    records: list[tuple[int, int, bytes]] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)

    @property
    def values(self) -> list[bytes]:
        return [v for _, _, v in self.records]


def consume_all(broker, topic: str, isolation: str, partitions: int = 1, *, settle: float = 0.0,
                timeout: float = 20.0) -> Consumed:
    """Read ``topic`` from offset 0 with a confluent consumer (no group: assign) until every
    partition reported EOF (at the HW, or at the LSO under read_committed), then ``settle``
    seconds more to catch anything delivered late."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name("reader"), "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    out = Consumed()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        settle_until = None
        while time.monotonic() < deadline:
            if settle_until is None and len(at_eof) == partitions:
                settle_until = time.monotonic() + settle
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            m = c.poll(0.1)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_eof.add(m.partition())
                continue
            at_eof.discard(m.partition())
            out.records.append((m.partition(), m.offset(), m.value()))
        assert len(at_eof) == partitions, f"no EOF from partitions {set(range(partitions)) - at_eof} in {timeout}s"
        for tp in c.position([TopicPartition(topic, p) for p in range(partitions)]):
            out.positions[tp.partition] = tp.offset
    finally:
        c.close()
    return out


# ---------------------------------------------------------------- transaction admin APIs
@dataclass
class TxnDescription:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: dict[str, list[int]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        s = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return s

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def describe_transactions(broker, *transactional_ids: str) -> dict[str, TxnDescription]:
    """DescribeTransactions v0 (flexible), decoded by hand."""
    with wire(broker) as c:
        c.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=list(transactional_ids))
        r = _Reader(bytes(c.receive_frame()))
    r.take(">i")  # correlation id
    r.tags()  # response header v1
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.uvarint() - 1):
        error = r.take(">h")
        tid, state = r.string(), r.string()
        timeout, start, pid, epoch = r.take(">i"), r.take(">q"), r.take(">q"), r.take(">h")
        parts = {}
        for _ in range(r.uvarint() - 1):
            topic = r.string()
            parts[topic] = [r.take(">i") for _ in range(r.uvarint() - 1)]
            r.tags()
        r.tags()
        out[tid] = TxnDescription(error, tid, state, timeout, start, pid, epoch, parts)
    return out


def list_transactions(broker, states: list[str] = (), producer_ids: list[int] = (),
                      duration_ms: int = -1) -> dict[str, tuple[int, str]]:
    """ListTransactions v1: transactional id -> (producer id, state)."""
    with wire(broker) as c:
        r = c.request(ApiKey.LIST_TRANSACTIONS, 1, state_filters=list(states), producer_id_filters=list(producer_ids),
                      duration_filter=duration_ms)
    assert r.error_code == 0, r
    return {t.transactional_id: (t.producer_id, t.transaction_state) for t in r.transaction_states}


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout}s")
        time.sleep(interval)
