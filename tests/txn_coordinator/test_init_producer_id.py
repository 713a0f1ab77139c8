"""InitProducerId: new ids, epoch bumps, fencing (of finished and of ongoing transactions),
KIP-360 recovery, epoch exhaustion, and every refusal with Kafka's error code per version."""

from __future__ import annotations

import pytest

from txn_coordinator import TransactionState
from txn_coordinator.metadata import MAX_EPOCH

from .harness import TP, E, TxnHarness, log_error

S = TransactionState


def test_idempotent_producer_gets_a_fresh_id_and_nothing_is_written() -> None:
    h = TxnHarness()
    for v in range(7):
        r = h.init(None, v=v)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, 1000 + v, 0)
    assert h.log.appends == 0
    h.ids.fail = log_error(E.coordinator_load_in_progress)
    r = h.init(None)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.coordinator_load_in_progress, -1, -1)


def test_new_transactional_id_writes_empty_with_epoch_0() -> None:
    h = TxnHarness()
    r = h.init("txn", timeout=30_000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, 1000, 0)
    [rec] = h.records("txn")
    assert (rec.producer_id, rec.producer_epoch, rec.transaction_status, rec.partitions) == (1000, 0, 0, None)
    assert (rec.transaction_timeout_ms, rec.start_timestamp_ms, rec.last_update_timestamp_ms) == (30_000, -1, h.clock.t)
    m = h.meta("txn")
    assert (m.state, m.producer_epoch, m.last_producer_epoch, m.pending_state) == (S.EMPTY, 0, -1, None)


def test_reinit_bumps_the_epoch_and_fences_the_old_producer() -> None:
    h = TxnHarness()
    old = h.init("txn")
    new = h.init("txn", timeout=10_000)
    assert (new.producer_id, new.producer_epoch) == (old.producer_id, 1)
    assert h.meta("txn").txn_timeout_ms == 10_000  # the new producer's timeout
    # The old instance is fenced everywhere; clients before PRODUCER_FENCED see INVALID_PRODUCER_EPOCH.
    assert h.add("txn", old.producer_id, 0, [TP("t", 0)], v=3) == {TP("t", 0): E.producer_fenced}
    assert h.add("txn", old.producer_id, 0, [TP("t", 0)], v=1) == {TP("t", 0): E.invalid_producer_epoch}
    assert h.end("txn", old.producer_id, 0, v=2).error_code == E.producer_fenced
    assert h.end("txn", old.producer_id, 0, v=1).error_code == E.invalid_producer_epoch
    assert h.add_offsets("txn", old.producer_id, 0, "g", v=2) == E.producer_fenced
    assert h.add_offsets("txn", old.producer_id, 0, "g", v=0) == E.invalid_producer_epoch


def test_init_with_an_ongoing_transaction_fences_aborts_and_asks_to_retry() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn", parts=(TP("t", 0), TP("t", 1)))
    r = h.init("txn")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.concurrent_transactions, -1, -1)
    # The abort is logged with the fenced epoch, so the old producer's writes are refused.
    assert h.records("txn")[-1].transaction_status == S.PREPARE_ABORT
    assert h.records("txn")[-1].producer_epoch == epoch + 1
    req = h.markers.last
    assert (req.producer_id, req.producer_epoch, req.result.name, req.partitions) == (
        pid, epoch + 1, "ABORT", frozenset({TP("t", 0), TP("t", 1)}))
    assert h.end("txn", pid, epoch).error_code == E.producer_fenced
    # Until the markers are written the client keeps being told to retry.
    assert h.init("txn").error_code == E.concurrent_transactions
    h.markers.complete()
    assert h.meta("txn").state is S.COMPLETE_ABORT
    r = h.init("txn")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, epoch + 2)


def test_init_with_an_ongoing_transaction_and_a_synchronous_sender() -> None:
    h = TxnHarness()
    h.markers.auto = True
    pid, epoch = h.begin("txn")
    assert h.init("txn").error_code == E.concurrent_transactions
    assert h.meta("txn").state is S.COMPLETE_ABORT  # markers written inside the call
    assert [r.transaction_status for r in h.records("txn")] == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert h.init("txn").producer_epoch == epoch + 2


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_markers_are_pending_is_concurrent(state: S) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    assert h.end("txn", pid, epoch, commit=state is S.PREPARE_COMMIT).error_code == E.none
    assert h.meta("txn").state is state
    assert h.init("txn").error_code == E.concurrent_transactions
    assert h.init("txn", pid=pid, epoch=epoch).error_code == E.concurrent_transactions


def test_bad_requests() -> None:
    h = TxnHarness(transaction_max_timeout_ms=60_000)
    assert h.init("").error_code == E.invalid_request
    assert h.init("txn", timeout=0).error_code == E.invalid_transaction_timeout
    assert h.init("txn", timeout=-5).error_code == E.invalid_transaction_timeout
    assert h.init("txn", timeout=60_001).error_code == E.invalid_transaction_timeout
    assert h.init("txn", timeout=60_000).error_code == E.none
    # v3+: producer id and epoch come together or not at all (KafkaApis).
    r = h.init("txn", pid=5, epoch=-1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.invalid_request, -1, -1)
    assert h.init("txn", pid=-1, epoch=3).error_code == E.invalid_request
    assert h.log.appends == 1


def test_kip360_resume_retry_and_fencing() -> None:
    h = TxnHarness()
    first = h.init("txn")
    pid = first.producer_id
    # The current producer resumes after an error: bumped, and its epoch remembered.
    r = h.init("txn", pid=pid, epoch=0)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid, 1)
    assert h.meta("txn").last_producer_epoch == 0
    # A retry of that request (its answer was lost) gets the same epoch again.
    r = h.init("txn", pid=pid, epoch=0)
    assert (r.error_code, r.producer_epoch) == (E.none, 1)
    # A stale epoch is fenced: PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before.
    h.init("txn", pid=pid, epoch=1)  # -> epoch 2, last 1
    assert h.init("txn", pid=pid, epoch=0, v=4).error_code == E.producer_fenced
    assert h.init("txn", pid=pid, epoch=0, v=3).error_code == E.invalid_producer_epoch
    # An unknown producer id is fenced too.
    assert h.init("txn", pid=pid + 77, epoch=2).error_code == E.producer_fenced
    # A new instance (no expected id) forgets the last epoch, so the old retry is fenced.
    assert h.init("txn").producer_epoch == 3
    assert h.meta("txn").last_producer_epoch == -1
    assert h.init("txn", pid=pid, epoch=2).error_code == E.producer_fenced


def test_kip360_on_a_just_created_id_accepts_any_expected_producer() -> None:
    # A producer recovering from UNKNOWN_PRODUCER_ID after its id expired gets a new id.
    h = TxnHarness()
    r = h.init("txn", pid=4242, epoch=17)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, 1000, 0)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = TxnHarness()
    pid = h.init("txn").producer_id
    h.meta("txn").producer_epoch = MAX_EPOCH - 1  # as if bumped 32766 times
    r = h.init("txn")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid + 1, 0)
    m = h.meta("txn")
    assert (m.previous_producer_id, m.last_producer_epoch) == (pid, -1)
    # KIP-360 with the exhausted epoch: rotate and remember it (a retry names the previous id).
    h.meta("txn").producer_epoch = MAX_EPOCH - 1
    r = h.init("txn", pid=pid + 1, epoch=MAX_EPOCH - 1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid + 2, 0)
    assert h.meta("txn").last_producer_epoch == MAX_EPOCH - 1
    assert h.meta("txn").previous_producer_id == pid + 1
    r = h.init("txn", pid=pid + 1, epoch=MAX_EPOCH - 1)  # the retry: same id and epoch
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, pid + 2, 0)


def test_allocation_failure_for_a_new_id() -> None:
    h = TxnHarness()
    h.ids.fail = log_error(E.coordinator_load_in_progress)
    assert h.init("txn").error_code == E.coordinator_load_in_progress
    h.ids.fail = RuntimeError("zookeeper away")
    assert h.init("txn").error_code == E.unknown_server_error
    h.ids.fail = None
    assert h.init("txn").error_code == E.none


@pytest.mark.parametrize(("append_code", "client_code"), [
    (E.not_leader_or_follower, E.not_coordinator),
    (E.kafka_storage_error, E.not_coordinator),
    (E.not_enough_replicas, E.coordinator_not_available),
    (E.request_timed_out, E.coordinator_not_available),
    (E.unknown_topic_or_partition, E.coordinator_not_available),
    (E.message_too_large, E.unknown_server_error),
    (E.record_list_too_large, E.unknown_server_error),
    (E.invalid_required_acks, E.invalid_required_acks),
])
def test_log_failures_map_like_kafka_and_clear_the_pending_state(append_code: E, client_code: E) -> None:
    h = TxnHarness()
    h.init("txn")
    h.log.fail = log_error(append_code)
    assert h.init("txn").error_code == client_code
    m = h.meta("txn")
    assert (m.pending_state, m.producer_epoch) == (None, 0)
    h.log.fail = None
    assert h.init("txn").producer_epoch == 1


def test_non_kafka_log_failures() -> None:
    h = TxnHarness()
    h.log.fail = OSError("disk gone")
    assert h.init("txn").error_code == E.not_coordinator
    h.log.fail = RuntimeError("bug")
    assert h.init("txn").error_code == E.unknown_server_error
    h.log.fail = None
    # The id was cached before its first write (as Kafka does) and still works.
    r = h.init("txn")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.none, 1000, 0)


def test_failed_fence_write_does_not_bump_twice() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("txn")
    h.log.fail = log_error(E.not_enough_replicas)
    assert h.init("txn").error_code == E.coordinator_not_available
    m = h.meta("txn")
    assert (m.state, m.pending_state, m.producer_epoch, m.has_failed_epoch_fence) == (S.ONGOING, None, epoch + 1, True)
    h.log.fail = None
    assert h.init("txn").error_code == E.concurrent_transactions
    assert h.records("txn")[-1].producer_epoch == epoch + 1  # the same fenced epoch, not +2
    h.markers.complete()
    assert h.meta("txn").has_failed_epoch_fence is False
    assert h.init("txn").producer_epoch == epoch + 2


def test_not_coordinator_and_loading() -> None:
    h = TxnHarness(load=False)
    assert h.init("txn").error_code == E.not_coordinator
    p = h.c.partition_for("txn")
    h.c.start_loading(p, 3)
    assert h.init("txn").error_code == E.coordinator_load_in_progress
    h.c.finished_loading(p)
    assert h.init("txn").error_code == E.none
    other = next(f"id-{i}" for i in range(100) if h.c.partition_for(f"id-{i}") != p)
    assert h.init(other).error_code == E.not_coordinator
    assert h.c.served_partitions() == {p}
