"""Transactions' cost, measured side by side on one Krait broker subprocess:

    .venv/bin/python bench/txn_bench.py [--records 200000] [--rounds 3] [--size 100]
        [--results FILE | --no-results-file]

1. produce   an idempotent (non-transactional) producer against transactional producers
             committing every 100 and every 10,000 records: records/s, the median of
             --rounds, each round running the three one after the other on fresh topics;
2. commit    broker CPU per transaction commit: a producer committing transactions of
             one record back to back; broker CPU seconds (from /proc) / commits, and
             commits/s;
3. consume   read_committed against read_uncommitted over the same data (the topic the
             10,000-record transactions wrote, plus one aborted transaction in every ten),
             records/s, median of --rounds.

The client is confluent-kafka (librdkafka) in this process; broker and client CPU are
both reported so that the bound is visible. Results are printed and appended to
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.krait_harness import BrokerProcess  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def client_cpu() -> float:
    t = os.times()
    return t.user + t.system


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, n: int, size: int, per_txn: int | None, tid: str,
            abort_every: int = 0) -> dict:
    """Send ``n`` records; ``per_txn`` None = idempotent only, else commit every per_txn
    records (abort every ``abort_every``-th transaction, whose records are sent again)."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 20}
    if per_txn is not None:
        conf["transactional.id"] = tid
    p = Producer(conf)
    if per_txn is not None:
        p.init_transactions(30)
    else:  # connect and get the producer id before the clock starts, as init_transactions does
        p.produce(topic + "-warmup", b"w")
        p.flush(30)
    value = b"x" * size
    sent = 0
    txns = 0
    aborted = 0
    t0, c0 = time.perf_counter(), client_cpu()
    while sent < n:
        chunk = min(per_txn or n, n - sent)
        if per_txn is not None:
            p.begin_transaction()
        for _ in range(chunk):
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.01)
        txns += 1
        if per_txn is None:
            p.flush(120)
        elif abort_every and txns % abort_every == 0:
            p.flush(120)  # all of it in the log (abort would drop what is still queued)
            p.abort_transaction(120)
            aborted += chunk
            continue  # not counted: sent again
        else:
            p.commit_transaction(120)
        sent += chunk
    p.flush(120)
    elapsed = time.perf_counter() - t0
    return {"records_per_sec": sent / elapsed, "seconds": elapsed, "client_cpu": client_cpu() - c0,
            "aborted_records": aborted}


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> dict:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = None  # from the first record: connecting is not what is measured
    deadline = time.perf_counter() + 300
    while got < expected and time.perf_counter() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                if t0 is None:
                    t0 = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    if got < expected:
        raise RuntimeError(f"{isolation}: consumed {got} of {expected}")
    return {"records_per_sec": got / elapsed, "seconds": elapsed}


def commit_cost(broker: BrokerProcess, topic: str, commits: int) -> dict:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"cost-{time.monotonic_ns()}",
                  "linger.ms": 0})
    p.init_transactions(30)
    b0 = cpu_seconds(broker.proc.pid)
    t0 = time.perf_counter()
    for i in range(commits):
        p.begin_transaction()
        p.produce(topic, b"v%d" % i)
        p.commit_transaction(30)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(broker.proc.pid) - b0
    return {"commits_per_sec": commits / elapsed, "broker_cpu_ms_per_commit": 1000 * cpu / commits}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--commits", type=int, default=500)
    ap.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    ap.add_argument("--no-results-file", action="store_true")
    args = ap.parse_args()

    broker = BrokerProcess(overrides={"transaction.state.log.num.partitions": "50"}).start()
    rows: dict[str, list[dict]] = {k: [] for k in ("idempotent", "txn-100", "txn-10000", "read_uncommitted",
                                                   "read_committed")}
    try:
        for r in range(args.rounds):
            n = args.records
            for name, per in (("idempotent", None), ("txn-100", 100), ("txn-10000", 10_000)):
                topic = f"{name}-{r}"
                create(broker.bootstrap, topic)
                create(broker.bootstrap, topic + "-warmup")
                b0 = cpu_seconds(broker.proc.pid)
                res = produce(broker.bootstrap, topic, n, args.size, per, f"bench-{name}-{r}")
                res["broker_cpu"] = cpu_seconds(broker.proc.pid) - b0
                rows[name].append(res)
                print(f"round {r + 1} {name}: {res['records_per_sec']:,.0f} records/s", flush=True)
            topic = f"mixed-{r}"
            create(broker.bootstrap, topic)
            aborted = produce(broker.bootstrap, topic, n, args.size, 10_000, f"bench-mixed-{r}",
                              abort_every=10)["aborted_records"]
            for iso in ("read_uncommitted", "read_committed"):
                expected = n + aborted if iso == "read_uncommitted" else n
                b0 = cpu_seconds(broker.proc.pid)
                res = consume(broker.bootstrap, topic, expected, iso)
                res["broker_cpu"] = cpu_seconds(broker.proc.pid) - b0
                rows[iso].append(res)
                print(f"round {r + 1} {iso}: {res['records_per_sec']:,.0f} records/s", flush=True)
        create(broker.bootstrap, "commit-cost")
        cost = commit_cost(broker, "commit-cost", args.commits)
    finally:
        broker.stop()

    def med(name: str, key: str = "records_per_sec") -> float:
        return statistics.median(x[key] for x in rows[name])

    idem = med("idempotent")
    ru = med("read_uncommitted")
    lines = [
        f"## Transactions — {_dt.datetime.now():%Y-%m-%d %H:%M} (bench/txn_bench.py)",
        "",
        f"{args.records:,} records of {args.size} B per run, median of {args.rounds} rounds, one Krait broker, "
        "confluent-kafka client in the benchmark process.",
        "",
        "| workload | records/s | ratio | broker CPU s | client CPU s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, base in (("idempotent", idem), ("txn-100", idem), ("txn-10000", idem),
                       ("read_uncommitted", ru), ("read_committed", ru)):
        lines.append(f"| {name} | {med(name):,.0f} | {med(name) / base:.2f}x | {med(name, 'broker_cpu'):.2f} | "
                     f"{med(name, 'client_cpu') if 'client_cpu' in rows[name][0] else float('nan'):.2f} |")
    lines += ["", f"Commit cost ({args.commits} one-record transactions back to back): "
                  f"{cost['commits_per_sec']:.0f} commits/s, broker CPU {cost['broker_cpu_ms_per_commit']:.2f} ms "
                  "per commit.", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_results_file:
        with open(args.results, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
