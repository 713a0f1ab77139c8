"""Rebalances under the classic and the consumer (KIP-848) group protocols, with real
clients in separate processes against one Krait broker subprocess:

    .venv/bin/python bench/consumer_protocol_bench.py [--runs 3] [--busy 20] [--join-after 2]
        [--rate 2000] [--members11 11] [--protocols classic,consumer] [--parts busy,eleven]
        [--override KEY=VALUE ...] [--png docs/img/consumer-protocol-timeline.png | --no-png]
        [--json-out FILE] [--results FILE | --no-results-file] [--quick]

1. busy     a 6-partition topic, a producer sending --rate records/s round-robin (its own
            process), three members consuming. Then member 1 becomes busy: its poll loop
            sleeps --busy seconds (a slow record handler; max.poll.interval.ms 45000 is
            larger, so it is not evicted). --join-after seconds into the busy period a
            fourth member subscribes. Measured: join → the new member's first record;
            each member's longest pause in consumption from the busy period's start
            until --after/2 seconds after its end (the new member: from its first
            record); records produced against distinct records consumed (missed ones)
            and duplicates. Under classic
            the join starts a stop-the-world rebalance that waits for the busy member's
            JoinGroup, which librdkafka sends only after the application polls again
            (revocation runs in poll), so every member stops; under consumer the target
            assignment changes and members only give up partitions, one heartbeat later
            (a partition moved from the busy member to the new one waits for the busy
            member's next poll too: the table says whose partitions the new member got).
2. eleven   --members11 members (started and idle beforehand) subscribe together to a topic
            with as many partitions, under the same producer: first subscribe() → every
            member holds a partition (disjoint, covering the topic) and has consumed a record
            since its last assignment change, stable for 2 s.

Each run does both parts under both protocols (the order of the protocols alternates from
run to run) on a fresh broker; figures are the median over --runs, with every run's value.
Members print a line per consume() batch and partition with a CLOCK_MONOTONIC timestamp
(bench/consumer_protocol_clients.py). Broker overrides (printed with the results): the
group.consumer.* heartbeat interval and session timeout lowered to 500 ms / 6 s (Kafka's
defaults 5 s / 45 s; their min.* bounds with them) and group.initial.rebalance.delay.ms 0;
classic members use session.timeout.ms 6000, heartbeat.interval.ms 500 and the range
assignor (librdkafka's default list starts with it), consumer members the broker's default
(uniform) assignor. The timeline of the last run is drawn to --png (records/s per member,
classic above, consumer below). Results are printed and appended to bench/RESULTS.md.
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

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from peers import git  # noqa: E402
from report import RESULTS, append_results, ck_version, machine  # noqa: E402

from tests.krait_harness import BrokerProcess  # noqa: E402

CLIENTS = ROOT / "bench" / "consumer_protocol_clients.py"
PNG = ROOT / "docs" / "img" / "consumer-protocol-timeline.png"
PROTOCOLS = ("classic", "consumer")

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}
CLIENT_CONF = {
    "classic": {"partition.assignment.strategy": "range", "session.timeout.ms": "6000",
                "heartbeat.interval.ms": "500", "max.poll.interval.ms": "45000"},
    "consumer": {"max.poll.interval.ms": "45000"},
}
mono = time.monotonic


def _parts(s: str) -> set[int]:
    return set() if s == "-" else {int(p) for p in s.split(",")}


class Proc:
    """A client process of consumer_protocol_clients.py; its stdout parsed by a thread."""

    def __init__(self, workdir: Path, name: str, *args: str, script: Path = CLIENTS):
        """``script``: consumer_protocol_clients.py, or bench/share_clients.py (a share-group
        member: its R lines carry the delivery count, and it prints H and K lines)."""
        self.name = name
        self.role = args[0]  # member | producer
        self.err = open(workdir / f"{name}.stderr", "w")  # librdkafka's log
        self.p = subprocess.Popen([sys.executable, str(script), *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, text=True, cwd=ROOT)
        self.lock = threading.Lock()
        self.ready = self.sub = self.closed = None
        self.assigned: set[int] = set()
        self.changes: list[tuple[float, str, list[int]]] = []  # (t, A/V/L, partitions)
        self.batches: list[tuple[float, int, int, int, int]] = []  # (t, partition, n, first, last)
        self.busy: tuple[float, float] | None = None
        self.ticks: list[tuple[float, int]] = []  # producer: (t, acknowledged)
        self.final: dict | None = None  # producer: P line
        # share members: (t, partition, n, first, last, delivery count) per R line, the hold's
        # start, and per commit_sync (t, ok partitions, failed partitions, R lines before it)
        self.deliveries: list[tuple[float, int, int, int, int, int]] = []
        self.held: float | None = None
        self.commits: list[tuple[float, set[int], set[int], int]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            f = line.split()
            if not f:
                continue
            with self.lock:
                k, t = f[0], float(f[1])
                if k == "R":
                    self.batches.append((t, int(f[2]), int(f[3]), int(f[4]), int(f[5])))
                    if len(f) > 6:
                        self.deliveries.append((t, int(f[2]), int(f[3]), int(f[4]), int(f[5]), int(f[6])))
                elif k == "H":
                    self.held = t
                elif k == "K":
                    self.commits.append((t, _parts(f[2]), _parts(f[3]), len(self.deliveries)))
                elif k in "AVL":
                    ps = _parts(f[2])
                    if k == "A":
                        self.assigned |= ps
                    else:
                        self.assigned -= ps
                    self.changes.append((t, k, sorted(ps)))
                elif k == "READY":
                    self.ready = t
                elif k == "S":
                    self.sub = t
                elif k == "B":
                    self.busy = (t, float(f[2]))
                elif k == "C":
                    self.closed = t
                elif k == "T":
                    self.ticks.append((t, int(f[2])))
                elif k == "P":
                    per = {int(a): int(b) for a, b in (x.split(":") for x in f[4].split(","))} if len(f) > 4 else {}
                    self.final = {"t": t, "acked": int(f[2]), "errors": int(f[3]), "per_partition": per}

    def send(self, cmd: str) -> None:
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def stop(self, timeout: float = 20) -> None:
        """Members: stop (close = LeaveGroup); producer: SIGTERM (flush). Killed if slow."""
        try:
            if self.p.poll() is None:
                if self.role == "member":
                    self.send("stop")
                else:
                    self.p.terminate()
            self.p.wait(timeout)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            self.p.kill()
            self.p.wait()
        self.err.close()


def _member(workdir: Path, bootstrap: str, group: str, topic: str, protocol: str, name: str) -> Proc:
    conf = [f"{k}={v}" for k, v in CLIENT_CONF[protocol].items()]
    return Proc(workdir, name, "member", bootstrap, group, topic, protocol, name, *conf)


def _wait(cond, timeout: float, what: str, step: float = 0.05) -> None:
    deadline = mono() + timeout
    while mono() < deadline:
        if cond():
            return
        time.sleep(step)
    raise RuntimeError(f"timed out ({timeout:g} s) waiting for {what}")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _covered(members: list[Proc], partitions: int) -> tuple[list[int], int]:
    """Per partition the number of distinct offsets consumed (batches are contiguous offset
    ranges: no compaction, no transactions), and the total consumed including repeats."""
    ranges: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    total = 0
    for m in members:
        with m.lock:
            for _t, p, n, first, last in m.batches:
                ranges[p].append((first, last))
                total += n
    out = []
    for p in range(partitions):
        n, end = 0, -1
        for first, last in sorted(ranges[p]):
            if last > end:
                n += last - max(first, end + 1) + 1
                end = last
        out.append(n)
    return out, total


def _max_offset(members: list[Proc], p: int) -> int:
    best = -1
    for m in members:
        with m.lock:
            for _t, q, _n, _f, last in m.batches:
                if q == p and last > best:
                    best = last
    return best


def _held_at(m: Proc, t: float) -> set[int]:
    """The partitions a member held at time t, replaying its callbacks."""
    held: set[int] = set()
    with m.lock:
        for tc, k, ps in m.changes:
            if tc > t:
                break
            if k == "A":
                held |= set(ps)
            else:
                held -= set(ps)
    return held


def _longest_pause(m: Proc, w0: float, w1: float) -> float:
    with m.lock:
        ts = sorted(t for t, *_ in m.batches if w0 < t < w1)
    edges = [w0, *ts, w1]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def busy_part(bootstrap: str, workdir: Path, protocol: str, tag: str, args, log) -> dict:
    topic = f"busy-{protocol}-{tag}"
    _create(bootstrap, topic, 6)
    prod = Proc(workdir, f"{topic}-producer", "producer", bootstrap, topic, "6", str(args.rate))
    members = [_member(workdir, bootstrap, f"g-{topic}", topic, protocol, f"{topic}-m{i + 1}") for i in range(4)]
    busy_m, new_m, healthy = members[0], members[3], members[1:3]
    try:
        _wait(lambda: all(m.ready for m in members), 60, "members to start")
        for m in members[:3]:
            m.send("go")

        def settled() -> bool:
            got = [m.assigned for m in members[:3]]
            return (all(got) and sorted(p for s in got for p in s) == list(range(6))
                    and all(m.batches and m.batches[-1][0] > max(t for t, *_ in m.changes) for m in members[:3]))

        _wait(settled, 60, "three members to share the 6 partitions and consume")
        time.sleep(args.steady)
        busy_m.send(f"busy {args.busy}")
        t_busy = mono()  # the member's own B line gives the exact start; this is within a poll (50 ms)
        time.sleep(args.join_after)
        new_m.send("go")
        _wait(lambda: busy_m.busy is not None, args.busy + 30, "the busy member to come back")
        b0, b1 = busy_m.busy
        _wait(lambda: mono() > b1 + args.after, args.after + 5, "the end of the window")
        prod.stop()
        final = prod.final
        if final is None:
            raise RuntimeError("the producer did not report its acknowledged records")
        per = final["per_partition"]
        try:
            _wait(lambda: all(_max_offset(members, p) >= per.get(p, 0) - 1 for p in range(6)), 30,
                  "the members to consume every produced record")
        except RuntimeError as exc:
            log(f"{protocol}: {exc}")
    finally:
        final_assignment = {m.name.rsplit("-", 1)[1]: sorted(m.assigned) for m in members}
        for m in members:
            m.stop()
        prod.stop()
    covered, total = _covered(members, 6)
    produced = final["acked"]
    missed = sum(max(0, per.get(p, 0) - covered[p]) for p in range(6))
    w1 = b1 + args.after / 2
    first_new = min((t for t, *_ in new_m.batches if t > new_m.sub), default=None)
    assigned_new = min((t for t, k, ps in new_m.changes if k == "A" and ps), default=None)
    # who held the new member's first partitions when it subscribed
    first_parts = next((ps for _t, k, ps in new_m.changes if k == "A" and ps), [])
    held = {m.name.rsplit("-", 1)[1]: _held_at(m, new_m.sub) for m in members[:3]}
    first_from = [f"{p}<-{next((n for n, ps in held.items() if p in ps), '?')}" for p in first_parts]
    res = {
        "protocol": protocol, "t_busy_command": t_busy, "busy": [b0, b1], "join": new_m.sub,
        "join_to_first_record_s": None if first_new is None else first_new - new_m.sub,
        "join_to_assignment_s": None if assigned_new is None else assigned_new - new_m.sub,
        "new_first_partitions_from": " ".join(first_from) or "none",
        "pause_healthy_s": max(_longest_pause(m, b0, w1) for m in healthy),
        "pause_per_member_s": {m.name.rsplit("-", 1)[1]: _longest_pause(m, b0, w1) for m in members[:3]},
        "pause_new_after_first_s": None if first_new is None else _longest_pause(new_m, first_new, w1),
        "produced": produced, "producer_errors": final["errors"], "consumed_distinct": sum(covered),
        "consumed_total": total, "missed": missed, "duplicates": total - sum(covered),
        "final_assignment": final_assignment,
        "changes": {m.name.rsplit("-", 1)[1]: m.changes for m in members},
        "timeline": {m.name.rsplit("-", 1)[1]: [(t, n) for t, _p, n, *_ in m.batches] for m in members},
        "produced_ticks": prod.ticks,
    }
    log(f"{protocol}: join → first record {_fmt(res['join_to_first_record_s'])} s, healthy members' longest pause "
        f"{res['pause_healthy_s']:.2f} s, produced {produced:,}, missed {missed}, duplicates {res['duplicates']:,}")
    return res


def eleven_part(bootstrap: str, workdir: Path, protocol: str, tag: str, args, log) -> dict:
    n = args.members11
    topic = f"eleven-{protocol}-{tag}"
    _create(bootstrap, topic, n)
    prod = Proc(workdir, f"{topic}-producer", "producer", bootstrap, topic, str(n), str(args.rate))
    members = [_member(workdir, bootstrap, f"g-{topic}", topic, protocol, f"{topic}-m{i + 1}") for i in range(n)]
    try:
        _wait(lambda: all(m.ready for m in members) and prod.ticks, 90, f"{n} members to start")
        time.sleep(1.0)  # the processes' start-up CPU settles
        for m in members:
            m.send("go")
        _wait(lambda: all(m.sub for m in members), 10, "subscribe")
        t0 = min(m.sub for m in members)

        def state() -> tuple[float, float] | None:
            """(all assigned, all consumed since) when the group covers the topic, else None."""
            sets, last_change, consumed = [], [], []
            for m in members:
                with m.lock:
                    if not m.assigned:
                        return None
                    sets.append(set(m.assigned))
                    lc = max((t for t, *_ in m.changes), default=t0)
                    first = next((t for t, *_ in m.batches if t > lc), None)
                if first is None:
                    return None
                last_change.append(lc)
                consumed.append(first)
            if sorted(p for s in sets for p in s) != list(range(n)):
                return None
            return max(last_change), max(consumed)

        deadline = mono() + 60
        result = None
        while mono() < deadline:
            st = state()
            if st is not None and mono() - st[0] >= 2.0:  # and no change for 2 s
                result = st
                break
            time.sleep(0.05)
        if result is None:
            raise RuntimeError(f"{protocol}: {n} members did not settle in 60 s: "
                               f"{[sorted(m.assigned) for m in members]}")
        settled_changes = sum(len(m.changes) for m in members)  # before close() revokes
    finally:
        for m in members:
            m.stop()
        prod.stop()
    res = {"protocol": protocol, "members": n, "all_assigned_s": result[0] - t0, "all_consumed_s": result[1] - t0,
           "subscribe_spread_s": max(m.sub for m in members) - t0,
           "assignment_changes": settled_changes}
    log(f"{protocol}: {n} members: all assigned {res['all_assigned_s']:.2f} s, all consumed {res['all_consumed_s']:.2f} s "
        f"after the first subscribe ({res['assignment_changes']} assignment callbacks)")
    return res


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _med(runs: list[dict], key: str, digits: int = 2) -> str:
    vals = [r[key] for r in runs if r.get(key) is not None]
    if not vals:
        return "n/a"
    each = ", ".join("n/a" if r.get(key) is None else f"{r[key]:.{digits}f}" for r in runs)
    return f"{statistics.median(vals):.{digits}f} ({each})"


def draw_rates(ax, timeline: dict[str, list[tuple[float, int]]], produced_ticks: list[tuple[float, int]],
               t0: float, lo: float, hi: float, binw: float, top: float, labels: dict[str, str],
               colors: dict[str, str], produced_label: str) -> None:
    """One panel's records/s per member in ``binw`` bins from ``lo`` to ``hi`` seconds after
    ``t0`` (member 2 drawn wide and pale: it often runs on the same values as member 3), bins
    above ``top`` clipped and labelled with their records, and the producer's rate dotted."""
    nb = int((hi - lo) / binw)
    edges = [lo + i * binw for i in range(nb + 1)]
    clipped: dict[int, int] = {}  # bin -> labels placed there
    for name, pts in timeline.items():
        counts = [0] * nb
        for t, n in pts:
            i = int((t - t0 - lo) / binw)
            if 0 <= i < nb:
                counts[i] += n
        rates = [c / binw for c in counts]
        wide = name == "m2"
        ax.stairs(rates, edges, color=colors[name], label=labels[name], linewidth=3.0 if wide else 1.4,
                  alpha=0.45 if wide else 1.0, baseline=None)
        for i, v in enumerate(rates):
            if v > top:
                k = clipped[i] = clipped.get(i, -1) + 1
                ax.annotate(f"{counts[i]:,} records in {binw:g} s", (edges[i] + binw, top),
                            xytext=(3, -3 - 10 * k), textcoords="offset points", va="top", fontsize=7,
                            color=colors[name])
    if len(produced_ticks) > 1:
        ticks = produced_ticks
        xs = [(ticks[i][0] + ticks[i + 1][0]) / 2 - t0 for i in range(len(ticks) - 1)]
        ys = [(ticks[i + 1][1] - ticks[i][1]) / (ticks[i + 1][0] - ticks[i][0]) for i in range(len(ticks) - 1)]
        ax.plot(xs, ys, color="grey", linestyle=":", linewidth=1, label=produced_label)


def draw(busy: dict[str, dict], path: Path, args, run_no: int) -> None:
    """records/s per member in 0.5 s bins, one panel per protocol; the busy period shaded,
    the join and the new member's first record marked; bins above the axis (the busy
    member's catch-up) clipped and labelled with their records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protos = [p for p in PROTOCOLS if p in busy]
    fig, axes = plt.subplots(len(protos), 1, figsize=(10, 3.3 * len(protos) + 0.8), sharex=True, squeeze=False)
    labels = {"m1": "member 1 (busy)", "m2": "member 2", "m3": "member 3", "m4": "member 4 (joins)"}
    colors = {"m1": "tab:red", "m2": "tab:blue", "m3": "tab:green", "m4": "tab:purple"}
    binw = 0.5
    top = args.rate * 1.3
    for ax, proto in zip(axes[:, 0], protos, strict=True):
        r = busy[proto]
        b0, b1 = r["busy"]
        lo, hi = -args.steady, (b1 - b0) + args.after * 0.9
        draw_rates(ax, r["timeline"], r["produced_ticks"], b0, lo, hi, binw, top, labels, colors,
                   "produced (all 6 partitions)")
        ax.axvspan(0, b1 - b0, color="tab:red", alpha=0.08, label=f"member 1 busy (no poll for {b1 - b0:.0f} s)")
        join = r["join"] - b0
        ax.axvline(join, color="tab:purple", linestyle="--", linewidth=1, label="member 4 subscribes")
        ttfr = r["join_to_first_record_s"]
        if ttfr is not None:
            y = top * 0.55
            ax.annotate("", (join + ttfr, y), (join, y), arrowprops={"arrowstyle": "->", "color": "tab:purple"})
            ax.annotate(f"member 4's first record after {ttfr:.1f} s", (join, y), xytext=(4, 4),
                        textcoords="offset points", va="bottom", fontsize=8, color="tab:purple")
        ax.set_title(f"group.protocol={proto}: members 2-3 pause at most {r['pause_healthy_s']:.1f} s; "
                     f"member 4 consumes {_fmt(ttfr)} s after subscribing", fontsize=10)
        ax.set_ylabel("records/s consumed")
        ax.set_xlim(lo, hi)
        ax.set_ylim(0, top)
        ax.grid(alpha=0.3)
    handles, lbls = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, lbls, loc="lower center", ncol=4, fontsize=8, frameon=False)
    axes[-1, 0].set_xlabel("seconds since member 1 became busy")
    fig.suptitle(f"Krait: a 4th member joins a 3-member group while one member is busy — 6 partitions, "
                 f"{args.rate:,} records/s (run {run_no}, {binw:g} s bins)", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(busy_runs: dict[str, list[dict]], eleven_runs: dict[str, list[dict]], args, elapsed: float,
           loads: tuple[str, str], png: Path | None) -> str:
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    protos = [p for p in PROTOCOLS if p in busy_runs or p in eleven_runs]
    out = [f"## {_dt.datetime.now():%Y-%m-%d %H:%M} — consumer groups: classic vs consumer protocol "
           f"(`bench/consumer_protocol_bench.py`), commit {commit}{dirty}", "",
           f"- machine: {machine()}; broker, producer and every member share the cores; `uptime` at start: "
           f"{loads[0]}; at end: {loads[1]} (other work on the machine skews results)",
           f"- {args.runs} run(s), a fresh broker each, took {elapsed / 60:.1f} min; median (every run's value); "
           f"client confluent-kafka {ck_version()}, members and the producer ({args.rate:,} records/s of 100 B, "
           f"acks=all) in their own processes",
           "- broker overrides: " + ", ".join(f"{k}={v}" for k, v in OVERRIDES.items()),
           *(f"- {p} members: " + ", ".join(f"{k}={v}" for k, v in CLIENT_CONF[p].items())
             + ", auto.offset.reset=earliest, enable.auto.commit=true (default)" for p in protos), ""]
    if busy_runs:
        out += [f"### A member joins while another is busy ({args.busy:g} s without polling; the join "
                f"{args.join_after:g} s into it), 6 partitions, 3 → 4 members", "",
                "| metric | " + " | ".join(protos) + " |", "|---|" + "---:|" * len(protos)]
        rows = [("join → new member's first record, s", "join_to_first_record_s"),
                ("join → new member's first assignment, s", "join_to_assignment_s"),
                ("new member's first partitions <- their holder at the join (m1 = busy)", "new_first_partitions_from"),
                ("longest pause of the 2 healthy members, s", "pause_healthy_s"),
                ("new member's longest pause after its first record, s", "pause_new_after_first_s"),
                ("records produced", "produced"), ("records missed (produced, never consumed)", "missed"),
                ("records consumed twice or more", "duplicates")]
        for label, key in rows:
            cells = []
            for p in protos:
                rs = busy_runs.get(p, [])
                if key in ("produced", "missed", "duplicates"):
                    cells.append(", ".join(f"{r[key]:,}" for r in rs) or "n/a")
                elif key == "new_first_partitions_from":
                    cells.append(", ".join(r[key] for r in rs) or "n/a")
                else:
                    cells.append(_med(rs, key))
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        busy_pauses = {p: ", ".join(f"{r['pause_per_member_s']['m1']:.1f}" for r in busy_runs.get(p, []))
                       for p in protos}
        finals = {p: json.dumps(busy_runs[p][-1]["final_assignment"]) for p in protos if busy_runs.get(p)}
        out += ["", "Pauses: longest gap between two consume() calls that returned records, from the start of the "
                f"busy period until {args.after / 2:g} s after its end (the busy member's own: "
                + "; ".join(f"{p} {v} s" for p, v in busy_pauses.items()) + "). Final assignments (last run): "
                + "; ".join(f"{p} {v}" for p, v in finals.items()) + ".", ""]
    if eleven_runs:
        n = args.members11
        out += [f"### {n} members subscribe together ({n} partitions, members started beforehand)", "",
                "| metric | " + " | ".join(protos) + " |", "|---|" + "---:|" * len(protos)]
        for label, key, digits in (("first subscribe → all hold a partition, s", "all_assigned_s", 2),
                                   ("first subscribe → all assigned and consumed, s", "all_consumed_s", 2),
                                   ("assignment callbacks (all members)", "assignment_changes", 0)):
            out.append(f"| {label} | " + " | ".join(_med(eleven_runs.get(p, []), key, digits) for p in protos) + " |")
        out.append("")
    if png:
        out += [f"Timeline of the last run: `{png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}`.", ""]
    return "\n".join(out).rstrip() + "\n"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy", type=float, default=20.0, help="seconds member 1 does not poll")
    ap.add_argument("--join-after", type=float, default=2.0, help="seconds into the busy period member 4 joins")
    ap.add_argument("--steady", type=float, default=4.0, help="seconds of steady consumption before the busy period")
    ap.add_argument("--after", type=float, default=6.0, help="seconds watched after the busy period")
    ap.add_argument("--rate", type=int, default=2000, help="records/s produced")
    ap.add_argument("--members11", type=int, default=11, help="members (and partitions) of the second part")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--parts", default="busy,eleven")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="more (or other) broker config, e.g. group.consumer.heartbeat.interval.ms=5000 (repeatable)")
    ap.add_argument("--png", default=str(PNG))
    ap.add_argument("--no-png", action="store_true")
    ap.add_argument("--json-out", default=None, help="also write every run's raw values here")
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--no-results-file", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one short run (smoke test): busy 4 s, 4 members")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.busy, args.join_after, args.steady, args.after, args.members11 = 1, 4.0, 1.0, 1.0, 2.0, 4
    protos = [p for p in args.protocols.split(",") if p]
    parts = [p for p in args.parts.split(",") if p]
    OVERRIDES.update(dict(kv.split("=", 1) for kv in args.override))

    def log(msg: str) -> None:
        print(f"[{_dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)

    loads0 = _uptime()
    log(f"uptime: {loads0}")
    t_start = mono()
    busy_runs: dict[str, list[dict]] = {p: [] for p in protos if "busy" in parts}
    eleven_runs: dict[str, list[dict]] = {p: [] for p in protos if "eleven" in parts}
    with tempfile.TemporaryDirectory(prefix="krait-cpbench-") as tmp:
        for r in range(args.runs):
            workdir = Path(tmp) / f"run{r + 1}"
            workdir.mkdir()
            broker = BrokerProcess(log_dir=str(workdir / "logs"), overrides=OVERRIDES).start()
            try:
                order = protos if r % 2 == 0 else protos[::-1]
                for proto in order:
                    if "busy" in parts:
                        log(f"run {r + 1}: busy member + join, {proto}")
                        busy_runs[proto].append(busy_part(broker.bootstrap, workdir, proto, str(r + 1), args, log))
                for proto in order:
                    if "eleven" in parts:
                        log(f"run {r + 1}: {args.members11} members, {proto}")
                        eleven_runs[proto].append(eleven_part(broker.bootstrap, workdir, proto, str(r + 1), args,
                                                              log))
            except Exception:
                log(f"broker log tail:\n{broker.log_text()[-3000:]}")
                raise
            finally:
                broker.stop()
            log(f"run {r + 1} done at {mono() - t_start:.0f} s; load average {os.getloadavg()[0]:.2f}")
    elapsed = mono() - t_start
    loads1 = _uptime()
    log(f"uptime: {loads1}")
    png = None
    if busy_runs and not args.no_png:
        png = Path(args.png).resolve()
        draw({p: rs[-1] for p, rs in busy_runs.items() if rs}, png, args, args.runs)
    text = render(busy_runs, eleven_runs, args, elapsed, (loads0, loads1), png)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"busy": busy_runs, "eleven": eleven_runs}, indent=1))
    if not args.no_results_file:
        append_results(args.results, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
