"""Timers on the injected clock: transactions older than their timeout are aborted (and the
producer fenced), idle transactional ids expire with a tombstone."""

from __future__ import annotations

from txn_coordinator import TransactionState, expiry

from .harness import TP, E, TxnHarness, log_error

S = TransactionState
ABORT_EVERY = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
EXPIRE_EVERY = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
WEEK = 604_800_000  # transactional.id.expiration.ms


def test_defaults_are_kafkas() -> None:
    h = TxnHarness()
    cfg = h.config
    assert (cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
            cfg.transactional_id_expiration_ms, cfg.transaction_max_timeout_ms) == (ABORT_EVERY, EXPIRE_EVERY, WEEK, 900_000)
    assert h.c.next_deadline_ms() == h.clock.t + ABORT_EVERY


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", timeout=15_000, parts=(TP("t", 0), TP("t", 1)))
    h.advance(ABORT_EVERY)  # 10 s in: not yet timed out
    assert h.meta("txn").state is S.ONGOING
    h.advance(ABORT_EVERY)  # 20 s > 15 s
    m = h.meta("txn")
    assert (m.state, m.producer_epoch, m.pending_state) == (S.PREPARE_ABORT, epoch + 1, S.COMPLETE_ABORT)
    rec = h.records("txn")[-1]
    assert (rec.transaction_status, rec.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    req = h.markers.last
    assert (req.result.name, req.producer_epoch, req.partitions) == ("ABORT", epoch + 1, frozenset({TP("t", 0), TP("t", 1)}))
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_ABORT
    # The producer that went quiet comes back: fenced.
    assert h.add("txn", pid, epoch, [TP("t", 0)]) == {TP("t", 0): E.producer_fenced}
    assert h.end("txn", pid, epoch).error_code == E.producer_fenced
    # A new instance carries on from the fenced epoch.
    assert h.init("txn").producer_epoch == epoch + 2


def test_timeout_is_measured_from_the_first_partition() -> None:
    h = TxnHarness()
    r = h.init("txn", timeout=15_000)
    h.advance(ABORT_EVERY * 3)  # Empty for a long time: nothing to abort
    h.add("txn", r.producer_id, 0, [TP("t", 0)])
    h.advance(ABORT_EVERY)
    assert h.meta("txn").state is S.ONGOING
    h.advance(ABORT_EVERY)
    assert h.meta("txn").state is S.PREPARE_ABORT


def test_transactions_with_pending_transitions_are_left_alone() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", timeout=1_000)
    h.end("txn", pid, epoch)  # PrepareCommit: not Ongoing any more
    h.advance(ABORT_EVERY)
    assert h.meta("txn").state is S.PREPARE_COMMIT and len(h.markers.sent) == 1


def test_failed_abort_write_is_tried_again_next_interval() -> None:
    h = TxnHarness()
    _, epoch = h.begin("txn", timeout=1_000)
    h.log.fail = log_error(E.not_enough_replicas)
    h.advance(ABORT_EVERY)
    m = h.meta("txn")
    assert (m.state, m.pending_state, m.has_failed_epoch_fence, m.producer_epoch) == (S.ONGOING, None, True, epoch + 1)
    h.log.fail = None
    h.advance(ABORT_EVERY)
    assert h.meta("txn").state is S.PREPARE_ABORT
    assert h.records("txn")[-1].producer_epoch == epoch + 1  # bumped once only


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = TxnHarness()
    h.init("idle")
    pid, epoch = h.begin("busy", timeout=900_000)
    h.end("busy", pid, epoch)
    h.markers.complete()  # CompleteCommit: may expire too
    h.begin("open", timeout=900_000)
    h.markers.auto = True
    h.clock.t += WEEK - 1
    h.c.poll()  # a week minus 1 ms idle: kept
    assert h.c.transaction("idle") is not None
    # The open transaction outlived its timeout: aborted now, and so used just now.
    assert h.meta("open").state is S.COMPLETE_ABORT
    h.advance(EXPIRE_EVERY)
    assert h.c.transaction("idle") is None and h.c.transaction("busy") is None
    assert h.records("idle")[-1] is None and h.records("busy")[-1] is None
    assert h.c.transaction("open") is not None
    assert h.describe("idle")[0].error_code == E.transactional_id_not_found
    # A producer with the same id starts over with a new producer id.
    r = h.init("idle")
    assert (r.error_code, r.producer_epoch) == (E.none, 0) and r.producer_id not in (1000, 1001, 1002)


def test_ongoing_and_recently_used_ids_do_not_expire() -> None:
    h = TxnHarness(transaction_max_timeout_ms=2 * WEEK)
    h.init("old")
    h.clock.t += WEEK
    h.init("recent")
    h.begin("open", timeout=2 * WEEK)
    h.advance(EXPIRE_EVERY)
    assert h.c.transaction("old") is None
    assert h.c.transaction("recent") is not None
    assert h.meta("open").state is S.ONGOING


def test_tombstones_are_written_in_batches_per_partition(monkeypatch) -> None:
    h = TxnHarness(transaction_state_log_num_partitions=1)
    for i in range(5):
        h.init(f"id-{i}")
    monkeypatch.setattr(expiry, "TOMBSTONE_BATCH_BYTES", 70)  # two 32-byte tombstones per batch
    h.clock.t += WEEK
    appends = h.log.appends
    h.advance(EXPIRE_EVERY)
    assert h.log.appends - appends == 3 and not h.c.transactions()
    assert all(h.records(f"id-{i}")[-1] is None for i in range(5))


def test_failed_tombstone_write_keeps_the_ids() -> None:
    h = TxnHarness()
    h.init("idle")
    h.clock.t += WEEK
    h.log.fail = log_error(E.not_leader_or_follower)
    h.advance(EXPIRE_EVERY)
    m = h.meta("idle")
    assert (m.state, m.pending_state) == (S.EMPTY, None)
    h.log.fail = None
    h.advance(EXPIRE_EVERY)
    assert h.c.transaction("idle") is None
