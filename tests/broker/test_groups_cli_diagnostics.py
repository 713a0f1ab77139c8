"""`krait groups` rebalance diagnostics against a real broker, with confluent-kafka consumers
of both protocols: the --members/--state columns of Kafka 4's kafka-consumer-groups.sh
(with --verbose) plus Krait's TYPE and ASSIGNOR, --list --type, --explain, and the line the
broker logs when a rebalance waits for a member that stopped polling."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid

import pytest

from broker.tools.group_views import GroupView, ViewMember, assignment_string, explain
from tests.krait_harness import REPO, BrokerProcess

OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}
MEMBERS = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
VERBOSE_MEMBERS = [*MEMBERS, "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
STATE = ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE"]


@pytest.fixture(scope="module")
def kbroker():
    b = BrokerProcess(overrides=OVERRIDES).start()
    yield b
    b.stop()


def groups(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "groups", "--bootstrap-server", broker.bootstrap, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def table(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip()]


def _topic(broker, partitions: int = 4) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"diag-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(partitions * 5):
        p.produce(topic, value=b"v", partition=i % partitions)
    assert p.flush(30) == 0
    return topic


def _consumer(broker, group: str, topic: str, name: str, protocol: str):
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "max.poll.interval.ms": 30000,
            "topic.metadata.refresh.interval.ms": 1000}
    if protocol == "classic":
        # a long session: the member must stay in the group while it does not poll
        conf.update({"session.timeout.ms": 20000, "heartbeat.interval.ms": 500})
    c = Consumer(conf)
    c.subscribe([topic])
    return c


def _poll_until(consumers, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


def _described(broker, group: str, *args: str) -> list[list[str]]:
    r = groups(broker, "--describe", "--group", group, *args)
    assert r.returncode == 0, r.stderr
    return table(r.stdout)


def _wait_log(broker, pattern: str, timeout: float, poll=()) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, broker.log_path.read_text(errors="replace"))
        if m:
            return m
        for c in poll:
            c.poll(0.1)
        time.sleep(0.1)
    raise AssertionError(f"no broker log line matching {pattern!r}:\n{broker.log_text()}")


# --- unit: the --explain derivation --------------------------------------------------------------


def test_explain_consumer_group_derives_member_states():
    a = ViewMember("A", None, "ca", "/h", {"t": [0, 1, 2]}, member_epoch=4, target={"t": [0, 1]})
    b = ViewMember("B", None, "cb", "/h", {"t": [3]}, member_epoch=5, target={"t": [2, 3]})
    c = ViewMember("C", None, "cc", "/h", {"t": [4]}, member_epoch=4, target={"t": [4, 5]})
    d = ViewMember("D", None, "cd", "/h", {}, member_epoch=5, target={"t": [5]})
    v = GroupView("g", "Reconciling", "consumer", "", [a, b, c, d], 0, (1, "h", 9092), group_type="consumer",
                  assignor="uniform", group_epoch=5, assignment_epoch=5)
    text = "\n".join(explain(v))
    assert "GROUP 'g' (Consumer, assignor uniform): state Reconciling, group epoch 5, target assignment epoch 5" in text
    lines = explain(v)
    ia = lines.index("  member A (client-id ca, host /h)")
    assert lines[ia + 1] == "    epoch 4 (target epoch 5): UnrevokedPartitions (must revoke before it reaches the target epoch)"
    assert lines[ia + 2] == "    current assignment t:0,1,2, target assignment t:0,1"
    assert lines[ia + 3] == "    to revoke [t-2] (still owned, not in its target)"
    ib = lines.index("  member B (client-id cb, host /h)")
    assert "UnreleasedPartitions" in lines[ib + 1]
    assert lines[ib + 3] == "    to receive [t-2]; [t-2] held by A until it revokes them"
    ic = lines.index("  member C (client-id cc, host /h)")
    assert "behind the target epoch" in lines[ic + 1]
    # t-5 is wanted by C and D and owned by nobody: free, or pending revocation by A or C (behind)
    assert any(line.startswith("  Partitions [t-5] are in a target assignment but in no member's") and "(A, C)" in line
               for line in lines)
    assert "Partitions pending revocation are not part of ConsumerGroupDescribe" in text
    assert assignment_string({"u": [2], "t": [1, 0]}) == "t:0,1;u:2" and assignment_string({}) == "-"


def test_explain_classic_group_says_what_kafka_does_not_tell():
    m = ViewMember("m1", None, "c1", "/h", {"t": [0]})
    v = GroupView("g", "PreparingRebalance", "consumer", "", [m], 0, (1, "h", 9092))
    text = "\n".join(explain(v))
    assert "GROUP 'g' (Classic, protocol -): state PreparingRebalance, 1 members" in text
    assert "not part of Kafka's DescribeGroups" in text and "group g: rebalance (generation N) waiting" in text
    assert "member m1 (client-id c1, host /h): assignment t:0" in text


# --- against the broker -----------------------------------------------------------------------


def test_classic_group_columns_and_slow_rebalance_log(kbroker):
    topic = _topic(kbroker)
    group = f"diag-classic-{uuid.uuid4().hex[:6]}"
    a = _consumer(kbroker, group, topic, "ca", "classic")
    b = None
    try:
        _poll_until([a], lambda: len(a.assignment()) == 4, 30, "the classic member's assignment")
        member = a.memberid()

        rows = _described(kbroker, group, "--members")
        assert rows[0] == [*MEMBERS, "TYPE", "ASSIGNOR"]
        assert rows[1] == [group, member, "/127.0.0.1", "ca", "4", "Classic", "range"]
        rows = _described(kbroker, group, "--members", "--verbose")
        assert rows[0] == [*VERBOSE_MEMBERS, "TYPE", "ASSIGNOR"]
        assert rows[1] == [group, member, "/127.0.0.1", "ca", "4", "-", f"{topic}:0,1,2,3", "-", "-", "Classic",
                           "range"]
        rows = _described(kbroker, group, "--state")
        assert rows[0] == [*STATE, "#MEMBERS", "TYPE"]
        assert rows[1][0] == group and rows[1][3:] == ["range", "Stable", "1", "Classic"]
        rows = _described(kbroker, group, "--state", "--verbose")
        assert rows[0] == [*STATE, "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS", "TYPE"]
        assert rows[1][3:] == ["range", "Stable", "-", "-", "1", "Classic"]
        r = groups(kbroker, "--list", "--type", "classic")
        assert r.returncode == 0, r.stderr
        assert [group, "Classic"] in table(r.stdout)

        # a stops polling; b joins: the rebalance waits for a
        b = _consumer(kbroker, group, topic, "cb", "classic")
        line = _wait_log(kbroker, rf"group {group}: rebalance \(generation (\d+)\) waiting (\d+\.\d)s for members "
                                  rf"\[{re.escape(member)} \(client-id ca, host /127\.0\.0\.1\)\] to rejoin; "
                                  r"max\.poll\.interval\.ms=30000", 20, poll=[b])
        assert int(line.group(1)) >= 2 and 5.0 <= float(line.group(2)) < 10
        r = groups(kbroker, "--describe", "--group", group, "--explain")
        assert r.returncode == 0, r.stderr
        assert f"GROUP '{group}' (Classic, protocol -): state PreparingRebalance, 2 members" in r.stdout
        assert "not part of Kafka's DescribeGroups" in r.stdout and f"member {member} (client-id ca" in r.stdout
        time.sleep(1.5)  # logged once per rebalance and member, however long it waits
        assert len(re.findall(rf"group {group}: rebalance", kbroker.log_path.read_text(errors="replace"))) == 1
    finally:
        for c in (a, b):
            if c is not None:
                c.close()


def test_consumer_group_columns_explain_and_revocation_log(kbroker):
    topic = _topic(kbroker)
    group = f"diag-consumer-{uuid.uuid4().hex[:6]}"
    a = _consumer(kbroker, group, topic, "ca", "consumer")
    b = None
    try:
        _poll_until([a], lambda: len(a.assignment()) == 4, 30, "the consumer member's assignment")
        rows = _described(kbroker, group, "--members", "--verbose")
        assert rows[0] == [*VERBOSE_MEMBERS, "TYPE", "ASSIGNOR"]
        row = rows[1]
        member = row[1]
        assert row[0] == group and row[2:5] == ["/127.0.0.1", "ca", "4"]
        assert row[5] == row[7] and int(row[5]) >= 1  # CURRENT-EPOCH == TARGET-EPOCH: reconciled
        assert row[6] == row[8] == f"{topic}:0,1,2,3" and row[9:] == ["Consumer", "uniform"]
        rows = _described(kbroker, group, "--state", "--verbose")
        assert rows[0] == [*STATE, "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS", "TYPE"]
        assert rows[1][3:5] == ["uniform", "Stable"] and rows[1][5] == rows[1][6] == row[7]
        assert rows[1][7:] == ["1", "Consumer"]
        rows = _described(kbroker, group)  # the offsets view works for consumer groups too
        assert {r[2] for r in rows[1:]} == {"0", "1", "2", "3"} and all(r[6] == member for r in rows[1:])
        r = groups(kbroker, "--list", "--type", "--state")
        assert r.returncode == 0, r.stderr
        assert table(r.stdout)[0] == ["GROUP", "TYPE", "STATE"] and [group, "Consumer", "Stable"] in table(r.stdout)
        assert group not in groups(kbroker, "--list", "--type", "classic").stdout.split()

        # a stops polling (it cannot revoke); b joins and waits for two of a's partitions
        b = _consumer(kbroker, group, topic, "cb", "consumer")
        line = _wait_log(kbroker, rf"group {group}: epoch (\d+) waiting (\d+\.\d)s for member {re.escape(member)} "
                                  rf"\(client-id ca, host /127\.0\.0\.1\) to revoke \[({re.escape(topic)}-\d), "
                                  rf"({re.escape(topic)}-\d)\]; member epoch (\d+), max\.poll\.interval\.ms=30000",
                         20, poll=[b])
        epoch, member_epoch = int(line.group(1)), int(line.group(5))
        assert member_epoch < epoch and 5.0 <= float(line.group(2)) < 10
        revoking = {line.group(3), line.group(4)}

        r = groups(kbroker, "--describe", "--group", group, "--explain")
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert f"GROUP '{group}' (Consumer, assignor uniform): state Reconciling" in out
        assert f"epoch {member_epoch} (target epoch {epoch}): behind the target epoch" in out
        assert f"epoch {epoch} (target epoch {epoch}): UnreleasedPartitions" in out
        unowned = re.search(r"Partitions \[(.*?)\] are in a target assignment but in no member's", out)
        assert unowned and set(unowned.group(1).split(", ")) == revoking and f"({member})" in out
        rows = _described(kbroker, group, "--members", "--verbose")
        by_client = {r[3]: r for r in rows[1:]}
        assert by_client["ca"][5] == str(member_epoch) and by_client["ca"][7] == str(epoch)
        assert by_client["cb"][6] == "-" and by_client["cb"][5] == by_client["cb"][7] == str(epoch)

        # a polls again: it revokes, b gets the partitions, the group is Stable
        _poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 30, "the hand-over")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            rows = _described(kbroker, group, "--state")
            if rows[1][4] == "Stable":
                break
            a.poll(0.2)
            b.poll(0.2)
        assert rows[1][4] == "Stable"
        assert "Stable: every member has reached the target assignment" in groups(
            kbroker, "--describe", "--group", group, "--explain").stdout
    finally:
        for c in (a, b):
            if c is not None:
                c.close()


def test_list_type_refuses_unknown_types(kbroker):
    r = groups(kbroker, "--list", "--type", "classic,bogus")
    assert r.returncode == 1 and "Invalid types list 'classic,bogus'" in r.stderr
