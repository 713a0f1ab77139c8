"""A chaos run's report: the counts per check (0 is the pass), what the workload did, the
availability per partition, the fault schedule as it ran, and a PNG timeline in the style
of Jepsen's rate and latency plots (faults as bands, acknowledged writes per second and
acknowledgement latency per partition)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .checker import CHECKS
from .runner import RunResult, _read_jsonl

_COLOURS = {"kill": "#d62728", "pause": "#ff7f0e", "zk-kill": "#8c564b", "zk-pause": "#c49c94",
            "isolate": "#9467bd", "split": "#c5b0d5", "cut-brokers": "#1f77b4", "cut-zk": "#aec7e8",
            "one-way": "#17becf", "disk-full": "#7f7f7f", "io-error": "#bcbd22"}


def fault_bands(events: list[dict]) -> list[tuple[float, float, str, int]]:
    out, open_at = [], {}
    for e in events:
        if e.get("phase") == "start":
            open_at[(e["kind"], e["broker"])] = e["t"]
        elif e.get("phase") == "heal" and (e["kind"], e["broker"]) in open_at:
            out.append((open_at.pop((e["kind"], e["broker"])), e["t"], e["kind"], e["broker"]))
    return out


def summary(rr: RunResult) -> str:
    r = rr.result
    lines = [f"### Chaos run: seed {rr.seed}, {rr.duration:.0f} s of faults, {rr.brokers} broker(s)"
             f" — {'PASS' if rr.ok else 'FAIL'}", ""]
    by = ", ".join(f"{n}{' (Java)' if n == 'pj' else ''} {c:,}" for n, c in sorted(r.stats.get("acked_by", {}).items()))
    lines.append(f"Workload: {r.stats.get('acked', 0):,} acknowledged idempotent writes ({by}), transactions "
                 f"{json.dumps(r.stats.get('transactions', {}))}, {r.stats.get('polled', 0):,} records polled "
                 f"by the group. {len(rr.faults)} faults scheduled, {sum(1 for e in rr.events if e.get('phase') == 'start')} run.")
    sh = r.stats.get("share")
    if sh:
        members = ", ".join(f"{n} {c:,}" for n, c in sh["by_member"].items())
        lines.append(f"Share group: {sh['acked']:,} acknowledged writes to its topic, {sh['deliveries']:,} deliveries "
                     f"of {sh['records']:,} records to {len(sh['by_member'])} members ({members}), "
                     f"{sh['redeliveries']:,} redeliveries, {sh['accepted']:,} records accepted with confirmation, "
                     f"{sh['released']:,} confirmed releases, {sh['unconfirmed']:,} acknowledgements unconfirmed, "
                     f"{sh['at_limit']:,} records at the delivery limit (highest count {sh['max_count']}).")
    sr = r.stats.get("registry")
    if sr:
        by = ", ".join(f"b{b} {c:,}" for b, c in sr["acked_by"].items())
        clients = ", ".join(f"{n} {c:,}" for n, c in sr["by_client"].items())
        lines.append(f"Schema Registry: {sr['acked']:,} registrations acknowledged to {len(sr['by_client'])} clients "
                     f"({clients}) by the brokers ({by}; median latency {sr['latency_p50']} s, longest "
                     f"{sr['latency_max']} s), {sr['failed_requests']:,} failed requests retried on the next "
                     f"broker ({sr['retried']:,} registrations needed a retry, at most "
                     f"{sr['most_attempts']} attempts), {sr['pending']} unacknowledged at the end; "
                     f"{sr['lookups']:,} versions looked up ({sr['lookup_misses']:,} lookups found nothing yet). "
                     f"Final state read from {sr['brokers_read']} broker(s) after {sr['read_waited']} s "
                     f"({sr['read_rounds']} round(s)): {sr['subjects']} subjects, {sr['versions']:,} versions, "
                     f"ids up to {sr['max_id']}.")
    if rr.skipped:
        lines.append("Not run here: " + "; ".join(rr.skipped) + ".")
    lines += ["", "| check | violations |", "|---|---|"]
    lines += [f"| {c} | {r.counts[c]} |" for c in CHECKS]
    worst = max(rr.availability.values(), default=0)
    lines += ["", "Longest window with no acknowledged write while ZooKeeper and a majority of brokers were up and joined, "
              "per partition (s): " + ", ".join(f"{p}: {v}" for p, v in sorted(rr.availability.items()))
              + f" (worst {worst})."]
    lines += ["", "Faults (seconds from the start of the run):", ""]
    for a, b, kind, broker in fault_bands(rr.events):
        who = "ZooKeeper" if kind.startswith("zk-") else f"broker {broker}"
        lines.append(f"- {a - rr.started:6.1f}–{b - rr.started:6.1f}  {kind} {who}")
    errors = [e for e in rr.events if e.get("error")]
    for e in errors:
        lines.append(f"- heal of {e['kind']} on broker {e['broker']} failed: {e['error']}")
    for c in CHECKS:
        if r.counts[c]:
            lines += ["", f"{c} (first {len(r.examples[c])}):"]
            lines += [f"    {json.dumps(x)[:400]}" for x in r.examples[c]]
    for v in [x["value"] for x in r.examples.get("duplicate", [])][:2]:
        lines += client_log_around(rr.workdir, v)
    return "\n".join(lines) + "\n"


def client_log_around(workdir: Path, value: str, before: float = 20.0, after: float = 5.0,
                      most: int = 60) -> list[str]:
    """The lines its producer's librdkafka logged (its history's .stderr: the "eos" debug
    context) from ``before`` seconds before it sent ``value`` to ``after`` seconds after
    the answer: how a duplicate came about, from the run's output alone."""
    name = value.rpartition("-")[0]
    hist, err = workdir / "history" / f"{name}.jsonl", workdir / "history" / f"{name}.stderr"
    if not hist.exists() or not err.exists():
        return []
    # sent (an ack's time less its latency) to answered
    times = [t for e in _read_jsonl(hist) if e.get("v") == value for t in (e["t"] - e.get("lat", 0), e["t"])]
    if not times:
        return []
    lo, hi = min(times) - before, max(times) + after
    picked = []
    for line in err.read_text(errors="replace").splitlines():
        parts = line.split("|", 3)  # %7|1795803722.830|IDEMPSTATE|...
        try:
            t = float(parts[1])
        except (IndexError, ValueError):
            continue
        if lo <= t <= hi:
            picked.append(f"    {line[:300]}")
    if len(picked) > most:  # the last ones: what led up to the answer
        picked = [f"    ({len(picked) - most} earlier lines left out)"] + picked[-most:]
    return ["", f"{name}'s client log around {value} ({err.name}):"] + picked


def timeline(rr: RunResult, path: Path) -> Path | None:
    """The PNG timeline; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    acks = defaultdict(list)  # partition -> [(t, latency)]
    for f in (rr.workdir / "history").glob("p*.jsonl"):
        for e in _read_jsonl(f):
            if e["k"] == "ack":
                acks[e["p"]].append((e["t"] - rr.started, e["lat"]))
    fig, (ax_rate, ax_lat) = plt.subplots(2, 1, figsize=(13, 7), sharex=True)
    end = max((t for pts in acks.values() for t, _ in pts), default=rr.duration)
    for p in sorted(acks):
        pts = sorted(acks[p])
        buckets = defaultdict(int)
        for t, _ in pts:
            buckets[int(t)] += 1
        xs = list(range(int(min(t for t, _ in pts)), int(end) + 1))
        ax_rate.plot(xs, [buckets.get(x, 0) for x in xs], lw=0.8, label=f"partition {p}")
        ax_lat.scatter([t for t, _ in pts], [lat for _, lat in pts], s=1, alpha=0.4)
    seen = set()
    for a, b, kind, broker in fault_bands(rr.events):
        for ax in (ax_rate, ax_lat):
            ax.axvspan(a - rr.started, b - rr.started, color=_COLOURS.get(kind, "#cccccc"), alpha=0.25,
                       label=None if kind in seen or ax is ax_lat else kind)
        seen.add(kind)
        ax_rate.text(a - rr.started, ax_rate.get_ylim()[1] * 0.98, f"{kind} {'zk' if kind.startswith('zk') else broker}",
                     fontsize=6, rotation=90, va="top")
    ax_rate.set_ylabel("acked writes/s")
    ax_lat.set_ylabel("ack latency (s)")
    ax_lat.set_yscale("log")
    ax_lat.set_xlabel("seconds since the faults started")
    ax_rate.legend(fontsize=6, ncol=6, loc="upper right")
    ax_rate.set_title(f"Krait chaos run, seed {rr.seed}: {'PASS' if rr.ok else 'FAIL'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(rr: RunResult) -> tuple[Path, Path | None]:
    text = summary(rr)
    out = rr.workdir / "report.md"
    out.write_text(text)
    (rr.workdir / "result.json").write_text(json.dumps({
        "seed": rr.seed, "ok": rr.ok, "counts": rr.result.counts, "examples": rr.result.examples,
        "stats": rr.result.stats, "availability": rr.availability, "skipped": rr.skipped,
        "timings": rr.timings}, indent=1, default=str))
    return out, timeline(rr, rr.workdir / "timeline.png")
