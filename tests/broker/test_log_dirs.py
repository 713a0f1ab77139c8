"""DescribeLogDirs, AlterReplicaLogDirs and DescribeTopicPartitions through real clients
(kafka-python, confluent-kafka, the Java admin client) against a real broker with two log
dirs, the `krait log-dirs` tool, and the broker version kafka-python infers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.security.operations import ResourceType, authorized_operations
from broker.tools.admin_client import AdminClient, LogDirDescription, ReplicaInfo
from broker.tools.log_dirs_cli import format_log_dirs, java_exception_name
from tests.krait_harness import REPO, BrokerProcess, JavaProgram, free_port


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _two_dir_broker(root: Path, **overrides: str) -> tuple[BrokerProcess, str, str]:
    a, b = str(root / "dir-a"), str(root / "dir-b")
    return BrokerProcess(a, overrides={"log.dirs": f"{a},{b}", **overrides}).start(), a, b


@pytest.fixture
def two_dirs(tmp_path):
    bp, a, b = _two_dir_broker(tmp_path)
    yield bp, a, b
    bp.kill()


def _log_bytes(partition_dir: str) -> int:
    return sum(os.path.getsize(os.path.join(partition_dir, n)) for n in os.listdir(partition_dir) if n.endswith(".log"))


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0, size: int = 100, prefix: str = "v") -> list:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 16384})
    acked = []

    def done(err, msg):
        assert err is None, err
        acked.append((msg.offset(), msg.value()))

    for i in range(n):
        p.produce(topic, value=f"{prefix}{i}-".encode() + b"x" * size, partition=partition, on_delivery=done)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return sorted(acked)


def _consume(bootstrap: str, topic: str, expected: int, partition: int = 0, timeout: float = 30.0) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, partition, 0)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
            continue
        assert not m.error(), m.error()
        out.append((m.offset(), m.value()))
    c.close()
    return out


def _replica_dir(admin, topic: str, partition: int = 0) -> tuple[str | None, str | None]:
    """(current dir, future dir) of a replica, from DescribeLogDirs."""
    current = future = None
    for d in admin.describe_log_dirs(1):
        r = d.replicas.get((topic, partition))
        if r is not None:
            if r.is_future:
                future = d.path
            else:
                current = d.path
    return current, future


def _wait_moved(admin, topic: str, dest: str, partition: int = 0, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _replica_dir(admin, topic, partition) == (dest, None):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}-{partition} did not reach {dest}: {_replica_dir(admin, topic, partition)}")


# --- DescribeLogDirs --------------------------------------------------------------------------


def test_describe_log_dirs_reports_sizes_on_disk(two_dirs):
    from kafka.admin import KafkaAdminClient, NewTopic

    bp, a, b = two_dirs
    topic = _topic("sizes")
    admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    _produce(bp.bootstrap, topic, 300, partition=0)
    _produce(bp.bootstrap, topic, 50, partition=2, size=1000)
    # topics=None asks for every partition (Kafka: null topics = all)
    [result] = admin.describe_log_dirs()
    assert result["broker"] == 1
    dirs = {d["log_dir"]: d for d in result["log_dirs"]}
    assert set(dirs) == {a, b}
    seen = {}
    for path, d in dirs.items():
        assert d["error_code"] == 0
        assert d["total_bytes"] >= d["usable_bytes"] > 0
        for t in d["topics"]:
            for p in t["partitions"]:
                if t["name"] == topic:
                    seen[p["partition_index"]] = (path, p)
    assert sorted(seen) == [0, 1, 2]
    for partition, (path, p) in seen.items():
        assert not p["is_future_key"] and p["offset_lag"] == 0
        assert p["partition_size"] == _log_bytes(os.path.join(path, f"{topic}-{partition}"))
    assert seen[0][1]["partition_size"] > 300 * 100 and seen[1][1]["partition_size"] == 0
    # asking for some partitions reports only those
    with AdminClient(bp.bootstrap) as ka:
        only = {tp for d in ka.describe_log_dirs(1, {topic: [2], "no-such-topic": [0]}) for tp in d.replicas}
        assert only == {(topic, 2)}
    admin.close()


# --- AlterReplicaLogDirs -----------------------------------------------------------------------


def test_alter_replica_log_dirs_moves_a_partition(two_dirs):
    from kafka import TopicPartitionReplica
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import NoError

    bp, a, b = two_dirs
    topic = _topic("move")
    kp = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
    kp.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": "65536"})])
    acked = _produce(bp.bootstrap, topic, 2000)
    admin = AdminClient(bp.bootstrap)
    source, _ = _replica_dir(admin, topic)
    dest = b if source == a else a
    before = _log_bytes(os.path.join(source, f"{topic}-0"))

    result = kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): dest})
    assert result == {TopicPartitionReplica(topic, 0, 1): NoError}
    _wait_moved(admin, topic, dest)
    assert not os.path.exists(os.path.join(source, f"{topic}-0"))
    files = os.listdir(os.path.join(dest, f"{topic}-0"))
    assert "partition.metadata" in files and sum(n.endswith(".log") for n in files) > 2
    assert _log_bytes(os.path.join(dest, f"{topic}-0")) == before
    assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    assert _consume(bp.bootstrap, topic, 2000) == acked  # same offsets, same records
    # the partition keeps working where it now lives, and stays there across restarts
    acked += _produce(bp.bootstrap, topic, 10, prefix="after")
    bp.restart()
    admin.close()
    admin = AdminClient(bp.bootstrap)
    assert _replica_dir(admin, topic) == (dest, None)
    assert _consume(bp.bootstrap, topic, 2010) == acked
    bp.restart(hard=True)
    assert _consume(bp.bootstrap, topic, 2010) == acked
    admin.close()
    kp.close()


def test_move_while_producing_loses_no_acked_record(two_dirs):
    bp, a, b = two_dirs
    topic = _topic("busy")
    with AdminClient(bp.bootstrap) as admin:
        admin.create_topic(topic, 1, 1, {"segment.bytes": str(4 << 20)})
        # ~30 MB, copied in passes on a thread: long enough for DescribeLogDirs to catch the
        # future replica (12 MB was copied before the first describe in one CI run)
        acked = _produce(bp.bootstrap, topic, 30_000, size=1000)
        source, _ = _replica_dir(admin, topic)
        dest = b if source == a else a
        more: list = []
        writer = threading.Thread(target=lambda: more.extend(_produce(bp.bootstrap, topic, 3000, prefix="during")))
        writer.start()
        assert admin.alter_replica_log_dirs(1, {(topic, 0): dest}) == {(topic, 0): None}
        # while the copy runs, the destination holds a future replica that lags the current one
        seen_future = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            dirs = admin.describe_log_dirs(1, {topic: [0]})
            future = [d.replicas[(topic, 0)] for d in dirs if (topic, 0) in d.replicas and d.replicas[(topic, 0)].is_future]
            if future:
                seen_future = True
                assert [d.path for d in dirs if (topic, 0) in d.replicas and d.replicas[(topic, 0)].is_future] == [dest]
                assert future[0].offset_lag >= 0
            elif _replica_dir(admin, topic) == (dest, None):
                break
            time.sleep(0.02)
        writer.join(60)
        _wait_moved(admin, topic, dest)
    assert seen_future
    assert len(more) == 3000
    everything = sorted(acked + more)
    assert [o for o, _ in everything] == list(range(33_000))
    assert _consume(bp.bootstrap, topic, 33_000, timeout=60) == everything


def test_alter_replica_log_dirs_errors(two_dirs):
    from kafka import TopicPartitionReplica
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

    bp, a, b = two_dirs
    topic = _topic("errs")
    kp = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
    kp.create_topics([NewTopic(topic, 1, 1)])
    _produce(bp.bootstrap, topic, 10)
    admin = AdminClient(bp.bootstrap)
    source, _ = _replica_dir(admin, topic)
    r = kp.alter_replica_log_dirs({
        TopicPartitionReplica(topic, 0, 1): str(Path(a).parent / "not-a-log-dir"),
        TopicPartitionReplica(topic, 7, 1): b,
        TopicPartitionReplica("no-such-topic-" + topic, 0, 1): b,
    })
    assert r == {TopicPartitionReplica(topic, 0, 1): LogDirNotFoundError,
                 TopicPartitionReplica(topic, 7, 1): UnknownTopicOrPartitionError,
                 TopicPartitionReplica("no-such-topic-" + topic, 0, 1): UnknownTopicOrPartitionError}
    # the dir it is already in: success, nothing moves
    assert kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): source}) == \
        {TopicPartitionReplica(topic, 0, 1): NoError}
    time.sleep(0.3)
    assert _replica_dir(admin, topic) == (source, None)
    assert os.path.isdir(os.path.join(source, f"{topic}-0"))
    admin.close()
    kp.close()


def test_leftover_future_dir_at_startup(tmp_path):
    bp, a, b = _two_dir_broker(tmp_path)
    try:
        topic = _topic("crash")
        with AdminClient(bp.bootstrap) as admin:
            admin.create_topic(topic, 1, 1, {"segment.bytes": "8192"})
            acked = _produce(bp.bootstrap, topic, 300)
            source, _ = _replica_dir(admin, topic)
        dest = b if source == a else a
        bp.kill()
        current = os.path.join(source, f"{topic}-0")

        # 1. a crash in the middle of the copy: a partial -future dir next to the current one
        partial = os.path.join(dest, f"{topic}-0.{uuid.uuid4().hex}-future")
        os.makedirs(partial)
        first = sorted(n for n in os.listdir(current) if n.endswith(".log"))[0]
        with open(os.path.join(current, first), "rb") as src, open(os.path.join(partial, first), "wb") as dst:
            dst.write(src.read()[:1000])
        bp.start()
        with AdminClient(bp.bootstrap) as admin:
            assert _replica_dir(admin, topic) == (source, None)
        assert not os.path.exists(partial)
        assert _consume(bp.bootstrap, topic, 300) == acked

        # 2. a crash after the commit (the copy is complete and the source renamed to
        # -delete) but before the copy took the partition's name: the move completes
        bp.kill()
        shutil.copytree(current, os.path.join(dest, f"{topic}-0.{uuid.uuid4().hex}-future"))
        os.replace(current, os.path.join(source, f"{topic}-0.{uuid.uuid4().hex}-delete"))
        bp.start()
        with AdminClient(bp.bootstrap) as admin:
            assert _replica_dir(admin, topic) == (dest, None)
        assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
        assert _consume(bp.bootstrap, topic, 300) == acked
        acked += _produce(bp.bootstrap, topic, 5, prefix="after")
        assert _consume(bp.bootstrap, topic, 305) == acked
    finally:
        bp.kill()


# --- DescribeTopicPartitions -------------------------------------------------------------------


def test_describe_topic_partitions_pages_with_a_cursor(broker):
    from kafka.admin import KafkaAdminClient, NewTopic

    prefix = "dtp-" + uuid.uuid4().hex[:6]
    t1, t2, missing = prefix + "-a", prefix + "-b", prefix + "-c-missing"
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    kp.create_topics([NewTopic(t2, 2, 1), NewTopic(t1, 3, 1)])
    asked = [missing, t2, t1]
    pages, cursor = [], None
    for _ in range(10):
        page = kp.describe_topic_partitions(asked, response_partition_limit=2, cursor=cursor)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # topics in name order; 2 partitions a page; the cursor names the first partition left out
    got = [[(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]] for page in pages]
    assert got == [[(t1, [0, 1])], [(t1, [2]), (t2, [0])], [(t2, [1]), (missing, [])]]
    assert [p["next_cursor"] for p in pages] == [{"topic_name": t1, "partition_index": 2},
                                                 {"topic_name": t2, "partition_index": 1}, None]
    by_name = {t["name"]: t for page in pages for t in page["topics"]}
    assert by_name[missing]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    for name in (t1, t2):
        t = by_name[name]
        assert t["error_code"] == 0 and not t["is_internal"]
        assert t["topic_authorized_operations"] == authorized_operations(ResourceType.TOPIC)
        for p in t["partitions"]:
            assert p["leader_id"] == 1 and p["replica_nodes"] == [1] and p["isr_nodes"] == [1]
            assert not p["eligible_leader_replicas"] and not p["last_known_elr"] and p["offline_replicas"] == []
    # no topics asked = every topic (internal ones too), still in pages
    everything, cursor = [], None
    while True:
        page = kp.describe_topic_partitions([], response_partition_limit=1, cursor=cursor)
        everything += [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert everything == sorted(everything)
    assert [(t1, 0), (t1, 1), (t1, 2), (t2, 0), (t2, 1)] == [e for e in everything if e[0].startswith(prefix)]
    # a cursor on a topic that was not asked for is an invalid request
    bad = kp.describe_topic_partitions([t2], cursor={"topic_name": t1, "partition_index": 0})
    assert [(t["name"], t["error_code"]) for t in bad["topics"]] == [(t2, 42)]
    kp.close()


JAVA_ADMIN_SRC = r"""
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.errors.LogDirNotFoundException;

public class KraitLogDirsCheck {
  public static void main(String[] a) throws Exception {
    String bs = a[0], topic = a[1], dest = a[2], bad = a[3];
    Properties p = new Properties();
    p.put("bootstrap.servers", bs);
    try (Admin admin = Admin.create(p)) {
      TopicDescription d = admin.describeTopics(List.of(topic),
          new DescribeTopicsOptions().partitionSizeLimitPerResponse(2)).allTopicNames().get().get(topic);
      System.out.println("partitions " + d.partitions().size());
      for (TopicPartitionInfo tp : d.partitions())
        System.out.println("partition " + tp.partition() + " leader " + tp.leader().id() + " elr " + tp.elr());
      Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
      for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
        ReplicaInfo r = e.getValue().replicaInfos().get(new TopicPartition(topic, 0));
        System.out.println("dir " + e.getKey() + " total " + e.getValue().totalBytes().getAsLong()
            + (r == null ? "" : " size " + r.size() + " lag " + r.offsetLag() + " future " + r.isFuture()));
      }
      TopicPartitionReplica tpr = new TopicPartitionReplica(topic, 0, 1);
      try {
        admin.alterReplicaLogDirs(Map.of(tpr, bad)).all().get();
        System.out.println("bad dir accepted");
      } catch (ExecutionException e) {
        System.out.println("bad dir " + e.getCause().getClass().getSimpleName());
      }
      admin.alterReplicaLogDirs(Map.of(tpr, dest)).all().get();
      long deadline = System.currentTimeMillis() + 60000;
      while (System.currentTimeMillis() < deadline) {
        DescribeReplicaLogDirsResult.ReplicaLogDirInfo info =
            admin.describeReplicaLogDirs(List.of(tpr)).all().get().get(tpr);
        if (dest.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) {
          System.out.println("moved to " + info.getCurrentReplicaLogDir());
          break;
        }
        Thread.sleep(100);
      }
    }
  }
}
"""


class _CountingProxy:
    """A TCP proxy in front of the broker that records the API key of every request."""

    def __init__(self, port: int, target_port: int):
        self.port = port
        self.target = target_port
        self.api_keys: list[int] = []
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise OSError("closed")
            buf += chunk
        return buf

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                head = self._read(src, 4)
                frame = self._read(src, struct.unpack(">i", head)[0])
                self.api_keys.append(struct.unpack_from(">h", frame)[0])
                dst.sendall(head + frame)
        except OSError:
            src.close()
            dst.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        src.close()
        dst.close()

    def close(self) -> None:
        self._server.close()


def test_java_admin_log_dirs_and_paged_describe_topics(tmp_path):
    java = JavaProgram(JAVA_ADMIN_SRC, "KraitLogDirsCheck", tmp_path)
    # every connection of the Java client goes through the proxy: it is the advertised listener
    proxy_port = free_port()
    bp, a, b = _two_dir_broker(tmp_path, **{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    proxy = _CountingProxy(proxy_port, bp.port)
    try:
        topic = _topic("java-dirs")
        with AdminClient(bp.bootstrap) as admin:
            admin.create_topic(topic, 5, 1)
            _produce(bp.bootstrap, topic, 100)
            source, _ = _replica_dir(admin, topic)
        dest = b if source == a else a
        size = _log_bytes(os.path.join(source, f"{topic}-0"))
        proxy.api_keys.clear()
        out = java.run(f"127.0.0.1:{proxy_port}", topic, dest, str(tmp_path / "nowhere"), timeout=180)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        lines = out.stdout.splitlines()
        assert "partitions 5" in lines
        assert [ln for ln in lines if ln.startswith("partition ")] == \
            [f"partition {i} leader 1 elr []" for i in range(5)]
        # 5 partitions at 2 a page: the Java admin followed the cursor over 3 DescribeTopicPartitions
        assert proxy.api_keys.count(75) >= 3
        assert f"dir {source} total " in out.stdout and f" size {size} lag 0 future false" in out.stdout
        assert "bad dir LogDirNotFoundException" in lines
        assert f"moved to {dest}" in lines
        assert os.path.isdir(os.path.join(dest, f"{topic}-0"))
    finally:
        proxy.close()
        bp.kill()


# --- broker version inference, ListOffsets v10, Fetch v17 --------------------------------------


def test_kafka_python_infers_kafka_4(broker):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    assert admin._client.check_version() >= (4, 0)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    assert producer.config["api_version"] >= (4, 0)
    producer.close()


# --- krait log-dirs ------------------------------------------------------------------------------


def _krait(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_log_dirs_cli_describe(two_dirs):
    bp, a, b = two_dirs
    topic = _topic("cli")
    with AdminClient(bp.bootstrap) as admin:
        admin.create_topic(topic, 2, 1)
        admin.create_topic(topic + "-other", 1, 1)
    _produce(bp.bootstrap, topic, 100)
    r = _krait("log-dirs", "--bootstrap-server", bp.bootstrap, "--describe", "--topic-list", topic)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1"]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [br["broker"] for br in doc["brokers"]] == [1]
    dirs = doc["brokers"][0]["logDirs"]
    assert sorted(d["logDir"] for d in dirs) == sorted([a, b]) and all(d["error"] is None for d in dirs)
    parts = {p["partition"]: (d["logDir"], p) for d in dirs for p in d["partitions"]}
    assert sorted(parts) == [f"{topic}-0", f"{topic}-1"]  # --topic-list filters
    for name, (log_dir, p) in parts.items():
        assert set(p) == {"partition", "size", "offsetLag", "isFuture"}
        assert p["size"] == _log_bytes(os.path.join(log_dir, name)) and p["offsetLag"] == 0 and not p["isFuture"]
    assert parts[f"{topic}-0"][1]["size"] > 0
    everything = json.loads(_krait("log-dirs", "--bootstrap-server", bp.bootstrap, "--describe",
                                   "--broker-list", "1").stdout.splitlines()[2])
    assert f"{topic}-other-0" in {p["partition"] for d in everything["brokers"][0]["logDirs"] for p in d["partitions"]}
    r = _krait("log-dirs", "--bootstrap-server", bp.bootstrap, "--describe", "--broker-list", "1,5")
    assert r.returncode == 1
    assert r.stderr.strip() == "ERROR: The given brokers do not exist from --broker-list: 5. Current existent " \
                               "brokers: 1"
    r = _krait("log-dirs", "--bootstrap-server", bp.bootstrap)
    assert r.returncode == 1 and 'Missing required argument "[describe]"' in r.stderr


def test_log_dirs_json_format():
    dirs = {1: [LogDirDescription("/d1", 0, {("t", 1): ReplicaInfo(10, 0, False), ("t", 0): ReplicaInfo(5, 2, True),
                                             ("u", 0): ReplicaInfo(1, 0, False)}),
                LogDirDescription("/d2", 56, {})]}
    assert format_log_dirs(dirs, {"t"}) == (
        '{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":5,"offsetLag":2,'
        '"isFuture":true},{"partition":"t-1","size":10,"offsetLag":0,"isFuture":false}],"error":null,'
        '"logDir":"/d1"},{"partitions":[],"error":"org.apache.kafka.common.errors.KafkaStorageException",'
        '"logDir":"/d2"}]}],"version":1}')
    assert java_exception_name(0) is None
    assert java_exception_name(57) == "org.apache.kafka.common.errors.LogDirNotFoundException"
    assert java_exception_name(31) == "org.apache.kafka.common.errors.ClusterAuthorizationException"
