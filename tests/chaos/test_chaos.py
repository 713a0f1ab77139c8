"""The short randomized fault runs of `make test` (the long one is `make soak`): a real
ZooKeeper and 3 real brokers, each in its own network namespace, under every nemesis the
machine allows, with fixed seeds; and the single-node mode under the faults that apply to
it. Both include the share group (three librdkafka share consumers on a topic of their
own) and the Schema Registry (two clients registering through every broker's registry, every
broker's registry read back at the end). Every check must count 0. The report (counts,
schedule, timeline PNG) is left in the test's tmp dir and printed on failure."""

from __future__ import annotations

import pytest

from tests.chaos import report, runner
from tests.cluster.zk_harness import zookeeper_missing

#: fixed seeds: a failure reproduces with `python bench/soak.py --seed N --duration D`
CLUSTER_SEED, CLUSTER_DURATION = 20261126, 150
SINGLE_SEED, SINGLE_DURATION = 7, 40


def _run(tmp_path, seed: int, duration: float, brokers: int) -> runner.RunResult:
    rr = runner.run(seed, duration, tmp_path / "run", brokers=brokers)
    text, png = report.write(rr)
    print(text.read_text())
    print(f"report: {text}, timeline: {png}")
    return rr


@pytest.mark.timeout(1200)
def test_randomized_faults_on_a_cluster(tmp_path):
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    rr = _run(tmp_path, CLUSTER_SEED, CLUSTER_DURATION, 3)
    ran = {e["kind"] for e in rr.events if e.get("phase") == "start"}
    assert ran >= {"kill", "pause", "zk-kill", "zk-pause"}, ran
    assert rr.result.stats["acked"] > 1000 and rr.result.stats["polled"] > 1000
    assert rr.result.stats["share"]["records"] > 1000
    assert rr.result.stats["registry"]["acked"] > 100 and rr.result.stats["registry"]["brokers_read"] == 3
    assert rr.ok, report.summary(rr)


@pytest.mark.timeout(600)
def test_randomized_faults_on_a_single_node(tmp_path):
    rr = _run(tmp_path, SINGLE_SEED, SINGLE_DURATION, 1)
    assert {e["kind"] for e in rr.events if e.get("phase") == "start"} >= {"kill", "pause"}
    assert rr.result.stats["acked"] > 1000 and rr.result.stats["share"]["records"] > 300
    assert rr.result.stats["registry"]["acked"] > 40
    assert rr.ok, report.summary(rr)
