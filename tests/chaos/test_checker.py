"""The checker finds each kind of violation it claims to find (synthetic histories, each
with one planted fault), and passes a clean history."""

from __future__ import annotations

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
