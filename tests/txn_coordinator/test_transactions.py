"""AddPartitionsToTxn, AddOffsetsToTxn and EndTxn through the markers to CompleteCommit/
CompleteAbort, with every refusal and the concurrent-transaction answers."""

from __future__ import annotations

import pytest

from coordinator.state import partition_for_group
from txn_coordinator import TransactionState

from .harness import TP, E, TxnHarness, log_error, request

S = TransactionState


# ====================================================================== AddPartitionsToTxn
def test_add_partitions_starts_the_transaction() -> None:
    h = TxnHarness()
    r = h.init("txn")
    h.clock.t += 5
    assert h.add("txn", r.producer_id, 0, [TP("t", 0), TP("u", 2)]) == {TP("t", 0): E.none, TP("u", 2): E.none}
    m = h.meta("txn")
    assert (m.state, m.partitions, m.txn_start_timestamp) == (S.ONGOING, {TP("t", 0), TP("u", 2)}, h.clock.t)
    rec = h.records("txn")[-1]
    assert (rec.transaction_status, rec.partitions, rec.start_timestamp_ms) == (S.ONGOING, frozenset(m.partitions), h.clock.t)
    # More partitions: the start time stays; partitions already there write nothing.
    h.clock.t += 5
    assert h.add("txn", r.producer_id, 0, [TP("t", 1)]) == {TP("t", 1): E.none}
    assert h.meta("txn").txn_start_timestamp == h.clock.t - 5
    appends = h.log.appends
    assert h.add("txn", r.producer_id, 0, [TP("t", 0), TP("t", 1)]) == {TP("t", 0): E.none, TP("t", 1): E.none}
    assert h.log.appends == appends


def test_add_partitions_refusals() -> None:
    h = TxnHarness(partition_exists=lambda t, p: t != "missing")
    assert h.add("nobody", 1, 0, [TP("t", 0)]) == {TP("t", 0): E.invalid_producer_id_mapping}
    assert h.add("", 1, 0, [TP("t", 0)]) == {TP("t", 0): E.invalid_request}
    r = h.init("txn")
    pid = r.producer_id
    assert h.add("txn", pid + 1, 0, [TP("t", 0)]) == {TP("t", 0): E.invalid_producer_id_mapping}
    assert h.add("txn", pid, 1, [TP("t", 0)]) == {TP("t", 0): E.producer_fenced}
    # One bad partition fails the request: the others were not attempted.
    assert h.add("txn", pid, 0, [TP("t", 0), TP("missing", 0)]) == {
        TP("t", 0): E.operation_not_attempted, TP("missing", 0): E.unknown_topic_or_partition}
    # Producers may not add internal topics (Kafka never authorizes it).
    assert h.add("txn", pid, 0, [TP("__consumer_offsets", 3), TP("t", 0)]) == {
        TP("__consumer_offsets", 3): E.topic_authorization_failed, TP("t", 0): E.operation_not_attempted}
    assert h.meta("txn").state is S.EMPTY
    assert len(h.records("txn")) == 1


def test_add_partitions_v4_batches_and_verifies() -> None:
    h = TxnHarness()
    a, b = h.init("a"), h.init("b")
    h.add("a", a.producer_id, 0, [TP("t", 0)])
    req = request("add_partitions_to_txn", 5, transactions=[
        {"transactional_id": "a", "producer_id": a.producer_id, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": "t", "partitions": [0, 1]}]},
        {"transactional_id": "b", "producer_id": b.producer_id, "producer_epoch": 0, "verify_only": False,
         "topics": [{"name": "__consumer_offsets", "partitions": [4]}]},  # brokers may
        {"transactional_id": "b", "producer_id": b.producer_id, "producer_epoch": 7, "verify_only": True,
         "topics": [{"name": "t", "partitions": [0]}]},
    ])
    from .harness import Box, answered
    box = Box()
    h.c.add_partitions_to_txn(req, box)
    resp = answered(req, box)
    got = [(r.transactional_id, {(t.name, p.partition_index): p.partition_error_code
                                 for t in r.topic_results for p in t.results_by_partition})
           for r in resp.results_by_transaction]
    assert got == [
        ("a", {("t", 0): E.none, ("t", 1): E.transaction_abortable}),
        ("b", {("__consumer_offsets", 4): E.none}),
        ("b", {("t", 0): E.producer_fenced}),
    ]
    assert h.meta("b").partitions == {TP("__consumer_offsets", 4)}


def test_verify_partitions_for_the_produce_path() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0),))
    assert h.c.verify_partitions("txn", pid, epoch, [TP("t", 0), TP("t", 9)]) == {
        TP("t", 0): E.none, TP("t", 9): E.transaction_abortable}
    assert h.c.verify_partitions("txn", pid + 1, epoch, [TP("t", 0)]) == {TP("t", 0): E.invalid_producer_id_mapping}
    assert h.c.verify_partitions("txn", pid, epoch + 1, [TP("t", 0)]) == {TP("t", 0): E.producer_fenced}
    assert h.c.verify_partitions("nobody", pid, epoch, [TP("t", 0)]) == {TP("t", 0): E.invalid_producer_id_mapping}
    assert h.c.verify_partitions("", pid, epoch, [TP("t", 0)]) == {TP("t", 0): E.invalid_request}
    h.end("txn", pid, epoch)
    assert h.c.verify_partitions("txn", pid, epoch, [TP("t", 0)]) == {TP("t", 0): E.concurrent_transactions}


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = TxnHarness()
    r = h.init("txn")
    assert h.add_offsets("txn", r.producer_id, 0, "my-group") == E.none
    assert h.meta("txn").partitions == {TP("__consumer_offsets", partition_for_group("my-group", 50))}
    assert h.add_offsets("nobody", r.producer_id, 0, "g") == E.invalid_producer_id_mapping
    assert h.add_offsets("txn", r.producer_id + 1, 0, "g") == E.invalid_producer_id_mapping


# ====================================================================== EndTxn and markers
@pytest.mark.parametrize("commit", [True, False])
def test_end_goes_through_markers_to_complete(commit: bool) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0), TP("u", 1)))
    h.add_offsets("txn", pid, epoch, "g")
    offsets_tp = TP("__consumer_offsets", partition_for_group("g", 50))
    r = h.end("txn", pid, epoch, commit=commit, v=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, epoch)  # v5+ carries them
    prepare, complete = (S.PREPARE_COMMIT, S.COMPLETE_COMMIT) if commit else (S.PREPARE_ABORT, S.COMPLETE_ABORT)
    rec = h.records("txn")[-1]
    assert (rec.transaction_status, rec.partitions) == (prepare, frozenset({TP("t", 0), TP("u", 1), offsets_tp}))
    m = h.meta("txn")
    assert (m.state, m.pending_state) == (prepare, complete)
    [(req, _)] = h.markers.sent
    assert (req.transactional_id, req.producer_id, req.producer_epoch, req.committed, req.coordinator_epoch) == (
        "txn", pid, epoch, commit, 0)
    assert req.partitions == frozenset({TP("t", 0), TP("u", 1), offsets_tp})
    assert req.txn_partition == h.c.partition_for("txn")
    assert "txn" in h.c.pending_markers()
    h.markers.complete()
    m = h.meta("txn")
    assert (m.state, m.pending_state, m.partitions) == (complete, None, set())
    rec = h.records("txn")[-1]
    assert (rec.transaction_status, rec.partitions, rec.producer_epoch) == (complete, frozenset(), epoch)
    assert not h.c.pending_markers()
    # The next transaction starts from the completed one.
    assert h.add("txn", pid, epoch, [TP("t", 5)]) == {TP("t", 5): E.none}
    assert h.meta("txn").txn_start_timestamp == h.clock.t


def test_answers_while_the_markers_are_pending_and_after() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    assert h.end("txn", pid, epoch, commit=True).error_code == E.none
    assert h.end("txn", pid, epoch, commit=True).error_code == E.concurrent_transactions  # a retry: wait
    assert h.end("txn", pid, epoch, commit=False).error_code == E.concurrent_transactions  # pending first
    assert h.add("txn", pid, epoch, [TP("t", 9)]) == {TP("t", 9): E.concurrent_transactions}
    h.markers.complete()
    # A retry of the commit that completed succeeds; the opposite outcome is an invalid state.
    r = h.end("txn", pid, epoch, commit=True, v=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, epoch)
    assert h.end("txn", pid, epoch, commit=False).error_code == E.invalid_txn_state


def test_prepare_state_answers_without_pending_markers() -> None:
    # Markers abandoned (a fenced producer epoch at a partition): the PrepareCommit stays.
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.end("txn", pid, epoch, commit=True)
    h.markers.complete(results={TP("t", 0): E.invalid_producer_epoch})
    m = h.meta("txn")
    assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert not h.c.pending_markers()
    m.pending_state = None  # what Kafka's state would be after its own pending state cleared
    assert h.end("txn", pid, epoch, commit=True).error_code == E.concurrent_transactions
    assert h.end("txn", pid, epoch, commit=False).error_code == E.invalid_txn_state


def test_end_refusals() -> None:
    h = TxnHarness()
    assert h.end("nobody", 1, 0).error_code == E.invalid_producer_id_mapping
    assert h.end("", 1, 0).error_code == E.invalid_request
    r = h.init("txn")
    pid = r.producer_id
    assert h.end("txn", pid, 0).error_code == E.invalid_txn_state  # nothing to end (Empty)
    assert h.end("txn", pid, 0, commit=False).error_code == E.invalid_txn_state
    h.add("txn", pid, 0, [TP("t", 0)])
    assert h.end("txn", pid + 1, 0).error_code == E.invalid_producer_id_mapping
    assert h.end("txn", pid, 1).error_code == E.producer_fenced  # a client must name the current epoch
    assert h.end("txn", pid, 1, v=0).error_code == E.invalid_producer_epoch
    r = h.end("txn", pid, 1, v=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.producer_fenced, -1, -1)
    assert h.meta("txn").state is S.ONGOING and not h.markers.sent


def test_end_with_a_failed_prepare_write_leaves_the_transaction_ongoing() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.log.fail = log_error(E.not_leader_or_follower)
    assert h.end("txn", pid, epoch).error_code == E.not_coordinator
    assert (h.meta("txn").state, h.meta("txn").pending_state) == (S.ONGOING, None)
    assert not h.markers.sent
    h.log.fail = None
    assert h.end("txn", pid, epoch).error_code == E.none


def test_synchronous_marker_sender_completes_inside_end_txn() -> None:
    h = TxnHarness()
    h.markers.auto = True
    pid, epoch = h.begin("txn")
    assert h.end("txn", pid, epoch).error_code == E.none
    assert h.meta("txn").state is S.COMPLETE_COMMIT
    assert [r.transaction_status for r in h.records("txn")] == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


def test_transaction_without_partitions_completes_without_markers() -> None:
    # Kafka lets AddPartitionsToTxn with no partitions start an (empty) transaction.
    h = TxnHarness()
    r = h.init("txn")
    assert h.add("txn", r.producer_id, 0, []) == {}
    assert h.meta("txn").state is S.ONGOING
    assert h.end("txn", r.producer_id, 0).error_code == E.none
    assert h.meta("txn").state is S.COMPLETE_COMMIT and not h.markers.sent


# ====================================================================== marker failures
def test_retriable_and_missing_partitions_are_sent_again_after_a_backoff() -> None:
    h = TxnHarness()
    parts = (TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 3))
    pid, epoch = h.begin("txn", parts=parts)
    h.end("txn", pid, epoch)
    h.markers.complete(results={TP("t", 0): E.none, TP("t", 1): E.not_leader_or_follower, TP("t", 2): E.request_timed_out})
    assert h.meta("txn").partitions == {TP("t", 1), TP("t", 2), TP("t", 3)}  # t-3: not reached
    assert len(h.markers.sent) == 1
    h.advance(99)
    assert len(h.markers.sent) == 1
    h.advance(1)
    assert h.markers.last.partitions == frozenset({TP("t", 1), TP("t", 2), TP("t", 3)})
    h.markers.complete(results={TP("t", 1): E.none, TP("t", 2): E.none, TP("t", 3): E.kafka_storage_error})
    h.advance(199)  # backoff doubles: 100, 200, ... up to 1000 ms
    assert len(h.markers.sent) == 2
    h.advance(1)
    assert h.markers.last.partitions == frozenset({TP("t", 3)})
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT


def test_deleted_and_unsupported_partitions_need_no_marker() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("gone", 0), TP("old", 0), TP("t", 0)))
    h.end("txn", pid, epoch, commit=False)
    h.markers.complete(results={TP("gone", 0): None, TP("old", 0): E.unsupported_for_message_format, TP("t", 0): E.none})
    assert h.meta("txn").state is S.COMPLETE_ABORT


def test_a_sender_that_raises_is_retried_and_double_reports_are_ignored() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.markers.fail = ConnectionError("no route")
    assert h.end("txn", pid, epoch).error_code == E.none  # durable: the markers are our problem now
    assert h.meta("txn").state is S.PREPARE_COMMIT
    h.markers.fail = None
    h.advance(100)
    assert len(h.markers.sent) == 1
    h.markers.complete(results={TP("t", 0): E.not_leader_or_follower})
    h.markers.complete()  # a second report of the same request changes nothing
    assert h.meta("txn").state is S.PREPARE_COMMIT
    h.advance(1000)
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT


def test_unexpected_marker_error_is_retried_not_fatal() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.end("txn", pid, epoch)
    h.markers.complete(results={TP("t", 0): E.corrupt_message})
    h.advance(100)
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT


def test_failed_complete_write_is_retried_with_the_pending_state_kept() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.end("txn", pid, epoch)
    h.log.fail = log_error(E.not_enough_replicas)  # -> COORDINATOR_NOT_AVAILABLE: retriable
    h.markers.complete()
    m = h.meta("txn")
    assert (m.state, m.pending_state, m.partitions) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT, set())
    assert h.init("txn").error_code == E.concurrent_transactions
    h.advance(100)
    assert h.meta("txn").state is S.PREPARE_COMMIT  # still failing
    h.log.fail = None
    h.advance(200)
    assert (h.meta("txn").state, h.meta("txn").pending_state) == (S.COMPLETE_COMMIT, None)


def test_complete_write_that_finds_the_partition_gone_is_left_to_the_next_leader() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.end("txn", pid, epoch)
    h.log.fail = log_error(E.not_leader_or_follower)  # -> NOT_COORDINATOR
    h.markers.complete()
    m = h.meta("txn")
    assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, None)
    h.log.fail = None
    h.advance(5000)
    assert h.records("txn")[-1].transaction_status == S.PREPARE_COMMIT  # nothing retried


def test_marker_results_as_plain_tuples_and_ints() -> None:
    # A broker may report (topic, partition) tuples and int error codes.
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0), TP("t", 1), TP("t", 2)))
    h.end("txn", pid, epoch)
    h.markers.complete(results={("t", 0): 0, ("t", 1): 6, ("t", 2): 31999})  # NONE, NOT_LEADER, unknown
    assert h.meta("txn").partitions == {TP("t", 1), TP("t", 2)}
    h.advance(100)
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT
