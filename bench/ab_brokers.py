"""Before/after for the broker alone: two Krait trees (e.g. a `git worktree` of an older
commit and this checkout) each run as a broker subprocess, driven alternately by the same
client (`krait perf` of this checkout), so that only the broker differs between the two
columns. Prints the median of the rounds and the after/before ratio per workload: records/s
(which the client may bound) and the broker's CPU-seconds per million records (which it
does not).

    git worktree add /tmp/krait-before <commit>
    .venv/bin/python bench/ab_brokers.py --before /tmp/krait-before --after . --rounds 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from broker.tools.perf_stats import BrokerCpu  # noqa: E402
from tests.krait_harness import spawn  # noqa: E402

WORKLOADS = {
    # name: (perf mode, topic, args); the consumers read what produce-100B wrote
    "produce-100B": ("produce", "ab-100", ["--num-records", "300000", "--record-size", "100", "--partitions", "1",
                                           "--acks", "1"]),
    "consume-100B": ("consume", "ab-100", ["--num-records", "300000", "--record-size", "100"]),
    "consume-100B-wire": ("consume", "ab-100", ["--num-records", "300000", "--record-size", "100",
                                                "--client", "wire"]),
    "produce-8p-lz4-all": ("produce", "ab-8p", ["--num-records", "300000", "--record-size", "100",
                                                "--partitions", "8", "--acks", "all", "--compression", "lz4"]),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, tree: Path):
        self.tree = tree
        self.dir = tempfile.mkdtemp(prefix="krait-ab-")
        self.port = _free_port()
        self.proc = spawn(
            [sys.executable, "-m", "broker", "--override", f"log.dirs={self.dir}", "--override",
             f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--override", "krait.http.listener=", "--override", "krait.schema.registry.listener=",
             "--log-level", "WARNING"],
            cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"broker from {tree} did not start")

    def cpu_s(self) -> float:
        """user + system CPU seconds of the broker process so far"""
        return BrokerCpu(self.proc.pid).seconds() or 0.0

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def _perf(mode: str, args: list[str], bootstrap: str, topic: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "broker.tools.perf", mode, "--bootstrap-server", bootstrap,
                          "--topic", topic, "--json", *args], cwd=REPO, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"perf {mode} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, type=Path)
    p.add_argument("--after", default=REPO, type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--scale", type=float, default=1.0, help="multiply the record counts (300,000 each)")
    args = p.parse_args()
    for _mode, _topic, wargs in WORKLOADS.values():
        i = wargs.index("--num-records") + 1
        wargs[i] = str(int(int(wargs[i]) * args.scale))
    results: dict[str, dict[str, list[float]]] = {w: {"before": [], "after": []} for w in WORKLOADS}
    cpu: dict[str, dict[str, list[float]]] = {w: {"before": [], "after": []} for w in WORKLOADS}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for side in order:
            broker = Broker(args.before if side == "before" else args.after)
            try:
                for w, (mode, topic, wargs) in WORKLOADS.items():
                    cpu0 = broker.cpu_s()
                    res = _perf(mode, wargs, f"127.0.0.1:{broker.port}", topic)
                    results[w][side].append(float(res["records_per_sec"]))
                    cpu[w][side].append((broker.cpu_s() - cpu0) / (int(res["records"]) / 1e6))
            finally:
                broker.stop()
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'workload':24} {'before rec/s':>14} {'after rec/s':>14} {'after/before':>13}"
          f" {'before CPU-s/M':>15} {'after CPU-s/M':>14} {'after/before':>13}")
    for w, sides in results.items():
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        cb, ca = statistics.median(cpu[w]["before"]), statistics.median(cpu[w]["after"])
        print(f"{w:24} {b:14,.0f} {a:14,.0f} {a / b:13.2f} {cb:15.2f} {ca:14.2f} {ca / cb:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
