"""The checker: Jepsen's Kafka checks over the clients' histories, the final reads and the
replicas' files. Pure: it takes what the run recorded and returns, per check, the number
of violations (0 is the pass) and a few examples of each.

Checks:
  lost                 an acknowledged value (or a committed transaction's value) that the
                       final read does not return
  duplicate            a value at more than one offset
  inconsistent_offset  two values at one offset, across acknowledgements, polls and reads
  nonmonotonic_send    a producer's later value acknowledged at a lower offset of a partition
  nonmonotonic_poll    a consumer's polls of a partition going backwards within one assignment
  poll_skip            a consumer jumping over a record it should have read (within one
                       assignment, or, when assigned, past the group's last acknowledged
                       commit to an offset no commit ever tried to store)
  aborted_read         a value of an aborted transaction seen at read_committed
  partial_txn          a transaction some but not all of whose values are visible
  offsets_backwards    the group's committed offset below one it acknowledged earlier (a
                       member assigned a partition starting below the last acked commit, or
                       the final committed offset below it)
  unreadable           a partition the final read could not read to its end
  replica_divergence   replicas of a partition that differ below the high watermark
  isr_incomplete       a partition whose ISR is not every replica after healing
  broker_errors        a traceback, or an ERROR line not expected from the faults, in a log
  share_after_accept   a share-group record delivered again after its acceptance was
                       confirmed, or accepted (with confirmation) twice
  share_lost           a record acknowledged to the share topic's producer that no share
                       member was ever given
  share_delivery_count a delivery count outside 1..share.delivery.count.limit, one count
                       confirmed twice, or a count going back below a confirmed release
  registry_id_reused   a Schema Registry id given to two different schemas (by the
                       acknowledgements, the lookups, any broker's final subjects or ids)
  registry_two_ids     one schema under two ids (same sources)
  registry_lost        an acknowledged registration missing from a broker's final state, or
                       there under another id than the one acknowledged
  registry_versions    a subject's versions not 1..N, or not the same on every broker, or a
                       schema at another version than the order of its registrations gives
                       it (in the final state or in a lookup), or a version holding a schema
                       the client never sent
  registry_refused     a registration answered with a 4xx (every request the client sends
                       is valid: only a 5xx or no answer is explained by a fault)
  registry_unreadable  a broker's registry that could not be read at the end, healed

The registry checks (check_registry): each of its clients registers one schema at a time
(its own subjects and schemas; two clients, so that two writers race for ids across the
writer's failovers) and retries it, on the next broker, until it is acknowledged, so the n-th
schema of a subject must be its version n (an attempt that failed without an answer may have been written: the retry then
answers the same id, with nothing new written); only the schema pending when the client
stopped may be in or not. The final reader waits until every broker answers the same (a
follower reads up to its high watermark) or 30 s pass, then its snapshots are checked.

The share-group checks (check_share) and the orderings they allow: a share-partition leader
persists a record's delivery count (through the share coordinator) only when the record's
state changes, by an acknowledgement or a lock expiry; an acquisition itself is not written.
So, legitimately:
  - an acknowledgement that was not confirmed (commit_sync failed, timed out, or answered
    nothing for the partition) may or may not have taken effect: the record may come again,
    at a higher count, or never;
  - a count can repeat: records acquired but not yet acknowledged when their leader fails
    start again from the persisted state, so the new leader hands out a count already seen
    (and even one lower than an acquisition the old leader never persisted);
  - a delivery at a higher count can precede a confirmed acceptance (an old leader's
    acquisition, never persisted, then the leader changed);
  - a client can hand its application a record fetched a while ago (librdkafka fetches in
    the background; a member blocked in commit_sync behind a paused broker polls late), so
    a delivery polled after a confirmed release with a count no higher proves nothing by
    itself: its lock may have expired before the release.
What no failure explains, and the checks count:
  - after a confirmed ACCEPT at count d, a delivery at a count above d polled after the
    confirmation (a new acquisition of an acknowledged record: at one leader counts only
    grow, and a new leader starts from the persisted ACKNOWLEDGED state);
  - two confirmed ACCEPTs of one record, or two confirmed acknowledgements at one count
    (a persisted state is read by every later leader, whose next count is higher; an older
    leader's writes are fenced by the coordinator's leader epoch);
  - after a confirmed RELEASE at count d, a delivery polled after the confirmation at a
    count no higher than d whose own acknowledgement was confirmed (the broker gave that
    member the record at a stale count and let it acknowledge);
  - a delivery count below 1 or above the limit (a record is archived at the limit);
  - a record acknowledged to the producer and never delivered by the end (the members run
    until every such record has been delivered, or a minute after the producers stop).
"""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

CHECKS = ["lost", "duplicate", "inconsistent_offset", "nonmonotonic_send", "nonmonotonic_poll", "poll_skip",
          "aborted_read", "partial_txn", "offsets_backwards", "unreadable", "replica_divergence",
          "isr_incomplete", "broker_errors", "share_after_accept", "share_lost", "share_delivery_count",
          "registry_id_reused", "registry_two_ids", "registry_lost", "registry_versions", "registry_refused",
          "registry_unreadable"]

#: the share group's producer (history name) and members ("s1", "s2", ...)
SHARE_PRODUCER = "sp"
SHARE_MEMBER = re.compile(r"s\d+$")
#: share.delivery.count.limit (the group keeps Kafka's default)
SHARE_DELIVERY_LIMIT = 5

#: the Schema Registry's clients ("sr1", "sr2", ...) and final reader (history names), and
#: its subjects' prefix
REGISTRY_CLIENT = re.compile(r"sr\d+$")
REGISTRY_READ = "sr-read"
REGISTRY_SUBJECT_PREFIX = "chaos-sr-"

#: ERROR lines the faults themselves explain (a full or read-only disk is an error to log)
EXPECTED_ERRORS = re.compile(r"No space left on device|Read-only file system|log dir .* (failed|offline)|"
                             r"KAFKA_STORAGE_ERROR|all log dirs .* have failed|offline after a storage error",
                             re.IGNORECASE)
#: and once every log dir of a broker has failed, its exit (Kafka's shutdown on the last dir)
AFTER_LAST_DIR = re.compile(r"Krait stopped after a fatal error")


@dataclass
class Result:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    examples: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    stats: dict[str, object] = field(default_factory=dict)

    def add(self, check: str, example: object, n: int = 1) -> None:
        self.counts[check] += n
        if len(self.examples[check]) < 10:
            self.examples[check].append(example)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())


def _seq(value: str) -> int:
    return int(value.rsplit("-", 1)[1])


def check(histories: dict[str, list[dict]], replicas: dict[int, dict[int, list[tuple[int, bytes]]]] | None = None,
          high_watermarks: dict[int, int] | None = None, isr: dict[int, list[int]] | None = None,
          brokers: list[int] | None = None, broker_logs: dict[str, str] | None = None,
          assigned: dict[str, list[int]] | None = None) -> Result:
    """``histories``: client name -> its events (workload.py); ``replicas``: partition ->
    broker -> [(base offset, batch bytes)] read from the log files; ``high_watermarks``:
    partition -> HW; ``isr``: partition -> final ISR; ``assigned``: partition -> its assigned
    replicas, what its ISR must hold (``brokers``, every broker, when not given)."""
    r = Result()
    producers = {n: h for n, h in histories.items() if n.startswith("p")}
    txns = [e for n, h in histories.items() if n.startswith("t") for e in h if e["k"] == "txn"]
    consumers = {n: h for n, h in histories.items() if n.startswith("c")}
    drain = histories.get("drain", [])

    reads = {iso: [e for e in drain if e["k"] == "read" and e["iso"] == iso]
             for iso in ("read_uncommitted", "read_committed")}
    final_values = defaultdict(set)  # value -> {(p, o)} at read_uncommitted
    for e in reads["read_uncommitted"]:
        final_values[e["v"]].add((e["p"], e["o"]))
    committed_values = {e["v"] for e in reads["read_committed"]}
    visible = defaultdict(list)  # partition -> sorted offsets visible at read_committed
    for e in reads["read_committed"]:
        visible[e["p"]].append(e["o"])
    for offs in visible.values():
        offs.sort()

    # --- one value per offset, one offset per value ---------------------------------------
    at = defaultdict(set)  # (p, o) -> values seen there by anyone
    for h in [*producers.values(), *[histories[n] for n in histories if n.startswith("t")]]:
        for e in h:
            if e["k"] in ("ack", "tack") and e["o"] is not None and e["o"] >= 0:
                at[(e["p"], e["o"])].add(e["v"])
    for h in consumers.values():
        for e in h:
            if e["k"] == "poll":
                at[(e["p"], e["o"])].add(e["v"])
    for e in drain:
        if e["k"] == "read":
            at[(e["p"], e["o"])].add(e["v"])
    for po, vs in at.items():
        if len(vs) > 1:
            r.add("inconsistent_offset", {"partition": po[0], "offset": po[1], "values": sorted(vs)})
    for v, places in final_values.items():
        if len(places) > 1:
            r.add("duplicate", {"value": v, "at": sorted(places)})

    # --- producers ----------------------------------------------------------------------------
    acked = 0
    r.stats["acked_by"] = {name: sum(1 for e in h if e["k"] == "ack") for name, h in producers.items()}
    for name, h in producers.items():
        per_part = defaultdict(list)
        for e in h:
            if e["k"] != "ack":
                continue
            acked += 1
            if e["v"] not in final_values:
                r.add("lost", {"value": e["v"], "acked_at": [e["p"], e["o"]]})
            elif e["o"] is not None and e["o"] >= 0 and (e["p"], e["o"]) not in final_values[e["v"]]:
                r.add("inconsistent_offset", {"value": e["v"], "acked_at": [e["p"], e["o"]],
                                              "read_at": sorted(final_values[e["v"]])})
            if e["o"] is not None and e["o"] >= 0:  # librdkafka may ack without the offset
                per_part[e["p"]].append((_seq(e["v"]), e["o"]))
        for p, pairs in per_part.items():
            pairs.sort()
            for (s1, o1), (s2, o2) in zip(pairs, pairs[1:], strict=False):
                if o2 <= o1:
                    r.add("nonmonotonic_send", {"producer": name, "partition": p, "seq": [s1, s2], "offsets": [o1, o2]})
    r.stats["acked"] = acked

    # --- transactions -------------------------------------------------------------------------
    aborted_values = set()
    outcomes = defaultdict(int)
    for t in txns:
        outcomes[t["outcome"]] += 1
        vals = [v for v, _p in t["values"]]
        seen = [v in committed_values for v in vals]
        if t["outcome"] == "abort":
            aborted_values.update(vals)
            for v, s in zip(vals, seen, strict=True):
                if s:
                    r.add("aborted_read", {"txn": t["id"], "value": v, "where": "final read_committed"})
        elif t["outcome"] == "commit":
            for v, s in zip(vals, seen, strict=True):
                if not s:
                    r.add("lost", {"txn": t["id"], "value": v, "committed": True})
            if any(seen) and not all(seen):
                r.add("partial_txn", {"txn": t["id"], "values": vals, "visible": seen})
        elif any(seen) and not all(seen):
            r.add("partial_txn", {"txn": t["id"], "values": vals, "visible": seen, "outcome": "unknown"})
    r.stats["transactions"] = dict(outcomes)

    # --- consumers ------------------------------------------------------------------------------
    commits = sorted((e["t"], e["p"], e["o"]) for h in consumers.values() for e in h if e["k"] == "commit")
    commit_times = [c[0] for c in commits]
    # commits whose answer was an error (or never came) may have been stored all the same
    tries = sorted((e["t"], int(p), o) for h in consumers.values() for e in h if e["k"] == "commit_try"
                   for p, o in e["offsets"].items())
    polled = 0
    for name, h in consumers.items():
        last: dict[int, int] = {}
        assigned_at: dict[int, float] = {}
        for e in h:
            if e["k"] == "assign":
                for p in e["ps"]:
                    last.pop(p, None)
                    assigned_at[p] = e["t"]
            elif e["k"] == "revoke":
                for p in e["ps"]:
                    last.pop(p, None)
            elif e["k"] == "poll":
                polled += 1
                p, o = e["p"], e["o"]
                if e["v"] in aborted_values:
                    r.add("aborted_read", {"consumer": name, "value": e["v"], "partition": p, "offset": o})
                if p in last:
                    prev = last[p]
                    if o <= prev:
                        r.add("nonmonotonic_poll", {"consumer": name, "partition": p, "offsets": [prev, o]})
                    else:
                        _skips(r, visible[p], prev, o, {"consumer": name, "partition": p, "offsets": [prev, o]})
                else:
                    # the first poll of an assignment: from the group's committed offset
                    before = commits[:bisect_right(commit_times, assigned_at.get(p, e["t"]))]
                    acked = max((c[2] for c in before if c[1] == p), default=None)
                    if acked is not None and o < acked:
                        r.add("offsets_backwards", {"consumer": name, "partition": p, "started_at": o,
                                                    "acked_commit": acked})
                    elif acked is not None and not any(c[1] == p and c[2] == o for c in tries
                                                       if c[0] <= assigned_at.get(p, e["t"])):
                        _skips(r, visible[p], acked - 1, o, {"consumer": name, "partition": p,
                                                              "committed": acked, "first_poll": o})
                last[p] = o
    r.stats["polled"] = polled
    final_committed = next((e["offsets"] for e in drain if e["k"] == "committed"), None)
    if final_committed is not None:
        for p in {c[1] for c in commits}:
            top = max(c[2] for c in commits if c[1] == p)
            got = final_committed.get(str(p), final_committed.get(p, -1))
            if got < top:
                r.add("offsets_backwards", {"partition": p, "final_committed": got, "acked_commit": top})
    for e in drain:
        if e["k"] == "ends" and e["unfinished"]:
            r.add("unreadable", {"isolation": e["iso"], "partitions": e["unfinished"]}, len(e["unfinished"]))

    # --- replicas, ISR, logs --------------------------------------------------------------------
    for p, per_broker in (replicas or {}).items():
        hw = (high_watermarks or {}).get(p, 0)
        views = {b: [(off, data) for off, data in batches if off < hw] for b, batches in per_broker.items()}
        if not views:
            continue
        ref_b, ref = max(views.items(), key=lambda kv: len(kv[1]))
        for b, v in views.items():
            if v != ref:
                diff = next((i for i, (x, y) in enumerate(zip(v, ref, strict=False)) if x != y), min(len(v), len(ref)))
                r.add("replica_divergence", {"partition": p, "brokers": [ref_b, b], "high_watermark": hw,
                                             "first_difference_at_batch": diff,
                                             "base_offset": (ref[diff][0] if diff < len(ref) else v[diff][0])})
    if isr is not None and brokers:
        for tp, members in isr.items():
            if sorted(members) != sorted((assigned or {}).get(tp, brokers)):
                r.add("isr_incomplete", {"partition": tp, "isr": members})
    for name, text in (broker_logs or {}).items():
        dirs_failed = False  # in this life of the broker (the harness marks each start)
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("==== chaos: start"):
                dirs_failed = False
            elif "have failed" in line and "log dirs" in line:
                dirs_failed = True
            if "Traceback" in line:
                r.add("broker_errors", {"log": name, "line": line[:300], **_traceback_end(lines, i)})
            elif " ERROR " in line and not EXPECTED_ERRORS.search(line) \
                    and not (dirs_failed and AFTER_LAST_DIR.search(line)):
                r.add("broker_errors", {"log": name, "line": line[:300]})
    check_share(r, histories)
    check_registry(r, histories)
    return r


def _traceback_end(lines: list[str], start: int) -> dict[str, str]:
    """The exception and innermost frame of the traceback starting at ``lines[start]``, so a
    report names the failure without the broker's log at hand (CI keeps only the report)."""
    frame = ""
    for line in lines[start + 1:start + 200]:
        if line.lstrip().startswith("File "):
            frame = line.strip()
        elif line and not line[0].isspace() and not line.startswith("During handling"):
            return {"exception": line[:300], "frame": frame[:300]}
    return {}


def check_share(r: Result, histories: dict[str, list[dict]], limit: int = SHARE_DELIVERY_LIMIT) -> None:
    """The share-group checks (see the module docstring) over the share producer's
    acknowledgements and the members' "share" events; nothing without share members."""
    members = {n: h for n, h in histories.items() if SHARE_MEMBER.match(n)}
    if not members and SHARE_PRODUCER not in histories:
        return
    deliveries = defaultdict(list)  # (p, o) -> [event + member]
    for name, h in members.items():
        for e in h:
            if e["k"] == "share":
                deliveries[(e["p"], e["o"])].append({**e, "member": name})
    delivered_values = {e["v"] for ds in deliveries.values() for e in ds}
    acked = [e for e in histories.get(SHARE_PRODUCER, []) if e["k"] == "ack"]
    for e in acked:
        if e["v"] not in delivered_values:
            r.add("share_lost", {"value": e["v"], "acked_at": [e["p"], e["o"]]})

    def brief(e: dict) -> dict:
        return {k: e[k] for k in ("member", "d", "a", "ok", "tp", "t") if k in e}

    for (p, o), ds in deliveries.items():
        where = {"partition": p, "offset": o}
        confirmed = sorted((e for e in ds if e["ok"]), key=lambda e: e["t"])
        accepts = [e for e in confirmed if e["a"] == "ACCEPT"]
        if len(accepts) > 1:
            r.add("share_after_accept", {**where, "accepted_twice": [brief(e) for e in accepts]})
        flagged = set()
        for x in accepts:
            for i, y in enumerate(ds):
                if i not in flagged and y["d"] > x["d"] and y["tp"] > x["t"]:
                    flagged.add(i)
                    r.add("share_after_accept", {**where, "accepted": brief(x), "delivered_after": brief(y)})
        for e in ds:
            if not 1 <= e["d"] <= limit:
                r.add("share_delivery_count", {**where, "limit": limit, "delivery": brief(e)})
        by_count = defaultdict(list)
        for e in confirmed:
            by_count[e["d"]].append(e)
        for d, es in by_count.items():
            if len(es) > 1:
                r.add("share_delivery_count", {**where, "count_confirmed_twice": d, "acks": [brief(e) for e in es]})
        for x in (e for e in confirmed if e["a"] == "RELEASE"):
            for y in confirmed:
                if y is not x and y["tp"] > x["t"] and y["d"] <= x["d"]:
                    r.add("share_delivery_count", {**where, "released": brief(x), "then_confirmed": brief(y)})

    events = [e for ds in deliveries.values() for e in ds]
    r.stats["share"] = {
        "acked": len(acked), "deliveries": len(events), "records": len(deliveries),
        "redeliveries": len(events) - len(deliveries),
        "accepted": sum(1 for ds in deliveries.values() if any(e["ok"] and e["a"] == "ACCEPT" for e in ds)),
        "released": sum(1 for e in events if e["ok"] and e["a"] == "RELEASE"),
        "unconfirmed": sum(1 for e in events if not e["ok"]),
        "at_limit": sum(1 for ds in deliveries.values() if any(e["d"] >= limit for e in ds)),
        "max_count": max((e["d"] for e in events), default=0),
        "by_member": {n: sum(1 for e in h if e["k"] == "share") for n, h in sorted(members.items())},
    }


def registry_fingerprint(schema: str) -> str:
    """A schema's identity as the registry's client and reader see it: its JSON with sorted
    keys (the registry may store it in another order or spacing), hashed."""
    try:
        text = json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
    except ValueError:
        text = schema
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_registry(r: Result, histories: dict[str, list[dict]]) -> None:
    """The Schema Registry checks (see the module docstring) over its client's history
    ("ack": subject, n (the client's n-th schema of the subject), fp, id, and v/lid from a
    lookup; "fail"; "pending") and the final reader's "snapshot" of each broker (versions:
    subject -> [[version, id, fp]], ids: id -> fp); nothing without either."""
    clients = {n: h for n, h in sorted(histories.items()) if REGISTRY_CLIENT.match(n)}
    reads = histories.get(REGISTRY_READ)
    if not clients and reads is None:
        return
    events = [{**e, "client": n} for n, h in clients.items() for e in h]
    acked = [e for e in events if e["k"] == "ack"]
    fails = [e for e in events if e["k"] == "fail"]
    pending = [e for e in events if e["k"] == "pending"]
    snaps = {e["b"]: e for e in reads or [] if e["k"] == "snapshot"}
    if not snaps:
        r.add("registry_unreadable", {"error": "no final read of the brokers' registries"})
    for b, snap in sorted(snaps.items()):
        if not snap["ok"]:
            r.add("registry_unreadable", {"broker": b, "url": snap.get("url"), "error": snap.get("err")})
    good = {b: snap for b, snap in sorted(snaps.items()) if snap["ok"]}

    for e in fails:
        if 400 <= e["status"] < 500:
            r.add("registry_refused", {k: e.get(k) for k in ("client", "subject", "n", "b", "attempt", "status", "code",
                                                             "msg")})

    # --- one id, one schema: every claim, and who made it -------------------------------------
    by_id: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    by_fp: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))

    def claim(schema_id: int, fp: str, source: str) -> None:
        by_id[schema_id][fp].append(source)
        by_fp[fp][schema_id].append(source)

    for e in acked:
        claim(e["id"], e["fp"], f"acknowledged to {e['client']} by b{e['b']} at {e['t']} ({e['subject']} #{e['n']})")
        if e.get("lid") is not None:
            claim(e["lid"], e["fp"], f"looked up by {e['client']} on b{e['lb']} ({e['subject']} v{e.get('v')})")
    for b, snap in good.items():
        for subject, vs in snap["versions"].items():
            for v, schema_id, fp, *_ in vs:
                claim(schema_id, fp, f"b{b} {subject} v{v}")
        for schema_id, fp in snap["ids"].items():
            claim(int(schema_id), fp, f"b{b} /schemas/ids/{schema_id}")
    for schema_id, fps in sorted(by_id.items()):
        if len(fps) > 1:
            r.add("registry_id_reused", {"id": schema_id, "schemas": {fp: src[:4] for fp, src in fps.items()}})
    for fp, ids in sorted(by_fp.items()):
        if len(ids) > 1:
            r.add("registry_two_ids", {"schema": fp, "ids": {i: src[:4] for i, src in sorted(ids.items())}})

    # --- every acknowledged registration on every broker, with its id ---------------------------
    where = {b: {(subject, x[2]): x for subject, vs in snap["versions"].items() for x in vs}
             for b, snap in good.items()}
    for e in acked:
        missing = [b for b in good if (e["subject"], e["fp"]) not in where[b]]
        other = {b: where[b][(e["subject"], e["fp"])][1] for b in good
                 if b not in missing and where[b][(e["subject"], e["fp"])][1] != e["id"]}
        if missing or other:
            r.add("registry_lost", {"client": e["client"], "subject": e["subject"], "n": e["n"], "schema": e["fp"],
                                    "id": e["id"],
                                    "acked_by": e["b"], "acked_at": e["t"], "missing_on": missing,
                                    "under_another_id_on": other})

    # --- versions: 1..N, in the client's order, the same everywhere ------------------------------
    sent = {(e["subject"], e["fp"]): e["n"] for e in [*acked, *fails, *pending]}
    for e in acked:
        if e.get("v") is not None and e["v"] != e["n"]:
            r.add("registry_versions", {"subject": e["subject"], "schema": e["fp"], "lookup_on": e.get("lb"),
                                        "looked_up_version": e["v"], "registered_as": e["n"]})
    for b, snap in good.items():
        for subject, vs in sorted(snap["versions"].items()):
            nums = [x[0] for x in vs]
            if nums != list(range(1, len(nums) + 1)):
                gaps = sorted(set(range(1, max(nums, default=0) + 1)) - set(nums))
                r.add("registry_versions", {"broker": b, "subject": subject, "versions": len(nums),
                                            "highest": max(nums, default=0), "missing": gaps[:10],
                                            "repeated": sorted({n for n in nums if nums.count(n) > 1})[:10]})
            for x in vs:
                if len(x) > 3:
                    r.add("registry_versions", {"broker": b, "subject": subject, "answered_for_another": x[3]})
                n = sent.get((subject, x[2]))
                if n is None and subject.startswith(REGISTRY_SUBJECT_PREFIX):
                    r.add("registry_versions", {"broker": b, "subject": subject, "version": x[0], "id": x[1],
                                                "schema": x[2], "never_sent": True})
                elif n is not None and n != x[0]:
                    r.add("registry_versions", {"broker": b, "subject": subject, "version": x[0], "id": x[1],
                                                "schema": x[2], "registered_as": n})
    for subject in sorted({s for snap in good.values() for s in snap["versions"]}):
        per = {b: snap["versions"].get(subject, []) for b, snap in good.items()}
        ref_b = max(per, key=lambda b: len(per[b]))
        for b, vs in per.items():
            if vs != per[ref_b]:
                i = next((i for i, (x, y) in enumerate(zip(vs, per[ref_b], strict=False)) if x != y),
                         min(len(vs), len(per[ref_b])))
                r.add("registry_versions", {"subject": subject, "brokers": [ref_b, b],
                                            "versions": [len(per[ref_b]), len(vs)], "first_difference": [
                                                per[ref_b][i] if i < len(per[ref_b]) else None,
                                                vs[i] if i < len(vs) else None]})

    lat = sorted(e["lat"] for e in acked)
    final = max(good.values(), key=lambda snap: sum(map(len, snap["versions"].values())), default=None)
    done = next((e for e in reads or [] if e["k"] == "read"), {})
    r.stats["registry"] = {
        "acked": len(acked), "failed_requests": len(fails), "pending": len(pending),
        "retried": sum(1 for e in acked if e["attempts"] > 1),
        "most_attempts": max((e["attempts"] for e in acked), default=0),
        "lookups": sum(1 for e in acked if e.get("v") is not None),
        "lookup_misses": sum(1 for e in acked if e.get("lookup_miss")),
        "acked_by": {str(b): sum(1 for e in acked if e["b"] == b) for b in sorted({e["b"] for e in acked})},
        "by_client": {n: sum(1 for e in h if e["k"] == "ack") for n, h in clients.items()},
        "latency_p50": lat[len(lat) // 2] if lat else None, "latency_max": lat[-1] if lat else None,
        "subjects": len(final["versions"]) if final else 0,
        "versions": sum(map(len, final["versions"].values())) if final else 0,
        "max_id": max((int(i) for i in final["ids"]), default=0) if final else 0,
        "brokers_read": len(good), "read_waited": done.get("waited"), "read_rounds": done.get("rounds"),
    }


def _skips(r: Result, offsets: list[int], prev: int, nxt: int, example: dict) -> None:
    """Visible offsets strictly between ``prev`` and ``nxt`` were jumped over."""
    lo, hi = bisect_right(offsets, prev), bisect_right(offsets, nxt - 1)
    if hi > lo:
        r.add("poll_skip", {**example, "skipped": offsets[lo:min(hi, lo + 5)], "count": hi - lo})


def availability(acks: list[tuple[float, int]], healthy: list[tuple[float, float]],
                 partitions: int) -> dict[int, float]:
    """Per partition, the longest window with no acknowledged write inside the periods when
    a majority of brokers and ZooKeeper were up (``healthy``: [(start, end)])."""
    by_part = defaultdict(list)
    for t, p in acks:
        by_part[p].append(t)
    out = {}
    for p in range(partitions):
        times = sorted(by_part.get(p, []))
        worst = 0.0
        for start, end in healthy:
            inside = [start] + [t for t in times if start < t < end] + [end]
            worst = max(worst, max(b - a for a, b in zip(inside, inside[1:], strict=False)))
        out[p] = round(worst, 1)
    return out
