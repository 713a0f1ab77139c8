"""Helpers for the consumer-group tests with real clients: members as processes
(consumer_member.py), a steady producer that remembers every offset it produced, and the
checks run on what the members printed (nothing missed, nothing committed seen twice,
the longest pause in a member's consumption)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from itertools import pairwise
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

MEMBER = Path(__file__).with_name("consumer_member.py")
REPO = Path(__file__).resolve().parents[2]

#: broker overrides that make KIP-848 groups fast enough for tests (Kafka's own
#: integration tests lower them the same way); heartbeat < session as the broker requires
FAST_CONSUMER_GROUPS = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}

Rec = tuple[str, int, int]  # (topic, partition, offset)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_for(cond, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


class Member:
    """consumer_member.py as a process; what it printed, as it prints it."""

    def __init__(self, bootstrap: str, group: str, member_name: str, protocol: str = "consumer", *,
                 topics: list[str] | None = None, regex: str | None = None, extra: list[str] = (),
                 argv: list[str] | None = None):
        """consumer_member.py with these arguments, or ``argv``: another program printing the
        same lines (the Java member, which leaves when its standard input closes)."""
        if argv is None:
            argv = [sys.executable, str(MEMBER), bootstrap, group, member_name, protocol]
            argv += ["--regex", regex] if regex else ["--topics", ",".join(topics)]
            argv += extra
        self._leave_on_eof = argv[0] != sys.executable
        self.name = member_name
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=REPO)
        self.lock = threading.Lock()
        self.parts: list[tuple[str, int]] = []
        self.assignments: list[tuple[float, list[tuple[str, int]]]] = []
        #: (time, topic, partition, offset, value, committed)
        self.recs: list[tuple[float, str, int, int, str, bool]] = []
        self.errors: list[str] = []
        self.ready = threading.Event()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            ev = json.loads(line)
            with self.lock:
                if ev["ev"] == "assigned":
                    self.parts = [tuple(p) for p in ev["parts"]]
                    self.assignments.append((ev["t"], self.parts))
                elif ev["ev"] == "recs":
                    self.recs += [(ev["t"], t, p, o, v, ev["committed"]) for t, p, o, v in ev["recs"]]
                elif ev["ev"] == "error":
                    self.errors.append(ev["error"])
                elif ev["ev"] == "ready":
                    self.ready.set()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)

    # --- views ----------------------------------------------------------------------------------
    def partitions(self) -> set[int]:
        with self.lock:
            return {p for _, p in self.parts}

    def seen(self) -> set[Rec]:
        with self.lock:
            return {(t, p, o) for _, t, p, o, _, _ in self.recs}

    def records(self) -> list[tuple[float, str, int, int, str, bool]]:
        with self.lock:
            return list(self.recs)

    def consumption_times(self, since: float, until: float) -> list[float]:
        with self.lock:
            return sorted({t for t, *_ in self.recs if since <= t <= until})

    def go(self) -> None:
        """Let a member started with --wait-stdin subscribe."""
        assert self.ready.wait(30), "the member never got ready"
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    # --- signals ----------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def freeze(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def close(self, timeout: float = 20) -> None:
        """SIGTERM: the member leaves the group and exits."""
        if self.alive():
            if self._leave_on_eof:
                self.proc.stdin.close()
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def __repr__(self) -> str:
        return f"Member({self.name}, parts={sorted(self.parts)}, recs={len(self.recs)}, errors={self.errors[-3:]})"


def stop_all(members: list[Member]) -> None:
    for m in members:
        try:
            m.thaw()
        except ProcessLookupError:
            pass
        m.kill()


def exact_cover(members: list[Member], partitions: int, per_member: int | None = None) -> bool:
    """Every partition owned by exactly one member (and each owning ``per_member``)."""
    owned = [p for m in members for p in m.partitions()]
    if sorted(owned) != list(range(partitions)):
        return False
    return per_member is None or all(len(m.partitions()) == per_member for m in members)


class SteadyProducer:
    """Produces to every partition of ``topic`` in turn, one record every ``interval`` s,
    from a thread; remembers the (topic, partition, offset) of every record acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.01):
        self.topic, self.partitions, self.interval = topic, partitions, interval
        # librdkafka's log lines (connection refused while a broker restarts) go to logging
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all",
                                  "message.timeout.ms": 60000, "reconnect.backoff.max.ms": 500},
                                 logger=logging.getLogger("tests.steady_producer"))
        self.acked: set[Rec] = set()
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._n = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.add((msg.topic(), msg.partition(), msg.offset()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.produce_one()
            self.producer.poll(0)
            time.sleep(self.interval)

    def produce_one(self) -> None:
        self.producer.produce(self.topic, value=f"v{self._n}".encode(), partition=self._n % self.partitions,
                              on_delivery=self._cb)
        self._n += 1

    def produce(self, n: int) -> set[Rec]:
        """n records at once (not from the thread), flushed: what was acknowledged."""
        before = set(self.acked)
        for _ in range(n):
            self.produce_one()
        assert self.producer.flush(30) == 0
        return self.acked - before

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self) -> set[Rec]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        assert self.producer.flush(60) == 0, "records left unacknowledged"
        assert not self.failed, self.failed[:5]
        return set(self.acked)


# --- checks on what the members printed -----------------------------------------------------------
def all_seen(members: list[Member]) -> set[Rec]:
    return set().union(*(m.seen() for m in members))


def committed_redeliveries(members: list[Member], uncommitted_ok: bool = False) -> list[tuple[Rec, list[str]]]:
    """Records delivered again after a member had consumed them *and committed* them: an
    at-least-once redelivery is allowed only when the commit had not succeeded.
    ``uncommitted_ok``: a redelivery whose own commit failed (a fenced member's records
    fetched before it was fenced) does not count."""
    events = sorted((t, m.name, (tp, p, o), committed) for m in members for t, tp, p, o, _, committed in m.records())
    committed_at: dict[Rec, str] = {}
    bad = []
    for _, who, rec, committed in events:
        if rec in committed_at and (committed or not uncommitted_ok):
            bad.append((rec, [committed_at[rec], who]))
        if committed:
            committed_at.setdefault(rec, who)
    return bad


def duplicates(members: list[Member], since: float = 0.0) -> list[Rec]:
    """Records delivered more than once (to anyone) after ``since``."""
    counts = Counter((tp, p, o) for m in members for t, tp, p, o, _, _ in m.records() if t >= since)
    return sorted(r for r, n in counts.items() if n > 1)


def longest_pause(member: Member, since: float, until: float) -> float:
    """The longest time without consumption in [since, until] (its ends count as events)."""
    times = [since, *member.consumption_times(since, until), until]
    return max(b - a for a, b in pairwise(times))
