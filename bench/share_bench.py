"""Share-group (KIP-932) consumption throughput against a consumer group (KIP-848) on the
same topic, with librdkafka members in separate processes against one Krait broker
subprocess:

    .venv/bin/python bench/share_bench.py [--runs 3] [--records 200000] [--partitions 6]
        [--members 1,3,6] [--kinds share,consumer] [--json-out FILE]
        [--results FILE | --no-results-file] [--quick]

Each run starts a fresh broker, fills a topic of --partitions partitions with --records
records of 100 B (`krait perf produce`, acks=1), then, for every member count and kind,
a new group of that many members (bench/share_clients.py's ``drain`` role: count records,
nothing else; share members acknowledge implicitly, each poll() accepting the previous
one's records on the next ShareFetch; consumer members auto-commit) reads the whole topic
from the start (share.auto.offset.reset=earliest, set as a group config). Measured from the
first record any member received to the last one: records/s; the broker's CPU seconds per
million records over that span (user + system of the broker process, psutil's reading of
/proc, sampled every 0.1 s, as bench/ab_brokers.py reads it) and its CPU %; the members'
CPU % together (out of 100 per core) and the whole machine's busy % (others' work included),
which tell whether the clients, the broker or the shared cores were the bound. Median over --runs, with every run's value; printed and appended to
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cluster_common import machine_busy_seconds, wait_quiet  # noqa: E402
from frozen_member_bench import SHARE_OVERRIDES, set_group_configs  # noqa: E402
from peers import git  # noqa: E402
from report import RESULTS, append_results, ck_version, machine  # noqa: E402

from broker.tools.perf_stats import BrokerCpu  # noqa: E402
from tests.krait_harness import BrokerProcess  # noqa: E402

CLIENTS = ROOT / "bench" / "share_clients.py"
KINDS = ("share", "consumer")
OVERRIDES = {**SHARE_OVERRIDES, "group.consumer.heartbeat.interval.ms": "500",
             "group.consumer.min.heartbeat.interval.ms": "500"}
mono = time.monotonic


class Drain:
    """One ``drain`` member process; its latest N line."""

    def __init__(self, workdir: Path, bootstrap: str, group: str, topic: str, kind: str, name: str):
        self.err = open(workdir / f"{name}.stderr", "w")
        self.p = subprocess.Popen([sys.executable, str(CLIENTS), "drain", bootstrap, group, topic, kind, name],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, cwd=ROOT)
        self.ready = threading.Event()
        self.n, self.first, self.last = 0, 0.0, 0.0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            f = line.split()
            if f and f[0] == "READY":
                self.ready.set()
            elif f and f[0] == "N":
                self.n, self.first, self.last = int(f[2]), float(f[3]), float(f[4])

    def stop(self) -> None:
        try:
            self.p.stdin.write("stop\n")
            self.p.stdin.flush()
            self.p.wait(20)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            self.p.kill()
            self.p.wait()
        self.err.close()


class CpuSampler:
    """(t, CPU seconds) of some processes (no pids: the whole machine's busy seconds) every
    0.1 s, on a thread."""

    def __init__(self, pids: list[int] | None):
        self.cpus = [BrokerCpu(p) for p in pids] if pids is not None else None
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _read(self) -> float:
        if self.cpus is None:
            return machine_busy_seconds()
        return sum(c.seconds() or 0.0 for c in self.cpus)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((mono(), self._read()))
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(2)
        self.samples.append((mono(), self._read()))

    def between(self, t0: float, t1: float) -> float:
        """CPU seconds from the last sample at or before t0 to the first at or after t1."""
        a = max((s for s in self.samples if s[0] <= t0), default=self.samples[0])
        b = min((s for s in self.samples if s[0] >= t1), default=self.samples[-1])
        return b[1] - a[1]


def drain_part(broker: BrokerProcess, workdir: Path, topic: str, records: int, kind: str, n: int, tag: str,
               log=print) -> dict:
    group = f"{kind}-{n}-{tag}"
    wait_quiet(10)  # start between other work's bursts on a shared machine
    if kind == "share":
        set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    members = [Drain(workdir, broker.bootstrap, group, topic, kind, f"{group}-m{i + 1}") for i in range(n)]
    broker_cpu = CpuSampler([broker.proc.pid])
    try:
        for m in members:
            if not m.ready.wait(60):
                raise RuntimeError(f"{group}: a member did not start")
        t_ready = mono()
        client_cpu = CpuSampler([m.p.pid for m in members])
        machine_cpu = CpuSampler(None)
        deadline = mono() + max(60.0, records / 5000)
        while sum(m.n for m in members) < records:
            if mono() > deadline:
                raise RuntimeError(f"{group}: {sum(m.n for m in members):,} of {records:,} records consumed")
            time.sleep(0.05)
        time.sleep(0.3)  # the last N lines
    finally:
        broker_cpu.stop()
        for m in members:
            m.stop()
    client_cpu.stop()
    machine_cpu.stop()
    t0 = min(m.first for m in members if m.first)
    t1 = max(m.last for m in members)
    span = t1 - t0
    got = sum(m.n for m in members)
    # CPU from every member started (joining costs the broker little) to the last record: the
    # samples' 0.1 s steps would weigh on a span of a second or two starting at the first record
    bcpu = broker_cpu.between(t_ready, t1)
    res = {"kind": kind, "members": n, "records": got, "seconds": span, "records_per_sec": records / span,
           "cpu_s_per_mrec": bcpu / (records / 1e6), "broker_cpu_pct": 100 * bcpu / (t1 - t_ready),
           "client_cpu_pct": 100 * client_cpu.between(t_ready, t1) / (t1 - t_ready),
           "machine_cpu_pct": 100 * machine_cpu.between(t_ready, t1) / (t1 - t_ready),
           "first_record_s": t0 - t_ready,
           "members_with_records": sum(1 for m in members if m.n)}
    log(f"{kind} x{n}: first record {res['first_record_s']:.2f} s after the members started, then "
        f"{res['records_per_sec']:,.0f} records/s, broker {res['cpu_s_per_mrec']:.2f} CPU-s/M "
        f"({res['broker_cpu_pct']:.0f} %), members {res['client_cpu_pct']:.0f} %, machine "
        f"{res['machine_cpu_pct']:.0f} %, {got:,} records "
        f"({res['members_with_records']} members got some)")
    return res


def _med(rs: list[dict], key: str, fmt: str) -> str:
    if not rs:
        return "n/a"
    return f"{statistics.median(r[key] for r in rs):{fmt}} ({', '.join(f'{r[key]:{fmt}}' for r in rs)})"


def render(runs: dict[tuple[str, int], list[dict]], args, elapsed: float, loads: tuple[str, str]) -> str:
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    cores = os.cpu_count() or 1
    out = [f"## {_dt.datetime.now():%Y-%m-%d %H:%M} — share groups vs a consumer group: consumption throughput "
           f"(`bench/share_bench.py`), commit {commit}{dirty}", "",
           f"- machine: {machine()}; the broker and every member share the cores; `uptime` at start: {loads[0]}; "
           f"at end: {loads[1]} (other work on the machine skews results)",
           f"- {args.runs} run(s), a fresh broker each, took {elapsed / 60:.1f} min; median (every run's value); "
           f"{args.records:,} records of 100 B on {args.partitions} partitions, read whole by a new group each time; "
           f"client confluent-kafka {ck_version()} (librdkafka's ShareConsumer, share.acknowledgement.mode=implicit; "
           f"Consumer, group.protocol=consumer), one process per member counting records",
           "- broker overrides: " + ", ".join(f"{k}={v}" for k, v in OVERRIDES.items()),
           "- records/s and CPU over the span from the first record any member received to the last; broker "
           "CPU-s/M = the broker process's user + system CPU seconds per million records; CPU % out of "
           f"{100 * cores} ({cores} cores)", "",
           "| group | members | records/s | broker CPU-s/M records | broker CPU % | members' CPU % | machine busy % |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for (kind, n), rs in runs.items():
        out.append(f"| {kind} | {n} | {_med(rs, 'records_per_sec', ',.0f')} | {_med(rs, 'cpu_s_per_mrec', '.2f')} | "
                   f"{_med(rs, 'broker_cpu_pct', '.0f')} | {_med(rs, 'client_cpu_pct', '.0f')} | "
                   f"{_med(rs, 'machine_cpu_pct', '.0f')} |")
    bound = []
    for (kind, n), rs in runs.items():
        if rs:
            b = statistics.median(r["broker_cpu_pct"] for r in rs)
            c = statistics.median(r["client_cpu_pct"] for r in rs)
            m = statistics.median(r["machine_cpu_pct"] for r in rs)
            who = ("broker" if b >= 85 else "members" if c >= 85 * min(n, cores)
                   else "the machine's cores (shared with other work)" if m >= 85 * cores
                   else "neither saturated (round trips)")
            bound.append(f"{kind} x{n}: {who}")
    out += ["", "Bound (broker ≥ 85 % of a core → broker; members ≥ 85 % of their cores → members; the "
            "machine ≥ 85 % busy → its cores; else neither): " + "; ".join(bound) + ". Each measurement waits "
            "(up to 10 s) for the machine to be below 25 % busy before its members start.", ""]
    return "\n".join(out).rstrip() + "\n"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--members", default="1,3,6")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--no-results-file", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one short run (smoke test): 100,000 records, 1 and 3 members")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.records, args.members = 1, 100_000, "1,3"
    counts = [int(x) for x in args.members.split(",") if x]
    kinds = [k for k in args.kinds.split(",") if k]

    def log(msg: str) -> None:
        print(f"[{_dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)

    loads0 = _uptime()
    log(f"uptime: {loads0}")
    t_start = mono()
    runs: dict[tuple[str, int], list[dict]] = {(k, n): [] for n in counts for k in kinds}
    with tempfile.TemporaryDirectory(prefix="krait-sharebench-") as tmp:
        for r in range(args.runs):
            workdir = Path(tmp) / f"run{r + 1}"
            workdir.mkdir()
            broker = BrokerProcess(log_dir=str(workdir / "logs"), overrides=OVERRIDES).start()
            try:
                topic = "share-bench"
                out = subprocess.run([sys.executable, "-m", "broker.tools.perf", "produce", "--bootstrap-server",
                                      broker.bootstrap, "--topic", topic, "--num-records", str(args.records),
                                      "--record-size", "100", "--partitions", str(args.partitions), "--acks", "1",
                                      "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
                if out.returncode != 0:
                    raise RuntimeError(f"perf produce failed: {out.stderr[-2000:]}")
                records = int(json.loads(out.stdout.strip().splitlines()[-1])["records"])
                order = list(runs) if r % 2 == 0 else list(runs)[::-1]
                for kind, n in order:
                    runs[(kind, n)].append(drain_part(broker, workdir, topic, records, kind, n, str(r + 1), log))
            except Exception:
                log(f"broker log tail:\n{broker.log_text()[-3000:]}")
                raise
            finally:
                broker.stop()
            log(f"run {r + 1} done at {mono() - t_start:.0f} s; load average {os.getloadavg()[0]:.2f}")
    elapsed = mono() - t_start
    loads1 = _uptime()
    log(f"uptime: {loads1}")
    text = render(runs, args, elapsed, (loads0, loads1))
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({f"{k}x{n}": rs for (k, n), rs in runs.items()}, indent=1))
    if not args.no_results_file:
        append_results(args.results, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
