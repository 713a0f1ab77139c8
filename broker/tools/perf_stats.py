"""What every ``krait perf`` mode measures with: the result error, latency percentiles,
process CPU time (the client's, and the broker's when it runs on this machine), the record
payload, and access to confluent-kafka."""

from __future__ import annotations

import contextlib
import math
import random
import resource
import socket
from types import ModuleType

__all__ = ["MB", "BrokerCpu", "PerfError", "broker_pid_for", "confluent", "cpu_seconds", "make_payload", "parse_props",
           "percentiles"]

#: MB here is 2**20 bytes of record values, as in Kafka's tools
MB = 1024 * 1024


class PerfError(Exception):
    """A run that cannot produce a result (shown as the result's ``error``)."""


def confluent() -> ModuleType:
    """confluent_kafka, imported when a mode needs it: it is an optional dependency."""
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PerfError("krait perf needs confluent-kafka: pip install 'krait[bench]'") from exc
    return confluent_kafka


def percentiles(samples: list[float]) -> dict[str, float | None]:
    """avg/p50/p99/p99.9/max of samples (nearest rank), None when there are none."""
    if not samples:
        return {"count": 0, "avg": None, "p50": None, "p99": None, "p999": None, "max": None}
    s = sorted(samples)
    n = len(s)

    def rank(q: float) -> float:
        return s[min(n - 1, max(0, math.ceil(q * n) - 1))]

    return {"count": n, "avg": sum(s) / n, "p50": rank(0.50), "p99": rank(0.99),
            "p999": rank(0.999), "max": s[-1]}


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, every thread (librdkafka's included)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def make_payload(size: int, seed: int = 42) -> bytes:
    """Random upper-case letters, like kafka-producer-perf-test (compressible, not trivially)."""
    rnd = random.Random(seed)
    return bytes(rnd.randrange(65, 91) for _ in range(size))


def parse_props(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise PerfError(f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def broker_pid_for(bootstrap: str) -> int | None:
    """The pid of a process of this machine listening on the first bootstrap address (psutil;
    None when it is elsewhere, not visible to this user, or psutil is missing)."""
    try:
        import psutil
    except ImportError:
        return None
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    host = host.split("://")[-1].strip("[]")
    try:
        ips = {ai[4][0] for ai in socket.getaddrinfo(host or "127.0.0.1", int(port), proto=socket.IPPROTO_TCP)}
        conns = psutil.net_connections(kind="tcp")
    except (OSError, ValueError, psutil.Error):
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == int(port) and c.pid and \
                (c.laddr.ip in ips or c.laddr.ip in ("0.0.0.0", "::")):
            return c.pid
    return None


class BrokerCpu:
    """User + system CPU seconds of the broker process and its children, when it is known."""

    def __init__(self, pid: int | None):
        self.pid = pid
        self.proc = None
        if pid:
            with contextlib.suppress(ImportError, Exception):
                import psutil

                self.proc = psutil.Process(pid)

    def seconds(self) -> float | None:
        if self.proc is None:
            return None
        try:
            t = self.proc.cpu_times()
            total = t.user + t.system
            for ch in self.proc.children(recursive=True):
                with contextlib.suppress(Exception):
                    ct = ch.cpu_times()
                    total += ct.user + ct.system
            return total
        except Exception:
            return None
