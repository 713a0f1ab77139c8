"""spark_jobs/rebalance_history.py: the pure logic on hand-built records, and the job on a
__consumer_offsets log written by a real broker for real consumer groups (confluent-kafka
members, each its own process): a classic group whose members join one by one, one of which
leaves (LeaveGroup) and one is SIGKILLed (evicted when its 6 s session times out) before the
last one leaves (the group becomes Empty); and a KIP-848 consumer-protocol group whose second
member joins and leaves. The job runs in-process on the session's Spark and once through
`krait spark` from a fresh shell's environment, started as soon as the log exists so that
its JVM start-up overlaps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from coordinator.consumer.records import (
    ConsumerGroupKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    TargetAssignmentValue,
    encode_record,
)
from coordinator.consumer_protocol import encode_assignment
from coordinator.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from spark_jobs import rebalance_history as rh
from tests.spark.conftest import fresh_shell_env

pytest.importorskip("confluent_kafka")


# --- hand-built records ----------------------------------------------------------------------------
T = 1_700_000_000_000


def _member(mid: str, parts: list[int], session: int = 6000, instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(member_id=mid, client_id=mid.split("-")[0], client_host="/127.0.0.1", session_timeout=session,
                          subscription=b"", assignment=encode_assignment([("t", parts)], 0) if parts else b"",
                          group_instance_id=instance, rebalance_timeout=60000)


def _gm(offset: int, ts: int, gen: int, members: list[MemberMetadata], state_ts: int, group: str = "g") -> rh.Rec:
    value = GroupMetadataValue("consumer", gen, "range" if members else None, members[0].member_id if members else None,
                               tuple(members), state_ts)
    return rh.Rec(offset, ts, encode_group_metadata_key(group), encode_group_metadata_value(value))


def test_classic_generations_from_hand_built_records():
    recs = [
        _gm(0, T + 1000, 1, [_member("a-1", [0, 1])], T + 900),
        _gm(5, T + 10_000, 2, [_member("a-1", [0]), _member("b-1", [1])], T + 9_500),
        _gm(9, T + 20_000, 3, [_member("a-1", [0, 1])], T + 19_800),  # b: silent since T+12000, then gone
        _gm(12, T + 30_000, 4, [_member("a-1", [0, 1])], T + 29_990),  # same members: a rejoin
        _gm(14, T + 40_000, 5, [], T + 40_000),
        rh.Rec(20, T + 50_000, encode_group_metadata_key("g"), None),
    ]
    # last commit per (generation window, partition), as the job aggregates them in Spark
    # keyed by the offset of the record that ended the window
    commits = {("g", 5, "t", 0): T + 9_400, ("g", 9, "t", 0): T + 19_700, ("g", 9, "t", 1): T + 12_000,
               ("g", 14, "t", 0): T + 39_000}
    groups = rh.classic_history(rh.decode_group_records(recs)["classic"]["g"], commits)
    gens = groups["generations"]
    assert [g["generation"] for g in gens] == [1, 2, 3, 4, 5]
    g1, g2, g3, g4, g5 = gens
    assert g1["joined"] == ["a-1"] and g1["rebalance"]["join_completed_ms"] == T + 900
    assert g1["rebalance"]["assigned_ms"] == T + 1000 and g1["rebalance"]["sync_phase_ms"] == 100
    assert g2["joined"] == ["b-1"] and g2["left"] == []
    # start bounds: after the previous assignment; the last commit is the estimate
    assert g2["rebalance"]["start_lower_bound_ms"] == T + 1000
    assert g2["rebalance"]["last_commit_before_ms"] == T + 9_400
    assert g2["rebalance"]["no_assignment_ms"] == {"min": 500, "estimate": 600, "max": 9000}
    (dep,) = g3["left"]
    assert dep["member_id"] == "b-1" and dep["how"] == "evicted" and dep["last_commit_ms"] == T + 12_000
    assert dep["silent_ms"] == 7_800
    assert dep["partitions_orphaned_max_ms"] == 8_000  # its partition 1: last commit -> the new assignment
    assert g4["left"] == [] and g4["joined"] == []
    assert g5["state"] == "Empty" and g5["members"] == [] and g5["left"][0]["how"] == "left"
    assert g1["members"][0]["partitions"] == ["t-0", "t-1"]
    assert groups["deleted_ms"] == T + 50_000
    assert g1["stable_until_ms"] == T + 9_400


def test_left_member_committing_until_the_rebalance():
    recs = [_gm(0, T + 1000, 1, [_member("a-1", [0]), _member("c-1", [1])], T + 900),
            _gm(5, T + 10_000, 2, [_member("a-1", [0, 1])], T + 9_800)]
    commits = {("g", 5, "t", 0): T + 9_700, ("g", 5, "t", 1): T + 9_600}
    gens = rh.classic_history(rh.decode_group_records(recs)["classic"]["g"], commits)["generations"]
    (dep,) = gens[1]["left"]
    assert dep["member_id"] == "c-1" and dep["how"] == "left"
    assert "session" in dep["basis"]


def test_static_member_replaced_and_generation_gap():
    recs = [_gm(0, T + 1000, 1, [_member("a-1", [0], instance="i1")], T + 900),
            _gm(5, T + 10_000, 4, [_member("a-2", [0], instance="i1")], T + 9_800)]
    gens = rh.classic_history(rh.decode_group_records(recs)["classic"]["g"], {})["generations"]
    assert gens[1]["left"][0]["how"] == "replaced (same group.instance.id)"
    assert gens[1]["missing_generations"] == [2, 3]


def _cg(offset: int, ts: int, rec) -> rh.Rec:
    k, v = encode_record(rec)
    return rh.Rec(offset, ts, k, v)


def test_consumer_group_epochs_and_reconciliation():
    tid = uuid.uuid4()
    mm = MemberMetadataValue(None, None, "x", "/127.0.0.1", ("t",), None, 45000, None)
    recs = [
        _cg(0, T, (ConsumerGroupKey(5, "cg", "m1"), mm)),
        _cg(1, T, (ConsumerGroupKey(3, "cg"), GroupEpochValue(1))),
        _cg(2, T, (ConsumerGroupKey(7, "cg", "m1"), TargetAssignmentValue({tid: frozenset({0, 1})}))),
        _cg(3, T, (ConsumerGroupKey(8, "cg", "m1"), CurrentAssignmentValue(1, 0, 0, {tid: frozenset({0, 1})}, {}))),
        _cg(4, T + 5000, (ConsumerGroupKey(5, "cg", "m2"), mm)),
        _cg(5, T + 5000, (ConsumerGroupKey(3, "cg"), GroupEpochValue(2))),
        _cg(6, T + 5000, (ConsumerGroupKey(8, "cg", "m2"), CurrentAssignmentValue(2, 0, 2, {}, {}))),
        _cg(7, T + 5500, (ConsumerGroupKey(8, "cg", "m1"), CurrentAssignmentValue(2, 1, 0, {tid: frozenset({0})}, {}))),
        _cg(8, T + 6000, (ConsumerGroupKey(8, "cg", "m2"), CurrentAssignmentValue(2, 1, 0, {tid: frozenset({1})}, {}))),
        _cg(9, T + 9000, (ConsumerGroupKey(8, "cg", "m2"), None)),
        _cg(10, T + 9000, (ConsumerGroupKey(5, "cg", "m2"), None)),
        _cg(11, T + 9000, (ConsumerGroupKey(3, "cg"), GroupEpochValue(3))),
    ]
    h = rh.consumer_history(rh.decode_group_records(recs)["consumer"]["cg"])
    epochs = h["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    e2 = epochs[1]
    assert e2["started_ms"] == T + 5000 and e2["joined"] == ["m2"] and e2["left"] == []
    rec = {r["member_id"]: r for r in e2["reconciliation"]}
    assert rec["m1"]["reached_ms"] == T + 5500 and rec["m1"]["took_ms"] == 500
    assert rec["m2"]["reached_ms"] == T + 6000 and rec["m2"]["took_ms"] == 1000
    assert e2["reconciled_ms"] == T + 6000
    assert epochs[2]["left"][0]["member_id"] == "m2"
    m2 = next(m for m in h["members"] if m["member_id"] == "m2")
    assert m2["joined_ms"] == T + 5000 and m2["left_ms"] == T + 9000
    assert m2["no_assignment_ms"] == 1000


def test_undecodable_and_commit_records_are_ignored():
    recs = [rh.Rec(0, T, b"\x00\x02\xff", b"junk"),
            rh.Rec(1, T, encode_offset_commit_key("g", "t", 0), encode_offset_commit_value(OffsetCommitValue(5, "", T)))]
    out = rh.decode_group_records(recs)
    assert out["classic"] == {} and out["consumer"] == {} and out["undecodable"] == 1


def test_a_group_moved_from_its_former_partition_keeps_its_history():
    # Krait's former placement put "connect-file-sink" in partition 27 of 50; Kafka's puts it
    # in 21. Its move copied the last record to 21 and left a tombstone in 27: the history
    # is 27's records, then 21's, with no deletion between them.
    group = "connect-file-sink"
    recs = [_gm(40, T + 1000, 1, [_member("a-1", [0])], T + 900, group)._replace(partition=27),
            _gm(41, T + 5000, 2, [], T + 5000, group)._replace(partition=27),
            rh.Rec(42, T + 9000, encode_group_metadata_key(group), None, 27),
            _gm(3, T + 8000, 2, [], T + 5000, group)._replace(partition=21),
            _gm(4, T + 20_000, 3, [_member("b-1", [0])], T + 19_000, group)._replace(partition=21)]
    classic = rh.decode_group_records(recs, 50)["classic"][group]
    assert [(r.offset, r.value.generation) for r in classic] == [(40, 1), (41, 2), (3, 2), (4, 3)]
    history = rh.classic_history(classic, {})
    assert [g["generation"] for g in history["generations"]] == [1, 2, 2, 3] and history["deleted_ms"] is None
    # a group not moved yet: its own tombstone in its former partition is a deletion
    alone = rh.decode_group_records(recs[:3], 50)["classic"][group]
    assert rh.classic_history(alone, {})["deleted_ms"] == T + 9000


# --- a real log ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_log(tmp_path_factory):
    """Run the scenario against a real broker (stopped at the end, so that its high watermark
    checkpoint covers every record), then start the job through `krait spark` on its log dir."""
    from tests.groups.members import FAST_CONSUMER_GROUPS, Member, SteadyProducer, create_topic, stop_all, wait_for
    from tests.krait_harness import BrokerProcess

    base = tmp_path_factory.mktemp("rebalance")
    broker = BrokerProcess(str(base / "logs"), {**FAST_CONSUMER_GROUPS, "group.min.session.timeout.ms": "6000"}).start()
    members: list = []
    try:
        topic = create_topic(broker.bootstrap, "rh-orders", 4)
        classic, consumer = "rh-classic", "rh-848"
        producer = SteadyProducer(broker.bootstrap, topic, 4, interval=0.01).start()

        def m(group, name, protocol):
            mem = Member(broker.bootstrap, group, name, protocol, topics=[topic])
            members.append(mem)
            return mem

        def covered(*ms):
            return lambda: sorted(p for x in ms for p in x.partitions()) == [0, 1, 2, 3] and all(x.partitions() for x in ms)

        a, x = m(classic, "alpha", "classic"), m(consumer, "xray", "consumer")
        wait_for(covered(a), 30, "alpha assigned")
        wait_for(covered(x), 30, "xray assigned")
        time.sleep(1)
        b, y = m(classic, "bravo", "classic"), m(consumer, "yankee", "consumer")
        wait_for(covered(a, b), 30, "alpha+bravo")
        wait_for(covered(x, y), 30, "xray+yankee")
        time.sleep(1)
        c = m(classic, "charlie", "classic")
        wait_for(covered(a, b, c), 30, "alpha+bravo+charlie")
        time.sleep(1.5)
        c.close()  # LeaveGroup
        y.close()  # consumer protocol leave (epoch -1)
        wait_for(covered(a, b), 30, "alpha+bravo after charlie left")
        wait_for(covered(x), 30, "xray after yankee left")
        time.sleep(1.5)
        n = len(a.assignments)
        b.kill()  # SIGKILL: evicted when its session (6 s) times out
        wait_for(lambda: len(a.assignments) > n and covered(a)(), 30, "alpha alone after the eviction")
        time.sleep(1)
        producer.stop()
        a.close()
        x.close()
        stop_all(members)
        assert broker.stop() == 0
    finally:
        stop_all(members)
        broker.kill()
    log_dir = broker.log_dir
    out = str(base / "submit-out")
    # through `krait spark`, from a fresh shell's environment, as an operator would run it
    krait = os.path.join(os.path.dirname(sys.executable), "krait")
    logf = open(str(base / "submit.log"), "wb")
    proc = subprocess.Popen([krait, "spark", "--master", "local[1]", "--driver-memory", "512m",
                             "--conf", "spark.ui.enabled=false", "rebalance_history", "--log-dirs", log_dir,
                             "--output", out], cwd=str(base), env=fresh_shell_env(), stdout=logf,
                            stderr=subprocess.STDOUT)
    yield {"log_dir": log_dir, "classic": classic, "consumer": consumer, "submit": (proc, out, logf), "base": base}
    if proc.poll() is None:
        proc.kill()
    logf.close()


def test_job_on_real_groups(spark, real_log, capsys):
    out = str(real_log["base"] / "out")
    assert rh.main(["--log-dirs", real_log["log_dir"], "--output", out], spark=spark) == 0
    with open(os.path.join(out, "rebalance_history.json")) as f:
        result = json.load(f)
    summary = capsys.readouterr().out
    assert "rh-classic" in summary and "rh-848" in summary

    g = result["classic"][real_log["classic"]]
    gens = g["generations"]
    clients = [sorted(m["client_id"] for m in gen["members"]) for gen in gens]
    # alpha; +bravo; +charlie; charlie left; bravo evicted; alpha left (Empty)
    assert clients == [["alpha"], ["alpha", "bravo"], ["alpha", "bravo", "charlie"], ["alpha", "bravo"], ["alpha"], []], clients
    assert [gen["generation"] for gen in gens] == list(range(1, 7))
    by_client = {m["member_id"]: m["client_id"] for gen in gens for m in gen["members"]}
    by_client.update({d["member_id"]: d["client_id"] for gen in gens for d in gen["left"]})
    left = {by_client[d["member_id"]]: d for gen in gens for d in gen["left"]}
    assert left["charlie"]["how"] == "left", left["charlie"]
    assert left["bravo"]["how"] == "evicted", left["bravo"]
    assert left["bravo"]["silent_ms"] >= 6000 - 500
    assert left["alpha"]["how"] == "left"
    assert gens[-1]["state"] == "Empty"
    for gen in gens[:-1]:
        r = gen["rebalance"]
        assert r["join_completed_ms"] <= r["assigned_ms"]
        assert r["start_lower_bound_ms"] <= r["join_completed_ms"]
        m0 = gen["members"][0]
        assert m0["session_timeout_ms"] == 6000 and m0["host"] and m0["rebalance_timeout_ms"] > 0
    # the eviction's rebalance: no assignment for about the session timeout at most, and the
    # join phase started after bravo's session ran out
    ev = gens[4]["rebalance"]
    assert ev["no_assignment_ms"]["min"] <= ev["no_assignment_ms"]["max"]

    cg = result["consumer"][real_log["consumer"]]
    epochs = cg["epochs"]
    assert len(epochs) >= 3
    names = {m["member_id"]: m["client_id"] for m in cg["members"]}
    assert sorted(names.values()) == ["xray", "yankee"]
    joins = [names[j] for e in epochs for j in e["joined"]]
    assert joins[:2] == ["xray", "yankee"]
    lefts = [names[d["member_id"]] for e in epochs for d in e["left"]]
    assert "yankee" in lefts and "xray" in lefts
    assert any(e["reconciled_ms"] is not None and len(e["reconciliation"]) == 2 for e in epochs)
    for name in ("rh-classic", "rh-848"):
        assert os.path.getsize(os.path.join(out, f"rebalance_{name}.png")) > 10_000
    assert os.path.exists(os.path.join(out, "rebalance_generations.csv"))

    # --groups filters
    out2 = str(real_log["base"] / "out2")
    assert rh.main(["--log-dirs", real_log["log_dir"], "--output", out2, "--groups", "rh-848"], spark=spark) == 0
    with open(os.path.join(out2, "rebalance_history.json")) as f:
        only = json.load(f)
    assert only["classic"] == {} and list(only["consumer"]) == ["rh-848"]


def test_job_through_krait_spark(real_log):
    proc, out, logf = real_log["submit"]
    rc = proc.wait(240)
    logf.close()
    with open(logf.name, encoding="utf-8", errors="replace") as f:
        text = f.read()
    assert rc == 0, text[-4000:]
    with open(os.path.join(out, "rebalance_history.json")) as f:
        result = json.load(f)
    assert len(result["classic"]["rh-classic"]["generations"]) == 6
    assert "rh-classic" in text
