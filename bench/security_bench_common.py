"""Shared by the security benchmark's parts (bench/security_bench.py): CPU accounting of
the broker, this process and the machine, the Meter of one run, which side was the bound,
medians and number formatting, and the benchmark's constants."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import psutil  # noqa: E402

from tests.security.secure_broker import ALICE  # noqa: E402

#: a process at or above this share of one core is the bound
BOUND_PCT = 85.0
SCRAM_MECH = "SCRAM-SHA-512"
SCRAM_USER = ("bench", "bench-secret")
#: the measured principal of part 3 (a PLAIN user of every SecureBroker)
PRINCIPAL = f"User:{ALICE[0]}"
BENCH_PREFIX = "secbench-"


# ---------------------------------------------------------------- CPU accounting


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its children (psutil)."""
    p = psutil.Process(pid)
    total = 0.0
    for q in (p, *p.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            t = q.cpu_times()
            total += t.user + t.system
    return total


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def machine_busy() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


@dataclass
class Meter:
    """Wall, broker, client and machine CPU between start() and stop()."""

    broker_pid: int
    client_cpu: Callable[[], float] = self_cpu

    def start(self) -> Meter:
        self.t0, self.b0, self.c0, self.m0 = time.perf_counter(), proc_cpu(self.broker_pid), self.client_cpu(), \
            machine_busy()
        return self

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        broker = proc_cpu(self.broker_pid) - self.b0
        client = self.client_cpu() - self.c0
        machine = machine_busy() - self.m0
        return {"wall": wall, "broker_cpu": broker, "client_cpu": client, "broker_pct": 100 * broker / wall,
                "client_pct": 100 * client / wall, "machine_pct": 100 * machine / wall,
                "other_pct": max(0.0, 100 * (machine - broker - client) / wall)}


def bound(run: dict[str, float]) -> str:
    """Which side limited a run: the busier of client and broker if it used >= BOUND_PCT of a
    core, else the machine if it was full (other people's load), else none."""
    side, top = max((("broker", run["broker_pct"]), ("client", run["client_pct"])), key=lambda kv: kv[1])
    if top >= BOUND_PCT:
        return side
    cores = os.cpu_count() or 1
    return "machine" if run["machine_pct"] >= BOUND_PCT * cores else "none"


def bounds(runs: list[dict]) -> str:
    c = Counter(r["bound"] for r in runs)
    return ", ".join(f"{k} ({v})" for k, v in c.most_common())


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def fmt(v: float, digits: int = 0) -> str:
    return f"{v:,.{digits}f}"


# ---------------------------------------------------------------- librdkafka helpers


def create_topic(conf: dict[str, Any], name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def produce(conf: dict[str, Any], topic: str, n: int, size: int, meter: Meter,
            extra: dict[str, Any] | None = None) -> dict[str, float]:
    """Send n records of `size` bytes as fast as librdkafka takes them; connected (one
    record sent to the topic first) before the clock starts."""
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, **(extra or {})})
    p.produce(topic, b"w")
    if p.flush(30):
        raise RuntimeError(f"warm-up record to {topic} not delivered")
    errors: list[Any] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    value = b"x" * size
    meter.start()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(300):
        raise RuntimeError(f"{topic}: records still queued after 300 s")
    run = meter.stop()
    if errors:
        raise RuntimeError(f"{topic}: {len(errors)} records failed, first: {errors[0]}")
    return run
