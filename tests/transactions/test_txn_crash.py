"""Transactions survive a broker SIGKILL at every point of their life, as Kafka's do.

A transactional producer (confluent-kafka, in a process of its own so that it dies with
the session) writes to several partitions; the broker is killed

* after the records are acknowledged, before EndTxn (the test SIGKILLs it): the
  transaction is still Ongoing after the restart and is aborted when a new producer with
  the same transactional.id calls init_transactions (fencing), or when its
  transaction.timeout.ms passes;
* right after PrepareCommit / PrepareAbort reached ``__transaction_state`` and before any
  marker (``KRAIT_TXN_CRASH_AT=after-prepare``): the restarted coordinator loads the
  Prepare* record and completes the transaction the way it was decided;
* after the first partition's marker and before the second's
  (``KRAIT_TXN_CRASH_AT=after-first-marker``): the restart writes the missing markers.

The broker is restarted on the same data without the crash variable. Then every
transaction has ended committed or aborted, a read_committed consumer sees all of a
committed one and none of an aborted one (read_uncommitted sees the records: they are in
the log), each partition holds the marker on disk, an aborted transaction is in the
``.txnindex``, no producer has an open transaction (DescribeProducers) and the last stable
offset is the high watermark again (ListOffsets with isolation_level 1 == 0).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.records import iter_headers, iter_records, parse_control_batch
from storage.txn_index import TXN_INDEX_SUFFIX, parse_entries
from tests.krait_harness import REPO, BrokerProcess
from txn_coordinator import TRANSACTION_STATE_TOPIC
from txn_coordinator.metadata import TransactionState
from txn_coordinator.records import decode_key, decode_value

CRASH_ENV = "KRAIT_TXN_CRASH_AT"  # broker/txn_driver.py's FAULT_ENV
PER_PARTITION = 5
READ_COMMITTED, READ_UNCOMMITTED = 1, 0

#: The transactional producer, run as ``python -c PRODUCER bootstrap txn_id timeout_ms end n topic:partition...``:
#: begins a transaction, writes n records to each partition, waits for their
#: acks, prints PRODUCED, and on a line on its stdin ends the transaction as told (commit,
#: abort, or none: it leaves it open) and prints ENDED if the broker answered.
PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, txn_id, timeout_ms, end, n, *tps = sys.argv[1:]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.timeout.ms": int(timeout_ms), "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
for i in range(int(n)):
    for tp in tps:
        topic, part = tp.rsplit(":", 1)
        p.produce(topic, value=f"{txn_id}-{tp}-{i}".encode(), partition=int(part))
assert p.flush(30) == 0, "records not acknowledged"
print("PRODUCED", flush=True)
sys.stdin.readline()
if end == "commit":
    p.commit_transaction(60)
elif end == "abort":
    p.abort_transaction(60)
print("ENDED", flush=True)
time.sleep(3600)
"""


# --- the broker and the producer ------------------------------------------------------------------


def _broker(tmp_path: Path, **overrides: str) -> BrokerProcess:
    return BrokerProcess(str(tmp_path / "logs"), overrides={
        "transaction.state.log.num.partitions": "4",
        "offsets.topic.num.partitions": "4",
        **overrides,
    })


@pytest.fixture
def cleanup():
    """Kills what a test started (brokers, producer processes), whatever happens."""
    started: list = []
    yield started
    for thing in reversed(started):
        if isinstance(thing, BrokerProcess):
            thing.kill()
        elif thing.poll() is None:
            thing.kill()
            thing.wait()


def _create_topics(b: BrokerProcess, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for fut in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        fut.result(15)


class TxnProducer:
    """The producer process of one transaction over ``tps`` [(topic, partition)]."""

    def __init__(self, b: BrokerProcess, txn_id: str, tps: list[tuple[str, int]], end: str,
                 timeout_ms: int, cleanup: list) -> None:
        self.txn_id, self.tps = txn_id, tps
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, b.bootstrap, txn_id, str(timeout_ms), end, str(PER_PARTITION),
             *(f"{t}:{p}" for t, p in tps)],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items() if k != CRASH_ENV})
        cleanup.append(self.proc)
        self.lines: list[str] = []

    def values(self) -> set[bytes]:
        """Every record value of the transaction."""
        return {f"{self.txn_id}-{t}:{p}-{i}".encode() for t, p in self.tps for i in range(PER_PARTITION)}

    def wait_for(self, line: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while line not in self.lines:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not select.select([self.proc.stdout], [], [], 0)[0]:
                raise AssertionError(f"producer did not print {line} (got {self.lines}); "
                                     f"stderr: {self._stderr()}")
            if select.select([self.proc.stdout], [], [], min(left, 0.2))[0]:
                got = self.proc.stdout.readline()
                if got:
                    self.lines.append(got.strip())

    def end(self) -> None:
        """Go on: end the transaction."""
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL the producer; what it printed stays in ``lines``."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.lines += [line.strip() for line in self.proc.stdout.read().splitlines()]

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read()[-3000:]


def _crash_and_restart(b: BrokerProcess, producer: TxnProducer, *, killed_by_test: bool,
                       before_restart=None) -> None:
    """The broker dies (the test kills it, or it kills itself at its crash point), the
    producer session is dropped, ``before_restart`` inspects the dead broker's data, and
    the broker starts again on it without the crash variable."""
    if killed_by_test:
        b.kill()
    else:
        try:
            b.proc.wait(20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the broker did not reach its crash point:\n{b.log_text()}") from None
    assert b.proc.returncode == -9, b.log_text()
    producer.kill()
    if before_restart is not None:
        before_restart()
    b.env.pop(CRASH_ENV, None)
    b.start()


# --- what the broker reports ------------------------------------------------------------------------


def _wire(b: BrokerProcess) -> WireClient:
    return WireClient("127.0.0.1", b.port, timeout=15)


def _describe_txn(b: BrokerProcess, txn_id: str):
    with _wire(b) as c:
        (st,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn_id]).transaction_states
    assert st.error_code == 0, st
    return st


def _wait_state(b: BrokerProcess, txn_id: str, state: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        st = _describe_txn(b, txn_id)
        if st.transaction_state == state:
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"{txn_id} is {st.transaction_state}, not {state}:\n{b.log_text()}")
        time.sleep(0.1)


def _txn_partitions(st) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in st.topics for p in t.partitions}


def _open_txn_starts(b: BrokerProcess, tps: list[tuple[str, int]]) -> dict[tuple[str, int], list[int]]:
    """DescribeProducers: per partition, the start offsets of the producers' open transactions."""
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    with _wire(b) as c:
        resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, topics=[dict(name=t, partition_indexes=ps)
                                                               for t, ps in topics.items()])
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            assert p.error_code == 0, p
            out[(t.name, p.partition_index)] = [a.current_txn_start_offset for a in p.active_producers
                                                if a.current_txn_start_offset >= 0]
    return out


def _latest(b: BrokerProcess, tps: list[tuple[str, int]], isolation_level: int) -> dict[tuple[str, int], int]:
    """ListOffsets latest: the high watermark (read_uncommitted) or the last stable offset (read_committed)."""
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    with _wire(b) as c:
        resp = c.request(ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=isolation_level, topics=[
            dict(name=t, partitions=[dict(partition_index=p, current_leader_epoch=-1, timestamp=-1,
                                          max_num_offsets=1) for p in ps]) for t, ps in topics.items()])
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            assert p.error_code == 0, p
            out[(t.name, p.partition_index)] = p.offset
    return out


def _consume(b: BrokerProcess, tps: list[tuple[str, int]], isolation: str) -> set[bytes]:
    """Every value a consumer with ``isolation`` reads from offset 0 until its position
    reaches the partitions' high watermarks (past the markers and aborted records)."""
    ends = _latest(b, tps, READ_UNCOMMITTED)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"reader-{isolation}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        c.assign([TopicPartition(t, p, 0) for t, p in tps])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.add(m.value())
            positions = c.position([TopicPartition(t, p) for t, p in tps])
            if all(pos.offset >= ends[(pos.topic, pos.partition)] for pos in positions):
                return seen
        raise AssertionError(f"{isolation} consumer stuck at {positions}, ends {ends}")
    finally:
        c.close()


class CommittedReader(threading.Thread):
    """A read_committed consumer polling across the crash and the restart: it must never
    see a record of an aborted transaction, even while the abort is being completed."""

    def __init__(self, b: BrokerProcess, tps: list[tuple[str, int]]) -> None:
        super().__init__(daemon=True)
        self.broker, self.tps = b, tps
        self.consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "watcher",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "reconnect.backoff.max.ms": 200, "log_level": 0})
        self.consumer.assign([TopicPartition(t, p, 0) for t, p in tps])
        self.seen: list[bytes] = []
        self._done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._done.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and not m.error():
                self.seen.append(m.value())

    def finish(self) -> list[bytes]:
        """What it saw, once it has read up to the high watermarks (so it was live)."""
        self._done.set()
        self.join(5)
        ends = _latest(self.broker, self.tps, READ_UNCOMMITTED)
        deadline = time.monotonic() + 15
        try:
            while True:
                positions = self.consumer.position([TopicPartition(t, p) for t, p in self.tps])
                if all(pos.offset >= ends[(pos.topic, pos.partition)] for pos in positions):
                    return self.seen
                assert time.monotonic() < deadline, f"watcher stuck at {positions}, ends {ends}"
                m = self.consumer.poll(0.2)
                if m is not None and not m.error():
                    self.seen.append(m.value())
        finally:
            self.consumer.close()


# --- what is on disk -------------------------------------------------------------------------------


def _partition_dir(b: BrokerProcess, topic: str, partition: int) -> Path:
    return Path(b.log_dir) / f"{topic}-{partition}"


def _markers(b: BrokerProcess, topic: str, partition: int, producer_id: int | None = None
             ) -> list[tuple[int, int, int, bool]]:
    """(offset, producer id, producer epoch, commit) of every COMMIT/ABORT control batch in
    the partition's .log files (of ``producer_id`` only, when given)."""
    out = []
    for seg in sorted(_partition_dir(b, topic, partition).glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_headers(data):
            if not h.is_control or (producer_id is not None and h.producer_id != producer_id):
                continue
            marker = parse_control_batch(data, pos)
            if marker is not None:
                out.append((h.base_offset, h.producer_id, h.producer_epoch, marker.commit))
    return out


def _txn_index(b: BrokerProcess, topic: str, partition: int):
    out = []
    for f in sorted(_partition_dir(b, topic, partition).glob("*" + TXN_INDEX_SUFFIX)):
        out += parse_entries(f.read_bytes(), str(f))
    return out


def _last_state_on_disk(b: BrokerProcess, txn_id: str):
    """The last TransactionLogValue of ``txn_id`` in the __transaction_state .log files."""
    last = None
    for d in sorted(Path(b.log_dir).glob(f"{TRANSACTION_STATE_TOPIC}-*")):
        for seg in sorted(d.glob("*.log")):
            data = seg.read_bytes()
            for pos, h in iter_headers(data):
                if h.is_control:
                    continue
                for rec in iter_records(data, pos):
                    if decode_key(rec.key) == txn_id and rec.value is not None:
                        last = decode_value(rec.value)
    return last


# --- the checks every scenario ends with ----------------------------------------------------------


def _assert_completed(b: BrokerProcess, producer: TxnProducer, *, committed: bool, producer_id: int) -> None:
    tps = producer.tps
    assert _open_txn_starts(b, tps) == {tp: [] for tp in tps}, "a producer still has an open transaction"
    hw = _latest(b, tps, READ_UNCOMMITTED)
    assert _latest(b, tps, READ_COMMITTED) == hw, "the last stable offset is not the high watermark"
    for t, p in tps:
        kinds = {commit for *_, commit in _markers(b, t, p, producer_id)}
        assert kinds == {committed}, f"{t}-{p}: markers {_markers(b, t, p)}"
    if committed:
        assert _consume(b, tps, "read_committed") == producer.values()
    else:
        assert _consume(b, tps, "read_committed") == set()
        for t, p in tps:
            aborted = [e for e in _txn_index(b, t, p) if e.producer_id == producer_id]
            (abort_offset,) = [off for off, *_ in _markers(b, t, p, producer_id)]
            # the transaction's first record is at 0 (the topics are fresh); the entry ends at its ABORT marker
            assert [(e.first_offset, e.last_offset) for e in aborted] == [(0, abort_offset)], _txn_index(b, t, p)
    # the records are in the log either way
    assert producer.values() <= _consume(b, tps, "read_uncommitted")


# --- the scenarios -------------------------------------------------------------------------------------


def _start_ongoing(tmp_path: Path, cleanup: list, txn_id: str, timeout_ms: int, watch: bool = False,
                   **overrides: str):
    """A broker, a transaction over 3 partitions whose records are acknowledged, the broker
    SIGKILLed before EndTxn and restarted: the transaction is still Ongoing. With
    ``watch``, a read_committed consumer polls from before the transaction on."""
    b = _broker(tmp_path, **overrides).start()
    cleanup.append(b)
    _create_topics(b, {"ongoing": 3})
    tps = [("ongoing", p) for p in range(3)]
    watcher = CommittedReader(b, tps) if watch else None
    producer = TxnProducer(b, txn_id, tps, "none", timeout_ms, cleanup)
    producer.wait_for("PRODUCED")
    before = _describe_txn(b, txn_id)
    assert before.transaction_state == "Ongoing"
    _crash_and_restart(b, producer, killed_by_test=True)
    st = _describe_txn(b, txn_id)
    assert st.transaction_state == "Ongoing", st
    assert (st.producer_id, st.producer_epoch) == (before.producer_id, before.producer_epoch)
    assert _txn_partitions(st) == set(tps)
    assert _open_txn_starts(b, tps) == {tp: [0] for tp in tps}
    lso, hw = _latest(b, tps, READ_COMMITTED), _latest(b, tps, READ_UNCOMMITTED)
    assert lso == {tp: 0 for tp in tps} and hw == {tp: PER_PARTITION for tp in tps}
    return b, producer, st, watcher


def test_ongoing_transaction_is_aborted_by_a_new_producer_after_restart(tmp_path, cleanup):
    b, producer, st, watcher = _start_ongoing(tmp_path, cleanup, "fenced", timeout_ms=60_000, watch=True)
    # the new session fences the old one: the coordinator aborts its transaction with a
    # bumped epoch before InitProducerId answers (CONCURRENT_TRANSACTIONS until then)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "fenced", "transaction.timeout.ms": 60_000})
    p.init_transactions(20)
    after = _describe_txn(b, "fenced")
    assert after.producer_id == st.producer_id and after.producer_epoch > st.producer_epoch
    _assert_completed(b, producer, committed=False, producer_id=st.producer_id)
    for t, q in producer.tps:
        ((_, _, epoch, _),) = _markers(b, t, q, st.producer_id)
        assert st.producer_epoch < epoch <= after.producer_epoch
    # and the partitions are not stuck: the new session commits, read_committed sees just that
    p.begin_transaction()
    for t, q in producer.tps:
        p.produce(t, value=b"new-%d" % q, partition=q)
    p.commit_transaction(20)
    new = {b"new-%d" % q for _, q in producer.tps}
    assert _consume(b, producer.tps, "read_committed") == new
    # the consumer that polled all along saw the new transaction and nothing of the old one
    assert sorted(watcher.finish()) == sorted(new)


def test_ongoing_transaction_is_aborted_when_it_times_out_after_restart(tmp_path, cleanup):
    b, producer, st, watcher = _start_ongoing(tmp_path, cleanup, "timed-out", timeout_ms=8_000, watch=True, **{
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    _wait_state(b, "timed-out", "CompleteAbort", timeout=15)
    _assert_completed(b, producer, committed=False, producer_id=st.producer_id)
    assert watcher.finish() == []
    # Kafka's timeout abort bumps the epoch (fencing the session that timed out)
    assert _describe_txn(b, "timed-out").producer_epoch == st.producer_epoch + 1


def _crash_at(tmp_path: Path, cleanup: list, point: str, end: str, topics: dict[str, int], txn_id: str,
              before_restart, watch: bool = False):
    """A broker that kills itself at ``point`` while a transaction over ``topics`` ends
    (``end``: commit or abort), checked by ``before_restart`` and restarted. With ``watch``,
    a read_committed consumer polls from before the transaction on."""
    b = _broker(tmp_path)
    b.env[CRASH_ENV] = point
    b.start()
    cleanup.append(b)
    _create_topics(b, topics)
    tps = [(t, p) for t, n in topics.items() for p in range(n)]
    watcher = CommittedReader(b, tps) if watch else None
    producer = TxnProducer(b, txn_id, tps, end, 60_000, cleanup)
    producer.wait_for("PRODUCED")
    st = _describe_txn(b, txn_id)
    assert _txn_partitions(st) == set(tps)
    producer.end()
    _crash_and_restart(b, producer, killed_by_test=False, before_restart=lambda: before_restart(b, st, tps))
    # the EndTxn call never got its answer
    assert "ENDED" not in producer.lines
    return b, producer, st, watcher


def _prepared_without_markers(state: TransactionState):
    def check(b: BrokerProcess, st, tps) -> None:
        on_disk = _last_state_on_disk(b, st.transactional_id)
        assert on_disk is not None and on_disk.transaction_status == state, on_disk
        assert on_disk.producer_id == st.producer_id
        assert {(tp.topic, tp.partition) for tp in on_disk.partitions} == set(tps)
        for t, p in tps:
            assert _markers(b, t, p) == [], f"{t}-{p} has a marker before the coordinator sent any"
    return check


def test_prepare_commit_is_completed_after_restart(tmp_path, cleanup):
    b, producer, st, _ = _crash_at(tmp_path, cleanup, "after-prepare", "commit", {"prepared": 3}, "pc",
                                _prepared_without_markers(TransactionState.PREPARE_COMMIT))
    # PrepareCommit was durable: the outcome is commit, whatever the producer was told
    _wait_state(b, "pc", "CompleteCommit")
    _assert_completed(b, producer, committed=True, producer_id=st.producer_id)
    for t, p in producer.tps:
        assert len(_markers(b, t, p, st.producer_id)) == 1


def test_prepare_abort_is_completed_after_restart(tmp_path, cleanup):
    b, producer, st, watcher = _crash_at(tmp_path, cleanup, "after-prepare", "abort", {"prepared": 3}, "pa",
                                         _prepared_without_markers(TransactionState.PREPARE_ABORT), watch=True)
    _wait_state(b, "pa", "CompleteAbort")
    _assert_completed(b, producer, committed=False, producer_id=st.producer_id)
    assert watcher.finish() == []


def test_commit_interrupted_between_markers_is_completed_after_restart(tmp_path, cleanup):
    first: list[tuple[str, int]] = []

    def one_marker_written(b: BrokerProcess, st, tps) -> None:
        on_disk = _last_state_on_disk(b, st.transactional_id)
        assert on_disk.transaction_status == TransactionState.PREPARE_COMMIT
        written = {tp: _markers(b, *tp) for tp in tps}
        first.extend(tp for tp, ms in written.items() if ms)
        assert len(first) == 1, written
        ((_, pid, _, commit),) = written[first[0]]
        assert pid == st.producer_id and commit

    # two topics: 2 partitions and 1
    b, producer, st, _ = _crash_at(tmp_path, cleanup, "after-first-marker", "commit", {"first": 2, "second": 1},
                                   "fm", one_marker_written)
    _wait_state(b, "fm", "CompleteCommit")
    _assert_completed(b, producer, committed=True, producer_id=st.producer_id)
    for tp in producer.tps:
        markers = _markers(b, *tp, st.producer_id)
        if tp not in first:
            assert len(markers) == 1, (tp, markers)
        else:
            # The restarted coordinator resends the markers of every partition of the
            # PrepareCommit record, as Kafka's does (the log does not say which were
            # written), so the partition that had its marker gets a second COMMIT (Krait
            # writes it). Kafka allows that: a marker for a producer with no open
            # transaction ends nothing and hides nothing, and consumers skip control batches.
            assert 1 <= len(markers) <= 2, (tp, markers)
