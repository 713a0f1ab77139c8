"""Iceberg table topics: how fresh the table is, and what writing it costs the broker (issue 27).

    .venv/bin/python bench/table_freshness_bench.py [--rate 10000] [--seconds 60]
        [--intervals 10000,1000] [--cpu-seconds 30] [--cpu-runs 3]

A real broker (``python -m broker``, tests.krait_harness.BrokerProcess: embedded SQLite
catalog and warehouse under its log dir) and a confluent-kafka producer (acks=all,
idempotent, linger.ms 5) sending 100-byte values to a 4-partition topic at ``--rate``
records/s, paced every 10 ms.

1. **Freshness**, for each ``krait.iceberg.commit.interval.ms`` of ``--intervals``: a
   ``krait.iceberg.mode=key_value`` topic, ``--seconds`` of produce. A record's commit time is
   its delivery report (the acks=all acknowledgement); a watcher process polls the catalog
   with pyiceberg every 50 ms (``load_table``: a reader's view) and notes when each new
   snapshot appears and the offsets its summary says it holds (``krait.offset.<p>``: the
   table holds exactly the partition's records below it). A record is visible at the first
   snapshot whose offset for its partition is past it. Latency = visible - acknowledged,
   p50/p99/max over every record (the poll adds up to 50 ms). At the end a full pyiceberg
   scan checks the table holds every record once.
2. **Broker CPU**: the same load for ``--cpu-seconds`` against a topic with
   ``krait.iceberg.mode=disabled`` and one with ``key_value`` (a new broker each run, the
   default 10 s commit interval), broker CPU seconds (utime + stime of /proc/<pid>/stat, all
   threads) from the first record to the table having caught up plus 2 s (the same window
   for the disabled run: its length is the key_value run's), per million records; runs
   alternate between the modes, median of ``--cpu-runs``.

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "fresh"
PARTITIONS = 4
VALUE = bytes(range(100))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def table_offsets(log_dir: str, topic: str) -> dict[int, int]:
    """The table's offsets as a pyiceberg reader sees them now ({} without a table)."""
    from tables.catalog import open_catalog, table_identifier
    from tables.writer import snapshot_offsets

    try:
        return snapshot_offsets(open_catalog(log_dir).load_table(table_identifier(topic)))
    except Exception:
        return {}


def watch(log_dir: str, out: str, poll: float) -> None:
    """Watcher process: every ``poll`` s load the table; on a new snapshot write a line
    {"t": seen, "offsets": {...}} to ``out``. Stops when ``out + ".stop"`` exists."""
    from pyiceberg.exceptions import NoSuchTableError

    from tables.catalog import open_catalog, table_identifier
    from tables.writer import snapshot_offsets

    catalog = None
    last = None
    with open(out, "w", encoding="utf-8") as f:
        db = os.path.join(log_dir, "krait-iceberg", "catalog.db")
        while not os.path.exists(out + ".stop"):
            try:
                if catalog is None and not os.path.exists(db):  # the broker creates it: do not race it
                    time.sleep(poll)
                    continue
                catalog = catalog or open_catalog(log_dir)
                table = catalog.load_table(table_identifier(TOPIC))
                snap = table.current_snapshot()
                if snap is not None and snap.snapshot_id != last:
                    seen = time.time()
                    last = snap.snapshot_id
                    f.write(json.dumps({"t": seen, "offsets": snapshot_offsets(table)}) + "\n")
                    f.flush()
            except NoSuchTableError:
                pass
            time.sleep(poll)


def start_broker(log_dir: str, interval_ms: int):
    from tests.krait_harness import BrokerProcess

    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": str(interval_ms),
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    return b


def create_topic(bootstrap: str, mode: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"krait.iceberg.mode": mode})])[TOPIC].result(30)


def produce(bootstrap: str, rate: int, seconds: float) -> tuple[dict[int, list[tuple[int, float]]], float, float]:
    """Produce at ``rate`` records/s for ``seconds``; returns per partition the (offset, ack
    time) of every record, the start time and the time the last ack came."""
    from confluent_kafka import Producer

    acks: dict[int, list[tuple[int, float]]] = {p: [] for p in range(PARTITIONS)}

    def done(err, msg) -> None:
        if err is not None:
            raise RuntimeError(err)
        acks[msg.partition()].append((msg.offset(), time.time()))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    step = 0.01
    per_step = rate * step
    t0 = time.time()
    sent = 0
    i = 0
    while True:
        now = time.time()
        if now - t0 >= seconds:
            break
        due = int((now - t0) / step * per_step) + int(per_step)
        while sent < due:
            p.produce(TOPIC, value=VALUE, key=str(i % 1000).encode(), partition=i % PARTITIONS, on_delivery=done)
            sent += 1
            i += 1
        p.poll(0)
        time.sleep(max(0.0, step - (time.time() - now)))
    assert p.flush(60) == 0
    return acks, t0, max(t for a in acks.values() for _, t in a)


def freshness(interval_ms: int, rate: int, seconds: float, root: str) -> dict:
    log_dir = os.path.join(root, f"fresh-{interval_ms}")
    b = start_broker(log_dir, interval_ms)
    out = os.path.join(root, f"watch-{interval_ms}.jsonl")
    watcher = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--watch", log_dir, "--out", out],
                               cwd=ROOT)
    try:
        create_topic(b.bootstrap, "key_value")
        time.sleep(1)
        acks, t0, _ = produce(b.bootstrap, rate, seconds)
        ends = {p: max(o for o, _ in a) + 1 for p, a in acks.items()}
        deadline = time.time() + 120
        while time.time() < deadline:
            seen = [json.loads(line) for line in open(out, encoding="utf-8")]
            if seen and all(int(seen[-1]["offsets"].get(str(p), 0)) >= e for p, e in ends.items()):
                break
            time.sleep(0.5)
        open(out + ".stop", "w").close()
        watcher.wait(30)
        snaps = [json.loads(line) for line in open(out, encoding="utf-8")]
        from tables.catalog import open_catalog, table_identifier

        rows = open_catalog(log_dir).load_table(table_identifier(TOPIC)).scan(
            selected_fields=("partition", "offset")).to_arrow()
    finally:
        if watcher.poll() is None:
            watcher.kill()
        b.stop()
    pairs = set(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    n = sum(len(a) for a in acks.values())
    assert len(pairs) == rows.num_rows == n, (len(pairs), rows.num_rows, n)  # every record once
    lat = []
    for p, a in acks.items():
        # the snapshots in order: (seen, offset of p); a record is visible at the first past it
        marks = [(s["t"], int(s["offsets"].get(str(p), 0))) for s in snaps]
        j = 0
        for off, t_ack in sorted(a):
            while j < len(marks) and marks[j][1] <= off:
                j += 1
            lat.append(marks[j][0] - t_ack)
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    return {"interval_ms": interval_ms, "records": n, "achieved_rate": n / seconds, "snapshots": len(snaps),
            "p50": q[49], "p99": q[98], "max": lat[-1], "min": lat[0]}


def cpu_run(mode: str, rate: int, seconds: float, root: str, k: int, window: float | None) -> dict:
    log_dir = os.path.join(root, f"cpu-{mode}-{k}")
    b = start_broker(log_dir, 10_000)
    try:
        create_topic(b.bootstrap, mode)
        time.sleep(1)
        pid = b.proc.pid
        c0 = cpu_seconds(pid)
        t0 = time.time()
        acks, _, _ = produce(b.bootstrap, rate, seconds)
        n = sum(len(a) for a in acks.values())
        if mode == "key_value":
            ends = {p: max(o for o, _ in a) + 1 for p, a in acks.items()}
            while time.time() - t0 < seconds + 120:
                offs = table_offsets(log_dir, TOPIC)
                if all(offs.get(p, 0) >= e for p, e in ends.items()):
                    break
                time.sleep(0.2)
            time.sleep(2)
        else:
            time.sleep(max(0.0, (window or 0) - (time.time() - t0)))
        c1 = cpu_seconds(pid)
        t1 = time.time()
    finally:
        b.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    return {"mode": mode, "records": n, "cpu": c1 - c0, "window": t1 - t0, "cpu_per_m": (c1 - c0) / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--intervals", default="10000,1000", help="commit intervals (ms) for the freshness runs")
    ap.add_argument("--cpu-seconds", type=float, default=30)
    ap.add_argument("--cpu-runs", type=int, default=3)
    ap.add_argument("--skip", default="", help="freshness,cpu: parts to leave out")
    ap.add_argument("--watch", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.watch:
        watch(args.watch, args.out, 0.05)
        return
    root = tempfile.mkdtemp(prefix="krait-freshness-")
    loads = []
    fresh, cpu = [], []
    try:
        if "freshness" not in args.skip:
            for interval in (int(x) for x in args.intervals.split(",") if x):
                fresh.append(freshness(interval, args.rate, args.seconds, root))
                loads.append(os.getloadavg()[0])
                print(json.dumps(fresh[-1]), file=sys.stderr, flush=True)
        if "cpu" not in args.skip:
            for k in range(args.cpu_runs):
                kv = cpu_run("key_value", args.rate, args.cpu_seconds, root, k, None)
                cpu.append(kv)
                cpu.append(cpu_run("disabled", args.rate, args.cpu_seconds, root, k, kv["window"]))
                loads.append(os.getloadavg()[0])
                print(json.dumps(cpu[-2:]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"\n{os.cpu_count()} cpus, load average {min(loads):.1f}-{max(loads):.1f} during the runs; "
          f"{args.rate:,} records/s of 100 B, {PARTITIONS} partitions, acks=all\n")
    if fresh:
        print("| commit interval | records | achieved records/s | snapshots | p50 s | p99 s | max s |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in fresh:
            print(f"| {r['interval_ms'] / 1000:g} s | {r['records']:,} | {r['achieved_rate']:,.0f} | {r['snapshots']} | "
                  f"{r['p50']:.2f} | {r['p99']:.2f} | {r['max']:.2f} |")
    if cpu:
        print("\n| mode | broker CPU s per million records (median) | runs (CPU s / records / window s) |")
        print("|---|---:|---|")
        med = {}
        for mode in ("disabled", "key_value"):
            rs = [r for r in cpu if r["mode"] == mode]
            med[mode] = statistics.median(r["cpu_per_m"] for r in rs)
            runs = "; ".join(f"{r['cpu']:.1f} / {r['records']:,} / {r['window']:.0f}" for r in rs)
            print(f"| {mode} | {med[mode]:.1f} | {runs} |")
        print(f"| extra for the table | {med['key_value'] - med['disabled']:.1f} "
              f"({(med['key_value'] / med['disabled'] - 1) * 100:.0f}%) | |")


if __name__ == "__main__":
    main()
