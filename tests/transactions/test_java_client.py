"""Transactions with the Java kafka-clients 4.3 jar: commit/abort visibility, a
read_committed consumer held at the last stable offset (its endOffsets is the LSO), a zombie
producer fenced, consume-transform-produce with sendOffsetsToTransaction(groupMetadata),
and the Admin client's listTransactions / describeTransactions. One program
(KraitTxn.java), compiled once for the module and run as one JVM answering a command per
scenario."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.krait_harness import JavaProgram

from .helpers import consume_all, create_topic, name

SOURCE = Path(__file__).with_name("KraitTxn.java")


class _JavaSession:
    """The program in "serve" mode: one JVM answering one command at a time."""

    def __init__(self, program: JavaProgram, stderr_path: Path) -> None:
        self._stderr = open(stderr_path, "w")
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(["java", "-cp", program.classpath, program.class_name, "serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def __call__(self, *args: str, timeout: float = 90) -> list[list[str]]:
        """The command's output lines, split at tabs."""
        self.proc.stdin.write("\t".join(args) + "\n")
        self.proc.stdin.flush()
        lines = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{args[0]}: no answer in {timeout}s: {lines}") from None
            if line is None:
                raise AssertionError(f"the JVM exited ({self.proc.wait()}): {lines}\n"
                                     f"{self.stderr_path.read_text()[-3000:]}")
            if line == "DONE":
                break
            lines.append(line.split("\t"))
        assert not any(x[0] == "ERROR" for x in lines), lines
        return lines

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    """java(*args) -> the command's output lines: KraitTxn compiled once and run as one JVM."""
    out = tmp_path_factory.mktemp("java-txn")
    session = _JavaSession(JavaProgram(SOURCE.read_text(), "KraitTxn", out), out / "stderr.log")
    yield session
    session.close()


def _records(lines, isolation: str) -> list[tuple[int, int, str]]:
    return [(int(p), int(o), v) for tag, iso, p, o, v in (x for x in lines if x[0] == "REC") if iso == isolation]


def _field(lines, tag: str, isolation: str, partition: int = 0) -> int:
    return next(int(x[3]) for x in lines if x[0] == tag and x[1] == isolation and int(x[2]) == partition)


def test_java_commit_and_abort_visibility(broker, java):
    topic = create_topic(broker, name("j-vis"))
    out = java("visibility", broker.bootstrap, topic, name("j-vis-tx"))
    # c1 c2 C | a1 a2 A | c3 C
    assert _records(out, "read_committed") == [(0, 0, "c1"), (0, 1, "c2"), (0, 6, "c3")]
    assert _records(out, "read_uncommitted") == [(0, 0, "c1"), (0, 1, "c2"), (0, 3, "a1"), (0, 4, "a2"),
                                                 (0, 6, "c3")]
    for iso in ("read_committed", "read_uncommitted"):
        assert _field(out, "POS", iso) == _field(out, "END", iso) == 8
    # and librdkafka agrees
    assert consume_all(broker, topic, "read_committed", settle=0.3).values == [b"c1", b"c2", b"c3"]


def test_java_read_committed_consumer_stops_at_the_lso(broker, java):
    topic = create_topic(broker, name("j-lso"))
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, b"n0")
    plain.flush(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name("j-lso-tx"), "linger.ms": 5})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic, b"t1")
    p.produce(topic, b"t2")
    assert p.flush(10) == 0
    plain.produce(topic, b"n3")
    plain.flush(10)

    out = java("consume", broker.bootstrap, topic, "read_committed", "1500")
    assert _records(out, "read_committed") == [(0, 0, "n0")]
    assert _field(out, "POS", "read_committed") == _field(out, "END", "read_committed") == 1
    out = java("consume", broker.bootstrap, topic, "read_uncommitted", "0")
    assert [v for *_, v in _records(out, "read_uncommitted")] == ["n0", "t1", "t2", "n3"]
    assert _field(out, "END", "read_uncommitted") == 4

    p.commit_transaction(15)
    out = java("consume", broker.bootstrap, topic, "read_committed", "0")
    assert _records(out, "read_committed") == [(0, 0, "n0"), (0, 1, "t1"), (0, 2, "t2"), (0, 3, "n3")]
    assert _field(out, "POS", "read_committed") == _field(out, "END", "read_committed") == 5


def test_java_zombie_producer_is_fenced(broker, java):
    topic = create_topic(broker, name("j-fence"))
    out = java("fence", broker.bootstrap, topic, name("j-fence-tx"))
    assert out[0] == ["P2", "INITIALISED"]
    assert out[1][:2] == ["ZOMBIE", "FAILED"]
    assert out[1][2] in ("ProducerFencedException", "InvalidProducerEpochException"), out
    assert out[2][:2] == ["ZOMBIE", "FAILED-AGAIN"]
    assert out[3] == ["P2", "COMMITTED"]
    assert consume_all(broker, topic, "read_committed", settle=0.3).values == [b"p2-1"]
    assert b"zombie-1" in consume_all(broker, topic, "read_uncommitted").values  # written, then aborted


def test_java_consume_transform_produce_exactly_once(broker, java):
    n, parts = 40, 2
    src, dst = create_topic(broker, name("j-eos-in"), parts), create_topic(broker, name("j-eos-out"), parts)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        plain.produce(src, f"in{i}".encode(), partition=i % parts)
    assert plain.flush(10) == 0

    out = java("eos", broker.bootstrap, src, dst, name("j-eos-g"), name("j-eos-tx"), "2", str(n))
    assert [x[0] for x in out if x[0] in ("ABORTED", "COMMITTED")].count("ABORTED") == 1
    assert sum(int(x[2]) for x in out if x[0] == "COMMITTED") == n
    assert sorted((int(x[1]), int(x[2])) for x in out if x[0] == "OFFSET") == [(q, n // parts) for q in range(parts)]

    want = Counter(f"out-in{i}".encode() for i in range(n))
    assert Counter(consume_all(broker, dst, "read_committed", parts, settle=0.3).values) == want
    assert Counter(consume_all(broker, dst, "read_uncommitted", parts).values) - want  # the aborted round


def test_java_admin_list_and_describe_transactions(broker, java):
    topic = create_topic(broker, name("j-adm"), 2)
    ongoing, committed, empty, unknown = (name(x) for x in ("j-adm-open", "j-adm-done", "j-adm-empty", "j-adm-none"))
    producers = {}
    for tid in (ongoing, committed, empty):
        producers[tid] = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5,
                                   "transaction.timeout.ms": 20000})
        producers[tid].init_transactions(15)
    producers[committed].begin_transaction()
    producers[committed].produce(topic, b"x", partition=0)
    producers[committed].commit_transaction(15)
    producers[ongoing].begin_transaction()
    producers[ongoing].produce(topic, b"y", partition=1)
    producers[ongoing].produce(topic, b"y", partition=0)
    assert producers[ongoing].flush(15) == 0

    out = java("admin", broker.bootstrap, ongoing, committed, empty, unknown)
    listed = {x[1]: x[3] for x in out if x[0] == "LIST"}
    assert {t: listed.get(t) for t in (ongoing, committed, empty, unknown)} == {
        ongoing: "Ongoing", committed: "CompleteCommit", empty: "Empty", unknown: None}
    only_ongoing = {x[1]: x[3] for x in out if x[0] == "ONGOING"}
    assert ongoing in only_ongoing and set(only_ongoing.values()) == {"Ongoing"}
    assert committed not in only_ongoing and empty not in only_ongoing

    desc = {x[1]: x[2:] for x in out if x[0] == "DESC"}
    state, pid, epoch, timeout, started, coordinator, partitions = desc[ongoing]
    assert (state, timeout, started, coordinator, partitions) == ("Ongoing", "20000", "started", "1",
                                                                  f"{topic}-0,{topic}-1")
    assert desc[committed][0] == "CompleteCommit" and desc[committed][4] == "started"
    assert desc[empty][0] == "Empty" and desc[empty][4] == "none" and desc[empty][6] == ""
    assert desc[unknown] == ["ERROR", "TransactionalIdNotFoundException"]
    assert int(pid) == int(next(x[2] for x in out if x[0] == "LIST" and x[1] == ongoing))
    producers[ongoing].abort_transaction(15)
