"""The long chaos run (`make soak`): ZooKeeper and 3 brokers (or 5, or a single node) under
randomized faults for --duration seconds (default 30 minutes), with idempotent,
transactional and consumer-group clients, checked as Jepsen checks Kafka
(tests/chaos/). Prints the report and writes it, the fault schedule, the histories and a
PNG timeline to --workdir; --results appends the report to bench/RESULTS.md. The seed
reproduces the schedule. Exit status 1 when any check finds a violation."""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos import report, runner  # noqa: E402
from tests.chaos.cluster import BROKER_REPO  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="the schedule's seed (random if not given)")
    ap.add_argument("--duration", type=float, default=1800, help="seconds of faults (default 1800)")
    ap.add_argument("--brokers", type=int, default=3, help="3 or 5; 1 runs the single-node mode")
    ap.add_argument("--rate", type=float, default=100, help="writes/s per idempotent producer")
    ap.add_argument("--workdir", type=Path, default=None, help="default: data/soak/<seed>")
    ap.add_argument("--results", action="store_true", help="append the report to bench/RESULTS.md")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    workdir = a.workdir or ROOT / "data" / "soak" / f"{seed}-{a.brokers}b-{int(time.time())}"
    rr = runner.run(seed, a.duration, workdir, brokers=a.brokers, rate=a.rate)
    text_path, png = report.write(rr)
    print(text_path.read_text())
    print(f"report: {text_path}\ntimeline: {png}")
    if a.results:
        charts = ROOT / "bench" / "charts"
        charts.mkdir(exist_ok=True)
        shown = ""
        if png is not None:
            dest = charts / f"soak-{seed}.png"
            shutil.copy(png, dest)
            shown = f"\n![timeline](charts/{dest.name})\n"
        commit = subprocess.run(["git", "-C", str(BROKER_REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
        with open(ROOT / "bench" / "RESULTS.md", "a") as f:
            f.write(f"\n## Soak {time.strftime('%Y-%m-%d')} (Krait {commit}; `make soak`, "
                    f"`bench/soak.py --seed {seed} --duration {a.duration:.0f}`)\n\n"
                    f"{text_path.read_text()}{shown}")
    return 0 if rr.ok else 1


if __name__ == "__main__":
    sys.exit(main())
