"""`krait topics --describe` in a cluster: leader, replicas and ISR as the Metadata response
gives them, and kafka-topics.sh's --under-replicated-partitions / --unavailable-partitions
filters. A fake broker answers with a degraded three-broker cluster (Krait does not
replicate yet); the same commands then run against a real broker."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import uuid

import pytest

from broker.tools import topics_cli
from broker.tools.admin_client import PartitionInfo, TopicInfo
from broker.tools.topics_cli import describe_topic_lines, is_unavailable, is_under_replicated
from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from tests.krait_harness import REPO

# --- unit ------------------------------------------------------------------------------------

DEGRADED = TopicInfo("orders", uuid.UUID(int=1), False, [
    PartitionInfo(0, 2, [1, 2, 3], [2, 3]),  # under-replicated, leader live
    PartitionInfo(1, -1, [1], [1]),          # no leader: unavailable, ISR as the last leader left it
    PartitionInfo(2, 1, [1, 3], [1, 3]),     # leader 1 is not a live broker: unavailable
    PartitionInfo(3, 3, [3, 2], [3, 2]),     # healthy
])
LIVE = [2, 3]


def test_partition_predicates():
    assert [is_under_replicated(p) for p in DEGRADED.partitions] == [True, False, False, False]
    assert [is_unavailable(p, LIVE) for p in DEGRADED.partitions] == [False, True, True, False]


def test_describe_without_filters_is_the_full_description():
    lines = describe_topic_lines(DEGRADED, {"retention.ms": "1000"}, live_brokers=LIVE)
    assert lines[0] == ("Topic: orders\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 4\tReplicationFactor: 3"
                        "\tConfigs: retention.ms=1000")
    assert lines[1:] == [
        "\tTopic: orders\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 2,3",
        "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 1\tIsr: 1",
        "\tTopic: orders\tPartition: 2\tLeader: 1\tReplicas: 1,3\tIsr: 1,3",
        "\tTopic: orders\tPartition: 3\tLeader: 3\tReplicas: 3,2\tIsr: 3,2",
    ]


def test_filters_print_matching_partitions_without_the_topic_line():
    full = describe_topic_lines(DEGRADED, {}, live_brokers=LIVE)
    assert describe_topic_lines(DEGRADED, None, under_replicated=True, live_brokers=LIVE) == [full[1]]
    assert describe_topic_lines(DEGRADED, None, unavailable=True, live_brokers=LIVE) == [full[2], full[3]]
    # both: a partition matching either, in partition order
    assert describe_topic_lines(DEGRADED, None, under_replicated=True, unavailable=True,
                                live_brokers=LIVE) == full[1:4]
    healthy = TopicInfo("ok", None, False, [PartitionInfo(0, 3, [3], [3])])
    assert describe_topic_lines(healthy, None, under_replicated=True, unavailable=True, live_brokers=LIVE) == []


# --- against a fake broker of a degraded cluster -----------------------------------------------


class _FakeClusterBroker:
    """Answers ApiVersions, Metadata (brokers 2 and 3 live, broker 1 down) and
    DescribeConfigs, at the versions the client negotiates."""

    RANGES = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12), ApiKey.DESCRIBE_CONFIGS: (1, 4)}

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _respond(self, key: int, v: int, req) -> object:
        rtype = apis.response_type(key, v)
        if key == ApiKey.API_VERSIONS:
            return make(rtype, error_code=0, api_keys=[dict(api_key=k, min_version=lo, max_version=hi)
                                                        for k, (lo, hi) in self.RANGES.items()])
        if key == ApiKey.METADATA:
            def part(p: PartitionInfo, offline: list[int]) -> dict:
                return dict(error_code=0, partition_index=p.partition, leader_id=p.leader, leader_epoch=0,
                            replica_nodes=p.replicas, isr_nodes=p.isr, offline_replicas=offline)
            topics = [dict(error_code=0, name=DEGRADED.name, topic_id=DEGRADED.topic_id, is_internal=False,
                           partitions=[part(p, [1] if 1 in p.replicas else []) for p in DEGRADED.partitions])]
            return make(rtype, brokers=[dict(node_id=n, host="127.0.0.1", port=self.port, rack=None) for n in LIVE],
                        cluster_id="fake", controller_id=2, topics=topics)
        assert key == ApiKey.DESCRIBE_CONFIGS
        return make(rtype, results=[dict(
            error_code=0, resource_type=r.resource_type, resource_name=r.resource_name, configs=[
                dict(name="retention.ms", value="1000", read_only=False, config_source=1, is_sensitive=False),
                dict(name="segment.bytes", value="1073741824", read_only=False, config_source=5, is_sensitive=False),
            ]) for r in req.resources])

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                hdr = framing.parse_request_header(body)
                req = framing.decode_request(hdr, body)
                resp = self._respond(hdr.api_key, hdr.api_version, req)
                conn.sendall(framing.encode_response(hdr.api_key, hdr.api_version, hdr.correlation_id, resp))


@pytest.fixture
def fake_cluster():
    fake = _FakeClusterBroker()
    yield f"127.0.0.1:{fake.port}"
    fake.close()


def _describe(capsys, bootstrap: str, *args: str) -> tuple[int, list[str], str]:
    code = topics_cli.main(["--bootstrap-server", bootstrap, "--describe", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_describe_takes_leader_replicas_isr_from_metadata(capsys, fake_cluster):
    code, lines, err = _describe(capsys, fake_cluster, "--topic", "orders")
    assert code == 0, err
    assert lines == describe_topic_lines(DEGRADED, {"retention.ms": "1000"}, live_brokers=LIVE)


def test_describe_filters_against_the_cluster_metadata(capsys, fake_cluster):
    full = describe_topic_lines(DEGRADED, {}, live_brokers=LIVE)
    code, lines, err = _describe(capsys, fake_cluster, "--under-replicated-partitions")
    assert (code, lines) == (0, [full[1]]), err
    code, lines, err = _describe(capsys, fake_cluster, "--unavailable-partitions")
    assert (code, lines) == (0, full[2:4]), err
    code, lines, err = _describe(capsys, fake_cluster, "--topic", "orders", "--unavailable-partitions",
                                 "--under-replicated-partitions")
    assert (code, lines) == (0, full[1:4]), err


# --- against a real broker ------------------------------------------------------------------------


def _krait_topics(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "topics", "--bootstrap-server", broker.bootstrap,
                           *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_topics_filters_on_a_healthy_broker_print_nothing(broker):
    assert _krait_topics(broker, "--create", "--topic", "cli-filters", "--partitions", "2").returncode == 0
    r = _krait_topics(broker, "--describe", "--topic", "cli-filters")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        r = _krait_topics(broker, "--describe", "--topic", "cli-filters", flag)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = _krait_topics(broker, "--describe", "--topic", "cli-no-such", "--unavailable-partitions")
    assert r.returncode == 1 and "Topic 'cli-no-such' does not exist as expected" in r.stderr


def test_topics_filters_only_go_with_describe(broker):
    r = _krait_topics(broker, "--list", "--under-replicated-partitions")
    assert r.returncode == 1
    assert r.stderr.startswith('Error while executing topic command : Option "[under-replicated-partitions]" '
                               'can\'t be used with option "[list]"')
    r = _krait_topics(broker, "--create", "--topic", "cli-filters-x", "--unavailable-partitions")
    assert r.returncode == 1 and 'Option "[unavailable-partitions]" can\'t be used with option "[create]"' in r.stderr
    assert "cli-filters-x" not in _krait_topics(broker, "--list").stdout.split()
