"""The cluster under test: a real ZooKeeper (Debian's package) and N real Krait brokers as
processes, each in its node's network namespace (tests/chaos/topology.py), each broker on a
log dir of its own on a small file system of its own (so that the disk nemesis can fill it or
make it fail), replication factor 3, min.insync.replicas=2, no unclean election. Every broker
serves its Schema Registry on its own address (REGISTRY_PORT on its namespace's host).

Single-node mode (``n_brokers=1``, no ZooKeeper) is the embedded default with the same
disk and process faults.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.krait_harness import REPO, free_port, spawn

from .topology import LoopbackNet, NamespaceNet, Node

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")

#: the share group's (tests/chaos/workload.py share): a few __share_group_state partitions,
#: and record locks down to a second, so that the group may set a short one
SHARE_CONFIG = {"share.coordinator.state.topic.num.partitions": "3", "group.share.min.record.lock.duration.ms": "1000"}
#: Kafka's production settings for a durable cluster, with failure detection lowered to
#: seconds as Kafka's own system tests lower it
BROKER_CONFIG = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "krait.http.listener": "",
    **SHARE_CONFIG,
}
SINGLE_CONFIG = {"group.initial.rebalance.delay.ms": "0", "krait.http.listener": "",
                 "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3", **SHARE_CONFIG}
#: each broker serves its Schema Registry (tests/chaos/workload.py registry) on its own host:
#: Confluent's port in its namespace, a free one on loopback
REGISTRY_PORT = 8081


#: the checkout whose broker runs (KRAIT_CHAOS_BROKER_REPO: another one, e.g. a base commit's
#: worktree, to run the same schedule against the code before a change)
BROKER_REPO = Path(os.environ.get("KRAIT_CHAOS_BROKER_REPO") or REPO)


class Proc:
    """One server process: started in its node's namespace, its output appended to a log."""

    def __init__(self, name: str, node: Node, log_path: Path) -> None:
        self.name, self.node, self.log_path = name, node, log_path
        self.proc: subprocess.Popen | None = None
        self.paused = False

    def spawn(self, argv: list[str], **kw) -> None:
        with open(self.log_path, "ab") as logf:
            # dies with the runner, however it ends (an interrupted soak leaves no broker behind)
            self.proc = spawn(self.node.wrap(argv), stdout=logf, stderr=subprocess.STDOUT, **kw)
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.alive:
            if self.paused:
                os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.paused = False

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> int | None:
        if not self.alive:
            return self.proc.returncode if self.proc else None
        self.resume()
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None


def _wait_port(host: str, port: int, proc: Proc, timeout: float, probe: bytes | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive:
            raise RuntimeError(f"{proc.name} exited with {proc.proc.returncode}: see {proc.log_path}")
        try:
            with socket.create_connection((host, port), timeout=0.5) as s:
                if probe is None:
                    return
                s.sendall(probe)
                if s.recv(64):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} did not listen on {host}:{port} in {timeout}s: see {proc.log_path}")


def _attach(image: Path) -> str:
    """A loop device for ``image``. Some machines keep a read-only loop device around (seen
    here: /dev/loop3); `losetup -f` hands it out first, so such a device is held while the
    next one is tried, then let go."""
    bad: list[str] = []
    try:
        for _ in range(8):
            dev = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                                 text=True).stdout.strip()
            ro = subprocess.run(["blockdev", "--getro", dev], capture_output=True, text=True).stdout.strip()
            if ro == "0":
                return dev
            bad.append(dev)
        raise OSError(f"no writable loop device (read-only: {', '.join(bad)})")
    finally:
        for dev in bad:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


class Disk:
    """A broker's log dir on a file system of its own, so that the disk nemesis can fill it
    or make it fail: an ext4 image on a loop device (root only; an I/O error is ext4's own
    error handling, ``errors=remount-ro``, triggered through sysfs), else a tmpfs (no I/O
    error then), else a plain directory (no disk faults at all)."""

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.image = path.parent / f"{path.name}.ext4"
        self.device: str | None = None
        self.mounted = False
        if os.geteuid() != 0:
            return
        try:
            subprocess.run(["truncate", "-s", f"{size_mb}M", str(self.image)], check=True, capture_output=True)
            self.device = _attach(self.image)
            subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.device)], check=True, capture_output=True)
            self.mount()
        except (subprocess.CalledProcessError, OSError):
            self.close()
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                               capture_output=True)
            self.mounted = r.returncode == 0

    @property
    def can_fail(self) -> bool:
        return self.device is not None and Path(f"/sys/fs/ext4/{Path(self.device).name}/trigger_fs_error").exists()

    def mount(self) -> None:
        subprocess.run(["mount", "-o", "errors=remount-ro", str(self.device), str(self.path)], check=True,
                       capture_output=True)
        self.mounted = True

    def fill(self) -> None:
        """Leave no free byte: a file as large as the free space (unbuffered writes, so
        that the last short write is not retried at close)."""
        fd = os.open(self.path / ".ballast", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 4096, 1):
                chunk = b"\0" * size
                try:
                    while os.write(fd, chunk):
                        pass
                except OSError:
                    pass
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.path / ".ballast").unlink(missing_ok=True)

    def fail(self) -> None:
        """An I/O error as ext4 meets one: the file system turns read-only under the broker."""
        Path(f"/sys/fs/ext4/{Path(self.device).name}/trigger_fs_error").write_text("1")

    def repair(self) -> None:
        """After fail(), with the broker stopped: unmount, fsck, mount again (on a loop
        device attached anew if the old one went away with the unmount)."""
        subprocess.run(["umount", str(self.path)], check=True, capture_output=True)
        self.mounted = False
        if subprocess.run(["losetup", str(self.device)], capture_output=True).returncode != 0:
            self.device = _attach(self.image)
        subprocess.run(["e2fsck", "-f", "-y", str(self.device)], capture_output=True)
        self.mount()
        if os.statvfs(self.path).f_flag & os.ST_RDONLY:
            raise RuntimeError(f"{self.path} is still read-only after its repair")

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None
        self.image.unlink(missing_ok=True)


class ChaosCluster:
    def __init__(self, workdir: Path, n_brokers: int = 3, *, use_namespaces: bool = True,
                 disk_mb: int = 256) -> None:
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.single = n_brokers == 1
        self.net = NamespaceNet() if use_namespaces else LoopbackNet()
        self.zk: Proc | None = None
        self.zk_port = 2181 if use_namespaces else free_port()
        if not self.single:
            self.zk = Proc("zk", self.net.add("zk"), self.logs / "zk.log")
        self.brokers: dict[int, Proc] = {}
        self.ports: dict[int, int] = {}
        self.registry_ports: dict[int, int] = {}
        self.disks: dict[int, Disk] = {}
        for i in range(1, n_brokers + 1):
            self.brokers[i] = Proc(f"b{i}", self.net.add(f"b{i}"), self.logs / f"b{i}.log")
            self.ports[i] = 9092 if use_namespaces else free_port()
            self.registry_ports[i] = REGISTRY_PORT if use_namespaces else free_port()
            self.disks[i] = Disk(workdir / f"data-b{i}", disk_mb)

    # --- ZooKeeper --------------------------------------------------------------------------
    @property
    def zk_connect(self) -> str:
        return f"{self.zk.node.host}:{self.zk_port}"

    def start_zk(self) -> None:
        data = self.workdir / "zk-data"
        data.mkdir(exist_ok=True)
        cp = f"{ZK_CONF}:{ZK_JAR}" if ZK_CONF.exists() else str(ZK_JAR)
        self.zk.spawn(["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
                       "-Dzookeeper.4lw.commands.whitelist=srvr", "-cp", cp,
                       "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.zk_port), str(data)])
        _wait_port(self.zk.node.host, self.zk_port, self.zk, 60, probe=b"srvr")

    # --- brokers ----------------------------------------------------------------------------
    def broker_config(self, i: int) -> dict[str, str]:
        host, port = self.brokers[i].node.host, self.ports[i]
        conf = {"node.id": str(i), "log.dirs": str(self.disks[i].path),
                "listeners": f"PLAINTEXT://{host}:{port}",
                "krait.schema.registry.listener": f"{host}:{self.registry_ports[i]}"}
        if self.single:
            return {**SINGLE_CONFIG, **conf}
        return {**BROKER_CONFIG, **conf, "zookeeper.connect": self.zk_connect}

    def start_broker(self, i: int, timeout: float = 60.0) -> None:
        if self.disks[i].device is not None and not self.disks[i].mounted:
            # never on the bare mount point: that is a broker whose disk was swapped for an
            # empty one, a different fault from the one the schedule asked for
            raise RuntimeError(f"b{i}'s log dir {self.disks[i].path} is not mounted")
        argv = [sys.executable, "-m", "broker"]
        for k, v in self.broker_config(i).items():
            argv += ["--override", f"{k}={v}"]
        b = self.brokers[i]
        with open(b.log_path, "ab") as f:
            f.write(f"==== chaos: start {time.strftime('%H:%M:%S')} ====\n".encode())
        b.spawn(argv, cwd=BROKER_REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        _wait_port(b.node.host, self.ports[i], b, timeout)

    def bootstrap(self) -> str:
        return ",".join(f"{self.brokers[i].node.host}:{self.ports[i]}" for i in self.brokers)

    def registry_urls(self) -> dict[int, str]:
        """Each broker's Schema Registry (REST API v1), by broker id."""
        return {i: f"http://{self.brokers[i].node.host}:{self.registry_ports[i]}" for i in self.brokers}

    def start(self) -> ChaosCluster:
        if self.zk is not None:
            self.start_zk()
        for i in self.brokers:
            self.start_broker(i)
        return self

    def stop(self) -> None:
        """Every process down (brokers with SIGTERM: a clean shutdown), disks still mounted."""
        for b in self.brokers.values():
            b.stop(20)
        if self.zk is not None:
            self.zk.stop(10)

    def close(self) -> None:
        self.stop()
        for d in self.disks.values():
            d.close()
        self.net.close()

    # --- what ZooKeeper says ---------------------------------------------------------------
    def zk_client(self):
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zk_connect, timeout=5)
        zk.start(10)
        return zk

    def assignments(self, zk, topics: list[str]) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> its assigned replicas (/brokers/topics/<topic>)."""
        out = {}
        for t in topics:
            parts = json.loads(zk.get(f"/brokers/topics/{t}")[0])["partitions"]
            out.update({(t, int(p)): list(r) for p, r in parts.items()})
        return out

    def partition_states(self, zk, topics: list[str]) -> dict[tuple[str, int], dict]:
        out = {}
        for t in topics:
            for p in zk.get_children(f"/brokers/topics/{t}/partitions"):
                raw = zk.get(f"/brokers/topics/{t}/partitions/{p}/state")[0]
                out[(t, int(p))] = json.loads(raw)
        return out
