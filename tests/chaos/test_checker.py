"""The checker finds each kind of violation it claims to find (synthetic histories, each
with one planted fault), and passes a clean history."""

from __future__ import annotations

import json

from tests.chaos import checker


def ack(v, p, o, t=1.0):
    return {"t": t, "k": "ack", "v": v, "p": p, "o": o}


def read(v, p, o, iso="read_uncommitted"):
    return {"t": 9.0, "k": "read", "iso": iso, "v": v, "p": p, "o": o}


def reads(pairs):
    return [read(v, p, o, iso) for v, p, o in pairs for iso in ("read_uncommitted", "read_committed")]


CLEAN_LOG = [("p1-0", 0, 0), ("p1-1", 0, 1), ("p1-2", 0, 2), ("p1-3", 0, 3)]


def clean() -> dict:
    return {"p1": [ack(v, p, o) for v, p, o in CLEAN_LOG],
            "c1": [{"t": 0.5, "k": "assign", "ps": [0]}] + [{"t": 2.0, "k": "poll", "p": p, "o": o, "v": v}
                                                             for v, p, o in CLEAN_LOG]
            + [{"t": 3.0, "k": "commit", "p": 0, "o": 4}],
            "drain": reads(CLEAN_LOG) + [{"t": 9.5, "k": "ends", "iso": "read_committed", "ends": {"0": 4},
                                          "unfinished": []},
                                         {"t": 9.6, "k": "committed", "offsets": {"0": 4}}]}


def only(r: checker.Result, name: str, n: int | None = None) -> None:
    bad = {k: v for k, v in r.counts.items() if v and k != name}
    assert not bad, (bad, dict(r.examples))
    assert r.counts[name] >= 1 if n is None else r.counts[name] == n, dict(r.examples)


def test_a_clean_history_passes():
    r = checker.check(clean())
    assert r.ok, dict(r.examples)
    assert r.stats["acked"] == 4 and r.stats["polled"] == 4


def test_lost_acked_write():
    h = clean()
    h["p1"].append(ack("p1-4", 0, 4))
    only(checker.check(h), "lost", 1)


def test_duplicate_and_inconsistent_offsets():
    h = clean()
    h["drain"] += reads([("p1-1", 0, 5)])
    only(checker.check(h), "duplicate", 1)  # a second copy of p1-1, at offset 5
    h = clean()
    h["p1"][2] = ack("p1-2", 0, 1)  # two values acked at offset 1
    r = checker.check(h)
    assert r.counts["inconsistent_offset"] >= 1 and r.counts["nonmonotonic_send"] == 1


def test_poll_skip_and_nonmonotonic_poll():
    h = clean()
    h["c1"] = [e for e in h["c1"] if not (e["k"] == "poll" and e["o"] == 2)]
    only(checker.check(h), "poll_skip", 1)
    h = clean()
    h["c1"].insert(-1, {"t": 2.0, "k": "poll", "p": 0, "o": 0, "v": "p1-0"})
    only(checker.check(h), "nonmonotonic_poll", 1)


def test_start_past_the_acked_commit():
    h = clean()
    h["c2"] = [{"t": 5.0, "k": "assign", "ps": [0]}, {"t": 5.5, "k": "poll", "p": 0, "o": 3, "v": "p1-3"}]
    h["c1"][-1] = {"t": 3.0, "k": "commit", "p": 0, "o": 2}
    only(checker.check(h), "poll_skip", 1)  # offset 2 was never read by c2
    # ...unless a commit of offset 3 was tried (its answer lost): the group may hold it
    h["c1"].append({"t": 3.5, "k": "commit_try", "offsets": {"0": 3}})
    assert checker.check(h).ok


def test_transactions_aborted_read_and_partial():
    h = clean()
    h["t1"] = [{"t": 1.0, "k": "txn", "id": 1, "values": [["t1-1-0", 0]], "outcome": "abort"},
               {"t": 1.5, "k": "txn", "id": 2, "values": [["t1-2-0", 0], ["t1-2-1", 0]], "outcome": "commit"}]
    h["drain"] += reads([("t1-1-0", 0, 10), ("t1-2-0", 0, 12)])
    r = checker.check(h)
    assert r.counts["aborted_read"] == 1
    assert r.counts["partial_txn"] == 1 and r.counts["lost"] == 1  # t1-2-1 never visible


def test_committed_offsets_going_backwards():
    h = clean()
    h["c2"] = [{"t": 5.0, "k": "assign", "ps": [0]}, {"t": 5.5, "k": "poll", "p": 0, "o": 1, "v": "p1-1"}]
    only(checker.check(h), "offsets_backwards", 1)
    h = clean()
    h["drain"][-1] = {"t": 9.6, "k": "committed", "offsets": {"0": 2}}
    only(checker.check(h), "offsets_backwards", 1)


def test_replicas_isr_and_logs():
    same = [(0, b"a"), (1, b"b")]
    r = checker.check(clean(), {0: {1: same, 2: same, 3: [(0, b"a"), (1, b"X")]}}, {0: 2},
                      {"chaos-0": [1, 2]}, [1, 2, 3], {"b1.log": "x\nTraceback (most recent call last):\n",
                                                       "b2.log": "[t] ERROR storage: No space left on device"})
    assert r.counts["replica_divergence"] == 1
    assert r.counts["isr_incomplete"] == 1
    assert r.counts["broker_errors"] == 1  # the full disk's ERROR is expected, the traceback is not


def test_the_isr_is_checked_against_the_assigned_replicas():
    # a topic created while broker 2 was down has replicas [3, 1]: an ISR of [3, 1] is whole
    isr = {"__share_group_state-0": [3, 1], "chaos-0": [1, 3]}
    r = checker.check(clean(), isr=isr, brokers=[1, 2, 3],
                      assigned={"__share_group_state-0": [3, 1], "chaos-0": [1, 2, 3]})
    assert r.counts["isr_incomplete"] == 1


def test_a_broker_exit_is_expected_only_after_its_last_log_dir_failed():
    exit_line = "[t] ERROR krait.broker: Krait stopped after a fatal error (exit code 1)"
    failed = "[t] CRITICAL krait.log_dir_failure: Shutdown broker because all log dirs in /d have failed"
    assert checker.check(clean(), broker_logs={"b1.log": f"{failed}\n{exit_line}"}).ok
    r = checker.check(clean(), broker_logs={"b1.log": f"{failed}\n==== chaos: start 10:00:00 ====\n{exit_line}"})
    assert r.counts["broker_errors"] == 1


def test_availability_counts_only_healthy_windows():
    acks = [(t, 0) for t in (1, 2, 3, 20, 21)]
    assert checker.availability(acks, [(0, 10), (15, 25)], 1) == {0: 7.0}


# --- the share group ------------------------------------------------------------------------
def sd(p, o, d, a="ACCEPT", ok=True, tp=2.0, t=None, v=None):
    """One share delivery: polled at ``tp``, its commit_sync back at ``t``."""
    return {"t": tp + 0.1 if t is None else t, "k": "share", "p": p, "o": o, "v": v or f"sp-{o}", "d": d, "a": a,
            "ok": ok, "tp": tp}


def shared(*members: list[dict]) -> dict:
    """The clean history plus the share producer's four records (partition 0, offsets 0-3)
    and the given members' deliveries."""
    h = clean()
    h["sp"] = [ack(f"sp-{o}", 0, o) for o in range(4)]
    for i, events in enumerate(members, 1):
        h[f"s{i}"] = events
    return h


def test_a_clean_share_history_passes_with_a_release_redelivered():
    h = shared([sd(0, 0, 1), sd(0, 1, 1), sd(0, 2, 1, "RELEASE", t=2.5), sd(0, 3, 1)],
               [sd(0, 2, 2, tp=3.0)])
    r = checker.check(h)
    assert r.ok, dict(r.examples)
    s = r.stats["share"]
    assert (s["acked"], s["deliveries"], s["records"], s["redeliveries"], s["accepted"], s["released"]) == \
        (4, 5, 4, 1, 4, 1)
    assert s["by_member"] == {"s1": 4, "s2": 1} and s["max_count"] == 2


def test_share_orderings_that_faults_explain():
    base = [sd(0, o, 1) for o in (1, 2, 3)]
    # an acceptance whose confirmation was lost is delivered again, at a higher count
    assert checker.check(shared([sd(0, 0, 1, ok=False), *base], [sd(0, 0, 2, tp=5.0)])).ok
    # a count handed out twice: acquired, the leader failed before anything was persisted
    assert checker.check(shared([sd(0, 0, 1, ok=False, tp=2.0), *base], [sd(0, 0, 1, tp=4.0)])).ok
    # a higher count polled before the confirmed acceptance: an old leader's, never persisted
    assert checker.check(shared([sd(0, 0, 2, ok=False, tp=1.0), *base], [sd(0, 0, 1, tp=4.0)])).ok
    # a stale count polled late after a confirmed release, its own acknowledgement refused
    assert checker.check(shared([sd(0, 0, 2, "RELEASE", tp=2.0, t=3.0), *base],
                                [sd(0, 0, 1, ok=False, tp=4.0), sd(0, 0, 3, tp=5.0)])).ok
    # a record released at every delivery reaches the limit and is archived
    assert checker.check(shared([*(sd(0, 0, d, "RELEASE", tp=float(d)) for d in range(1, 6)), *base])).ok


def test_share_delivered_after_a_confirmed_acceptance():
    base = [sd(0, o, 1) for o in (1, 2, 3)]
    h = shared([sd(0, 0, 1, tp=2.0, t=3.0), *base], [sd(0, 0, 2, ok=False, tp=4.0)])
    only(checker.check(h), "share_after_accept", 1)
    # ...or accepted twice, whatever the counts
    h = shared([sd(0, 0, 1, tp=2.0, t=3.0), *base], [sd(0, 0, 1, tp=2.5, t=3.5)])
    r = checker.check(h)
    assert r.counts["share_after_accept"] == 1 and r.counts["share_delivery_count"] == 1  # one count confirmed twice


def test_share_record_lost():
    h = shared([sd(0, o, 1) for o in (0, 1, 2)])
    r = checker.check(h)
    only(r, "share_lost", 1)
    assert r.examples["share_lost"][0]["value"] == "sp-3"


def test_share_delivery_counts():
    base = [sd(0, o, 1) for o in (1, 2, 3)]
    # beyond share.delivery.count.limit (5)
    h = shared([*(sd(0, 0, d, "RELEASE", tp=float(d)) for d in range(1, 6)), sd(0, 0, 6, "RELEASE", tp=6.0), *base])
    only(checker.check(h), "share_delivery_count", 1)
    # one count acknowledged by two members
    h = shared([sd(0, 0, 1, "RELEASE", tp=2.0, t=3.0), *base], [sd(0, 0, 1, "RELEASE", tp=2.5, t=3.5),
                                                              sd(0, 0, 2, tp=4.0)])
    only(checker.check(h), "share_delivery_count", 1)
    # the count goes back below a confirmed release, and that stale delivery is confirmed
    h = shared([sd(0, 0, 1, "RELEASE", ok=False, tp=1.0), sd(0, 0, 2, "RELEASE", tp=2.0, t=3.0), *base],
               [sd(0, 0, 1, tp=4.0)])
    only(checker.check(h), "share_delivery_count", 1)


# --- the Schema Registry ---------------------------------------------------------------------
def subj(k):
    return f"{checker.REGISTRY_SUBJECT_PREFIX}{k}-value"


def fp(k, n):
    """The fingerprint of the client's n-th schema of subject k (opaque to the checker)."""
    return f"fp{k}.{n}"


def sr_ack(k, n, schema_id, b=1, v=None, lid=None, attempts=1, t=1.0):
    """An acknowledged registration; its lookup (on the next broker) answered version ``v``
    (default: n) and id ``lid`` (default: the acknowledged one); v=False: no lookup."""
    e = {"t": t, "k": "ack", "subject": subj(k), "n": n, "fp": fp(k, n), "id": schema_id, "b": b,
         "attempts": attempts, "sent": t - 0.01, "lat": 0.01}
    if v is False:
        e["lookup_miss"] = [[b % 3 + 1, 404, 40403]]
    else:
        e.update(v=n if v is None else v, lid=schema_id if lid is None else lid, lb=b % 3 + 1)
    return e


def sr_fail(k, n, b=1, status=-1, code=None, attempt=1):
    return {"t": 0.9, "k": "fail", "subject": subj(k), "n": n, "fp": fp(k, n), "b": b, "attempt": attempt,
            "status": status, "code": code, "msg": "timed out" if status < 0 else "error"}


def snap(b, versions):
    """Broker b's final registry: {k: [(version, id, n)]}, n the client's schema at that version."""
    vs = {subj(k): [[v, i, fp(k, n)] for v, i, n in xs] for k, xs in versions.items()}
    ids = {str(i): f for xs in vs.values() for _, i, f in xs}
    return {"t": 9.0, "k": "snapshot", "b": b, "url": f"http://b{b}:8081", "ok": True, "versions": vs, "ids": ids}


#: two subjects, two versions each, ids in the order of registration
SR_FINAL = {0: [(1, 1, 1), (2, 3, 2)], 1: [(1, 2, 1), (2, 4, 2)]}


def registered(client, finals=None, other=None):
    """The clean history plus the registry client's events (and another client's), and each
    broker's final read (``finals``: broker -> its versions, default SR_FINAL on brokers 1-3)."""
    h = clean()
    h["sr1"] = client
    if other is not None:
        h["sr2"] = other
    finals = finals if finals is not None else {b: SR_FINAL for b in (1, 2, 3)}
    h["sr-read"] = [snap(b, vs) for b, vs in finals.items()] + [
        {"t": 9.1, "k": "read", "rounds": 1, "waited": 0.1, "agreed": True}]
    return h


def sr_clean():
    return [sr_ack(0, 1, 1, b=1), sr_ack(1, 1, 2, b=2),
            sr_fail(0, 2, b=3), sr_fail(0, 2, b=1, status=500, code=50002, attempt=2),
            sr_ack(0, 2, 3, b=2, attempts=3), sr_ack(1, 2, 4, b=3, v=False)]


def test_a_clean_registry_history_passes():
    r = checker.check(registered(sr_clean()))
    assert r.ok, dict(r.examples)
    s = r.stats["registry"]
    assert (s["acked"], s["failed_requests"], s["retried"], s["most_attempts"], s["lookups"], s["lookup_misses"]) \
        == (4, 2, 1, 3, 3, 1)
    assert (s["subjects"], s["versions"], s["max_id"], s["brokers_read"]) == (2, 4, 4, 3)
    # the schema pending when the client stopped may be in, or not
    pending = {"t": 5.0, "k": "pending", "subject": subj(1), "n": 3, "fp": fp(1, 3), "attempts": 2}
    final = {**SR_FINAL, 1: [*SR_FINAL[1], (3, 5, 3)]}
    assert checker.check(registered([*sr_clean(), pending], {b: final for b in (1, 2, 3)})).ok
    assert checker.check(registered([*sr_clean(), pending])).ok
    # ...but never with a version the client did not send
    r = checker.check(registered(sr_clean(), {b: final for b in (1, 2, 3)}))
    only(r, "registry_versions", 3)


def test_registry_id_given_to_two_schemas():
    # two writers each acknowledged id 3 for their own second version (one by the writer
    # before a failover, one by the writer after it), and so on every broker
    final = {0: [(1, 1, 1), (2, 3, 2)], 1: [(1, 2, 1), (2, 3, 2)]}
    r = checker.check(registered([sr_ack(0, 1, 1), sr_ack(0, 2, 3, b=1)], {b: final for b in (1, 2, 3)},
                                 other=[sr_ack(1, 1, 2), sr_ack(1, 2, 3, b=2)]))
    only(r, "registry_id_reused", 1)
    assert set(r.examples["registry_id_reused"][0]["schemas"]) == {fp(0, 2), fp(1, 2)}
    assert r.stats["registry"]["by_client"] == {"sr1": 2, "sr2": 2}


def test_registry_schema_under_two_ids():
    # the lookup after the acknowledgement answered another id
    client = [*sr_clean()[:4], sr_ack(0, 2, 3, lid=7), sr_ack(1, 2, 4)]
    only(checker.check(registered(client)), "registry_two_ids", 1)
    # a broker holds an acknowledged schema under another id than the one acknowledged
    finals = {1: SR_FINAL, 2: SR_FINAL, 3: {**SR_FINAL, 1: [(1, 2, 1), (2, 5, 2)]}}
    r = checker.check(registered(sr_clean(), finals))
    assert r.counts["registry_two_ids"] == 1 and r.counts["registry_lost"] == 1
    assert r.examples["registry_lost"][0]["under_another_id_on"] == {3: 5}
    assert r.counts["registry_versions"] == 1  # and b3's subject differs from the others'


def test_registry_lost_version():
    # an acknowledged version missing on every broker: the subject ends at version 1 everywhere
    final = {**SR_FINAL, 1: [(1, 2, 1)]}
    r = checker.check(registered(sr_clean(), {b: final for b in (1, 2, 3)}))
    only(r, "registry_lost", 1)
    lost = r.examples["registry_lost"][0]
    assert (lost["subject"], lost["n"], lost["id"], lost["missing_on"]) == (subj(1), 2, 4, [1, 2, 3])
    # missing on one broker only (a follower that never caught up): lost there, and the
    # brokers disagree on the subject
    r = checker.check(registered(sr_clean(), {1: SR_FINAL, 2: final, 3: SR_FINAL}))
    assert r.counts["registry_lost"] == 1 and r.examples["registry_lost"][0]["missing_on"] == [2]
    assert r.counts["registry_versions"] == 1
    assert sum(r.counts.values()) == 2


def test_registry_versions_with_a_gap_or_out_of_order():
    # the second schema of subject 0 at version 3: versions 1, 3 on every broker
    final = {**SR_FINAL, 0: [(1, 1, 1), (3, 3, 2)]}
    r = checker.check(registered(sr_clean(), {b: final for b in (1, 2, 3)}))
    only(r, "registry_versions", 6)  # per broker: a gap, and a schema at another version than its order
    assert any(x.get("missing") == [2] for x in r.examples["registry_versions"])
    # a lookup answering another version than the order of the registrations gives
    client = [*sr_clean()[:4], sr_ack(0, 2, 3, v=1), sr_ack(1, 2, 4)]
    only(checker.check(registered(client)), "registry_versions", 1)


def test_registry_refused_and_unreadable():
    client = [*sr_clean(), sr_fail(1, 3, status=409, code=409)]
    only(checker.check(registered(client)), "registry_refused", 1)
    h = registered(sr_clean())
    h["sr-read"][1] = {"t": 9.0, "k": "snapshot", "b": 2, "url": "http://b2:8081", "ok": False, "err": "timed out"}
    only(checker.check(h), "registry_unreadable", 1)
    h = registered(sr_clean())
    del h["sr-read"]
    only(checker.check(h), "registry_unreadable", 1)
    # without a registry client nor reader (a run with registry=False): no registry check
    r = checker.check(clean())
    assert r.ok and "registry" not in r.stats


def test_a_traceback_is_reported_with_its_exception_and_innermost_frame():
    log = ("[t] ERROR krait.server: error handling share_fetch v1; closing the connection\n"
           "Traceback (most recent call last):\n"
           '  File "/k/broker/server.py", line 3, in run\n    await x()\n'
           '  File "/k/broker/share/service.py", line 9, in _partition\n    await y\n'
           "IndexError: list index out of range\n")
    r = checker.check(clean(), broker_logs={"b2.log": log})
    tb = [v for v in r.examples["broker_errors"] if "exception" in v]
    assert tb == [{"log": "b2.log", "line": "Traceback (most recent call last):",
                   "exception": "IndexError: list index out of range",
                   "frame": 'File "/k/broker/share/service.py", line 9, in _partition'}]


def test_a_duplicates_report_quotes_its_producers_log_around_it(tmp_path):
    from tests.chaos.report import client_log_around

    hist = tmp_path / "history"
    hist.mkdir()
    (hist / "p3.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"t": 1000.0, "k": "ack", "v": "p3-7", "p": 1, "o": 4, "lat": 2.0},
        {"t": 1001.0, "k": "ack", "v": "p3-8", "p": 2, "o": 5, "lat": 0.01}]) + "\n")
    (hist / "p3.stderr").write_text("".join(f"%7|{t:.3f}|{tag}|rdkafka#producer-1| [thrd:main]: {msg}\n" for t, tag, msg in [
        (970.0, "DRAIN", "too early"),
        (990.0, "DRAIN", "chaos [1] beginning partition drain"),
        (998.5, "ERRSEQ", "skipped sequence numbers: recovering"),
        (1004.0, "IDEMPSTATE", "state change DrainBump -> RequestPID"),
        (1006.0, "NEWPID", "too late")]) + "not a log line\n")
    out = client_log_around(tmp_path, "p3-7")
    assert out[1] == "p3's client log around p3-7 (p3.stderr):"
    assert [line.split("|")[2] for line in out[2:]] == ["DRAIN", "ERRSEQ", "IDEMPSTATE"]
    assert client_log_around(tmp_path, "p9-1") == []
    assert len(client_log_around(tmp_path, "p3-7", most=1)) == 4  # a header, "left out", the last line
