"""Smoke test of the benchmark suite on tiny sizes (benchmarks are not timed tests).

`krait perf produce|consume|e2e` against the session broker, and bench/compare.py --quick
against Krait alone: both must run and print their figures.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.krait_harness import REPO

pytest.importorskip("confluent_kafka")


def _krait_perf(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "perf", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_perf_produce_then_consume(broker):
    common = ["--bootstrap-server", broker.bootstrap, "--topic", "bench-smoke", "--num-records", "2000",
              "--timeout", "30"]
    out = _krait_perf("produce", *common, "--record-size", "100", "--partitions", "2", "--acks", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"2000 records sent in [\d.]+ s, [\d.]+ records/s \([\d.]+ MB/s\)", out.stdout), out.stdout
    assert re.search(r"ack latency ms: avg [\d.]+, p50 [\d.]+, p99 [\d.]+, p99\.9 [\d.]+", out.stdout), out.stdout

    out = _krait_perf("consume", *common, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["records"] == 2000 and res["partitions"] == 2 and not res.get("error")
    assert res["records_per_sec"] > 0 and res["bytes"] == 2000 * 100

    out = _krait_perf("consume", *common, "--client", "wire", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    # whole batches: may count past --num-records (the producer also sends one warm-up record)
    assert res["records"] >= 2000 and res["partitions"] == 2 and res["wire_bytes"] > 2000 * 100


def test_wire_producer_appends_what_it_reports(broker):
    """The ingest-ceiling client: pre-built batches over several connections; the log end
    offsets add up to the records it says it sent, and the broker's CPU is reported."""
    topic = "bench-smoke-ingest"
    out = _krait_perf("produce", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", "10000",
                      "--record-size", "100", "--partitions", "3", "--client", "wire", "--producers", "3",
                      "--batch-records", "500", "--broker-pid", str(broker.proc.pid), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    # whole requests: 7 per connection (ceil(10,000 / (500 x 3)))
    assert res["client"] == "wire" and res["connections"] == 3 and res["records"] == 7 * 3 * 500
    assert res["broker_cpu_s_per_mrec"] is not None and res["records_per_sec"] > 0
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "smoke-ingest"})
    try:
        ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)]
    finally:
        c.close()
    assert sum(ends) == res["records"]
    assert ends == [res["records"] // 3] * 3  # connection i writes partition i


def test_perf_e2e(broker):
    out = _krait_perf("e2e", "--bootstrap-server", broker.bootstrap, "--topic", "bench-smoke-e2e",
                      "--num-records", "500", "--throughput", "2000", "--timeout", "30", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["received"] == 500
    assert res["e2e_latency_ms"]["count"] == 500 and res["e2e_latency_ms"]["p99"] > 0


def test_compare_quick_runs_and_prints_a_table(tmp_path):
    out = subprocess.run([sys.executable, "bench/compare.py", "--quick", "--brokers", "krait", "--no-results-file",
                          "--json-out", str(tmp_path / "raw.json")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "| workload | metric | krait |" in out.stdout, out.stdout[-3000:]
    for workload in ("produce-100B", "consume-100B", "produce-8p-lz4-all", "e2e-10k", "ingest-ceiling", "idle-conns",
                     "partitions"):
        assert f"| {workload} |" in out.stdout
    # every row names its client, and the broker's own cost is a row of its own
    assert "| produce-100B | broker CPU-s/M records, librdkafka ↓ |" in out.stdout
    assert "| ingest-ceiling | records/s, wire ↑ |" in out.stdout
    raw = json.loads((tmp_path / "raw.json").read_text())
    assert raw["krait"][0]["produce-100B"]["values"]["records_per_sec"] > 0
    assert raw["krait"][0]["consume-100B"]["values"]["records_per_sec"] > 0
    assert raw["krait"][0]["produce-100B"]["values"]["cpu_s_per_mrec"] >= 0
    assert raw["krait"][0]["ingest-ceiling"]["values"]["records_per_sec"] > 0
    # charts only where asked (--no-results-file writes none by default)
    assert "chart:" not in out.stdout
