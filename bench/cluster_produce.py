"""Parts 1 and 4 of bench/cluster_bench.py: produce throughput and latency with
replication, and scale-out.

1. On one 3-broker cluster, rf=3 acks=all against rf=1 acks=1, side by side in each round
   (the order alternates), 100 B and 1 KiB records, both topics led by the same broker (a
   manual assignment; not the controller). `krait perf produce` (confluent-kafka), one
   client process at a time: throughput at full speed with the ack latency it sees, then
   the ack latency at a fixed rate, then one more rf=3 run with py-spy on the leader and a
   follower (not timed).
4. On one 2-broker cluster, rf=1 acks=1: a topic with all its partitions on one broker
   against one with them spread over both, side by side in each round.

Each run gets a fresh topic. CPU % (100 = one core) is each process's CPU time over the
client's timed window: the brokers are idle outside it apart from a Metadata request or
two, and the client measures its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from cluster_common import (
    BusySampler,
    Cluster,
    Sizes,
    ZooKeeper,
    cpu_seconds,
    create_topic,
    delete_topic,
    med,
    pick_leader,
    py_spy,
    run_perf,
    wait_quiet,
)

SIZES = ((100, "100B"), (1024, "1KiB"))
#: a process at or above this share of one core is the bound; the machine is when the sum is
BOUND_PCT = 85


def _bound(client: float | None, brokers: dict[str, float], machine: float | None) -> str:
    """Which side limited a run, from the CPU each process used and the whole machine's."""
    procs = {"client": client or 0.0, **brokers}
    name, top = max(procs.items(), key=lambda kv: kv[1])
    if top >= BOUND_PCT:
        return f"{name} ({top:.0f}% of a core)"
    cores = os.cpu_count() or 1
    if machine is None:
        return "none saturated (run too short to sample the machine)"
    if machine >= BOUND_PCT * cores:
        return f"machine ({machine:.0f}% of {cores * 100}% busy)"
    return f"none saturated ({machine:.0f}% of {cores * 100}% busy)"


def measured_perf(cl: Cluster, roles: dict[int, str], topic: str, n: int, size: int, parts: int, acks: str,
                  s: Sizes, extra: list[str] | None = None, *, delete: bool = True) -> dict:
    """One `krait perf produce` run (after waiting up to s.quiet_wait for a quiet machine);
    its figures plus each broker role's CPU % (the topic is deleted afterwards unless told
    not to)."""
    waited = wait_quiet(s.quiet_wait)
    cpu0 = cpu_seconds(cl)
    try:
        with BusySampler() as busy:
            r = run_perf("produce", cl.bootstrap, topic, n, size, parts, acks, "none", s.timeout, extra)
        cpu1 = cpu_seconds(cl)
    finally:
        if delete:
            delete_topic(cl, topic)
    secs = r["seconds"] or 1e-9
    machine = busy.median
    by_role: dict[str, float] = {}
    for i, role in roles.items():
        if i in cpu0 and i in cpu1:
            by_role[role] = by_role.get(role, 0.0) + 100 * (cpu1[i] - cpu0[i]) / secs
    lat = r.get("ack_latency_ms") or {}
    return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"], "ack_p50": lat.get("p50"),
            "ack_p99": lat.get("p99"), "ack_p999": lat.get("p999"), "client_cpu_pct": r.get("client_cpu_pct"), "seconds": r["seconds"],
            **{f"{k}_cpu_pct": v for k, v in by_role.items()}, "machine_busy_pct": machine,
            "waited_for_quiet_s": waited, "other_load_pct": None if machine is None else
            max(0.0, machine - (r.get("client_cpu_pct") or 0.0) - sum(by_role.values())),
            "bound": _bound(r.get("client_cpu_pct"), by_role, machine)}


def _fmt_run(v: dict) -> str:
    return (f"{v['records_per_sec']:,.0f} rec/s, {v['mb_per_sec']:.1f} MB/s, ack p50 {v['ack_p50'] or 0:.1f} "
            f"p99 {v['ack_p99'] or 0:.1f} ms; CPU client {v['client_cpu_pct'] or 0:.0f}% " +
            " ".join(f"{k[:-8]} {x:.0f}%" for k, x in v.items() if k.endswith("_cpu_pct") and k != "client_cpu_pct"))


def produce_part(zkp: ZooKeeper, s: Sizes, log, profile_dir: Path | None) -> dict:
    """rf=3 acks=all vs rf=1 acks=1: {"throughput": {(size, cfg): [values per round]},
    "latency": {cfg: [...]}, "profile": {name: summary}, "leader": id, "controller": id}."""
    out: dict = {"throughput": {}, "latency": {}, "profile": {}}
    with zkp.cluster(3) as cl:
        leader = pick_leader(cl)
        followers = [i for i in sorted(cl.brokers) if i != leader]
        out["leader"], out["followers"] = leader, followers
        roles = {leader: "leader", **{f: "followers" for f in followers}}
        configs = {"rf1": ([[leader]], "1"), "rf3": ([[leader, *followers]], "all")}
        for r in range(s.rounds):
            order = ["rf1", "rf3"] if r % 2 == 0 else ["rf3", "rf1"]
            for size, label in SIZES:
                n = s.n100 if size == 100 else s.n1k
                for cfg in order:
                    assignment, acks = configs[cfg]
                    topic = f"tp-{label}-{cfg}-{r}"
                    create_topic(cl, topic, assignment)
                    v = measured_perf(cl, roles, topic, n, size, 1, acks, s)
                    out["throughput"].setdefault((label, cfg), []).append(v)
                    log(f"  round {r + 1} produce {label} {cfg}: {_fmt_run(v)}; bound: {v['bound']}")
        n = int(s.lat_rate * s.lat_seconds)
        out["lat_rate"] = s.lat_rate
        for r in range(s.rounds):
            for cfg in (["rf1", "rf3"] if r % 2 == 0 else ["rf3", "rf1"]):
                assignment, acks = configs[cfg]
                topic = f"lat-{cfg}-{r}"
                create_topic(cl, topic, assignment)
                v = measured_perf(cl, roles, topic, n, 100, 1, acks, s,
                                  ["--throughput", str(s.lat_rate), "--latency-sample", "1"])
                out["latency"].setdefault(cfg, []).append(v)
                log(f"  round {r + 1} latency at {s.lat_rate:,}/s {cfg}: {_fmt_run(v)}")
        if profile_dir is not None:
            topic = "tp-profile-rf3"
            create_topic(cl, topic, configs["rf3"][0])
            pids = {"leader": cl.brokers[leader].proc.pid, "follower": cl.brokers[followers[0]].proc.pid}
            with py_spy(pids, profile_dir, out["profile"]):
                v = measured_perf(cl, roles, topic, s.n100, 100, 1, "all", s, delete=False)
            delete_topic(cl, topic)
            out["profile_run"] = v
            log(f"  profiled rf3 100B run (py-spy on brokers {leader} and {followers[0]}): {_fmt_run(v)}")
    return out


def scaleout_part(zkp: ZooKeeper, s: Sizes, log) -> dict:
    """One broker vs two (rf=1 acks=1, partitions on one broker or spread over both):
    {(size, layout): [values per round]}."""
    out: dict = {}
    parts = s.scaleout_partitions
    with zkp.cluster(2) as cl:
        layouts = {"1 broker": [[1]] * parts, "2 brokers": [[1 + p % 2] for p in range(parts)]}
        roles = {1: "broker1", 2: "broker2"}
        for r in range(s.rounds):
            order = list(layouts) if r % 2 == 0 else list(reversed(layouts))
            for size, label in SIZES:
                n = s.n100 if size == 100 else s.n1k
                for lay in order:
                    topic = f"so-{label}-{lay[0]}-{r}"
                    create_topic(cl, topic, layouts[lay])
                    v = measured_perf(cl, roles, topic, n, size, parts, "1", s)
                    out.setdefault((label, lay), []).append(v)
                    log(f"  round {r + 1} scale-out {label} {lay}: {_fmt_run(v)}; bound: {v['bound']}")
    return out


# --- tables -------------------------------------------------------------------------------------

def _m(runs: list[dict], key: str) -> float | None:
    return med([v.get(key) for v in runs])


def _f(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}f}"


def _bounds(runs: list[dict]) -> str:
    seen: dict[str, int] = {}
    for v in runs:
        key = v["bound"].split(" (")[0]
        seen[key] = seen.get(key, 0) + 1
    return ", ".join(f"{k} {c}/{len(runs)}" for k, c in sorted(seen.items(), key=lambda kv: -kv[1]))


def produce_table(res: dict) -> str:
    rows = ["| records | config | records/s | MB/s | ack p50 ms | ack p99 ms | client CPU % | leader CPU % | "
            "followers CPU % (2) | machine busy % | other load % | bound (runs) |", "|" + "---|" * 12]
    tp = res["throughput"]
    for _, label in SIZES:
        for cfg, name in (("rf1", "rf=1 acks=1"), ("rf3", "rf=3 acks=all")):
            runs = tp.get((label, cfg), [])
            if not runs:
                continue
            rows.append(f"| {label} | {name} | {_f(_m(runs, 'records_per_sec'))} | {_f(_m(runs, 'mb_per_sec'))} | "
                        f"{_f(_m(runs, 'ack_p50'))} | {_f(_m(runs, 'ack_p99'))} | {_f(_m(runs, 'client_cpu_pct'), 0)} | "
                        f"{_f(_m(runs, 'leader_cpu_pct'), 0)} | {_f(_m(runs, 'followers_cpu_pct'), 0)} | "
                        f"{_f(_m(runs, 'machine_busy_pct'), 0)} | {_f(_m(runs, 'other_load_pct'), 0)} | "
                        f"{_bounds(runs)} |")
        a, b = tp.get((label, "rf1"), []), tp.get((label, "rf3"), [])
        if a and b:
            ratios = [y["records_per_sec"] / x["records_per_sec"] for x, y in zip(a, b, strict=False)
                      if x["records_per_sec"]]
            rows.append(f"| {label} | rf3/rf1, per round | {_f(med(ratios), 2)}x | | "
                        f"{' '.join(f'{x:.2f}' for x in ratios)} | | | | | | | |")
    lat = res["latency"]
    if lat:
        rows += ["", "| fixed rate, 100 B | config | records/s | ack p50 ms | ack p99 ms | ack p99.9 ms | leader CPU % | "
                 "followers CPU % (2) |", "|---|---|---|---|---|---|---|---|"]
        for cfg, name in (("rf1", "rf=1 acks=1"), ("rf3", "rf=3 acks=all")):
            runs = lat.get(cfg, [])
            if runs:
                rows.append(f"| {_f(res.get('lat_rate'))}/s | {name} | {_f(_m(runs, 'records_per_sec'))} | {_f(_m(runs, 'ack_p50'), 2)} | "
                            f"{_f(_m(runs, 'ack_p99'), 2)} | {_f(_m(runs, 'ack_p999'), 2)} | "
                            f"{_f(_m(runs, 'leader_cpu_pct'), 0)} | {_f(_m(runs, 'followers_cpu_pct'), 0)} |")
    return "\n".join(rows)


def profile_text(res: dict, top: int = 12) -> str:
    """The top self frames of each profiled broker, as Markdown."""
    out = []
    for name, summary in res.get("profile", {}).items():
        lines = summary.splitlines()
        if "top self:" not in lines:
            out.append(f"- {name}: {summary.strip()}")
            continue
        out.append(f"- {name} ({lines[0]}; % of its wall time, idle included)")
        for section, label in (("top self:", "top self frames"), ("Krait's frames, inclusive:",
                                                                  "Krait's frames, inclusive")):
            if section not in lines:
                continue
            i = lines.index(section)
            frames = []
            for ln in lines[i + 1:i + 1 + top]:
                if not ln.strip():
                    break
                frames.append(ln.strip())
            out.append(f"  - {label}: " + "; ".join(f"`{f}`" for f in frames))
    return "\n".join(out)


def scaleout_table(res: dict) -> str:
    rows = ["| records | partitions on | records/s | MB/s | broker 1 CPU % | broker 2 CPU % | client CPU % | "
            "machine busy % | other load % | bound (runs) |", "|" + "---|" * 10]
    for _, label in SIZES:
        for lay in ("1 broker", "2 brokers"):
            runs = res.get((label, lay), [])
            if runs:
                rows.append(f"| {label} | {lay} | {_f(_m(runs, 'records_per_sec'))} | {_f(_m(runs, 'mb_per_sec'))} | "
                            f"{_f(_m(runs, 'broker1_cpu_pct'), 0)} | {_f(_m(runs, 'broker2_cpu_pct'), 0)} | "
                            f"{_f(_m(runs, 'client_cpu_pct'), 0)} | {_f(_m(runs, 'machine_busy_pct'), 0)} | "
                            f"{_f(_m(runs, 'other_load_pct'), 0)} | {_bounds(runs)} |")
        a, b = res.get((label, "1 broker"), []), res.get((label, "2 brokers"), [])
        if a and b:
            ratios = [y["records_per_sec"] / x["records_per_sec"] for x, y in zip(a, b, strict=False)
                      if x["records_per_sec"]]
            rows.append(f"| {label} | 2/1, per round | {_f(med(ratios), 2)}x | | "
                        f"{' '.join(f'{x:.2f}' for x in ratios)} | | | | | |")
    return "\n".join(rows)

