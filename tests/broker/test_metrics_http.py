"""The HTTP listener (krait.http.listener) against a real broker process and real
confluent-kafka clients: /metrics counts what was produced and consumed, /healthz and
/readyz answer, a taken port stops start-up naming the key, and krait.log.format=json
writes JSON lines.

Byte counts: bytes in are the record batches of Produce requests as the client sent them
(batch headers included, request framing not), which is what the log stores, so they equal
the partitions' log sizes when nothing was compressed again; bytes out are the stored
batches sent to consumers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.krait_harness import REPO, BrokerProcess, free_port

prometheus_parser = pytest.importorskip("prometheus_client.parser")


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics as {(name, labels): value}."""
    status, text = _get(port, "/metrics")
    assert status == 200
    out = {}
    for fam in prometheus_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def http_broker(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(str(tmp_path_factory.mktemp("metrics") / "logs"),
                      {"krait.http.listener": f"127.0.0.1:{port}"}).start()
    b.http_port = port
    yield b
    assert b.stop() == 0, b.log_text()


def _stats_requests(stats: list[str], api: str) -> int:
    """The requests of one API a librdkafka client sent, from its last statistics."""
    last = json.loads(stats[-1])
    return sum(b.get("req", {}).get(api, 0) for b in last["brokers"].values())


def test_health_and_readiness(http_broker):
    assert _get(http_broker.http_port, "/healthz") == (200, "ok\n")
    assert _get(http_broker.http_port, "/readyz") == (200, "ready\n")
    assert _get(http_broker.http_port, "/nope")[0] == 404


def test_scrape_counts_what_was_produced_and_consumed(http_broker):
    bootstrap, port = http_broker.bootstrap, http_broker.http_port
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    before = scrape(port)

    n = 600
    stats: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "statistics.interval.ms": 100,
                  "stats_cb": stats.append})
    for i in range(n):
        p.produce(topic, key=str(i % 7).encode(), value=b"v" * (50 + i % 30), partition=i % 2)
        if i % 100 == 99:
            p.poll(0)
    assert p.flush(20) == 0
    stats.clear()
    deadline = time.monotonic() + 10
    while not stats and time.monotonic() < deadline:
        p.poll(0.1)
    produce_requests = _stats_requests(stats, "Produce")
    assert produce_requests >= 1

    after_produce = scrape(port)
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    log_size = sum(value(after_produce, "kafka_log_log_size", topic=topic, partition=str(i)) for i in range(2))
    bytes_in = value(after_produce, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in == log_size > n * 50
    for i in range(2):
        assert value(after_produce, "kafka_log_log_logendoffset", topic=topic, partition=str(i)) == n // 2
        assert value(after_produce, "kafka_log_log_logstartoffset", topic=topic, partition=str(i)) == 0
        assert value(after_produce, "kafka_log_log_numlogsegments", topic=topic, partition=str(i)) == 1
    produced = (value(after_produce, "kafka_network_requestmetrics_requests_total", request="Produce")
                - value(before, "kafka_network_requestmetrics_requests_total", request="Produce"))
    assert produced == produce_requests
    assert value(after_produce, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) >= 2

    # consume everything, then commit only part of partition 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, i, 0) for i in range(2)])
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == n
    committed = 100
    c.commit(offsets=[TopicPartition(topic, 0, committed), TopicPartition(topic, 1, n // 2)], asynchronous=False)

    after = scrape(port)
    c.close()
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == bytes_in
    assert value(after, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic=topic) >= 2
    assert value(after, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition="0") \
        == committed
    assert value(after, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0") \
        == n // 2 - committed
    assert value(after, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="1") == 0
    for api in ("Fetch", "OffsetCommit", "Metadata", "ApiVersions", "CreateTopics"):
        assert value(after, "kafka_network_requestmetrics_requests_total", request=api) >= 1, api
    # Kafka also counts every Fetch under the fetcher's kind: here all are consumers'
    assert value(after, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") \
        == value(after, "kafka_network_requestmetrics_requests_total", request="Fetch")
    assert value(after, "kafka_network_requestmetrics_requests_total", request="FetchFollower") == 0
    # the latency histogram counts the same requests, in cumulative buckets
    for api in ("Produce", "Fetch"):
        count = value(after, "kafka_network_requestmetrics_totaltimems_count", request=api)
        assert count == value(after, "kafka_network_requestmetrics_requests_total", request=api)
        assert value(after, "kafka_network_requestmetrics_totaltimems_bucket", request=api, le="+Inf") == count
        assert value(after, "kafka_network_requestmetrics_totaltimems_sum", request=api) > 0
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in after.items()
                         if k[0] == "kafka_network_requestmetrics_totaltimems_bucket" and ("request", api) in k[1])
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert value(after, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(after, "kafka_server_replicamanager_leadercount") == value(
        after, "kafka_server_replicamanager_partitioncount")
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Fetch") >= 0


def test_parked_fetch_shows_in_the_purgatory(http_broker):
    bootstrap, port = http_broker.bootstrap, http_broker.http_port
    topic = f"p-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "fetch.wait.max.ms": 5000})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + 15
        parked = 0.0
        while time.monotonic() < deadline and not parked:
            c.poll(0.2)
            parked = value(scrape(port), "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                           delayedOperation="Fetch")
        assert parked >= 1
        assert value(scrape(port), "kafka_server_delayedoperationpurgatory_purgatorysize",
                     delayedOperation="Fetch") >= 1
    finally:
        c.close()


def test_port_taken_stops_start_up_naming_the_key(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path / 'logs'}",
                              "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                              "--override", f"krait.http.listener=127.0.0.1:{taken}"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert f"krait.http.listener=127.0.0.1:{taken}" in out.stderr and "already in use" in out.stderr


def test_invalid_listener_value_is_a_config_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}",
                          "--override", "krait.http.listener=nonsense"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "krait.http.listener" in out.stderr
    out = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}",
                          "--override", "krait.log.format=xml"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "krait.log.format" in out.stderr


def test_json_log_format_writes_json_lines(tmp_path):
    b = BrokerProcess(str(tmp_path / "logs"), {"krait.log.format": "json", "no.such.key": "1"}).start()
    assert b.stop() == 0
    lines = [line for line in b.log_path.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)
    messages = " ".join(r["message"] for r in records)
    assert "started" in messages and "stopped cleanly" in messages
    # the config's own warnings come out as JSON too
    assert any(r["level"] == "WARNING" and "no.such.key" in r["message"] for r in records)


def test_http_listener_disabled_by_an_empty_value(tmp_path):
    b = BrokerProcess(str(tmp_path / "logs")).start()  # the harness sets krait.http.listener=""
    assert b.stop() == 0
    assert "HTTP listener" not in b.log_path.read_text()


def test_readiness_reasons_before_start(tmp_path):
    from broker.broker import Broker
    from broker.config import BrokerConfig
    from broker.metrics import readiness

    b = Broker(BrokerConfig.from_props({"log.dirs": str(tmp_path), "krait.http.listener": ""}))
    assert readiness(b) == "logs are loading"
    b.open_storage()
    try:
        assert readiness(b) == "coordinators are loading"
        b.stopping = True
        assert readiness(b) == "stopping"
    finally:
        b.logs.shutdown()


def test_dashboard_queries_only_metrics_the_broker_exports(http_broker):
    """docker/grafana/dashboards/krait.json is valid JSON and every metric its queries name
    is one /metrics has (so a rename cannot silently blank a panel)."""
    import re

    dash = json.loads((REPO / "docker" / "grafana" / "dashboards" / "krait.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"]]
    wanted = {n for e in exprs for n in re.findall(r"\bkafka_[a-z_]+", e)}
    status, text = _get(http_broker.http_port, "/metrics")
    families = set(re.findall(r"^# TYPE (\S+) (\S+)", text, re.M))
    exported = {n for n, _ in families} | {f"{n}_bucket" for n, t in families if t == "histogram"}
    assert wanted and wanted <= exported, wanted - exported
