"""The share-partition state machine (broker/replica/share_partition.py): acquisition,
acknowledgement, delivery limits, lock expiry, SPSO movement, read_committed, persisted
state and its round trip. Pure: an injected clock, no event loop."""

from __future__ import annotations

import pytest

from broker.replica.share_partition import SharePartition
from broker.replica.share_state import (
    AbortedTxn,
    AckBatch,
    AcquiredRecords,
    FetchedBatch,
    PersistedBatch,
    RecordState,
    merge_state_batches,
)
from protocol.errors import ErrorCode, KafkaError

ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(a, b) for a, b in ranges]


def make(clock: Clock | None = None, start: int = 0, **kw) -> SharePartition:
    sp = SharePartition(clock or Clock(), **kw)
    sp.initialize(start)
    return sp


def commit(sp: SharePartition, write) -> None:
    assert write is not None
    sp.complete_write(write, True)


def view(sp: SharePartition) -> dict[int, tuple[RecordState, int, str | None]]:
    """offset -> (state, delivery count, member) for every in-flight record."""
    out = {}
    for k in sp._keys:
        b = sp._batches[k]
        for first, last, st in b.states(b.first, b.last):
            for o in range(first, last + 1):
                out[o] = (st.state, st.delivery_count, st.member_id)
    return out


def test_acquire_then_accept_delivers_exactly_once():
    sp = make()
    r = sp.acquire("a", 0, batches((0, 4), (5, 9)), 500)
    assert r.records == [AcquiredRecords(0, 9, 1)] and r.count == 10
    assert sp.next_fetch_offset() == 10
    w = sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT])])
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.ACKNOWLEDGED, 1)]
    assert w.start_offset == 0 and w.delivery_complete_count == 10
    commit(sp, w)
    assert sp.start_offset == 10 and sp.in_flight_batches == 0 and sp.in_flight_records == 0
    # a stale read of the same records acquires nothing
    assert sp.acquire("b", 0, batches((0, 9)), 500).records == []
    assert sp.metrics.acquired_records == 10 and sp.metrics.redelivered_records == 0


def test_release_redelivers_with_count_plus_one():
    sp = make()
    sp.acquire("a", 0, batches((0, 9)), 500)
    w = sp.acknowledge("a", [AckBatch(0, 9, [RELEASE])])
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.AVAILABLE, 1)]
    commit(sp, w)
    assert sp.next_fetch_offset() == 0
    r = sp.acquire("b", 0, batches((0, 9)), 500)
    assert r.records == [AcquiredRecords(0, 9, 2)]
    assert sp.metrics.redelivered_records == 10


def test_reject_archives_and_moves_the_start_offset():
    sp = make()
    sp.acquire("a", 0, batches((0, 9)), 500)
    w = sp.acknowledge("a", [AckBatch(0, 9, [REJECT])])
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.ARCHIVED, 1)]
    commit(sp, w)
    assert sp.start_offset == 10 and sp.metrics.archived_records == 10
    assert sp.acquire("a", 0, batches((0, 9)), 500).records == []


def test_delivery_limit_archives_after_n_deliveries_by_release():
    sp = make(delivery_count_limit=3)
    for n in (1, 2, 3):
        r = sp.acquire("a", sp.next_fetch_offset(), batches((0, 9)), 500)
        assert r.records == [AcquiredRecords(0, 9, n)]
        commit(sp, sp.acknowledge("a", [AckBatch(0, 9, [RELEASE])]))
    # the third release hit the limit: archived, not redelivered
    assert sp.start_offset == 10 and sp.in_flight_batches == 0
    assert sp.acquire("a", 0, batches((0, 9)), 500).records == []


def test_delivery_limit_archives_after_n_deliveries_by_lock_expiry():
    clock = Clock()
    sp = make(clock, delivery_count_limit=2, record_lock_duration_ms=100)
    sp.acquire("a", 0, batches((0, 9)), 500)
    assert sp.next_deadline() == clock.now + 100
    assert sp.expire_locks(clock.now + 99) is None
    clock.now += 100
    w = sp.expire_locks()
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.AVAILABLE, 1)]
    sp.complete_write(w, False)  # an expiry stands even when its write fails, as in Kafka
    assert sp.next_fetch_offset() == 0 and sp.next_deadline() is None
    assert sp.acquire("b", 0, batches((0, 9)), 500).records == [AcquiredRecords(0, 9, 2)]
    clock.now += 100
    w = sp.expire_locks()
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.ARCHIVED, 2)]
    commit(sp, w)
    assert sp.start_offset == 10 and sp.metrics.archived_records == 10


def test_two_members_acquire_disjoint_records():
    sp = make()
    ra = sp.acquire("a", 0, batches((0, 4), (5, 9)), 5)
    assert ra.records == [AcquiredRecords(0, 4, 1)]
    # b's read overlaps a's records: it gets only the rest
    rb = sp.acquire("b", 0, batches((0, 4), (5, 9)), 500)
    assert rb.records == [AcquiredRecords(5, 9, 1)]
    v = view(sp)
    assert {v[o][2] for o in range(5)} == {"a"} and {v[o][2] for o in range(5, 10)} == {"b"}
    with pytest.raises(KafkaError) as e:
        sp.acknowledge("b", [AckBatch(0, 4, [ACCEPT])])
    assert e.value.error_code == ErrorCode.invalid_record_state


def test_max_record_locks_caps_acquisition():
    sp = make(max_record_locks=10)
    fetched = [FetchedBatch(o, o) for o in range(100)]
    r = sp.acquire("a", 0, fetched, 500)
    assert r.count == 10 and r.records[-1].last_offset == 9
    assert not sp.can_acquire()
    assert sp.acquire("b", 10, fetched[10:], 500).records == []
    commit(sp, sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT])]))
    assert sp.can_acquire()
    assert sp.acquire("b", 10, fetched[10:], 500).count == 10


def test_cap_still_lets_released_records_inside_the_window_be_reacquired():
    sp = make(max_record_locks=10)
    sp.acquire("a", 0, batches((0, 9)), 500)
    w = sp.acknowledge("a", [AckBatch(3, 3, [RELEASE])])
    commit(sp, w)
    assert sp.next_fetch_offset() == 3
    r = sp.acquire("b", 3, batches((0, 9), (10, 19)), 500)
    assert r.records == [AcquiredRecords(3, 3, 2)]


def test_member_leave_releases_its_records():
    sp = make()
    sp.acquire("a", 0, batches((0, 9)), 500)
    sp.acquire("b", 10, batches((10, 19)), 500)
    w = sp.release_member("a")
    # Kafka 4.2 gives the delivery back: the leaving member most likely never processed them
    assert w.state_batches == [PersistedBatch(0, 9, RecordState.AVAILABLE, 0)]
    commit(sp, w)
    assert sp.next_fetch_offset() == 0
    assert view(sp)[10] == (RecordState.ACQUIRED, 1, "b")
    assert sp.acquire("c", 0, batches((0, 9)), 500).records == [AcquiredRecords(0, 9, 1)]
    assert sp.release_member("nobody") is None


def test_acknowledging_what_you_do_not_hold_changes_nothing():
    sp = make()
    sp.acquire("a", 0, batches((0, 4)), 500)
    sp.acquire("b", 5, batches((5, 9)), 500)
    before = view(sp)
    for member, acks in [
        ("b", [AckBatch(0, 4, [ACCEPT])]),                               # a's records
        ("a", [AckBatch(0, 4, [ACCEPT]), AckBatch(5, 9, [ACCEPT])]),     # second batch is b's
        ("a", [AckBatch(0, 2, [ACCEPT]), AckBatch(3, 6, [REJECT])]),     # spans into b's
        ("a", [AckBatch(0, 4, [ACCEPT, ACCEPT, RELEASE, ACCEPT, ACCEPT]), AckBatch(8, 8, [ACCEPT])]),
    ]:
        with pytest.raises(KafkaError) as e:
            sp.acknowledge(member, acks)
        assert e.value.error_code == ErrorCode.invalid_record_state
        assert view(sp) == before
        assert all(st.rollback is None for k in sp._keys for _, _, st in
                   sp._batches[k].states(sp._batches[k].first, sp._batches[k].last))
    # a range past the in-flight records, or a malformed batch, is INVALID_REQUEST
    for acks in ([AckBatch(0, 20, [ACCEPT])], [AckBatch(0, 4, [ACCEPT, ACCEPT])], [AckBatch(0, 4, [9])],
                 [AckBatch(4, 3, [ACCEPT])]):
        with pytest.raises(KafkaError) as e:
            sp.acknowledge("a", acks)
        assert e.value.error_code == ErrorCode.invalid_request
        assert view(sp) == before
    # and then a's own acknowledgement still works
    commit(sp, sp.acknowledge("a", [AckBatch(0, 4, [ACCEPT])]))
    assert sp.start_offset == 5


def test_a_pending_acknowledgement_cannot_be_acknowledged_again():
    sp = make()
    sp.acquire("a", 0, batches((0, 9)), 500)
    w = sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT])])
    with pytest.raises(KafkaError) as e:
        sp.acknowledge("a", [AckBatch(0, 9, [RELEASE])])
    assert e.value.error_code == ErrorCode.invalid_record_state
    commit(sp, w)
    assert sp.start_offset == 10


def test_failed_write_rolls_back():
    clock = Clock()
    sp = make(clock, record_lock_duration_ms=100)
    sp.acquire("a", 0, batches((0, 9)), 500)
    w = sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT])])
    sp.complete_write(w, False)
    assert view(sp)[0] == (RecordState.ACQUIRED, 1, "a") and sp.start_offset == 0
    # the lock runs out while the retried acknowledgement's write is pending: rollback = expiry
    w = sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT])])
    clock.now += 150
    assert sp.expire_locks() is None  # not acquired while the change is pending
    sp.complete_write(w, False)
    assert view(sp)[0] == (RecordState.AVAILABLE, 1, None)
    assert sp.next_fetch_offset() == 0


def test_renew_extends_the_lock_without_persisting():
    clock = Clock()
    sp = make(clock, record_lock_duration_ms=100)
    sp.acquire("a", 0, batches((0, 9)), 500)
    clock.now += 80
    assert sp.acknowledge("a", [AckBatch(0, 9, [RENEW])]) is None
    clock.now += 50  # past the first deadline
    assert sp.expire_locks() is None
    assert sp.next_deadline() == clock.now + 50
    clock.now += 50
    assert sp.expire_locks() is not None


def test_start_offset_advances_and_in_flight_memory_is_dropped():
    sp = make()
    for lo in (0, 10, 20):
        sp.acquire("a", lo, batches((lo, lo + 9)), 500)
    assert sp.in_flight_batches == 3 and sp.in_flight_records == 30
    commit(sp, sp.acknowledge("a", [AckBatch(10, 19, [ACCEPT])]))
    assert sp.start_offset == 0 and sp.in_flight_batches == 3
    # a partial acknowledgement of the first batch moves the SPSO inside it
    commit(sp, sp.acknowledge("a", [AckBatch(0, 4, [ACCEPT])]))
    assert sp.start_offset == 5 and sp.in_flight_batches == 3
    commit(sp, sp.acknowledge("a", [AckBatch(5, 9, [REJECT])]))
    assert sp.start_offset == 20 and sp.in_flight_batches == 1 and sp.in_flight_records == 10
    assert sp._keys == [20]


def test_read_committed_archives_aborted_transactions():
    sp = make()
    fetched = [
        FetchedBatch(0, 4, producer_id=7, is_transactional=True),
        FetchedBatch(5, 5, producer_id=7, is_transactional=True, is_control=True, is_abort_marker=True),
        FetchedBatch(6, 9),
        FetchedBatch(10, 12, producer_id=8, is_transactional=True),  # committed
    ]
    r = sp.acquire("a", 0, fetched, 500, aborted_transactions=[AbortedTxn(7, 0)])
    assert r.records == [AcquiredRecords(5, 12, 1)] and r.count == 8
    v = view(sp)
    assert all(v[o][0] is RecordState.ARCHIVED for o in range(5))
    assert sp.metrics.archived_records == 5 and sp.metrics.acquired_records == 8
    commit(sp, sp.acknowledge("a", [AckBatch(5, 12, [ACCEPT])]))
    assert sp.start_offset == 13 and sp.in_flight_batches == 0


def test_init_from_persisted_state_restores_counts_and_skips_acknowledged():
    sp = SharePartition(Clock())
    sp.initialize(10, 3, [
        PersistedBatch(10, 14, RecordState.ACKNOWLEDGED, 1),
        PersistedBatch(15, 19, RecordState.AVAILABLE, 2),
        PersistedBatch(20, 24, RecordState.ARCHIVED, 5),
    ])
    assert sp.start_offset == 15 and sp.state_epoch == 3 and sp.next_fetch_offset() == 15
    r = sp.acquire("a", 15, batches((10, 19), (20, 24), (25, 29)), 500)
    assert r.records == [AcquiredRecords(15, 19, 3), AcquiredRecords(25, 29, 1)]


def test_init_of_a_new_share_partition_takes_the_reset_offset():
    sp = SharePartition(Clock())
    with pytest.raises(ValueError):
        sp.initialize(-1)
    sp.initialize(-1, reset_offset=42)
    assert sp.start_offset == 42 and sp.next_fetch_offset() == 42
    assert sp.acquire("a", 42, batches((40, 49)), 500).records == [AcquiredRecords(42, 49, 1)]


def test_gaps_in_persisted_state_are_delivered():
    sp = SharePartition(Clock())
    sp.initialize(0, 1, [PersistedBatch(5, 9, RecordState.ACKNOWLEDGED, 1)])
    assert sp.start_offset == 0 and sp.next_fetch_offset() == 0
    r = sp.acquire("a", 0, batches((0, 14)), 500)
    assert r.records == [AcquiredRecords(0, 4, 1), AcquiredRecords(10, 14, 1)]
    commit(sp, sp.acknowledge("a", [AckBatch(0, 4, [ACCEPT]), AckBatch(10, 14, [ACCEPT])]))
    assert sp.start_offset == 15 and sp.in_flight_batches == 0


def test_records_missing_from_the_log_are_archived():
    sp = make()
    # compaction removed 0-9: the read from 0 begins at 10
    r = sp.acquire("a", 0, batches((10, 19)), 500)
    assert r.records == [AcquiredRecords(10, 19, 1)]
    assert sp.start_offset == 10


def test_log_start_offset_movement_archives_available_records():
    sp = make()
    sp.acquire("a", 0, batches((0, 9)), 500)
    commit(sp, sp.acknowledge("a", [AckBatch(0, 9, [RELEASE])]))
    sp.update_log_start_offset(5)
    assert sp.start_offset == 5 and sp.next_fetch_offset() == 5
    assert sp.acquire("b", 5, batches((5, 9)), 500).records == [AcquiredRecords(5, 9, 2)]


def test_persisted_writes_round_trip_through_a_restart():
    clock = Clock()
    sp = SharePartition(clock, record_lock_duration_ms=100, delivery_count_limit=3)
    sp.initialize(0, 1)
    stored: tuple[int, list[PersistedBatch]] = (0, [])

    def apply(write) -> None:
        nonlocal stored
        if write is not None:
            sp.complete_write(write, True)
            stored = merge_state_batches(*stored, write)

    sp.acquire("a", 0, batches((0, 9)), 500)
    sp.acquire("b", 10, batches((10, 19)), 500)
    sp.acquire("c", 20, batches((20, 29)), 500)
    apply(sp.acknowledge("a", [AckBatch(0, 9, [ACCEPT, ACCEPT, RELEASE, REJECT, ACCEPT, ACCEPT,
                                               ACCEPT, ACCEPT, GAP, ACCEPT])]))
    apply(sp.acknowledge("b", [AckBatch(10, 19, [RELEASE])]))
    apply(sp.release_member("c"))
    sp.acquire("d", sp.next_fetch_offset(), batches((0, 9), (10, 19)), 500)
    clock.now += 100
    apply(sp.expire_locks())
    sp.acquire("e", sp.next_fetch_offset(), batches((0, 9), (10, 19), (20, 29)), 500)
    apply(sp.acknowledge("e", [AckBatch(10, 14, [ACCEPT])]))
    sp.acquire("f", 30, batches((30, 39)), 500)  # acquired only: never persisted

    restarted = SharePartition(Clock())
    restarted.initialize(stored[0], 1, stored[1])
    before, after = view(sp), view(restarted)
    assert restarted.start_offset == sp.start_offset == 2
    for o, (state, count, _member) in before.items():
        if o < sp.start_offset or state is RecordState.ACQUIRED:
            continue  # below the SPSO: gone; an acquisition is not persisted (AVAILABLE again)
        got = after.get(o, (RecordState.AVAILABLE, 0, None))
        assert (got[0], got[1]) == (state, count), o
    assert restarted.next_fetch_offset() == 2
    assert restarted.delivery_complete_count() == sp.delivery_complete_count()


def test_whole_batch_acknowledgement_stays_per_batch():
    sp = make()
    r = sp.acquire("a", 0, batches((0, 9_999)), 20_000)
    assert r.count == 10_000 and sp.in_flight_batches == 1
    assert sp._batches[0].offset_state is None
    w = sp.acknowledge("a", [AckBatch(0, 9_999, [ACCEPT])])
    assert sp._batches[0].offset_state is None and len(w.state_batches) == 1
    commit(sp, w)
    assert sp.in_flight_batches == 0 and not sp._batches


def test_partial_acquisition_of_an_available_batch_splits_it():
    sp = SharePartition(Clock())
    sp.initialize(0, 1, [PersistedBatch(0, 9_999, RecordState.AVAILABLE, 1)])
    r = sp.acquire("a", 0, batches((0, 4_999)), 500)
    assert r.records == [AcquiredRecords(0, 4_999, 2)]
    assert sp.in_flight_batches == 2
    assert all(sp._batches[k].offset_state is None for k in sp._keys)
    assert sp.next_fetch_offset() == 5_000


def test_batch_size_splits_new_acquisitions_at_log_batch_boundaries():
    sp = make()
    r = sp.acquire("a", 0, batches((0, 3), (4, 7), (8, 11)), 500, batch_size=5)
    assert r.records == [AcquiredRecords(0, 7, 1), AcquiredRecords(8, 11, 1)]
    assert sp.in_flight_batches == 2
