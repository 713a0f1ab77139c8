"""DescribeTransactions and ListTransactions (what kafka-transactions.sh shows), and every
API at every version answering with a serializable response of the same version."""

from __future__ import annotations

import datetime

import pytest

from txn_coordinator import TransactionState

from .harness import TP, Box, E, TxnHarness, answered, request

S = TransactionState


def ms(dt: datetime.datetime) -> int:
    return round(dt.timestamp() * 1000)


def test_describe() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", timeout=30_000, parts=(TP("u", 2), TP("t", 1), TP("t", 0)))
    start = h.clock.t
    h.init("idle")
    [d, idle, missing, empty] = h.describe("txn", "idle", "missing", "")
    assert (d.error_code, d.transactional_id, d.transaction_state, d.producer_id, d.producer_epoch) == (
        E.none, "txn", "Ongoing", pid, epoch)
    assert d.transaction_timeout == datetime.timedelta(milliseconds=30_000)
    assert ms(d.transaction_start_time) == start
    assert [(t.topic, list(t.partitions)) for t in d.topics] == [("t", [0, 1]), ("u", [2])]
    assert (idle.transaction_state, ms(idle.transaction_start_time), idle.topics) == ("Empty", -1, ())
    assert missing.error_code == E.transactional_id_not_found
    assert empty.error_code == E.invalid_request
    # While preparing, the partitions still waiting for a marker are listed.
    h.end("txn", pid, epoch)
    h.markers.complete(results={TP("t", 0): E.none, TP("t", 1): E.none, TP("u", 2): E.not_leader_or_follower})
    [d] = h.describe("txn")
    assert (d.transaction_state, [(t.topic, list(t.partitions)) for t in d.topics]) == ("PrepareCommit", [("u", [2])])


def test_list_with_filters() -> None:
    h = TxnHarness()
    a = h.init("a").producer_id
    h.clock.t += 1000
    b, _ = h.begin("b")
    h.clock.t += 1000
    c, ce = h.begin("c")
    h.end("c", c, ce)

    def listed(**f):
        resp = h.list_(**f)
        assert resp.error_code == E.none
        return sorted((s.transactional_id, s.producer_id, s.transaction_state) for s in resp.transaction_states), list(
            resp.unknown_state_filters)

    assert listed() == ([("a", a, "Empty"), ("b", b, "Ongoing"), ("c", c, "PrepareCommit")], [])
    assert listed(state_filters=["Ongoing", "PrepareCommit", "Bogus"]) == (
        [("b", b, "Ongoing"), ("c", c, "PrepareCommit")], ["Bogus"])
    assert listed(state_filters=["Bogus"]) == ([], ["Bogus"])
    assert listed(producer_id_filters=[a, 99]) == ([("a", a, "Empty")], [])
    # Running longer than 500 ms: b (1000 ms), not c (0 ms); a has no transaction (start -1),
    # which Kafka counts as running since the epoch.
    assert [t for t, _, _ in listed(duration_filter=500)[0]] == ["a", "b"]
    assert [t for t, _, _ in listed(duration_filter=1000)[0]] == ["a"]  # strictly longer
    req = request("list_transactions", 2, transactional_id_pattern="[ab]")
    box = Box()
    h.c.list_transactions(req, box)
    assert sorted(s.transactional_id for s in answered(req, box).transaction_states) == ["a", "b"]
    req = request("list_transactions", 2, transactional_id_pattern="(")
    box = Box()
    h.c.list_transactions(req, box)
    assert answered(req, box).error_code == E.invalid_regular_expression


def test_list_hides_ids_being_expired() -> None:
    h = TxnHarness()
    h.init("a")
    h.meta("a").state = S.DEAD
    assert h.list_().transaction_states == ()
    assert h.describe("a")[0].error_code == E.transactional_id_not_found


@pytest.mark.parametrize("v", range(7))
def test_init_producer_id_every_version(v: int) -> None:
    h = TxnHarness()
    r = h.init("txn", v=v)
    assert type(r).__version__ == v and r.error_code == E.none


@pytest.mark.parametrize("v", range(6))
def test_add_partitions_and_end_txn_every_version(v: int) -> None:
    h = TxnHarness()
    r = h.init("txn")
    assert h.add("txn", r.producer_id, 0, [TP("t", 0)], v=v) == {TP("t", 0): E.none}
    if v <= 4:
        assert h.add_offsets("txn", r.producer_id, 0, "g", v=v) == E.none
    assert h.end("txn", r.producer_id, 0, v=v).error_code == E.none


@pytest.mark.parametrize("v", range(3))
def test_list_transactions_every_version(v: int) -> None:
    h = TxnHarness()
    h.init("txn")
    assert [s.transactional_id for s in h.list_(v=v).transaction_states] == ["txn"]
