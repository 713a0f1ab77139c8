"""Cluster-mode benchmarks: replication's cost, failover, catch-up and scale-out, on real
broker subprocesses and a real ZooKeeper on this machine.

    .venv/bin/python bench/cluster_bench.py [--parts produce,failover,catchup,scaleout]
        [--scale 1.0] [--rounds 5] [--failover-runs 5] [--quick] [--profile DIR | --no-profile]
        [--override KEY=VALUE ...] [--broker-env KEY=VALUE ...] [--failover-producer-prop KEY=VALUE ...]
        [--wait-quiet SECONDS]
        [--results FILE | --no-results-file] [--json-out FILE]

1. produce   rf=3 acks=all against rf=1 acks=1 on one 3-broker cluster, 100 B and 1 KiB
             records, side by side in each round (median of --rounds), with the ack
             latency at full speed and at a fixed rate, CPU per process and which side was
             the bound; then py-spy on the leader and a follower during one more rf=3 run;
2. failover  SIGKILL of a partition's leader under a producer sending continuously: kill →
             new leader in ZooKeeper and kill → first ack, median of --failover-runs with
             zookeeper.session.timeout.ms 6000, plus one run whose leader was the controller
             and one with Kafka's defaults (18000);
3. catchup   a follower stopped while the leader receives --scale x 1 GiB, then restarted:
             MB/s until it is back in the ISR;
4. scaleout  rf=1 produce with the partitions on one broker against spread over two.

Each part gets a fresh ZooKeeper (tests/cluster/zk_harness.py) and its clusters
(tests/cluster/cluster_harness.py) temporary dirs; every process is stopped at the end,
also on failure or Ctrl-C. The client is `krait perf` (confluent-kafka), as in
bench/compare.py. Results are printed and appended to bench/RESULTS.md. The parts live in
cluster_produce.py and cluster_failover.py, shared helpers in cluster_common.py.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

# cluster_common first: through peers it puts the checkout on sys.path
from cluster_common import BROKER_ENV, MIB_NOTE, Sizes, ZooKeeper, py_spy_exe, zookeeper_missing
from cluster_failover import catchup_part, catchup_table, failover_part, failover_table
from cluster_produce import produce_part, produce_table, profile_text, scaleout_part, scaleout_table
from peers import git
from report import RESULTS, append_results, ck_version, machine

PARTS = ["produce", "failover", "catchup", "scaleout"]


def _run_parts(args, sizes: Sizes, workdir: Path, log) -> tuple[dict, dict[str, str]]:
    results: dict = {}
    errors: dict[str, str] = {}
    for part in args.parts:
        t0 = time.perf_counter()
        log(f"{part}: fresh ZooKeeper")
        try:
            with ZooKeeper(workdir, args.override) as zkp:
                if part == "produce":
                    prof = None if args.no_profile else Path(args.profile or workdir / "profile")
                    results[part] = produce_part(zkp, sizes, log, prof)
                elif part == "failover":
                    results[part] = failover_part(zkp, sizes, log)
                elif part == "catchup":
                    results[part] = catchup_part(zkp, sizes, log)
                else:
                    results[part] = scaleout_part(zkp, sizes, log)
        except Exception as exc:  # one part's failure must not lose the others' figures
            errors[part] = f"{type(exc).__name__}: {exc}"[:600]
            log(f"{part} FAILED: {errors[part]}\n{traceback.format_exc(limit=6)}")
        log(f"{part}: {time.perf_counter() - t0:.0f} s")
    return results, errors


def render(results: dict, errors: dict[str, str], sizes: Sizes, args, elapsed: float, load0: float) -> str:
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    out = [f"## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} — cluster benchmarks (`bench/cluster_bench.py`), "
           f"commit {commit}{dirty}", "",
           f"- machine: {machine()}; {os.cpu_count()} cores shared by every broker, ZooKeeper and the client; "
           f"load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end (other work on the machine skews "
           f"results)",
           f"- scale {args.scale}{' (quick)' if args.quick else ''}; run took {elapsed / 60:.1f} min; a fresh "
           f"ZooKeeper 3.8 per part, brokers as subprocesses (`python -m broker`, log level INFO) with "
           f"zookeeper.session.timeout.ms 6000, replica.lag.time.max.ms 6000, replica.fetch.backoff.ms 200 "
           f"(the test harness's values) unless stated"
           + (f"; overrides: {', '.join(f'{k}={v}' for k, v in args.override.items())}" if args.override else "")
           + (f"; broker environment: {' '.join(f'{k}={v}' for k, v in BROKER_ENV.items())}" if BROKER_ENV else "")
           + (f"; each measured run waited up to {args.wait_quiet:g} s for the machine to be < 25% busy"
              if args.wait_quiet else ""),
           f"- client: `krait perf produce` (confluent-kafka {ck_version()}), one client process at a time, "
           f"linger.ms 5, no compression, no idempotence; {MIB_NOTE}; CPU % = CPU time over the client's timed "
           f"window, 100 = one core; machine busy % = the whole machine's non-idle CPU (every process, ours or "
           f"not), median of 0.5 s slices during the run, out of {100 * (os.cpu_count() or 1)}; other load % = machine busy minus the client's and the brokers' "
           f"CPU (ZooKeeper, this script and whatever else runs on the machine); bound: a process "
           f"at >= 85% of a core, else the machine when it is >= 85% busy", ""]
    if "produce" in results:
        r = results["produce"]
        out += [f"### Produce: rf=3 acks=all vs rf=1 acks=1, 3 brokers, {sizes.rounds} round(s), median", "",
                f"1 partition, both topics led by broker {r['leader']} (followers {r['followers']}); 100 B x "
                f"{sizes.n100:,} and 1 KiB x {sizes.n1k:,} records per run at full speed; then "
                f"{sizes.lat_rate:,} records/s for {sizes.lat_seconds:g} s, every ack timed.", "",
                produce_table(r), ""]
        if r.get("profile"):
            pv = r.get("profile_run", {})
            out += [f"py-spy (`record --idle`, 100 Hz) during one more rf=3 acks=all 100 B run "
                    f"({pv.get('records_per_sec', 0):,.0f} records/s while profiled):", "", profile_text(r), ""]
    if "failover" in results:
        props = f", producer props {' '.join(sizes.failover_producer_props)}" if sizes.failover_producer_props else ""
        out += [f"### Failover: SIGKILL of the leader under an acks=all producer ({sizes.failover_rate:,} records/s, "
                f"one rf=3 partition{props})", "", failover_table(results["failover"]), ""]
    if "catchup" in results:
        c = results["catchup"]
        out += [f"### Catch-up: a follower restarted {c['behind_bytes'] / (1 << 20):,.0f} MiB behind "
                f"({c['records']:,} records of 1 KiB, rf=3)", "", catchup_table(c), ""]
    if "scaleout" in results:
        out += [f"### Scale-out: rf=1 acks=1, {sizes.scaleout_partitions} partitions on one broker vs spread "
                f"over two, {sizes.rounds} round(s), median", "", scaleout_table(results["scaleout"]), ""]
    for part, err in errors.items():
        out += [f"- {part}: FAILED: {err}"]
    return "\n".join(out).rstrip() + "\n"


def _jsonable(x):
    if isinstance(x, dict):
        return {(" ".join(map(str, k)) if isinstance(k, tuple) else str(k)): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def _interrupt(*_) -> None:
    """SIGTERM unwinds like Ctrl-C, so that every broker and ZooKeeper is stopped."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(PARTS), help="comma list of " + ", ".join(PARTS))
    p.add_argument("--scale", type=float, default=1.0, help="multiply record counts and the catch-up volume")
    p.add_argument("--rounds", type=int, default=None, help="rounds of the produce and scale-out parts (5)")
    p.add_argument("--failover-runs", type=int, default=None, help="failover runs at session timeout 6000 (5)")
    p.add_argument("--failover-producer-prop", action="append", default=[], metavar="KEY=VALUE",
                   help="more librdkafka properties for the failover producer (repeatable)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="broker config for every cluster, e.g. replica.fetch.max.bytes=4194304 (repeatable)")
    p.add_argument("--broker-env", action="append", default=[], metavar="KEY=VALUE",
                   help="environment for the broker processes only, e.g. MALLOC_MMAP_THRESHOLD_=33554432 (repeatable)")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each measured run, wait up to this long for the machine to be < 25%% busy "
                        "(a shared machine)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    p.add_argument("--profile", default=None, metavar="DIR", help="keep py-spy's raw stacks and summaries here")
    p.add_argument("--no-profile", action="store_true", help="no py-spy run")
    p.add_argument("--results", default=str(RESULTS), help="markdown file the results are appended to")
    p.add_argument("--no-results-file", action="store_true", help="print only")
    p.add_argument("--json-out", default=None, help="also write the raw values as JSON here")
    args = p.parse_args(argv)
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    try:
        args.override = dict(kv.split("=", 1) for kv in args.override)
    except ValueError:
        p.error("--override takes KEY=VALUE")
    bad = [x for x in args.parts if x not in PARTS]
    if bad:
        p.error(f"unknown parts {bad}; choose from {PARTS}")
    why = zookeeper_missing()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    sizes = Sizes.make(args.scale, args.quick)
    if args.rounds:
        sizes.rounds = args.rounds
    sizes.failover_producer_props = tuple(args.failover_producer_prop)
    sizes.quiet_wait = args.wait_quiet
    try:
        BROKER_ENV.update(dict(kv.split("=", 1) for kv in args.broker_env))
    except ValueError:
        p.error("--broker-env takes KEY=VALUE")
    if args.failover_runs is not None:
        sizes.failover_runs = args.failover_runs
    if "produce" in args.parts and not args.no_profile and py_spy_exe() is None:
        print("py-spy not found: the produce part runs without a profile (pip install py-spy into .venv)",
              flush=True)
        args.no_profile = True

    def log(msg: str) -> None:
        print(msg, flush=True)

    signal.signal(signal.SIGTERM, _interrupt)
    log(f"parts: {', '.join(args.parts)}; {sizes}")
    workdir = Path(tempfile.mkdtemp(prefix="krait-cluster-bench-"))
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        results, errors = _run_parts(args, sizes, workdir, log)
    except KeyboardInterrupt:
        log("interrupted: everything stopped, nothing reported")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = render(results, errors, sizes, args, time.perf_counter() - t0, load0)
    print("\n" + text, flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(_jsonable(results), indent=1, default=str))
    if not args.no_results_file:
        log(f"appended to {append_results(args.results, text)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
