"""Smoke test of the cluster benchmarks (bench/cluster_bench.py) at a tiny scale, so that
they cannot rot: every part runs on real brokers and a real ZooKeeper and prints its
table; the figures themselves are not checked (benchmarks are not timed tests)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cluster.zk_harness import zookeeper_missing
from tests.krait_harness import REPO

pytest.importorskip("confluent_kafka")
pytest.importorskip("psutil")


@pytest.mark.timeout(420)
def test_cluster_bench_quick_runs_every_part(tmp_path):
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    out = subprocess.run([sys.executable, "bench/cluster_bench.py", "--quick", "--no-results-file",
                          "--json-out", str(tmp_path / "raw.json")],
                         cwd=REPO, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    for heading in ("### Produce: rf=3 acks=all vs rf=1 acks=1", "### Failover: SIGKILL of the leader",
                    "### Catch-up: a follower restarted", "### Scale-out: rf=1 acks=1"):
        assert heading in out.stdout, out.stdout[-4000:]
    assert "| 100B | rf=3 acks=all |" in out.stdout and "| 1KiB | rf3/rf1, per round |" in out.stdout
    raw = json.loads((tmp_path / "raw.json").read_text())

    tp = raw["produce"]["throughput"]
    for key in ("100B rf1", "100B rf3", "1KiB rf1", "1KiB rf3"):
        assert tp[key][0]["records_per_sec"] > 0 and tp[key][0]["leader_cpu_pct"] >= 0
    assert raw["produce"]["latency"]["rf3"][0]["ack_p99"] > 0

    trial = raw["failover"]["fast"][0]
    assert trial["new_leader"] != trial["leader"] and trial["errors"] == 0
    assert trial["kill_to_leader_s"] > 0 and trial["kill_to_ack_s"] > 0

    c = raw["catchup"]
    assert c["behind_bytes"] > 0 and c["restart_to_isr_s"] > 0 and c["follower_bytes_at_end"] >= c["leader_bytes"]

    so = raw["scaleout"]
    # at the smoke scale a run lasts a fraction of a second: CPU shares may round to 0
    assert so["100B 1 broker"][0]["records_per_sec"] > 0 and so["1KiB 2 brokers"][0]["records_per_sec"] > 0
    assert so["1KiB 2 brokers"][0]["broker2_cpu_pct"] >= 0
