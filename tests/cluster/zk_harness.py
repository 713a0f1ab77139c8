"""A real ZooKeeper server for the cluster tests: Debian's `zookeeper` package (3.8), run
as a subprocess on an ephemeral port with its own data dir. `make test` installs the
package; a test skips, saying so, only when it is not installed at all."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.krait_harness import free_port, spawn

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")


def zookeeper_missing() -> str | None:
    if not ZK_JAR.exists():
        return "ZooKeeper is not installed (Debian package `zookeeper`; `make test` installs it with apt-get)"
    if not shutil.which("java"):
        return "Java is not installed (ZooKeeper needs it)"
    return None


class ZooKeeperProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="krait-zk-")
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        classpath = f"{ZK_CONF}:{ZK_JAR}" if ZK_CONF.exists() else str(ZK_JAR)
        self.proc = spawn(
            ["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-cp", classpath,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.port), self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"srvr")  # the one four-letter word 3.8 allows by default
                    if s.recv(64).startswith(b"Zookeeper version"):
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"ZooKeeper did not start in {timeout}s")

    def stop(self, *, keep_data: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if not keep_data:
            shutil.rmtree(self.dir, ignore_errors=True)
