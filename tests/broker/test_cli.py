"""`krait topics` / `krait groups`: output formatting (unit) and the commands run as
subprocesses against a real broker, with confluent-kafka consumers for the group views."""

from __future__ import annotations

import datetime
import io
import re
import struct
import subprocess
import sys
import time
import uuid

import pytest
from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment, TopicPartition
from kio.serial import entity_writer

from broker.tools.admin_client import AdminClient, PartitionInfo, TopicInfo, decode_assignment, format_uuid
from broker.tools.groups_cli import format_group_offsets, format_reset_offsets, parse_datetime
from broker.tools.topics_cli import format_topic_description, parse_configs
from broker.tools.wire import parse_bootstrap
from protocol.build import make
from protocol.client_errors import ClientError, describe, kafka_error
from protocol.errors import ErrorCode
from tests.krait_harness import REPO

# --- helpers ---------------------------------------------------------------------------------


def krait(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def topics(broker, *args: str) -> subprocess.CompletedProcess:
    return krait("topics", "--bootstrap-server", broker.bootstrap, *args)


def groups(broker, *args: str) -> subprocess.CompletedProcess:
    return krait("groups", "--bootstrap-server", broker.bootstrap, *args)


def table(stdout: str) -> list[list[str]]:
    """Whitespace-split rows of a table, header first, blank lines dropped."""
    return [line.split() for line in stdout.splitlines() if line.strip()]


# --- unit: formatting and decoding ------------------------------------------------------------


def test_describe_format_matches_kafka_topics():
    tid = uuid.UUID(bytes=bytes(range(16)))
    t = TopicInfo("orders", tid, False, [PartitionInfo(0, 1, [1], [1]), PartitionInfo(1, -1, [1, 2], [2])])
    lines = format_topic_description(t, {"retention.ms": "1000", "cleanup.policy": "compact"})
    assert lines[0] == (f"Topic: orders\tTopicId: {format_uuid(tid)}\tPartitionCount: 2\tReplicationFactor: 1"
                        "\tConfigs: retention.ms=1000,cleanup.policy=compact")
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"
    assert lines[2] == "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 1,2\tIsr: 2"
    assert format_uuid(tid) == "AAECAwQFBgcICQoLDA0ODw"  # Kafka's Uuid.toString: url-safe base64, no padding


def test_group_offsets_table_columns_and_dashes():
    lines = format_group_offsets([
        ("g", "orders", 0, 5, 12, "consumer-1-abc", "/127.0.0.1", "consumer-1"),
        ("g", "orders", 1, None, 3, None, None, None),
    ])
    assert lines[0] == ""
    header = lines[1]
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                              "HOST", "CLIENT-ID"]
    assert header.startswith("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG")
    assert lines[2].split() == ["g", "orders", "0", "5", "12", "7", "consumer-1-abc", "/127.0.0.1", "consumer-1"]
    assert lines[3].split() == ["g", "orders", "1", "-", "3", "-", "-", "-", "-"]
    # columns line up: every value starts where its header does
    for row in lines[2:]:
        for col in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LAG", "CONSUMER-ID"):
            pos = header.index(col)
            assert row[pos - 1] == " " and row[pos] != " "


def test_group_offsets_columns_widen_for_long_values():
    long_id = "consumer-1-" + "x" * 40
    lines = format_group_offsets([("g", "t", 0, 1, 1, long_id, "/10.0.0.1", "c")])
    assert lines[1].index("HOST") == lines[2].index("/10.0.0.1") > len(long_id)


def test_reset_offsets_table():
    lines = format_reset_offsets("g", {("t", 1): 7, ("t", 0): 0})
    assert lines[0] == ""
    assert lines[1] == f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} NEW-OFFSET"
    assert [line.split() for line in lines[2:]] == [["g", "t", "0", "0"], ["g", "t", "1", "7"]]


def test_parse_datetime_formats():
    assert parse_datetime("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime("1970-01-01T01:00:00.000+01:00") == 0
    assert parse_datetime("1970-01-01T01:00:00.000+0100") == 0
    local = datetime.datetime(2024, 5, 1, 12, 30).astimezone()
    assert parse_datetime("2024-05-01T12:30:00.000") == int(local.timestamp() * 1000)


def test_parse_configs_keeps_list_values():
    assert parse_configs(["cleanup.policy=compact,delete", "retention.ms=5,segment.bytes=1024"]) == {
        "cleanup.policy": "compact,delete", "retention.ms": "5", "segment.bytes": "1024"}


def _assignment_bytes(version: int, topics: dict[str, list[int]]) -> bytes:
    buf = io.BytesIO()
    obj = ConsumerProtocolAssignment(
        assigned_partitions=tuple(TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        user_data=None)
    entity_writer(ConsumerProtocolAssignment)(buf, obj)
    return struct.pack(">h", version) + buf.getvalue()


def test_decode_assignment_versions_and_garbage():
    assert decode_assignment(_assignment_bytes(0, {"a": [0, 2], "b": [1]})) == {"a": [0, 2], "b": [1]}
    assert decode_assignment(_assignment_bytes(3, {"a": [5]})) == {"a": [5]}
    assert decode_assignment(b"") == {}
    assert decode_assignment(None) == {}
    # hostile array length must not allocate or raise
    assert decode_assignment(struct.pack(">hi", 0, 0x7FFFFFFF)) == {}
    assert decode_assignment(struct.pack(">h", 0) + b"\xff" * 7) == {}


def test_kafka_error_names_and_messages():
    # without the broker's message, Kafka's own default message for the code
    assert describe(kafka_error(68)) == "NON_EMPTY_GROUP: The group is not empty."
    assert describe(kafka_error(36, "Topic 't' already exists.")) == "TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    assert describe(kafka_error(15, context="group 'g'")) == (
        "COORDINATOR_NOT_AVAILABLE: group 'g': The coordinator is not available.")
    assert kafka_error(15).error_code == ErrorCode.coordinator_not_available
    assert describe(kafka_error(9999)).startswith("UNKNOWN_SERVER_ERROR: Error code 9999")


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("PLAINTEXT://h:9092") == [("h", 9092)]
    with pytest.raises(ClientError):
        parse_bootstrap("nohost")


def test_unreachable_broker_is_one_line_not_a_traceback():
    r = krait("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert r.returncode == 1
    assert "cannot connect to 127.0.0.1:1" in r.stderr and "Traceback" not in r.stderr
    r = krait("groups", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert r.returncode == 1 and r.stderr.startswith("Error: cannot connect") and "Traceback" not in r.stderr


def test_usage_errors():
    r = krait("topics", "--list")
    assert r.returncode == 1 and "bootstrap-server" in r.stderr
    r = krait("groups", "--bootstrap-server", "127.0.0.1:1", "--list", "--describe")
    assert r.returncode == 1 and "not allowed with" in r.stderr


# --- topics against the broker -----------------------------------------------------------------


def test_topics_create_list_describe(broker):
    r = topics(broker, "--create", "--topic", "cli-a", "--partitions", "3", "--replication-factor", "1",
               "--config", "retention.ms=60000", "--config", "cleanup.policy=compact,delete")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Created topic cli-a.\n"
    assert topics(broker, "--create", "--topic", "cli-b").stdout == "Created topic cli-b.\n"

    r = topics(broker, "--list")
    assert r.returncode == 0 and {"cli-a", "cli-b"} <= set(r.stdout.split())

    r = topics(broker, "--describe", "--topic", "cli-a")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"Topic: cli-a\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: .*", lines[0]), lines[0]
    configs = lines[0].split("Configs: ", 1)[1]
    assert "retention.ms=60000" in configs and "cleanup.policy=compact,delete" in configs
    assert lines[1:] == [f"\tTopic: cli-a\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]

    # describe without --topic lists every topic; default partition count comes from the broker
    r = topics(broker, "--describe")
    b_line = next(line for line in r.stdout.splitlines() if line.startswith("Topic: cli-b\t"))
    assert "\tPartitionCount: 1\t" in b_line and b_line.endswith("\tConfigs: ")


def test_topics_create_existing(broker):
    assert topics(broker, "--create", "--topic", "cli-dup").returncode == 0
    r = topics(broker, "--create", "--topic", "cli-dup")
    assert r.returncode == 1
    assert r.stderr.strip() == "Error while executing topic command : TOPIC_ALREADY_EXISTS: Topic 'cli-dup' already exists."
    r = topics(broker, "--create", "--topic", "cli-dup", "--if-not-exists")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""


def test_topics_create_invalid(broker):
    r = topics(broker, "--create", "--topic", "cli-bad", "--config", "no.such.config=1")
    assert r.returncode == 1 and "INVALID_CONFIG" in r.stderr
    r = topics(broker, "--create", "--topic", "bad name!")
    assert r.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in r.stderr
    r = topics(broker, "--create", "--topic", "cli-bad", "--partitions", "0")
    assert r.returncode == 1 and "partitions must be greater than 0" in r.stderr
    assert "cli-bad" not in topics(broker, "--list").stdout.split()


def test_topics_alter_partitions_and_configs(broker):
    assert topics(broker, "--create", "--topic", "cli-alter", "--partitions", "2").returncode == 0
    r = topics(broker, "--alter", "--topic", "cli-alter", "--partitions", "5")
    assert r.returncode == 0, r.stderr
    assert "PartitionCount: 5\t" in topics(broker, "--describe", "--topic", "cli-alter").stdout
    r = topics(broker, "--alter", "--topic", "cli-alter", "--partitions", "3")
    assert r.returncode == 1 and "INVALID_PARTITIONS" in r.stderr

    r = topics(broker, "--alter", "--topic", "cli-alter", "--config", "retention.ms=12345")
    assert r.returncode == 0 and r.stdout == "Completed updating config for topic cli-alter.\n"
    head = topics(broker, "--describe", "--topic", "cli-alter").stdout.splitlines()[0]
    assert head.endswith("Configs: retention.ms=12345")
    r = topics(broker, "--alter", "--topic", "cli-alter", "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stderr
    assert topics(broker, "--describe", "--topic", "cli-alter").stdout.splitlines()[0].endswith("Configs: ")

    r = topics(broker, "--alter", "--topic", "cli-missing", "--partitions", "3")
    assert r.returncode == 1 and "Topic 'cli-missing' does not exist as expected" in r.stderr


def test_topics_delete(broker):
    assert topics(broker, "--create", "--topic", "cli-del").returncode == 0
    r = topics(broker, "--delete", "--topic", "cli-del")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while "cli-del" in topics(broker, "--list").stdout.split() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "cli-del" not in topics(broker, "--list").stdout.split()
    r = topics(broker, "--delete", "--topic", "cli-del")
    assert r.returncode == 1 and "does not exist as expected" in r.stderr
    assert topics(broker, "--delete", "--topic", "cli-del", "--if-exists").returncode == 0


def test_admin_client_negotiates_versions(broker):
    with AdminClient(broker.bootstrap) as admin:
        versions = admin.bootstrap.versions
        from protocol.apis import ApiKey

        assert versions[ApiKey.METADATA][1] == 12 and versions[ApiKey.CREATE_TOPICS][1] == 7
        assert admin.node_ids() == [1]


# --- groups against the broker (need the group coordinator) -------------------------------------


def _produce(broker, topic: str, per_partition: dict[int, int]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for part, n in per_partition.items():
        for i in range(n):
            p.produce(topic, value=b"v%d" % i, partition=part)
    assert p.flush(30) == 0


def _consumer(broker, group: str, client_id: str = "cli-test"):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": client_id,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})


def _consume(c, n: int, timeout: float = 30.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == n, f"consumed {len(got)} of {n}"
    return got


@pytest.fixture
def group_topic(broker):
    """A 2-partition topic with 10 records in partition 0 and 4 in partition 1, and a group
    whose consumer read and committed 6 records of partition 0 and nothing of partition 1
    (assigned, by TopicPartition, so the commit is exact); the consumer is left open."""
    from confluent_kafka import TopicPartition

    topic = f"cli-g-{uuid.uuid4().hex[:8]}"
    group = f"cli-group-{uuid.uuid4().hex[:8]}"
    assert topics(broker, "--create", "--topic", topic, "--partitions", "2").returncode == 0
    _produce(broker, topic, {0: 10, 1: 4})
    c = _consumer(broker, group)
    c.subscribe([topic])
    _consume(c, 14)
    c.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    yield topic, group, c
    try:
        c.close()
    except RuntimeError:  # the test closed it already
        pass


def test_groups_list_and_describe_active_member(broker, group_topic):
    topic, group, c = group_topic
    r = groups(broker, "--list")
    assert r.returncode == 0, r.stderr
    assert group in r.stdout.split()

    r = groups(broker, "--describe", "--group", group)
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"]
    assert r.stdout.startswith("\nGROUP ")
    by_part = {row[2]: row for row in rows[1:]}
    assert set(by_part) == {"0", "1"}
    member_id = c.memberid()
    assert by_part["0"][:6] == [group, topic, "0", "6", "10", "4"]
    assert by_part["0"][6] == member_id and by_part["0"][8] == "cli-test"
    assert by_part["1"][:6] == [group, topic, "1", "-", "4", "-"]
    assert by_part["1"][6] == member_id and "127.0.0.1" in by_part["1"][7]

    r = groups(broker, "--describe", "--group", group, "--members")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    # Kafka's columns, then Krait's TYPE and ASSIGNOR
    assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "TYPE", "ASSIGNOR"]
    assert rows[1][0] == group and rows[1][1] == member_id and rows[1][4] == "2" and rows[1][5] == "Classic"

    r = groups(broker, "--describe", "--group", group, "--state")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert rows[1][0] == group and "Stable" in rows[1] and rows[1][-2:] == ["1", "Classic"]


def test_groups_delete_refused_while_active_then_allowed(broker, group_topic):
    topic, group, c = group_topic
    r = groups(broker, "--delete", "--group", group)
    assert r.returncode == 1
    assert "Deletion of some consumer groups failed:" in r.stderr
    assert f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty." in r.stderr

    c.close()
    r = groups(broker, "--describe", "--group", group)
    assert r.returncode == 0, r.stderr
    assert f"Consumer group '{group}' has no active members." in r.stderr
    rows = table(r.stdout)
    assert [row[:6] + row[6:] for row in rows[1:]] == [[group, topic, "0", "6", "10", "4", "-", "-", "-"]]

    r = groups(broker, "--delete", "--group", group)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    assert group not in groups(broker, "--list").stdout.split()
    r = groups(broker, "--describe", "--group", group)
    assert r.returncode == 1 and f"Error: Consumer group '{group}' does not exist." in r.stderr


def test_groups_reset_offsets(broker, group_topic):
    topic, group, c = group_topic
    # refused while the group is active (dry run too, as in Kafka)
    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert r.returncode == 1
    assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is "
            "Stable.") in r.stderr
    c.close()

    def committed() -> dict[str, str]:
        out = groups(broker, "--describe", "--group", group).stdout
        return {row[2]: row[3] for row in table(out)[1:]}

    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert rows[1:] == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert committed() == {"0": "6"}  # dry run changed nothing

    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert r.returncode == 0, r.stderr
    assert committed() == {"0": "0", "1": "0"}

    r = groups(broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-latest", "--execute")
    assert r.returncode == 0, r.stderr
    assert table(r.stdout)[1:] == [[group, topic, "1", "4"]]
    assert committed() == {"0": "0", "1": "4"}

    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "7", "--execute")
    assert r.returncode == 0, r.stderr
    assert "higher than latest offset" in r.stderr  # partition 1 only has 4: clamped
    assert committed() == {"0": "7", "1": "4"}

    r = groups(broker, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-2", "--execute")
    assert r.returncode == 0, r.stderr
    assert committed() == {"0": "5", "1": "2"}

    # by time: everything was produced before now, nothing after a future date
    future = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime", future, "--execute")
    assert r.returncode == 0, r.stderr
    assert committed() == {"0": "10", "1": "4"}
    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
               "2000-01-01T00:00:00.000", "--execute")
    assert r.returncode == 0, r.stderr
    assert committed() == {"0": "0", "1": "0"}

    # without --execute / --dry-run: a warning and a dry run
    r = groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest")
    assert r.returncode == 0 and "WARN: No action will be performed" in r.stderr
    assert committed() == {"0": "0", "1": "0"}

    # a consumer in the group resumes from the reset offsets
    c2 = _consumer(broker, group)
    c2.subscribe([topic])
    try:
        assert len(_consume(c2, 14)) == 14
    finally:
        c2.close()


def test_groups_describe_unknown_group(broker):
    r = groups(broker, "--describe", "--group", "cli-no-such-group")
    assert r.returncode == 1
    assert "Error: Consumer group 'cli-no-such-group' does not exist." in r.stderr


# --- version negotiation against a fake broker with older versions ---------------------------


class _FakeBroker:
    """Answers ApiVersions v3+ with UNSUPPORTED_VERSION (v0 body, like Kafka) and then
    serves the older request shapes: Metadata v5, FindCoordinator v3, OffsetFetch v7,
    DeleteTopics v5."""

    RANGES = {18: (0, 2), 3: (0, 5), 10: (0, 3), 9: (0, 7), 20: (0, 5)}

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.seen: list[tuple[int, int, object]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        from protocol import apis, framing

        conn, _ = self.sock.accept()
        with conn:
            while True:
                head = conn.recv(4, 0x100)  # MSG_WAITALL
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">i", head)[0], 0x100)
                hdr = framing.parse_request_header(body)
                key, v = hdr.api_key, hdr.api_version
                ranges = [dict(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in self.RANGES.items()]
                if key == 18 and v > 2:
                    resp = make(apis.response_type(18, 0), error_code=35, api_keys=ranges)
                    conn.sendall(framing.encode_response(18, 0, hdr.correlation_id, resp))
                    continue
                req = framing.decode_request(hdr, body)
                self.seen.append((key, v, req))
                if key == 18:
                    resp = make(apis.response_type(18, v), error_code=0, api_keys=ranges)
                elif key == 3:
                    resp = make(apis.response_type(3, v), brokers=[dict(node_id=7, host="127.0.0.1", port=self.port)],
                                controller_id=7, topics=[])
                elif key == 10:
                    resp = make(apis.response_type(10, v), error_code=0, node_id=7, host="127.0.0.1", port=self.port)
                elif key == 9:
                    resp = make(apis.response_type(9, v), error_code=0, topics=[dict(name="t", partitions=[
                        dict(partition_index=0, committed_offset=42, metadata="", error_code=0),
                        dict(partition_index=1, committed_offset=-1, metadata="", error_code=0)])])
                elif key == 20:
                    resp = make(apis.response_type(20, v), responses=[
                        dict(name=n, error_code=3 if n == "missing" else 0) for n in req.topic_names])
                conn.sendall(framing.encode_response(key, v, hdr.correlation_id, resp))


def test_admin_client_downgrades_to_older_versions():
    fake = _FakeBroker()
    with AdminClient(f"127.0.0.1:{fake.port}") as admin:
        assert admin.bootstrap.versions[18] == (0, 2) and admin.bootstrap.versions[3] == (0, 5)
        assert admin.find_coordinator("g") == (7, "127.0.0.1", fake.port)
        assert admin.offset_fetch("g") == {("t", 0): (42, "")}
        res = admin.delete_topics(["a", "missing"])
        assert res["a"] is None and res["missing"].error_code == ErrorCode.unknown_topic_or_partition
    versions = [(k, v) for k, v, _ in fake.seen]
    assert (18, 2) in versions and (10, 3) in versions and (9, 7) in versions and (20, 5) in versions
    fc = next(r for k, _, r in fake.seen if k == 10)
    assert fc.key == "g"
