"""A frozen member (SIGSTOP) in a classic group, a consumer-protocol (KIP-848) group and a
share group (KIP-932), with real librdkafka clients in separate processes against one Krait
broker subprocess:

    .venv/bin/python bench/frozen_member_bench.py [--runs 3] [--freeze 20] [--rate 2000]
        [--partitions 2] [--lock-ms 6000] [--max-locks N] [--kinds classic,consumer,share]
        [--png docs/img/frozen-member-timeline.png | --no-png] [--json-out FILE]
        [--results FILE | --no-results-file] [--quick] [--redraw JSON]

Each group gets its own topic (--partitions, 2 by default) under the same producer rate
(bench/consumer_protocol_clients.py's producer, its own process) and three members: the
classic and consumer members of bench/consumer_protocol_clients.py, the share members of
bench/share_clients.py (implicit acknowledgement: what a poll() returned is accepted by the
commit_sync() after it). Once every partition is being consumed, the member consuming the
most partitions is frozen with SIGSTOP right after a consume()/poll() returned records (a
share member prints them and holds them unacknowledged: its commit comes after the freeze),
for --freeze seconds, then SIGCONT. Measured, from the freeze until --after/2 seconds after
SIGCONT: each partition's longest pause in consumption (by any member: only the others can
consume during the freeze), the longest pause of the other members that held partitions,
the records consumed more than once (redelivered), and records produced but never consumed
(a share member's record counts as consumed once a commit_sync() confirmed it); for the
share group, when the frozen member's unacknowledged records reached another member and
with what delivery count.

What gives up on the frozen member: the classic group after the client's session.timeout.ms
(6000, heartbeat 500 ms), the consumer group after group.consumer.session.timeout.ms (6000,
heartbeat 500 ms), the share group only on its records, after the group's
share.record.lock.duration.ms (--lock-ms, 6000 by default, set with IncrementalAlterConfigs
on the GROUP resource; the broker's group.share.min.record.lock.duration.ms lowered to
1000 to allow small values); its share.session.timeout.ms stays at Kafka's 45 s, longer than
the freeze, so the member is never evicted. Records the frozen member holds keep the
share-partition's start offset where it is, and a share-partition hands out records only
up to share.partition.max.record.locks (2000) past its start offset: at 1,000 records/s per
partition that window is full 2 s into a 6 s lock, and the others wait for the lock to
expire (--max-locks raises it for the group). With 3 members on 2 partitions Kafka's simple
assignor gives every partition to two share members, so freezing one leaves every partition
with a consumer; the classic and consumer groups leave one member idle.

Each run does the three groups (their order rotates from run to run) on a fresh broker;
figures are the median over --runs, with every run's value. The timeline of the last run is
drawn to --png (records/s per member, one panel per group); results are printed and
appended to bench/RESULTS.md. tests/share/test_frozen_share_member.py runs the share part
with a short lock and freeze and asserts on its figures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from consumer_protocol_bench import (  # noqa: E402
    CLIENT_CONF,
    OVERRIDES,
    Proc,
    _covered,
    _create,
    _held_at,
    _longest_pause,
    _member,
    _uptime,
    _wait,
    draw_rates,
)
from peers import git  # noqa: E402
from report import RESULTS, append_results, ck_version, machine  # noqa: E402

from broker.tools.admin_client import RESOURCE_GROUP, AdminClient  # noqa: E402
from tests.krait_harness import BrokerProcess  # noqa: E402

SHARE_CLIENTS = ROOT / "bench" / "share_clients.py"
PNG = ROOT / "docs" / "img" / "frozen-member-timeline.png"
KINDS = ("classic", "consumer", "share")

#: consumer_protocol_bench's overrides, and share groups' lowered bounds: lock durations from
#: 1 s, heartbeats every 500 ms (Kafka's 5 s would delay the three members' assignment)
SHARE_OVERRIDES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
}
mono = time.monotonic


@dataclass
class Params:
    rate: int = 2000  # records/s produced, round-robin over the partitions
    partitions: int = 2
    freeze: float = 20.0  # seconds the member is stopped
    steady: float = 4.0  # seconds of steady consumption before the freeze
    after: float = 8.0  # seconds watched after SIGCONT
    lock_ms: int = 6000  # the share group's share.record.lock.duration.ms
    max_locks: int | None = None  # its share.partition.max.record.locks (None: the broker's, 2000)


def broker_overrides() -> dict[str, str]:
    return {**OVERRIDES, **SHARE_OVERRIDES}


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) on a GROUP resource (librdkafka's admin client has no
    such type)."""
    with AdminClient(bootstrap) as admin:
        admin.incremental_alter_configs(RESOURCE_GROUP, group, configs)


def _share_member(workdir: Path, bootstrap: str, group: str, topic: str, name: str) -> Proc:
    return Proc(workdir, name, "member", bootstrap, group, topic, name, script=SHARE_CLIENTS)


def _accepted(m: Proc) -> list[tuple[float, int, int, int, int]]:
    """A share member's R lines whose commit_sync() confirmed their partition."""
    out = []
    with m.lock:
        start = 0
        for _t, ok, _bad, end in m.commits:
            out += [(t, p, n, f, la) for t, p, n, f, la, _d in m.deliveries[start:end] if p in ok]
            start = end
    return out


def _distinct(ranges: list[tuple[int, int]]) -> int:
    n, end = 0, -1
    for first, last in sorted(ranges):
        if last > end:
            n += last - max(first, end + 1) + 1
            end = last
    return n


def _partition_pause(members: list[Proc], p: int, w0: float, w1: float) -> float:
    """The longest gap between two deliveries of partition p's records (to any member)
    within [w0, w1], the window's edges included."""
    ts: list[float] = []
    for m in members:
        with m.lock:
            ts += [t for t, q, *_ in m.batches if q == p and w0 < t < w1]
    edges = [w0, *sorted(ts), w1]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def frozen_part(bootstrap: str, workdir: Path, kind: str, tag: str, prm: Params, log=print) -> dict:
    """One group of three members, one of them frozen; the figures described in the module's
    docstring (and the raw timeline) as a dict."""
    topic = f"frozen-{kind}-{tag}"
    group = f"g-{topic}"
    _create(bootstrap, topic, prm.partitions)
    if kind == "share":
        set_group_configs(bootstrap, group, {"share.record.lock.duration.ms": str(prm.lock_ms),
                                             "share.auto.offset.reset": "earliest",
                                             **({"share.partition.max.record.locks": str(prm.max_locks)}
                                                if prm.max_locks else {})})
    prod = Proc(workdir, f"{topic}-producer", "producer", bootstrap, topic, str(prm.partitions), str(prm.rate))
    if kind == "share":
        members = [_share_member(workdir, bootstrap, group, topic, f"{topic}-m{i + 1}") for i in range(3)]
    else:
        members = [_member(workdir, bootstrap, group, topic, kind, f"{topic}-m{i + 1}") for i in range(3)]
    try:
        _wait(lambda: all(m.ready for m in members), 60, "members to start")
        for m in members:
            m.send("go")

        def recent(m: Proc, since: float) -> set[int]:
            with m.lock:
                return {p for t, p, *_ in m.batches if t > since}

        def settled() -> bool:
            now = mono()
            got = set().union(*(recent(m, now - 1.0) for m in members))
            if got != set(range(prm.partitions)):
                return False
            if kind == "share":  # every member holds a partition (3 members, fewer partitions)
                return all(recent(m, now - 1.0) for m in members)
            with_changes = [t for m in members for t, *_ in m.changes]
            return not with_changes or now - max(with_changes) > 1.5

        _wait(settled, 60, f"{kind}: every partition consumed")
        time.sleep(prm.steady)
        now = mono()
        frozen = max(members, key=lambda m: len(recent(m, now - 1.0)))
        others = [m for m in members if m is not frozen]
        if kind == "share":
            frozen.send("hold 1")  # print the next records, commit them 1 s later: frozen before
            _wait(lambda: frozen.held is not None, 10, "the share member to hold records", step=0.002)
        else:
            n0 = len(frozen.batches)
            _wait(lambda: len(frozen.batches) > n0, 10, "a batch of the member to freeze", step=0.002)
        os.kill(frozen.p.pid, signal.SIGSTOP)
        t_freeze = mono()
        log(f"{kind}: froze {frozen.name} (it consumed partitions {sorted(recent(frozen, t_freeze - 1.0))})")
        try:
            time.sleep(prm.freeze)
        finally:
            os.kill(frozen.p.pid, signal.SIGCONT)
        t_thaw = mono()
        time.sleep(prm.after)
        prod.stop()
        produced = prod.final["per_partition"] if prod.final else {}

        def consumed() -> list[int]:
            if kind != "share":
                return _covered(members, prm.partitions)[0]
            acc = [a for m in members for a in _accepted(m)]
            return [_distinct([(f, la) for _t, q, _n, f, la in acc if q == p]) for p in range(prm.partitions)]

        try:
            _wait(lambda: all(c >= produced.get(p, 0) for p, c in enumerate(consumed())), 30,
                  "every produced record to be consumed", step=0.2)
        except RuntimeError as e:
            log(f"{kind}: {e}")
    finally:
        for m in members:
            m.stop()
        prod.stop()
    w1 = t_thaw + prm.after / 2
    distinct, total = _covered(members, prm.partitions)
    done = consumed()
    n_produced = sum(produced.values())
    if kind == "share":
        held_by_others = [m for m in others if m.batches and min(t for t, *_ in m.batches) < t_freeze]
    else:
        held_by_others = [m for m in others if _held_at(m, t_freeze)]
    res: dict = {
        "kind": kind, "frozen": frozen.name, "freeze": (t_freeze, t_thaw),
        "partition_pause_s": {p: _partition_pause(members, p, t_freeze, w1) for p in range(prm.partitions)},
        "partition_pause_frozen_s": {p: _partition_pause(others, p, t_freeze, t_thaw) for p in range(prm.partitions)},
        "others_pause_s": max((_longest_pause(m, t_freeze, w1) for m in held_by_others), default=None),
        "produced": n_produced, "missed": n_produced - sum(min(c, produced.get(p, 0)) for p, c in enumerate(done)),
        "consumed": total, "redelivered": total - sum(distinct),
        "timeline": {m.name.rsplit("-", 1)[1]: [(t, n) for t, _p, n, *_ in m.batches] for m in members},
        "frozen_key": frozen.name.rsplit("-", 1)[1], "produced_ticks": prod.ticks,
    }
    res["pause_s"] = max(res["partition_pause_s"].values())
    res["pause_frozen_s"] = max(res["partition_pause_frozen_s"].values())
    if kind == "share":
        with frozen.lock:
            before = [c for c in frozen.commits if c[0] < frozen.held]
            start = before[-1][3] if before else 0
            held = [(p, o) for t, p, _n, f, la, _d in frozen.deliveries[start:] if t <= frozen.held
                    for o in range(f, la + 1)]
        first_other: dict[tuple[int, int], tuple[float, int]] = {}
        for m in others:
            with m.lock:
                for t, p, _n, f, la, d in m.deliveries:
                    for o in range(f, la + 1):
                        if (p, o) not in first_other or t < first_other[(p, o)][0]:
                            first_other[(p, o)] = (t, d)
        again = [first_other[k] for k in held if k in first_other]
        res.update({
            "held": len(held), "held_redelivered": len(again),
            "held_delivery_counts": sorted({d for _t, d in again}),
            "held_first_s": min(t for t, _d in again) - frozen.held if again else None,
            "held_last_s": max(t for t, _d in again) - frozen.held if again else None,
            "redelivered_d2": sum(n for m in members for _t, _p, n, _f, _la, d in m.deliveries if d >= 2),
            "lock_ms": prm.lock_ms,
        })
    log(f"{kind}: longest partition pause {res['pause_s']:.2f} s (during the freeze {res['pause_frozen_s']:.2f} s), "
        f"redelivered {res['redelivered']:,}, missed {res['missed']:,} of {n_produced:,}"
        + (f", held {res['held']} → others after {_fmt(res['held_first_s'])}-{_fmt(res['held_last_s'])} s "
           f"with delivery counts {res['held_delivery_counts']}" if kind == "share" else ""))
    return res


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _med(runs: list[dict], key: str, digits: int = 2) -> str:
    vals = [r[key] for r in runs if r.get(key) is not None]
    if not vals:
        return "n/a"
    each = ", ".join("n/a" if r.get(key) is None else f"{r[key]:,.{digits}f}" for r in runs)
    return f"{statistics.median(vals):,.{digits}f} ({each})"


def draw(last: dict[str, dict], path: Path, prm: Params, run_no: int) -> None:
    """records/s per member in 0.5 s bins, one panel per group (consumer_protocol_bench's
    drawing), the freeze shaded, the share group's lock expiry marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in KINDS if k in last]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(12, 2.9 * len(kinds) + 0.8), sharex=True, squeeze=False)
    binw, top = 0.5, prm.rate * 1.3
    titles = {"classic": "classic group", "consumer": "consumer group (KIP-848)", "share": "share group (KIP-932)"}
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        r = last[kind]
        f0, f1 = r["freeze"]
        names = sorted(r["timeline"])
        fk = r["frozen_key"]
        labels = {n: f"member {n[1:]}" + (" (frozen)" if n == fk else "") for n in names}
        palette = iter(["tab:blue", "tab:green"])
        colors = {n: "tab:red" if n == fk else next(palette) for n in names}
        draw_rates(ax, r["timeline"], r["produced_ticks"], f0, -prm.steady, (f1 - f0) + prm.after * 0.9, binw, top,
                   labels, colors, f"produced ({prm.partitions} partitions)")
        ax.axvspan(0, f1 - f0, color="tab:red", alpha=0.08, label=f"SIGSTOP for {f1 - f0:.0f} s")
        extra = ""
        if kind == "share":
            ax.axvline(r["lock_ms"] / 1000, color="tab:orange", linestyle="--", linewidth=1,
                       label="record lock duration after the freeze")
            extra = (f"; the {r['held']} records it held went to others after {r['held_first_s'] or 0:.1f} s "
                     f"(delivery count {','.join(map(str, r['held_delivery_counts'])) or '-'})")
        ax.set_title(f"{titles[kind]}: longest pause of a partition {r['pause_s']:.1f} s, "
                     f"{r['redelivered']:,} records consumed twice{extra}", fontsize=9)
        ax.set_ylabel("records/s consumed")
        ax.set_ylim(0, top)
        ax.set_xlim(-prm.steady, (f1 - f0) + prm.after * 0.9)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    axes[-1, 0].set_xlabel("seconds since the member was frozen (SIGSTOP)")
    fig.suptitle(f"Krait: one of 3 members frozen — {prm.partitions} partitions, {prm.rate:,} records/s "
                 f"(run {run_no}, {binw:g} s bins)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(runs: dict[str, list[dict]], prm: Params, n_runs: int, elapsed: float, loads: tuple[str, str],
           png: Path | None) -> str:
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    kinds = [k for k in KINDS if runs.get(k)]
    groups = ", ".join(kinds[:-1]) + (" and " if len(kinds) > 1 else "") + kinds[-1]
    out = [f"## {_dt.datetime.now():%Y-%m-%d %H:%M} — a frozen member: {groups} group{'s' if len(kinds) > 1 else ''} "
           f"(`bench/frozen_member_bench.py`), commit {commit}{dirty}", "",
           f"- machine: {machine()}; broker, producer and every member share the cores; `uptime` at start: "
           f"{loads[0]}; at end: {loads[1]} (other work on the machine skews results)",
           f"- {n_runs} run(s), a fresh broker each, took {elapsed / 60:.1f} min; median (every run's value); "
           f"client confluent-kafka {ck_version()} (librdkafka's Consumer and ShareConsumer), each member and the "
           f"producer ({prm.rate:,} records/s of 100 B over {prm.partitions} partitions, acks=all) in its own "
           f"process; the producer sets the pace: the figures are timings (session timeouts, the record "
           f"lock), not throughput, and no side's CPU bounds them",
           f"- one of 3 members frozen (SIGSTOP) for {prm.freeze:g} s right after it was handed records; watched "
           f"until {prm.after / 2:g} s after SIGCONT",
           "- broker overrides: " + ", ".join(f"{k}={v}" for k, v in broker_overrides().items()),
           *(f"- {k} members: " + ", ".join(f"{a}={b}" for a, b in CLIENT_CONF[k].items())
             + ", auto.offset.reset=earliest, enable.auto.commit=true (default)" for k in kinds if k != "share"),
           f"- share group: share.record.lock.duration.ms={prm.lock_ms}, share.auto.offset.reset=earliest, "
           f"share.partition.max.record.locks={prm.max_locks or 'the broker default (2000)'} "
           f"(group configs), share.session.timeout.ms 45000 (Kafka's default); members "
           f"share.acknowledgement.mode=implicit, commit_sync() after every poll()", "",
           "| metric | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    rows = [("longest pause in consuming a partition, s", "pause_s", 2),
            ("… while the member was frozen, s", "pause_frozen_s", 2),
            ("longest pause of the other members holding partitions, s", "others_pause_s", 2),
            ("records redelivered (consumed more than once)", "redelivered", 0),
            ("records produced", "produced", 0), ("records missed (produced, never consumed)", "missed", 0)]
    for label, key, digits in rows:
        out.append(f"| {label} | " + " | ".join(_med(runs[k], key, digits) for k in kinds) + " |")
    if "share" in kinds:
        sh = runs["share"]
        out += ["", "Share group: the frozen member's unacknowledged records (printed, not committed) — "
                + "; ".join(f"run {i + 1}: {r['held']} held, {r['held_redelivered']} delivered to another member "
                            f"{_fmt(r['held_first_s'])}-{_fmt(r['held_last_s'])} s after the hold started, "
                            f"delivery count {','.join(map(str, r['held_delivery_counts'])) or '-'}"
                            for i, r in enumerate(sh)) + "."]
    out += ["", "Pauses: the longest gap between two deliveries of a partition's records (to any member), from "
            f"the freeze until {prm.after / 2:g} s after SIGCONT; “… while frozen” counts only the freeze. The "
            "classic and consumer groups stop consuming the frozen member's partition until its session times "
            "out and a rebalance moves it; the share group's other members go on with every partition until "
            "share.partition.max.record.locks records past the frozen member's are in flight, and its records "
            "come back once their locks expire.", ""]
    if png:
        out += [f"Timeline of the last run: `{png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}`.", ""]
    return "\n".join(out).rstrip() + "\n"


def redraw(json_path: str, png: str, prm: Params) -> None:
    """Draw a --json-out file's last run again (after a change to the drawing)."""
    runs = json.loads(Path(json_path).read_text())
    draw({k: rs[-1] for k, rs in runs.items() if rs}, Path(png), prm, max(len(rs) for rs in runs.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--freeze", type=float, default=20.0, help="seconds the member is stopped")
    ap.add_argument("--rate", type=int, default=2000, help="records/s produced")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--lock-ms", type=int, default=6000, help="the share group's share.record.lock.duration.ms")
    ap.add_argument("--max-locks", type=int, default=None,
                    help="the share group's share.partition.max.record.locks (default: the broker's, 2000)")
    ap.add_argument("--steady", type=float, default=4.0)
    ap.add_argument("--after", type=float, default=8.0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--png", default=str(PNG))
    ap.add_argument("--no-png", action="store_true")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--results", default=str(RESULTS))
    ap.add_argument("--no-results-file", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one short run (smoke test): frozen 5 s, lock 2 s")
    ap.add_argument("--redraw", metavar="JSON", help="only draw --png again from a --json-out file (same options)")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.freeze, args.lock_ms, args.steady, args.after = 1, 5.0, 2000, 1.0, 3.0
    prm = Params(rate=args.rate, partitions=args.partitions, freeze=args.freeze, steady=args.steady,
                 after=args.after, lock_ms=args.lock_ms, max_locks=args.max_locks)
    kinds = [k for k in args.kinds.split(",") if k]
    if args.redraw:
        redraw(args.redraw, args.png, prm)
        return 0

    def log(msg: str) -> None:
        print(f"[{_dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)

    loads0 = _uptime()
    log(f"uptime: {loads0}")
    t_start = mono()
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="krait-frozen-") as tmp:
        for r in range(args.runs):
            workdir = Path(tmp) / f"run{r + 1}"
            workdir.mkdir()
            broker = BrokerProcess(log_dir=str(workdir / "logs"), overrides=broker_overrides()).start()
            try:
                order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
                for kind in order:
                    log(f"run {r + 1}: {kind}")
                    runs[kind].append(frozen_part(broker.bootstrap, workdir, kind, str(r + 1), prm, log))
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
    if not args.no_png:
        png = Path(args.png).resolve()
        draw({k: rs[-1] for k, rs in runs.items() if rs}, png, prm, args.runs)
    text = render(runs, prm, args.runs, elapsed, (loads0, loads1), png)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(runs, indent=1))
    if not args.no_results_file:
        append_results(args.results, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
