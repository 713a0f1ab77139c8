"""`krait transactions` (kafka-transactions.sh): the table format (unit), argument errors,
and list / describe / describe-producers / find-hanging / abort run as subprocesses
against a real broker holding a committed transaction, an open one whose producer was
SIGKILLed, and a hanging one its coordinator never heard of."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.tools import transactions_cli
from broker.tools.transactions_cli import format_table
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.records import build_batch
from tests.krait_harness import REPO, BrokerProcess

READ_UNCOMMITTED, READ_COMMITTED = 0, 1

#: a transactional producer that writes 3 records to each of partitions 0 and 1 of a topic,
#: prints PRODUCED once they are acknowledged and then waits, its transaction open
OPEN_TXN_PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, txn_id, topic = sys.argv[1:]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 600000})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    for part in (0, 1):
        p.produce(topic, value=b"open-%d-%d" % (part, i), partition=part)
assert p.flush(30) == 0
print("PRODUCED", flush=True)
time.sleep(3600)
"""


def krait(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def transactions(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess:
    """``krait transactions --bootstrap-server ... args`` run in this process (quicker than
    a subprocess; the list test runs the real command)."""
    out, err = io.StringIO(), io.StringIO()
    code = transactions_cli.main(["--bootstrap-server", broker.bootstrap, *args], out, err)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def rows(stdout: str) -> list[list[str]]:
    """The table's rows as cells (the header first): cells end with a tab."""
    return [[c.strip() for c in line.split("\t")[:-1]] for line in stdout.splitlines() if line.strip()]


# --- unit ----------------------------------------------------------------------------------------------


def test_table_is_kafkas_pretty_print():
    # ToolsUtils.prettyPrintTable: each cell left-aligned to its column's width, then a tab
    assert format_table(["TransactionalId", "Coordinator"], [["a-much-longer-id", "1"], ["b", "12"]]) == [
        "TransactionalId \tCoordinator\t",
        "a-much-longer-id\t1          \t",
        "b               \t12         \t",
    ]
    assert format_table(["A", "B"], []) == ["A\tB\t"]


def _run(*argv: str) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    code = transactions_cli.main(list(argv), out, err)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_argument_errors_are_one_line():
    r = _run("--bootstrap-server", "127.0.0.1:1")
    assert r.returncode == 1 and "a command is required" in r.stderr
    r = _run("list")
    assert r.returncode == 1 and "--bootstrap-server" in r.stderr
    r = _run("--bootstrap-server", "127.0.0.1:1", "abort", "--partition", "0")
    assert r.returncode == 1 and "--topic" in r.stderr
    r = _run("describe", "--transactional-id", "x", "--bootstrap-server", "127.0.0.1:1")  # options after the command
    assert r.returncode == 1 and r.stderr.strip().startswith("cannot connect to 127.0.0.1:1")
    # the registered command, as a user runs it
    r = krait("transactions", "--help")
    assert r.returncode == 0 and "find-hanging" in r.stdout
    r = krait("transactions", "--bootstrap-server", "127.0.0.1:1", "list")
    assert r.returncode == 1 and "cannot connect" in r.stderr and "Traceback" not in r.stderr


# --- against a broker ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """A broker with a committed transaction ("cli-done") and an open one ("cli-open",
    on cli-tx-0 and cli-tx-1) whose producer was SIGKILLed; its timeout is 10 minutes.
    Produce verification (KIP-890) is off, as on the brokers before it where a produce
    the coordinator never saw could open a transaction: the hanging-transaction test
    makes one."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("txn-cli") / "logs"), overrides={
        "transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4",
        "transaction.partition.verification.enable": "false"}).start()
    producer = None
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for fut in admin.create_topics([NewTopic("cli-tx", 2, 1), NewTopic("cli-hang", 1, 1)]).values():
            fut.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "cli-done"})
        p.init_transactions(20)
        p.begin_transaction()
        for part in (0, 1):
            p.produce("cli-tx", value=b"done-%d" % part, partition=part)
        p.commit_transaction(20)
        producer = subprocess.Popen([sys.executable, "-c", OPEN_TXN_PRODUCER, b.bootstrap, "cli-open", "cli-tx"],
                                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert producer.stdout.readline().strip() == "PRODUCED", producer.stderr.read()
        producer.kill()
        producer.wait()
        yield b
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait()
        b.stop()


def _latest(b: BrokerProcess, topic: str, partition: int, isolation_level: int) -> int:
    with WireClient("127.0.0.1", b.port) as c:
        resp = c.request(ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=isolation_level, topics=[dict(
            name=topic, partitions=[dict(partition_index=partition, current_leader_epoch=-1, timestamp=-1,
                                         max_num_offsets=1)])])
    (p,) = resp.topics[0].partitions
    assert p.error_code == 0
    return p.offset


def _read_committed(b: BrokerProcess, topic: str, partition: int) -> list[bytes]:
    """What a read_committed consumer reads from the start up to the high watermark."""
    end = _latest(b, topic, partition, READ_UNCOMMITTED)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cli-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.value())
            (pos,) = c.position([TopicPartition(topic, partition)])
            if pos.offset >= end:
                return seen
        raise AssertionError(f"read_committed consumer stuck at {pos.offset}, high watermark {end}")
    finally:
        c.close()


def _producers(b: BrokerProcess, topic: str, partition: int) -> list[dict[str, str]]:
    r = transactions(b, "describe-producers", "--topic", topic, "--partition", str(partition))
    assert r.returncode == 0, r.stderr
    header, *body = rows(r.stdout)
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    return [dict(zip(header, row, strict=True)) for row in body]


def test_list_shows_every_transaction_with_its_coordinator(txn_broker):
    r = krait("transactions", "--bootstrap-server", txn_broker.bootstrap, "list")
    assert r.returncode == 0, r.stderr
    header, *body = rows(r.stdout)
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    got = {row[0]: row for row in body}
    assert got["cli-done"][1:] == ["1", got["cli-done"][2], "CompleteCommit"]
    assert got["cli-open"][1] == "1" and got["cli-open"][3] == "Ongoing"
    assert got["cli-done"][2] != got["cli-open"][2]
    # the duration filter (ListTransactions v1): the open transaction has not run for an hour
    r = transactions(txn_broker, "list", "--duration-filter", "3600000")
    assert r.returncode == 0, r.stderr
    assert "cli-open" not in r.stdout


def test_describe_asks_the_coordinator(txn_broker):
    r = transactions(txn_broker, "describe", "--transactional-id", "cli-open")
    assert r.returncode == 0, r.stderr
    header, row = rows(r.stdout)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    d = dict(zip(header, row, strict=True))
    assert (d["CoordinatorId"], d["TransactionalId"], d["TransactionState"], d["TransactionTimeoutMs"]) == (
        "1", "cli-open", "Ongoing", "600000")
    start, duration = int(d["CurrentTransactionStartTimeMs"]), int(d["TransactionDurationMs"])
    assert 0 <= duration < 120_000 and abs(start + duration - time.time() * 1000) < 60_000
    assert d["TopicPartitions"] == "cli-tx-0,cli-tx-1"

    r = transactions(txn_broker, "describe", "--transactional-id", "cli-done")
    assert r.returncode == 0, r.stderr
    d = dict(zip(*rows(r.stdout), strict=True))
    assert d["TransactionState"] == "CompleteCommit" and d["TopicPartitions"] == ""

    # an initialised id with no transaction yet: Kafka sends start time -1 (kio's reader refuses it)
    Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": "cli-empty"}).init_transactions(30)
    r = transactions(txn_broker, "describe", "--transactional-id", "cli-empty")
    assert r.returncode == 0, r.stderr
    d = dict(zip(*rows(r.stdout), strict=True))
    assert (d["TransactionState"], d["CurrentTransactionStartTimeMs"], d["TransactionDurationMs"]) == (
        "Empty", "None", "None")

    r = transactions(txn_broker, "describe", "--transactional-id", "no-such-id")
    assert r.returncode == 1
    assert r.stderr.strip() == ("Failed to describe transaction state of transactional-id `no-such-id`: "
                                "TRANSACTIONAL_ID_NOT_FOUND: The transactionalId could not be found.")


def test_abort_by_start_offset_ends_a_dead_producers_transaction(txn_broker):
    b = txn_broker
    (open_txn,) = [p for p in _producers(b, "cli-tx", 0) if p["CurrentTransactionStartOffset"] != "None"]
    start = int(open_txn["CurrentTransactionStartOffset"])
    hw = _latest(b, "cli-tx", 0, READ_UNCOMMITTED)
    assert start == 2  # after the committed record and its marker
    assert _latest(b, "cli-tx", 0, READ_COMMITTED) == start < hw  # read_committed consumers are held there

    r = transactions(b, "abort", "--topic", "cli-tx", "--partition", "0", "--start-offset", str(start))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")

    # the ABORT marker is the new log end, and the last stable offset moved to it
    assert _latest(b, "cli-tx", 0, READ_COMMITTED) == _latest(b, "cli-tx", 0, READ_UNCOMMITTED) == hw + 1
    assert _read_committed(b, "cli-tx", 0) == [b"done-0"]
    assert all(p["CurrentTransactionStartOffset"] == "None" for p in _producers(b, "cli-tx", 0))
    # the other partition of the transaction is untouched: its coordinator will abort it
    assert _latest(b, "cli-tx", 1, READ_COMMITTED) < _latest(b, "cli-tx", 1, READ_UNCOMMITTED)

    r = transactions(b, "abort", "--topic", "cli-tx", "--partition", "0", "--start-offset", str(start))
    assert r.returncode == 1
    assert r.stderr.strip() == f"Could not find any open transactions starting at offset {start} on partition cli-tx-0"


def _open_ghost_transaction(b: BrokerProcess, topic: str) -> tuple[int, int]:
    """A transaction on ``topic``-0 its coordinator never heard of: an idempotent producer
    id writes a transactional batch (stamped two minutes ago) under a transactional id
    that was never initialised. (producer id, epoch)"""
    with WireClient("127.0.0.1", b.port) as c:
        r = c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=-1,
                      producer_id=-1, producer_epoch=-1)
        assert r.error_code == 0
        batch = build_batch([(None, b"ghost-1"), (None, b"ghost-2")], timestamp=int(time.time() * 1000) - 120_000,
                            producer_id=r.producer_id, producer_epoch=r.producer_epoch, base_sequence=0,
                            transactional=True)
        resp = c.request(ApiKey.PRODUCE, transactional_id="ghost", acks=-1, timeout_ms=10_000, topic_data=[dict(
            name=topic, partition_data=[dict(index=0, records=batch)])])
        assert resp.responses[0].partition_responses[0].error_code == 0, resp
        return r.producer_id, r.producer_epoch


def test_find_hanging_then_abort_by_producer_id(txn_broker):
    b = txn_broker
    pid, epoch = _open_ghost_transaction(b, "cli-hang")
    header = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
              "LastTimestamp", "Duration(min)"]
    # With no timeout at all, cli-open's transaction on cli-tx-1 is a candidate too, but
    # its coordinator lists that partition in it: only the unknown producer hangs.
    for scope in (["--broker-id", "1", "--max-transaction-timeout", "0"],
                  ["--broker-id", "1", "--max-transaction-timeout", "1"],
                  ["--topic", "cli-hang", "--partition", "0"] + ["--max-transaction-timeout", "1"]):
        r = transactions(b, "find-hanging", *scope)
        assert r.returncode == 0, r.stderr
        got_header, *body = rows(r.stdout)
        assert got_header == header
        assert [row[:6] + row[7:] for row in body] == [["cli-hang", "0", str(pid), str(epoch), "-1", "0", "2"]], scope
    # the default maximum timeout (15 minutes) is longer than the transaction has run
    r = transactions(b, "find-hanging", "--broker-id", "1")
    assert r.returncode == 0 and rows(r.stdout) == [header]
    r = transactions(b, "find-hanging")
    assert r.returncode == 1 and "requires either --topic or --broker-id" in r.stderr

    r = transactions(b, "abort", "--topic", "cli-hang", "--partition", "0", "--producer-id", str(pid))
    assert r.returncode == 1 and r.stderr.strip() == "Missing required argument --producer-epoch"
    assert _latest(b, "cli-hang", 0, READ_COMMITTED) == 0
    # coordinator epoch -1 (no marker yet): Kafka's tool sends 0
    r = transactions(b, "abort", "--topic", "cli-hang", "--partition", "0", "--producer-id", str(pid),
                     "--producer-epoch", str(epoch), "--coordinator-epoch", "-1")
    assert (r.returncode, r.stderr) == (0, "")
    assert _latest(b, "cli-hang", 0, READ_COMMITTED) == _latest(b, "cli-hang", 0, READ_UNCOMMITTED) == 3
    assert _read_committed(b, "cli-hang", 0) == []
    r = transactions(b, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    assert r.returncode == 0 and rows(r.stdout) == [header]
