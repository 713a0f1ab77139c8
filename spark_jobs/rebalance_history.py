"""rebalance_history: each consumer group's generations (classic) or epochs (KIP-848 consumer
protocol) over time, rebuilt from __consumer_offsets: when each rebalance started and ended,
who was in each generation, who joined, left or was evicted, how long the group had no
assignment.

    spark-submit spark_jobs/rebalance_history.py --log-dirs DIR --output OUT [--groups g1,g2]

Classic groups. Kafka (and Krait) write a GroupMetadata record when the leader's SyncGroup
completes a generation (its assignment) and when the group becomes Empty. Per generation:

* exact: ``assigned_ms`` (the record's append time: members get their assignment then),
  ``join_completed_ms`` (the value's currentStateTimestamp: the group entered
  CompletingRebalance, every member had rejoined or was dropped), so the sync phase, and
  the members (member id, group.instance.id, client id, host, timeouts, partitions);
* bounds: the start of the rebalance is not logged. ``start_lower_bound_ms`` is the later of
  the previous generation's assignment and ``join_completed_ms`` minus the largest rebalance
  timeout (the join phase cannot last longer); ``last_commit_before_ms`` is the group's last
  offset commit before the join completed, an estimate of the start (the group was still
  consuming; commits are accepted while a rebalance prepares, so the start is seldom much
  before it, and may be just after it). ``no_assignment_ms`` is {min: the sync phase,
  estimate: from the last commit, max: from the lower bound} (eager assignors: members hold
  nothing from when they rejoin until the assignment; cooperative ones keep most partitions);
* departures are inferred: LeaveGroup and evictions are not logged. Commits are attributed
  to the member that owned the partition in that generation (only it may commit it); a
  member last seen (commit, or its assignment) less than its session timeout before the join
  completed did not expire: it ``left``; one silent for at least its session timeout while
  the others went on committing was ``evicted`` (likely); otherwise ``left or evicted``.

Consumer-protocol groups (KIP-848): the group epoch, target assignment and each member's
current assignment (member epoch, state) records, all at exact append times: per epoch when
it started (the epoch bump), when its target assignment was computed, when each member
reached it (a Stable current assignment at that epoch) and so when the group was reconciled;
per member how long it was in the group with no partitions. Tombstones (null values) delete.

Writes OUT/rebalance_history.json, OUT/rebalance_generations.csv and one timeline per group,
OUT/rebalance_<group>.png, and prints a summary table. The group records are few and are
decoded on the driver; offset commits are decoded on the executors and aggregated there
(last commit per generation window and partition).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

if not __package__:  # run as a script (spark-submit spark_jobs/rebalance_history.py)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_jobs.jobcommon import base_parser, iso, log, print_table, progress, reader, session, write_json
from spark_jobs.rebalance_charts import chart_classic, chart_consumer

__all__ = ["Rec", "decode_group_records", "classic_windows", "classic_history", "consumer_history", "main"]

MEMBER_STATES = {0: "stable", 1: "unrevoked partitions", 2: "unreleased partitions", 127: "unknown"}


class Rec(NamedTuple):
    """One __consumer_offsets record as read: log offset, append time (ms), key, value, and
    the __consumer_offsets partition (-1: unknown)."""

    offset: int
    ts: int
    key: bytes
    value: bytes | None
    partition: int = -1


class ClassicRec(NamedTuple):
    offset: int
    ts: int
    value: Any  # GroupMetadataValue | None (tombstone)


class ConsumerRec(NamedTuple):
    offset: int
    ts: int
    key: Any  # ConsumerGroupKey
    value: Any  # a consumer-group record value | None (tombstone)


# --- decoding -------------------------------------------------------------------------------------
def decode_group_records(recs: Iterable[Rec], offsets_partitions: int = 0) -> dict:
    """Group records (classic GroupMetadata, KIP-848 types 3-8) by group, in log order, through
    the coordinator's own codecs. Offset commits are skipped; undecodable records counted.

    A group Krait's former placement wrote into another partition has its older records
    there and the newer ones in its own (Kafka's placement among ``offsets_partitions``;
    0: every record is taken as in its own): those come last, and the tombstones its move
    left behind in the former partition are no deletion of the group."""
    from coordinator.consumer.records import ConsumerGroupKey, decode_any_key, decode_record
    from coordinator.placement import partition_for_key
    from coordinator.records import GroupMetadataKey, RecordDecodeError, decode_group_metadata_value

    classic: dict[str, list[ClassicRec]] = {}
    consumer: dict[str, list[ConsumerRec]] = {}
    bad = 0
    decoded: list[tuple[bool, Rec, Any]] = []  # (in the group's own partition, record, key)
    for r in recs:
        try:
            key = decode_any_key(r.key)
        except RecordDecodeError:
            bad += 1
            continue
        home = offsets_partitions <= 0 or r.partition < 0 or partition_for_key(key.group, offsets_partitions) == r.partition
        decoded.append((home, r, key))
    decoded.sort(key=lambda d: (d[0], d[1].offset))
    moved = {key.group for home, _, key in decoded if home}
    for home, r, key in decoded:
        if r.value is None and not home and key.group in moved:
            continue
        try:
            if isinstance(key, GroupMetadataKey):
                v = None if r.value is None else decode_group_metadata_value(r.value)
                classic.setdefault(key.group, []).append(ClassicRec(r.offset, r.ts, v))
            elif isinstance(key, ConsumerGroupKey):
                _, v = decode_record(key, r.value)
                consumer.setdefault(key.group, []).append(ConsumerRec(r.offset, r.ts, key, v))
        except RecordDecodeError:
            bad += 1
    return {"classic": classic, "consumer": consumer, "undecodable": bad}


def _partitions(assignment: bytes) -> list[str]:
    from coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment

    if not assignment:
        return []
    try:
        return [f"{t}-{p}" for t, ps in decode_assignment(assignment) for p in sorted(ps)]
    except ConsumerProtocolError:
        return []


# --- classic groups ----------------------------------------------------------------------------------
def classic_windows(recs: list[ClassicRec]) -> list[tuple[int, int, int]]:
    """(record offset, from ms, to ms) per GroupMetadata record: the commits in [from, to) were
    made by the members of the previous record's generation (commits are refused while a
    generation waits for its assignment), so they end up keyed by the record that ended it."""
    out, prev = [], 0
    for r in recs:
        if r.value is None:
            prev = r.ts
            continue
        out.append((r.offset, prev, r.ts))
        prev = r.ts
    return out


def _member(m: Any, leader: str | None) -> dict:
    return {"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
            "host": m.client_host, "session_timeout_ms": m.session_timeout, "rebalance_timeout_ms": m.rebalance_timeout,
            "partitions": _partitions(m.assignment), "leader": m.member_id == leader}


def _departure(m: dict, prev_ts: int, join_ms: int, window: dict[str, int], instances_now: set[str]) -> dict:
    """Why ``m`` (a member of the previous generation) is not in the next one."""
    d = {"member_id": m["member_id"], "client_id": m["client_id"], "instance_id": m["instance_id"]}
    if m["instance_id"] is not None and m["instance_id"] in instances_now:
        return {**d, "how": "replaced (same group.instance.id)", "basis": "a new member id took its static instance id",
                "last_commit_ms": None, "silent_ms": None}
    mine = [window[p] for p in m["partitions"] if p in window]
    last_commit = max(mine) if mine else None
    seen = max(last_commit or prev_ts, prev_ts)
    silent = join_ms - seen
    others = [t for p, t in window.items() if p not in m["partitions"] and t > seen]
    st, rt = m["session_timeout_ms"], m["rebalance_timeout_ms"]
    if silent < st:
        if rt > 0 and join_ms - prev_ts >= rt:
            how, basis = "left or evicted", (f"seen {silent} ms before the join completed (< session timeout {st} ms), "
                                             f"but the join phase may have lasted its rebalance timeout ({rt} ms)")
        else:
            how, basis = "left", (f"seen {silent} ms before the join completed, less than its session timeout "
                                  f"({st} ms): its session did not expire, it sent LeaveGroup")
    elif others:
        how, basis = "evicted", (f"no commit from it for {silent} ms (>= session timeout {st} ms) while the group "
                                 f"went on committing: its session expired (likely)")
    else:
        how, basis = "left or evicted", f"silent for {silent} ms (>= session timeout {st} ms), as was the whole group"
    return {**d, "how": how, "basis": basis, "last_commit_ms": last_commit, "silent_ms": silent}


def classic_history(recs: list[ClassicRec], commits: dict[tuple[str, int, str, int], int], group: str | None = None,
                    end_ms: int | None = None) -> dict:
    """Generations of one classic group from its GroupMetadata records (log order) and the last
    commit per (group, record offset, topic, partition) in the record's window (see
    :func:`classic_windows`)."""
    gens: list[dict] = []
    deleted = None
    prev: dict | None = None
    prev_ts: int | None = None
    for r in recs:
        v = r.value
        if v is None:
            deleted = r.ts
            prev = None
            prev_ts = r.ts
            continue
        window = {f"{t}-{p}": ts for (g, off, t, p), ts in commits.items() if off == r.offset and (group is None or g == group)}
        members = [_member(m, v.leader) for m in v.members]
        empty = not members
        join_ms = v.current_state_timestamp if v.current_state_timestamp >= 0 else r.ts
        join_ms = min(join_ms, r.ts)
        window = {p: t for p, t in window.items() if t <= join_ms}
        ids_now = {m["member_id"] for m in members}
        prev_members = prev["members"] if prev else []
        ids_before = {m["member_id"] for m in prev_members}
        instances_now = {m["instance_id"] for m in members if m["instance_id"] is not None}
        left = [_departure(m, prev_ts if prev_ts is not None else r.ts, join_ms, window, instances_now)
                for m in prev_members if m["member_id"] not in ids_now]
        max_rt = max([m["rebalance_timeout_ms"] for m in members + prev_members if m["rebalance_timeout_ms"] > 0] or [0])
        lower = join_ms - max_rt if max_rt else None
        if prev_ts is not None:
            lower = prev_ts if lower is None else max(lower, prev_ts)
        last_commit = max(window.values()) if window else None
        if last_commit is not None and lower is not None and last_commit < lower:
            last_commit = None
        estimate = last_commit
        reb: dict[str, Any] = {"start_lower_bound_ms": lower, "last_commit_before_ms": last_commit,
                               "join_completed_ms": join_ms}
        for d in left:
            if d["last_commit_ms"] is not None or d["silent_ms"] is not None:
                seen = max(d["last_commit_ms"] or 0, prev_ts or 0)
                # its partitions were consumed by nobody from at most its last sign of life until now
                d["partitions_orphaned_max_ms"] = r.ts - seen
        if empty:
            reb.update(assigned_ms=None, became_empty_ms=r.ts, sync_phase_ms=None, no_assignment_ms=None)
        else:
            reb.update(assigned_ms=r.ts, sync_phase_ms=r.ts - join_ms, no_assignment_ms={
                "min": r.ts - join_ms,
                "estimate": None if estimate is None else r.ts - estimate,
                "max": None if lower is None else r.ts - lower})
        missing = list(range(prev["generation"] + 1, v.generation)) if prev and v.generation > prev["generation"] + 1 else []
        gen = {"generation": v.generation, "log_offset": r.offset, "state": "Empty" if empty else "Stable",
               "protocol_type": v.protocol_type, "protocol": v.protocol, "leader": v.leader, "members": members,
               "joined": [m["member_id"] for m in members if m["member_id"] not in ids_before],
               "left": left, "rebalance": reb, "missing_generations": missing, "stable_until_ms": None}
        if gens:  # the previous generation lasted until this rebalance started (estimated)
            start = estimate if estimate is not None else join_ms
            was = gens[-1]["rebalance"]["assigned_ms"] or gens[-1]["rebalance"]["became_empty_ms"]
            gens[-1]["stable_until_ms"] = max(start, was)
        gens.append(gen)
        prev, prev_ts = gen, r.ts
    if gens:
        gens[-1]["stable_until_ms"] = deleted if deleted is not None else end_ms
    return {"generations": gens, "deleted_ms": deleted,
            "exact": ["assigned_ms", "join_completed_ms", "sync_phase_ms", "became_empty_ms", "members"],
            "bounds": ["start_lower_bound_ms", "last_commit_before_ms (estimate)", "no_assignment_ms",
                       "left[].how (inferred)"]}


# --- consumer-protocol groups -------------------------------------------------------------------
def consumer_history(recs: list[ConsumerRec], end_ms: int | None = None) -> dict:
    """Epochs and members of one KIP-848 group from its records (log order)."""
    from coordinator.consumer.records import (
        CURRENT_MEMBER_ASSIGNMENT,
        GROUP_METADATA,
        MEMBER_METADATA,
        PARTITION_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        TARGET_ASSIGNMENT_METADATA,
    )

    names: dict[Any, str] = {}
    members: dict[str, dict] = {}  # every member ever seen
    live: set[str] = set()
    current: dict[str, Any] = {}
    target: dict[str, Any] = {}
    epochs: list[dict] = []
    pending_join: list[str] = []
    pending_left: list[dict] = []
    deleted = None

    def parts(assignment: dict) -> list[str]:
        return [f"{names.get(t, str(t))}-{p}" for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
                for p in sorted(ps)]

    def empty_since(m: dict, ts: int, is_empty: bool) -> None:
        if is_empty and m["_empty_from"] is None:
            m["_empty_from"] = ts
        elif not is_empty and m["_empty_from"] is not None:
            m["no_assignment_ms"] += ts - m["_empty_from"]
            m["_empty_from"] = None

    for r in recs:
        k, v, ts = r.key, r.value, r.ts
        if k.type == PARTITION_METADATA and v is not None:
            names.update({t.topic_id: t.name for t in v.topics})
        elif k.type == MEMBER_METADATA:
            mid = k.member_id
            if v is None:
                if mid in live:
                    live.discard(mid)
                    m = members[mid]
                    m["left_ms"] = ts
                    empty_since(m, ts, False)
                    pending_left.append({"member_id": mid, "client_id": m["client_id"], "how": "left or fenced",
                                         "basis": "its records were deleted (a leave and a session expiry look alike)"})
                continue
            if mid not in live:
                live.add(mid)
                if mid not in members:
                    members[mid] = {"member_id": mid, "joined_ms": ts, "left_ms": None, "no_assignment_ms": 0,
                                    "_empty_from": ts, "epochs": []}
                    pending_join.append(mid)
            members[mid].update({"instance_id": v.instance_id, "rack_id": v.rack_id, "client_id": v.client_id,
                                 "host": v.client_host, "rebalance_timeout_ms": v.rebalance_timeout_ms,
                                 "subscribed": list(v.subscribed_topic_names) or v.subscribed_topic_regex,
                                 "server_assignor": v.server_assignor, "classic_protocol": v.classic is not None,
                                 "session_timeout_ms": v.classic.session_timeout_ms if v.classic else None})
        elif k.type == GROUP_METADATA:
            if v is None:
                deleted = ts
                continue
            epochs.append({"epoch": v.epoch, "started_ms": ts, "joined": pending_join, "left": pending_left,
                           "members": sorted(live), "target_ms": None, "target": {}, "reconciliation": [],
                           "reconciled_ms": None, "_pending": set(live)})
            pending_join, pending_left = [], []
            for mid in live:  # already there (epoch bumped with its own records in one batch)
                c = current.get(mid)
                if c is not None and c.state == 0 and c.member_epoch >= v.epoch:
                    _reached(epochs[-1], mid, ts)
        elif k.type == TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                target.pop(k.member_id, None)
            else:
                target[k.member_id] = v.partitions
        elif k.type == TARGET_ASSIGNMENT_METADATA and v is not None:
            for e in reversed(epochs):
                if e["epoch"] == v.assignment_epoch:
                    e["target_ms"] = ts
                    e["target"] = {mid: parts(a) for mid, a in sorted(target.items()) if mid in live}
                    break
        elif k.type == CURRENT_MEMBER_ASSIGNMENT:
            mid = k.member_id
            if v is None:
                current.pop(mid, None)
                continue
            current[mid] = v
            m = members.get(mid)
            if m is not None:
                empty_since(m, ts, not v.assigned)
                m["epochs"].append({"ms": ts, "member_epoch": v.member_epoch,
                                    "state": MEMBER_STATES.get(v.state, str(v.state)), "partitions": parts(v.assigned),
                                    "pending_revocation": parts(v.pending_revocation)})
            if v.state == 0:
                for e in epochs:
                    if e["epoch"] <= v.member_epoch and mid in e["_pending"]:
                        _reached(e, mid, ts)
    last = max([r.ts for r in recs] + [end_ms or 0])
    for m in members.values():
        if m["_empty_from"] is not None and m["left_ms"] is None:
            m["no_assignment_ms"] += last - m["_empty_from"]
        del m["_empty_from"]
    for e in epochs:
        for mid in sorted(e.pop("_pending")):
            gone = members[mid]["left_ms"]
            e["reconciliation"].append({"member_id": mid, "reached_ms": None, "took_ms": None,
                                        "note": "left before reaching it" if gone is not None else "not reached in the log"})
        e["reconciliation"].sort(key=lambda x: x["member_id"])
    return {"epochs": epochs, "members": sorted(members.values(), key=lambda m: m["joined_ms"]), "deleted_ms": deleted,
            "exact": ["started_ms", "target_ms", "reached_ms", "joined_ms", "left_ms", "no_assignment_ms"],
            "bounds": ["left[].how (a leave and a fencing are not told apart)"]}


def _reached(e: dict, mid: str, ts: int) -> None:
    e["_pending"].discard(mid)
    e["reconciliation"].append({"member_id": mid, "reached_ms": ts, "took_ms": ts - e["started_ms"]})
    if not e["_pending"] and all(x["reached_ms"] is not None for x in e["reconciliation"]):
        e["reconciled_ms"] = max([x["reached_ms"] for x in e["reconciliation"]] or [ts])


# --- output ----------------------------------------------------------------------------------------
def _secs(ms: int | None) -> str:
    return "" if ms is None else f"{ms / 1000:.2f}"


def summary_rows(result: dict) -> list[dict]:
    rows = []
    for group, h in sorted(result["classic"].items()):
        for g in h["generations"]:
            r = g["rebalance"]
            names = {m["member_id"]: m["client_id"] for m in g["members"]}
            na = r["no_assignment_ms"]
            rows.append({
                "GROUP": group, "TYPE": "classic", "GEN/EPOCH": g["generation"],
                "AT": (iso(r["assigned_ms"] or r["became_empty_ms"]) or "")[11:23],
                "MEMBERS": len(g["members"]),
                "CHANGES": " ".join([f"+{names.get(j, j)}" for j in g["joined"]]
                                    + [f"-{d['client_id']}({d['how']}" + (f", silent {_secs(d['silent_ms'])} s)"
                                                                         if d["how"] == "evicted" else ")")
                                       for d in g["left"]]) or "-",
                "NO-ASSIGNMENT s": "" if na is None else f"{_secs(na['min'])}..{_secs(na['max'])}"
                                   + ("" if na["estimate"] is None else f" (~{_secs(na['estimate'])})"),
            })
    for group, h in sorted(result["consumer"].items()):
        names = {m["member_id"]: m.get("client_id") for m in h["members"]}
        for e in h["epochs"]:
            took = None if e["reconciled_ms"] is None else e["reconciled_ms"] - e["started_ms"]
            rows.append({
                "GROUP": group, "TYPE": "consumer", "GEN/EPOCH": e["epoch"], "AT": (iso(e["started_ms"]) or "")[11:23],
                "MEMBERS": len(e["members"]),
                "CHANGES": " ".join([f"+{names.get(j, j)}" for j in e["joined"]]
                                    + [f"-{names.get(d['member_id'])}({d['how']})" for d in e["left"]]) or "-",
                "NO-ASSIGNMENT s": "" if took is None else f"reconciled in {_secs(took)}",
            })
    return rows


def write_csv(path: str, result: dict) -> None:
    import csv

    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "type", "generation_or_epoch", "state", "start_lower_bound", "last_commit_before",
                    "join_completed_or_started", "assigned_or_reconciled", "no_assignment_min_ms",
                    "no_assignment_estimate_ms", "no_assignment_max_ms", "members", "joined", "left"])
        for group, h in sorted(result["classic"].items()):
            for g in h["generations"]:
                r, na = g["rebalance"], g["rebalance"]["no_assignment_ms"] or {}
                w.writerow([group, "classic", g["generation"], g["state"], iso(r["start_lower_bound_ms"]),
                            iso(r["last_commit_before_ms"]), iso(r["join_completed_ms"]), iso(r["assigned_ms"]),
                            na.get("min"), na.get("estimate"), na.get("max"),
                            " ".join(m["member_id"] for m in g["members"]), " ".join(g["joined"]),
                            " ".join(f"{d['member_id']}:{d['how']}" for d in g["left"])])
        for group, h in sorted(result["consumer"].items()):
            for e in h["epochs"]:
                w.writerow([group, "consumer", e["epoch"], "", "", "", iso(e["started_ms"]), iso(e["reconciled_ms"]),
                            "", "", "", " ".join(e["members"]), " ".join(e["joined"]),
                            " ".join(f"{d['member_id']}:{d['how']}" for d in e["left"])])


def _file_name(group: str) -> str:
    return "rebalance_" + re.sub(r"[^A-Za-z0-9._-]", "_", group) + ".png"


# --- the job ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None, spark: Any = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--groups", help="comma-separated groups (default: all)")
    args = ap.parse_args(argv)
    args.topics = None  # __consumer_offsets only
    os.makedirs(args.output, exist_ok=True)
    own = spark is None
    if own:
        spark = session("krait-rebalance-history", args.master)
    from pyspark.sql import functions as F

    from spark_jobs.consumer_lag import COMMITS_SCHEMA, decode_commits, offsets_partitions
    from spark_jobs.logdir import list_partitions

    wanted = set(args.groups.split(",")) if args.groups else None
    result: dict[str, Any] = {"classic": {}, "consumer": {}, "undecodable_records": 0}
    if not any(p.topic == "__consumer_offsets" for p in list_partitions(args.log_dirs.split(","))):
        log("no __consumer_offsets partitions in the log dirs: no groups")
    else:
        raw = reader(spark, args, subscribe="__consumer_offsets").load() \
            .select("key", "value", "partition", "offset", F.unix_millis("timestamp").alias("log_ts"))
        is_commit = F.hex(F.substring("key", 1, 2)).isin("0000", "0001")
        with progress(spark, "group records"):
            rows = raw.where(F.col("key").isNotNull() & ~is_commit).select("key", "value", "partition", "offset", "log_ts").collect()
        # a group's partition keeps its log order (decode_group_records orders a moved group's two)
        recs = [Rec(r.offset, r.log_ts, bytes(r.key), None if r.value is None else bytes(r.value), r.partition)
                for r in rows]
        dec = decode_group_records(recs, offsets_partitions(
            (p.topic, p.partition) for p in list_partitions(args.log_dirs.split(","))))
        result["undecodable_records"] = dec["undecodable"]
        classic = {g: v for g, v in dec["classic"].items() if wanted is None or g in wanted}
        consumer = {g: v for g, v in dec["consumer"].items() if wanted is None or g in wanted}
        groups = sorted(set(classic) | set(consumer))
        commits_by_key: dict[tuple[str, int, str, int], int] = {}
        last_commit: dict[str, int] = {}
        if groups:
            commits = raw.where(is_commit).mapInArrow(decode_commits, COMMITS_SCHEMA) \
                .where(~F.col("tombstone") & F.col("group").isin(groups)).select("group", "topic", "partition", "log_ts")
            # one window per generation, plus one per group over everything (offset -1: its last commit)
            windows = [(g, off, lo, hi) for g, rs in classic.items() for off, lo, hi in classic_windows(rs)]
            windows += [(g, -1, 0, 1 << 62) for g in groups]
            with progress(spark, f"last commits in {len(windows)} windows"):
                wdf = spark.createDataFrame(windows, "wgroup string, woffset long, lo long, hi long")
                agg = (commits.join(F.broadcast(wdf), (commits.group == wdf.wgroup) & (commits.log_ts >= wdf.lo)
                                    & (commits.log_ts < wdf.hi))
                       .groupBy("group", "woffset", "topic", "partition").agg(F.max("log_ts").alias("t")).collect())
            for r in agg:
                if r.woffset == -1:
                    last_commit[r.group] = max(last_commit.get(r.group, 0), r.t)
                else:
                    commits_by_key[(r.group, r.woffset, r.topic, r.partition)] = r.t
        for g, rs in sorted(classic.items()):
            end = max([r.ts for r in rs] + [last_commit.get(g, 0)])
            h = classic_history(rs, {k: v for k, v in commits_by_key.items() if k[0] == g}, g, end_ms=end)
            h["log_end_ms"] = end
            result["classic"][g] = h
        for g, rs in sorted(consumer.items()):
            end = max([r.ts for r in rs] + [last_commit.get(g, 0)])
            h = consumer_history(rs, end_ms=end)
            h["log_end_ms"] = end
            result["consumer"][g] = h

    charts = []
    for g, h in result["classic"].items():
        if h["generations"]:
            charts.append(_file_name(g))
            chart_classic(os.path.join(args.output, charts[-1]), g, h, h["log_end_ms"])
    for g, h in result["consumer"].items():
        if h["epochs"]:
            charts.append(_file_name(g))
            chart_consumer(os.path.join(args.output, charts[-1]), g, h, h["log_end_ms"])
    write_json(os.path.join(args.output, "rebalance_history.json"), result)
    write_csv(os.path.join(args.output, "rebalance_generations.csv"), result)
    print_table(summary_rows(result), ["GROUP", "TYPE", "GEN/EPOCH", "AT", "MEMBERS", "CHANGES", "NO-ASSIGNMENT s"])
    log(f"wrote {args.output}/rebalance_history.json, rebalance_generations.csv and {len(charts)} timeline(s)")
    if own:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
