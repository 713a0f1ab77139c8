"""Loading ``__transaction_state`` (a restart, a leadership change): replayed ids equal the
ones written, transactions caught preparing resume their markers, loading and resigned
partitions answer as Kafka's do, and garbage in the log is skipped."""

from __future__ import annotations

import logging

from txn_coordinator import TransactionCoordinator, TransactionState
from txn_coordinator.records import TransactionLogValue, encode_key, encode_value

from .harness import TP, E, TxnHarness

S = TransactionState


def restarted(h: TxnHarness, epoch: int = 1) -> TransactionCoordinator:
    """A new coordinator on the same log (the broker restarted), every partition loaded."""
    h.markers.sent.clear()
    c = h.new_coordinator()
    h.load_all(c, epoch)
    h.c = c
    return c


def snapshot(c: TransactionCoordinator) -> dict:
    return {
        m.transactional_id: (m.producer_id, m.producer_epoch, m.txn_timeout_ms, m.state, set(m.partitions),
                             m.txn_start_timestamp, m.txn_last_update_timestamp)
        for m in c.transactions()
    }


def test_replay_reproduces_every_state() -> None:
    h = TxnHarness()
    h.init("empty")
    h.begin("ongoing", parts=(TP("t", 0), TP("u", 3)))
    pid, epoch = h.begin("committed")
    h.end("committed", pid, epoch)
    h.markers.complete()
    pid, epoch = h.begin("aborted")
    h.end("aborted", pid, epoch, commit=False)
    h.markers.complete()
    h.init("bumped")
    h.init("bumped")
    before = snapshot(h.c)
    restarted(h)
    assert snapshot(h.c) == before
    assert {m.transactional_id: m.state for m in h.c.transactions()} == {
        "empty": S.EMPTY, "ongoing": S.ONGOING, "committed": S.COMPLETE_COMMIT, "aborted": S.COMPLETE_ABORT,
        "bumped": S.EMPTY}
    assert not h.markers.sent
    # Producers carry on where they were.
    assert h.init("bumped").producer_epoch == 2
    ongoing = h.meta("ongoing")
    assert h.end("ongoing", ongoing.producer_id, ongoing.producer_epoch).error_code == E.none


def test_prepare_commit_resumes_its_markers_after_loading() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0), TP("t", 1)))
    h.end("txn", pid, epoch)
    h.markers.complete(results={TP("t", 0): E.none})  # t-1 never reached; then the broker died
    restarted(h, epoch=4)
    m = h.meta("txn")
    assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    # Kafka resends to every partition of the record: markers are idempotent.
    [(req, _)] = h.markers.sent
    assert (req.committed, req.producer_id, req.producer_epoch, req.coordinator_epoch) == (True, pid, epoch, 4)
    assert req.partitions == frozenset({TP("t", 0), TP("t", 1)})
    assert h.init("txn").error_code == E.concurrent_transactions
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT
    assert h.records("txn")[-1].transaction_status == S.COMPLETE_COMMIT
    assert h.init("txn").producer_epoch == epoch + 1


def test_prepare_abort_resumes_too_and_an_ongoing_one_waits_for_its_timeout() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("aborting")
    h.end("aborting", pid, epoch, commit=False)
    h.begin("open", timeout=20_000)
    h.markers.auto = True
    restarted(h)
    assert h.meta("aborting").state is S.COMPLETE_ABORT
    assert h.meta("open").state is S.ONGOING
    h.advance(30_000)
    assert h.meta("open").state is S.COMPLETE_ABORT


def test_loading_answers_load_in_progress_then_serves() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    p = h.c.partition_for("txn")
    c = h.new_coordinator()
    h.c = c
    c.start_loading(p, 1)
    assert c.is_loading(p)
    assert h.init("txn").error_code == E.coordinator_load_in_progress
    assert h.end("txn", pid, epoch).error_code == E.coordinator_load_in_progress
    assert h.add("txn", pid, epoch, [TP("t", 1)]) == {TP("t", 1): E.coordinator_load_in_progress}
    assert h.describe("txn")[0].error_code == E.coordinator_load_in_progress
    assert h.list_().error_code == E.coordinator_load_in_progress
    records = h.log.replay(p)
    c.load_partition(p, records[:1])  # in chunks
    c.load_partition(p, records[1:])
    c.finished_loading(p)
    assert not c.is_loading(p)
    assert h.end("txn", pid, epoch).error_code == E.none


def test_unload_forgets_ids_and_stops_their_markers() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.end("txn", pid, epoch)
    p = h.c.partition_for("txn")
    assert h.c.unload_partition(p) >= 1
    assert p not in h.c.served_partitions()
    assert not h.c.pending_markers()
    assert h.init("txn").error_code == E.not_coordinator
    assert h.describe("txn")[0].error_code == E.not_coordinator
    # The markers' late answer is ignored: nothing is written by a coordinator that resigned.
    appends = h.log.appends
    h.markers.complete()
    assert h.log.appends == appends
    # Leadership comes back: the PrepareCommit is found in the log and completed.
    h.markers.sent.clear()
    h.c.start_loading(p, 2)
    h.c.load_partition(p, h.log.replay(p))
    h.c.finished_loading(p)
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_COMMIT


def test_a_stale_marker_answer_after_a_reload_at_the_same_epoch_is_ignored() -> None:
    # A single broker's coordinator epoch never changes: the metadata object tells rounds apart.
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0), TP("t", 1)))
    h.end("txn", pid, epoch)
    p = h.c.partition_for("txn")
    h.c.unload_partition(p)
    h.c.start_loading(p, 0)
    h.c.load_partition(p, h.log.replay(p))
    h.c.finished_loading(p)
    assert len(h.markers.sent) == 2
    h.markers.complete(0)  # the first round's answer arrives late
    assert h.meta("txn").partitions == {TP("t", 0), TP("t", 1)}
    h.markers.complete(1)
    assert h.meta("txn").state is S.COMPLETE_COMMIT
    assert [r.transaction_status for r in h.records("txn")].count(S.COMPLETE_COMMIT) == 1


def test_verify_while_loading() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    p = h.c.partition_for("txn")
    h.c.start_loading(p, 1)
    assert h.c.verify_partitions("txn", pid, epoch, [TP("t", 0)]) == {TP("t", 0): E.coordinator_load_in_progress}


def test_unload_during_a_load_cancels_it_and_stale_epochs_do_not() -> None:
    h = TxnHarness()
    h.init("txn")
    p = h.c.partition_for("txn")
    c = h.new_coordinator()
    h.c = c
    c.start_loading(p, 5)
    c.unload_partition(p, coordinator_epoch=4)  # an older epoch's resignation: the load goes on
    assert c.is_loading(p)
    c.unload_partition(p, coordinator_epoch=5)
    assert not c.is_loading(p)
    c.finished_loading(p)  # a load that was cancelled serves nothing
    assert h.init("txn").error_code == E.not_coordinator


def test_tombstones_and_bad_records_in_the_log(caplog) -> None:
    h = TxnHarness()
    h.init("keep")
    p = h.c.partition_for("keep")
    other, truncated, bad_state = [f"id-{i}" for i in range(2000) if h.c.partition_for(f"id-{i}") == p][:3]
    wrong = next(f"id-{i}" for i in range(200) if h.c.partition_for(f"id-{i}") != p)
    value = encode_value(TransactionLogValue(7, 0, 1000, 0, None, 5, -1))
    extra = [
        (encode_key(other), value), (encode_key(other), None),  # written, then expired
        (b"\x00\x01garbage", value),  # an unknown key version
        (encode_key(truncated), b"\x00\x00\x01"),  # truncated value
        (None, value),  # no key
        (encode_key(wrong), value),  # an id of another partition
        (encode_key(bad_state), encode_value(TransactionLogValue(7, 0, 1000, 9, None, 5, -1))),
    ]
    h.log.partitions[p].extend(extra)
    with caplog.at_level(logging.WARNING):
        restarted(h)
    assert [m.transactional_id for m in h.c.transactions()] == ["keep"]
    assert caplog.text.count("skipping") == 5


def test_a_failing_record_iterator_keeps_what_was_read() -> None:
    h = TxnHarness()
    h.init("txn")
    p = h.c.partition_for("txn")
    c = h.new_coordinator()
    h.c = c

    def records():
        yield from h.log.replay(p)
        raise OSError("corrupt batch")

    c.start_loading(p, 0)
    c.load_partition(p, records())
    c.finished_loading(p)
    assert h.meta("txn").producer_epoch == 0
