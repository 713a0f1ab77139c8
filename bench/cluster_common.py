"""What the cluster benchmarks (bench/cluster_bench.py) share: a fresh ZooKeeper and a
Cluster of real broker subprocesses in temporary dirs, cleaned up even on failure; topics
with a chosen replica assignment (so that the leader is a known broker); per-process CPU;
on-disk log sizes; `krait perf` runs; py-spy; medians and number formatting.

The cluster is the test suite's own harness (tests/cluster/cluster_harness.py on
tests/cluster/zk_harness.py): N `python -m broker` processes with `zookeeper.connect`,
the ZooKeeper timeouts lowered as the tests lower them unless a part asks for the defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# peers first: it puts the checkout on sys.path for the imports below
from peers import PY
from report import fmt
from workloads import WorkloadFailed, run_perf

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.zk_harness import ZooKeeperProcess, zookeeper_missing

__all__ = ["BROKER_ENV", "KAFKA_DEFAULTS", "MIB_NOTE", "Cluster", "PY", "Sizes", "WorkloadFailed", "ZooKeeper", "controller_id", "cpu_seconds", "create_topic",
           "delete_topic", "BusySampler", "wait_quiet", "broker_env", "fmt",
           "log_bytes", "med", "pick_leader", "py_spy", "py_spy_exe", "run_perf", "spread", "wait_for", "zookeeper_missing"]

MIB_NOTE = "MB = 2^20 bytes (of record values for produce, of .log segments for catch-up)"
#: Kafka's defaults for the keys the test harness lowers (FAST in cluster_harness.py)
KAFKA_DEFAULTS = {"zookeeper.session.timeout.ms": "18000", "replica.lag.time.max.ms": "30000",
                  "replica.fetch.backoff.ms": "1000"}


@dataclass
class Sizes:
    """What each part runs; the defaults are the full-scale run (--scale multiplies the
    record counts and the catch-up volume, --quick is the smoke test's tiny run)."""
    rounds: int = 5
    n100: int = 3_000_000
    n1k: int = 600_000
    lat_rate: int = 5_000
    lat_seconds: float = 10.0
    failover_runs: int = 5
    failover_default_runs: int = 1
    failover_controller_runs: int = 1
    failover_rate: int = 1_000
    #: more librdkafka properties for the failover producer (KEY=VALUE)
    failover_producer_props: tuple[str, ...] = ()
    catchup_bytes: int = 1 << 30
    catchup_partitions: int = 1
    scaleout_partitions: int = 4
    timeout: float = 900.0
    #: before each measured run, wait up to this long for the machine to be quiet
    quiet_wait: float = 0.0

    @classmethod
    def make(cls, scale: float, quick: bool) -> Sizes:
        if quick:
            return cls(rounds=1, n100=20_000, n1k=5_000, lat_rate=2_000, lat_seconds=1.0, failover_runs=1,
                       failover_default_runs=0, failover_controller_runs=0, failover_rate=200,
                       catchup_bytes=4 << 20, timeout=120.0)
        s = cls()
        s.n100 = max(1000, int(s.n100 * scale))
        s.n1k = max(1000, int(s.n1k * scale))
        s.lat_seconds = max(1.0, s.lat_seconds * min(1.0, scale))
        s.catchup_bytes = max(1 << 20, int(s.catchup_bytes * scale))
        return s


#: environment for the broker processes only (--broker-env), e.g. glibc malloc tunables
BROKER_ENV: dict[str, str] = {}


@contextlib.contextmanager
def broker_env() -> Iterator[None]:
    """BROKER_ENV in os.environ while brokers are spawned (the harness passes os.environ on),
    then restored, so that the client and ZooKeeper run without it."""
    saved = {k: os.environ.get(k) for k in BROKER_ENV}
    os.environ.update(BROKER_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ZooKeeper:
    """One fresh ZooKeeper for a benchmark part, and the clusters started on it (each in a
    chroot of its own and a temporary dir); everything is stopped and removed on exit,
    also when the part fails."""

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        #: broker config for every cluster (a part's own overrides win)
        self.overrides = dict(overrides or {})
        self.zk: ZooKeeperProcess | None = None
        self.clusters: list[Cluster] = []

    def __enter__(self) -> ZooKeeper:
        self.zk = ZooKeeperProcess().start()
        return self

    def __exit__(self, *exc) -> None:
        for cl in self.clusters:
            stop_cluster(cl)
        if self.zk is not None:
            self.zk.stop()

    @contextlib.contextmanager
    def cluster(self, n: int, **overrides: str) -> Iterator[Cluster]:
        chroot = f"krait-bench-{uuid.uuid4().hex[:8]}"
        tmp = Path(tempfile.mkdtemp(prefix=f"{chroot}-", dir=self.workdir))
        cl = Cluster(tmp, f"{self.zk.connect}/{chroot}", n=n, **{"log.retention.check.interval.ms": "3600000",
                                                                   **self.overrides, **overrides})
        self.clusters.append(cl)
        try:
            with broker_env():
                cl.start()
            yield cl
        finally:
            stop_cluster(cl)
            self.clusters.remove(cl)
            shutil.rmtree(tmp, ignore_errors=True)


def stop_cluster(cl: Cluster) -> None:
    """SIGTERM every broker (SIGKILL when that fails) and close the ZooKeeper session."""
    for b in cl.brokers.values():
        try:
            b.stop(timeout=60)
        except Exception:
            with contextlib.suppress(Exception):
                b.kill()
    with contextlib.suppress(Exception):
        cl.close_zk()


def controller_id(cl: Cluster) -> int:
    return json.loads(cl.zk.get("/controller")[0])["brokerid"]


def pick_leader(cl: Cluster, *, controller: bool = False) -> int:
    """The controller, or the lowest-numbered live broker that is not the controller."""
    ctrl = controller_id(cl)
    if controller:
        return ctrl
    return min(i for i in cl.live_ids() if i != ctrl)


def create_topic(cl: Cluster, name: str, assignment: list[list[int]], configs: dict[str, str] | None = None) -> None:
    """CreateTopics with a manual assignment (the first replica of each partition leads),
    then wait until every partition has its full ISR."""
    via = assignment[0][0]
    with WireClient("127.0.0.1", cl.brokers[via].port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=[dict(partition_index=p, broker_ids=ids) for p, ids in enumerate(assignment)],
            configs=[dict(name=k, value=v) for k, v in (configs or {}).items()])], timeout=30000,
            validate_only=False)
    t = r.topics[0]
    if t.error_code:
        raise WorkloadFailed(f"CreateTopics {name}: error {t.error_code} {t.error_message}")
    for p, ids in enumerate(assignment):
        st = cl.wait_isr(name, p, len(ids), timeout=60)
        if st["leader"] != ids[0]:
            raise WorkloadFailed(f"{name}-{p}: leader {st['leader']}, not the preferred {ids[0]}")


def delete_topic(cl: Cluster, name: str, timeout: float = 60.0) -> None:
    """DeleteTopics, so that runs do not pile up gigabytes of dirty pages, then wait until
    every broker has removed its replicas (the next run must not share the machine with the
    deletion); best effort: a failure only costs disk space."""
    live = [b for b in cl.brokers.values() if b.proc is not None and b.proc.poll() is None]
    with contextlib.suppress(Exception), WireClient("127.0.0.1", live[0].port) as c:
        c.request(ApiKey.DELETE_TOPICS, 6, topics=[dict(name=name, topic_id=None)], timeout=30000)
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not any(p.name.startswith(f"{name}-") for b in live for p in Path(b.log_dir).iterdir()),
                 timeout, 0.1, what=f"{name} deleted")


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (every process, ours or not)."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def wait_quiet(max_wait: float, below_pct: float = 25.0) -> float:
    """Wait (up to max_wait seconds) until the whole machine is below below_pct busy over one
    second (an idle cluster and ZooKeeper use a few %): on a shared machine, runs then start
    between other people's bursts. Returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_wait:
        b0, s0 = machine_busy_seconds(), time.monotonic()
        time.sleep(1.0)
        if 100 * (machine_busy_seconds() - b0) / (time.monotonic() - s0) < below_pct:
            break
    return time.monotonic() - t0


class BusySampler:
    """The whole machine's busy share (100 = one core, every process, ours or not) in 0.5 s
    slices while a block runs; `median` is the steady state, start-up and tail aside."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last_t, last_b = time.monotonic(), machine_busy_seconds()
        while not self._stop.wait(self.interval):
            t, b = time.monotonic(), machine_busy_seconds()
            self.samples.append(100 * (b - last_b) / (t - last_t))
            last_t, last_b = t, b

    def __enter__(self) -> BusySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


def cpu_seconds(cl: Cluster) -> dict[int, float]:
    """CPU seconds (user + system) of every running broker process, by broker id."""
    import psutil

    out = {}
    for i, b in cl.brokers.items():
        if b.proc is not None and b.proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                t = psutil.Process(b.proc.pid).cpu_times()
                out[i] = t.user + t.system
    return out


def log_bytes(cl: Cluster, broker_id: int, topic: str, partition: int) -> int:
    """Bytes in the .log segments of one replica (what replication copies)."""
    d = Path(cl.brokers[broker_id].log_dir) / f"{topic}-{partition}"
    total = 0
    for p in d.glob("*.log"):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def spread(values: list[float | None]) -> str:
    """"median (min-max)" of a list, "n/a" when empty."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "n/a"
    if len(vals) == 1:
        return fmt(float(vals[0]))
    return f"{fmt(float(statistics.median(vals)))} ({fmt(float(min(vals)))}-{fmt(float(max(vals)))})"


def py_spy_exe() -> str | None:
    exe = shutil.which("py-spy") or str(Path(PY).parent / "py-spy")
    return exe if Path(exe).exists() else None


def summarise_main_thread(path: Path, top: int = 15) -> str:
    """Top frames of the broker's main thread (its event loop) from py-spy's raw output
    recorded with --threads --idle: percentages of that thread's wall time, so that the
    loop's idle time shows as uvloop's own frame (Runner.run self). ZooKeeper's threads
    (kazoo), which mostly wait, are left out."""
    self_c: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, cnt = line.rpartition(" ")
        frames = stack.split(";")
        if not cnt.isdigit() or not frames[0].startswith("thread ") or not frames[0].endswith("MainThread"):
            continue
        frames = frames[1:]
        if not frames:
            continue
        c = int(cnt)
        total += c
        self_c[frames[-1]] = self_c.get(frames[-1], 0) + c
        for f in set(frames):
            incl[f] = incl.get(f, 0) + c
    if not total:
        return "no samples of the main thread\n"
    out = [f"{total} samples of the main thread", "", "top self:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in sorted(self_c.items(), key=lambda kv: -kv[1])[:top]]
    out += ["", "top inclusive:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:top]]
    ours = {f: c for f, c in incl.items() if any(f"({pkg}/" in f for pkg in ("broker", "storage", "protocol"))
            and not any(f"({entry}" in f for entry in ("broker/cli.py", "broker/__main__.py"))}
    out += ["", "Krait's frames, inclusive:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in sorted(ours.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(out) + "\n"


@contextlib.contextmanager
def py_spy(pids: dict[str, int], out_dir: Path, result: dict[str, str]) -> Iterator[None]:
    """py-spy record (raw collapsed stacks per thread, --idle, 100 Hz) of each named process
    while the block runs; result[name] gets the main thread's summary or why not."""
    exe = py_spy_exe()
    if exe is None:
        for name in pids:
            result[name] = "py-spy not installed (pip install py-spy into .venv)"
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    procs = {}
    for name, pid in pids.items():
        path = out_dir / f"{name}.txt"
        procs[name] = (path, subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--rate", "100", "--format", "raw", "--nonblocking", "--idle",
             "--threads", "--function", "-o", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    time.sleep(1.0)
    try:
        yield
    finally:
        for name, (path, prof) in procs.items():
            prof.send_signal(signal.SIGINT)
            try:
                _, err = prof.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                prof.kill()
                _, err = prof.communicate()
            if path.exists() and path.stat().st_size:
                result[name] = summarise_main_thread(path)
                (out_dir / f"{name}.summary.txt").write_text(result[name])
            else:
                result[name] = f"py-spy wrote nothing: {err.decode(errors='replace')[-300:]}"
