"""`make cluster` / `make cluster-stop`: a real ZooKeeper and three real brokers started as
daemons by the Makefile (scripts/cluster.py), on free ports and in a directory of the
test's own, so that nothing on 2181 or 9092-9094 is touched."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.zk_harness import zookeeper_missing
from tests.krait_harness import REPO, free_port

pytestmark = pytest.mark.skipif(zookeeper_missing() is not None, reason=zookeeper_missing() or "")


def _free_port_run(n: int) -> int:
    """A port p with p .. p+n-1 all free (the brokers listen on consecutive ports)."""
    for _ in range(100):
        base = free_port()
        if base + n > 65535:
            continue
        try:
            for port in range(base, base + n):
                with socket.socket() as s:
                    # as the servers bind (free_port leaves `base` in TIME_WAIT, which they reuse)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {n} consecutive free ports")


def _make(*args: str) -> subprocess.CompletedProcess:
    # -o: the venv running this test is the one to use; `make cluster` must not reinstall it
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.runtime", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=180)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # an exited daemon its parent has not reaped yet is a zombie: gone
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _pids(cluster_dir: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in sorted(cluster_dir.glob("*.pid"))}


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _metadata(port: int):
    with WireClient("127.0.0.1", port, timeout=10) as c:
        return c.request(ApiKey.METADATA, topics=[], allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def test_make_cluster_starts_three_registered_brokers_and_cluster_stop_ends_them(tmp_path):
    cluster_dir = tmp_path / "cluster"
    base, zk_port = _free_port_run(3), free_port()
    ports = [base, base + 1, base + 2]
    variables = [f"CLUSTER_DIR={cluster_dir}", f"CLUSTER_PORT={base}", f"ZK_PORT={zk_port}", "CLUSTER_HTTP_PORT=0"]
    pids: dict[str, int] = {}
    try:
        r = _make("cluster", *variables)
        assert r.returncode == 0, r.stdout + r.stderr
        pids = _pids(cluster_dir)
        assert sorted(pids) == ["broker-1", "broker-2", "broker-3", "zookeeper"]
        assert all(_alive(pid) for pid in pids.values())
        assert f"bootstrap.servers=127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}" in r.stdout
        for name in ("zookeeper", "broker-1", "broker-2", "broker-3"):
            assert (cluster_dir / f"{name}.log").exists()
        assert (cluster_dir / "zookeeper" / "zoo.cfg").read_text().count(f"clientPort={zk_port}") == 1

        # every broker lists the three (registrations reach the others through ZooKeeper watches)
        deadline = time.monotonic() + 30
        while True:
            answers = [_metadata(port) for port in ports]
            seen = [sorted((b.node_id, b.port) for b in md.brokers) for md in answers]
            if all(s == [(1, ports[0]), (2, ports[1]), (3, ports[2])] for s in seen) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert seen == [[(1, ports[0]), (2, ports[1]), (3, ports[2])]] * 3
        assert len({md.cluster_id for md in answers}) == 1 and answers[0].cluster_id
        assert len({md.controller_id for md in answers}) == 1 and answers[0].controller_id in (1, 2, 3)

        # idempotent: a second run starts nothing
        r = _make("cluster", *variables)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count("already running") == 4 and _pids(cluster_dir) == pids

        r = _make("cluster-stop", f"CLUSTER_DIR={cluster_dir}")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "ZooKeeper stopped" in r.stdout and r.stdout.count("stopped") == 4
        assert not any(_alive(pid) for pid in pids.values())
        assert not any(_listening(port) for port in [*ports, zk_port])
        assert list(cluster_dir.glob("*.pid")) == []
        # a clean broker shutdown leaves Kafka's clean-shutdown marker in its log dir
        for n in (1, 2, 3):
            assert (cluster_dir / f"broker-{n}" / ".kafka_cleanshutdown").exists()

        r = _make("cluster-stop", f"CLUSTER_DIR={cluster_dir}")
        assert r.returncode == 0 and "no Krait cluster is running" in r.stdout
    finally:
        # whatever this test started, even when `make cluster` failed half-way
        left = {**pids, **(_pids(cluster_dir) if cluster_dir.exists() else {})}
        if any(_alive(pid) for pid in left.values()):
            _make("cluster-stop", f"CLUSTER_DIR={cluster_dir}")
        for pid in left.values():
            if _alive(pid):
                os.kill(pid, 9)


def test_make_cluster_refuses_a_busy_zookeeper_port(tmp_path):
    cluster_dir = tmp_path / "cluster"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        zk_port = busy.getsockname()[1]
        r = _make("cluster", f"CLUSTER_DIR={cluster_dir}", f"CLUSTER_PORT={_free_port_run(3)}", f"ZK_PORT={zk_port}")
    assert r.returncode != 0
    assert f"port {zk_port} is already in use" in r.stderr and "ZK_PORT=" in r.stderr
    assert list(cluster_dir.glob("*.pid")) == []  # nothing was started
