"""The share-partition state machine (KIP-932, Kafka 4.2's SharePartition): the part of a
partition leader that hands the records of one topic-partition to the members of one share
group, counts their deliveries, holds their acquisition locks and takes their
acknowledgements.

It owns the share-partition start offset (SPSO), the in-flight records above it and their
states (:mod:`broker.replica.share_state`), and says what must be persisted after each
change. It is pure and synchronous: no event loop, no I/O, time from an injected clock in
milliseconds. The async shell drives it: it reads the log from :meth:`next_fetch_offset`,
calls :meth:`acquire` with the batches read, writes each :class:`StateWrite` a change returns
through the share coordinator and answers the client only after handing the outcome back
with :meth:`complete_write` (a failed write rolls the change back, as Kafka does), and runs
one timer on :meth:`next_deadline` that calls :meth:`expire_locks`.

In-flight records are kept per batch (one state for a whole batch) and split into
per-offset states only when records of one batch diverge (a partial or per-offset
acknowledgement), so the hot path stays per batch. An offset between the SPSO and the end
of the in-flight window that no batch covers has never been delivered: it counts as
AVAILABLE with delivery count 0 (a gap left by persisted state after a restart).

Departures from Kafka, each deliberate: acquisition splits a batch-state batch at the
fetch boundaries rather than exploding it into per-offset states; an acknowledgement range
only checks the in-flight batches it overlaps.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right, insort
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

from .share_state import (
    ACK_TARGET,
    TERMINAL,
    AbortedTxn,
    AckBatch,
    AcknowledgeType,
    AcquiredRecords,
    DeliveryCountOp,
    FetchedBatch,
    InFlightBatch,
    InFlightState,
    PersistedBatch,
    RecordState,
    StateWrite,
    coalesce,
)

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ARCHIVED = RecordState.ARCHIVED

# Defaults of group.share.partition.max.record.locks, group.share.delivery.count.limit and
# group.share.record.lock.duration.ms.
DEFAULT_MAX_RECORD_LOCKS = 2000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000


@dataclass
class ShareMetrics:
    """Running totals the shell exports (the gauges are properties of the partition)."""

    acquired_records: int = 0
    redelivered_records: int = 0
    archived_records: int = 0


@dataclass
class AcquireResult:
    """What one acquire handed out: ShareFetch's AcquiredRecords and their record count."""

    records: list[AcquiredRecords]
    count: int


def _invalid_state(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_record_state, message)


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


class SharePartition:
    """One share group's view of one topic-partition, on the partition's leader."""

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS,
        delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT,
        record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS,
        leader_epoch: int = 0,
    ) -> None:
        self._clock = clock
        self.max_record_locks = max_record_locks
        self.delivery_count_limit = delivery_count_limit
        self.record_lock_duration_ms = record_lock_duration_ms
        self.leader_epoch = leader_epoch
        self.state_epoch = 0
        self.start_offset = 0
        # the first offset never put in flight: the in-flight window is
        # [start_offset, _next_new) and a new record is acquired at or after _next_new
        self._next_new = 0
        # in-flight batches by first offset, and their first offsets in order
        self._batches: dict[int, InFlightBatch] = {}
        self._keys: list[int] = []
        # acquisition locks: (deadline, seq, first, last); checked against the states when
        # they fire, so a lock released or renewed early needs no removal here
        self._locks: list[tuple[int, int, int, int]] = []
        self._seq = 0
        # set when a record may have become AVAILABLE, so next_fetch_offset must look
        self._find_next = False
        self.metrics = ShareMetrics()

    # ---------------------------------------------------------------- initialisation

    def initialize(
        self,
        start_offset: int,
        state_epoch: int = 0,
        state_batches: Iterable[PersistedBatch] = (),
        *,
        reset_offset: int | None = None,
    ) -> None:
        """Load what ReadShareGroupState returned. ``start_offset`` -1 (a share-partition
        never initialised) takes ``reset_offset``: share.auto.offset.reset (latest,
        earliest or by_duration) resolved to an offset by the caller."""
        if start_offset < 0:
            if reset_offset is None:
                raise ValueError("an uninitialised share-partition needs the reset offset")
            start_offset = reset_offset
        self._batches.clear()
        self._keys.clear()
        self._locks.clear()
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        prev_last = start_offset - 1
        for pb in sorted(state_batches):
            if pb.last_offset < start_offset:
                continue
            first = max(pb.first_offset, start_offset)
            if first <= prev_last:
                raise ValueError(f"overlapping persisted state batches at offset {first}")
            state = RecordState(pb.delivery_state)
            if state not in (AVAILABLE, *TERMINAL):
                # Only acknowledged, archived and available records are ever written.
                state = AVAILABLE
            self._insert(InFlightBatch(first, pb.last_offset, InFlightState(state, pb.delivery_count)))
            prev_last = pb.last_offset
        self._next_new = prev_last + 1
        self._find_next = True
        self._advance_start()

    # ---------------------------------------------------------------- gauges

    @property
    def end_offset(self) -> int:
        """The share-partition end offset (SPEO): the last offset in flight, or the start
        offset minus one when nothing is."""
        return self._next_new - 1

    @property
    def in_flight_records(self) -> int:
        """Records between SPSO and SPEO (what group.share.partition.max.record.locks caps)."""
        return self._next_new - self.start_offset if self._keys else 0

    @property
    def in_flight_batches(self) -> int:
        return len(self._keys)

    def delivery_complete_count(self) -> int:
        """Acknowledged and archived records at or above the SPSO (KIP-1226's lag input)."""
        start = self.start_offset
        total = 0
        for k in self._keys:
            b = self._batches[k]
            for first, last, st in b.states(start, b.last):
                if st.state in TERMINAL:
                    total += last - first + 1
        return total

    def can_acquire(self) -> bool:
        """Worth a log read: some record is AVAILABLE again, or the lock cap has room."""
        return self.next_fetch_offset() != self._next_new or self.in_flight_records < self.max_record_locks

    # ---------------------------------------------------------------- fetch position

    def next_fetch_offset(self) -> int:
        """The first offset that may hold an AVAILABLE record: where the next log read for
        this share-partition starts."""
        if not self._find_next:
            return self._next_new
        p = self.start_offset
        keys, batches = self._keys, self._batches
        for k in keys[self._first_overlapping(p):]:
            b = batches[k]
            if b.first > p:
                return p  # never delivered
            for first, _last, st in b.states(p, b.last):
                if st.state is AVAILABLE and st.rollback is None:
                    return first
            p = b.last + 1
        self._find_next = False
        return self._next_new

    # ---------------------------------------------------------------- acquire

    def acquire(
        self,
        member_id: str,
        fetch_offset: int,
        fetched: Sequence[FetchedBatch],
        max_records: int,
        *,
        batch_size: int | None = None,
        aborted_transactions: Sequence[AbortedTxn] | None = None,
    ) -> AcquireResult:
        """Acquire for ``member_id`` the AVAILABLE records among the batches a log read from
        ``fetch_offset`` returned (Kafka's batch_optimized mode: whole batches, so
        ``max_records`` is a soft limit). New records and records whose lock runs out get a
        lock of record_lock_duration_ms. ``aborted_transactions`` (read_committed) lists the
        aborted transactions of the read: their records are archived, not delivered.
        ``batch_size`` splits newly acquired ranges at log batch boundaries."""
        if not fetched or max_records <= 0:
            return AcquireResult([], 0)
        now = self._clock()
        first_base = fetched[0].base_offset
        hi = fetched[-1].last_offset
        # Kafka's lastOffsetAndMaxRecordsToAcquire: never past the record-lock cap, except
        # to re-acquire records inside the window.
        limit = min(max_records, self.max_record_locks - self.in_flight_records)
        if limit <= 0:
            if fetch_offset > self.end_offset:
                return AcquireResult([], 0)
            limit = min(max_records, self.end_offset - fetch_offset + 1)
            hi = min(hi, self.end_offset)
        self._archive_missing(fetch_offset, first_base)
        lo = max(first_base, self.start_offset)
        out: list[AcquiredRecords] = []
        count = 0
        p = lo
        while p <= hi and count < limit:
            i = self._first_overlapping(p)
            b = self._batches[self._keys[i]] if i < len(self._keys) else None
            if b is None or b.first > p:
                # never delivered: acquire as new records up to the next in-flight batch
                gap_end = hi if b is None else min(hi, b.first - 1)
                count += self._acquire_new(member_id, p, gap_end, limit - count, fetched, batch_size, now, out)
                p = gap_end + 1
                continue
            if b.offset_state is None:
                count += self._acquire_batch(member_id, b, p, hi, now, out)
            else:
                count += self._acquire_offsets(member_id, b, p, hi, now, out)
            # the batch now holding p (a split may have cut the one we looked at)
            p = self._batches[self._keys[self._first_overlapping(p)]].last + 1
        if aborted_transactions and out:
            out, count = self._drop_aborted(member_id, fetched, aborted_transactions, out)
        self.metrics.acquired_records += count
        self.metrics.redelivered_records += sum(
            r.last_offset - r.first_offset + 1 for r in out if r.delivery_count > 1)
        return AcquireResult(out, count)

    def _lock(self, first: int, last: int, deadline: int) -> None:
        self._seq += 1
        heapq.heappush(self._locks, (deadline, self._seq, first, last))

    def _acquire_new(self, member_id: str, lo: int, hi: int, remaining: int,
                     fetched: Sequence[FetchedBatch], batch_size: int | None, now: int,
                     out: list[AcquiredRecords]) -> int:
        last = hi
        if remaining < hi - lo + 1:
            # Soft limit: finish the log batch holding the last record allowed.
            want = lo + remaining - 1
            last = want
            for fb in fetched:
                if fb.base_offset > want:
                    break
                if fb.last_offset >= want:
                    last = fb.last_offset
            last = min(last, hi)
        ranges = []
        cur = lo
        if batch_size and last - lo + 1 > batch_size:
            for fb in fetched:
                if fb.base_offset > last:
                    break
                if fb.base_offset - cur >= batch_size:
                    ranges.append((cur, fb.base_offset - 1))
                    cur = fb.base_offset
        ranges.append((cur, last))
        deadline = now + self.record_lock_duration_ms
        for first, end in ranges:
            self._insert(InFlightBatch(first, end, InFlightState(ACQUIRED, 1, member_id, deadline)))
            self._lock(first, end, deadline)
            out.append(AcquiredRecords(first, end, 1))
        if last >= self._next_new:
            self._next_new = last + 1
        return last - lo + 1

    def _acquire_batch(self, member_id: str, b: InFlightBatch, lo: int, hi: int, now: int,
                       out: list[AcquiredRecords]) -> int:
        st = b.batch_state
        assert st is not None
        if st.state is not AVAILABLE or st.rollback is not None:
            return 0
        # Acquire exactly the fetched part, cutting the batch rather than exploding it.
        if b.first < lo:
            b = self._split(b, lo)
            st = b.batch_state
            assert st is not None
        if b.last > hi:
            self._split(b, hi + 1)
        self._find_next = True  # a part left AVAILABLE on either side of the cut
        st.try_update(ACQUIRED, DeliveryCountOp.INCREASE, self.delivery_count_limit, member_id)
        st.deadline = now + self.record_lock_duration_ms
        self._lock(b.first, b.last, st.deadline)
        out.append(AcquiredRecords(b.first, b.last, st.delivery_count))
        return b.size

    def _acquire_offsets(self, member_id: str, b: InFlightBatch, lo: int, hi: int, now: int,
                         out: list[AcquiredRecords]) -> int:
        deadline = now + self.record_lock_duration_ms
        got = 0
        span_first = span_last = -1
        assert b.offset_state is not None
        first_out = len(out)
        for o in range(max(lo, b.first), min(hi, b.last) + 1):
            st = b.offset_state[o]
            if st.state is not AVAILABLE or st.rollback is not None:
                continue
            st.try_update(ACQUIRED, DeliveryCountOp.INCREASE, self.delivery_count_limit, member_id)
            st.deadline = deadline
            # Adjacent offsets with the same delivery count go out as one range.
            if len(out) > first_out and out[-1].last_offset == o - 1 \
                    and out[-1].delivery_count == st.delivery_count:
                out[-1] = out[-1]._replace(last_offset=o)
            else:
                out.append(AcquiredRecords(o, o, st.delivery_count))
            if span_first < 0:
                span_first = o
            span_last = o
            got += 1
        if got:
            self._lock(span_first, span_last, deadline)
        return got

    def _archive_missing(self, fetch_offset: int, first_base: int) -> None:
        """Offsets from the fetch offset up to the first batch the read returned hold no
        record (compaction, transaction markers removed): archive whatever of them is
        AVAILABLE or never delivered, so the SPSO and the fetch position can pass them
        (Kafka's maybeArchiveStaleBatches)."""
        lo = max(fetch_offset, self.start_offset)
        hi = first_base - 1
        if lo > hi:
            return
        if self._archive_range(lo, hi, gaps=True):
            self._advance_start()

    def _archive_range(self, lo: int, hi: int, *, gaps: bool) -> bool:
        """Archive AVAILABLE records in lo..hi (and, with ``gaps``, offsets no batch covers);
        these archives are never persisted, as in Kafka."""
        changed = False
        p = lo
        while p <= hi:
            i = self._first_overlapping(p)
            b = self._batches[self._keys[i]] if i < len(self._keys) else None
            if b is None or b.first > p:
                gap_end = hi if b is None else min(hi, b.first - 1)
                if gaps:
                    self._insert(InFlightBatch(p, gap_end, InFlightState(ARCHIVED, 0, forced_terminal=True)))
                    changed = True
                p = gap_end + 1
                continue
            if b.offset_state is None:
                st = b.batch_state
                assert st is not None
                if st.state is AVAILABLE and st.rollback is None:
                    if b.first < p:
                        b = self._split(b, p)
                    if b.last > hi:
                        self._split(b, hi + 1)
                    self._force_archive(b.batch_state, b.size)  # type: ignore[arg-type]
                    changed = True
            else:
                for o in range(p, min(hi, b.last) + 1):
                    st = b.offset_state[o]
                    if st.state is AVAILABLE and st.rollback is None:
                        self._force_archive(st, 1)
                        changed = True
            p = b.last + 1
        if gaps and hi >= self._next_new:
            self._next_new = hi + 1
        return changed

    def _force_archive(self, st: InFlightState, n: int) -> None:
        st.state = ARCHIVED
        st.member_id = None
        st.deadline = None
        st.forced_terminal = True
        self.metrics.archived_records += n

    def _drop_aborted(self, member_id: str, fetched: Sequence[FetchedBatch],
                      aborted: Sequence[AbortedTxn], out: list[AcquiredRecords]
                      ) -> tuple[list[AcquiredRecords], int]:
        """read_committed: archive the just-acquired records of aborted transactions and
        keep them out of the response (Kafka's filterAbortedTransactionalAcquiredRecords)."""
        pending = sorted(aborted, key=lambda t: t.first_offset)
        j = 0
        aborted_pids: set[int] = set()
        drop: list[tuple[int, int]] = []
        for fb in fetched:
            if fb.producer_id < 0:
                continue
            while j < len(pending) and pending[j].first_offset <= fb.last_offset:
                aborted_pids.add(pending[j].producer_id)
                j += 1
            if fb.is_control and fb.is_abort_marker:
                aborted_pids.discard(fb.producer_id)
            elif fb.is_transactional and fb.producer_id in aborted_pids:
                drop.append((fb.base_offset, fb.last_offset))
        if not drop:
            return out, sum(r.last_offset - r.first_offset + 1 for r in out)
        for first, last in drop:
            self._archive_acquired(member_id, first, last)
        kept: list[AcquiredRecords] = []
        for r in out:
            pieces = [r]
            for first, last in drop:
                nxt = []
                for q in pieces:
                    if last < q.first_offset or first > q.last_offset:
                        nxt.append(q)
                        continue
                    if q.first_offset < first:
                        nxt.append(q._replace(last_offset=first - 1))
                    if q.last_offset > last:
                        nxt.append(q._replace(first_offset=last + 1))
                pieces = nxt
            kept.extend(pieces)
        return kept, sum(r.last_offset - r.first_offset + 1 for r in kept)

    def _archive_acquired(self, member_id: str, lo: int, hi: int) -> None:
        p = lo
        while p <= hi:
            i = self._first_overlapping(p)
            if i >= len(self._keys):
                return
            b = self._batches[self._keys[i]]
            if b.first > hi:
                return
            p = max(p, b.first)
            if b.offset_state is None:
                st = b.batch_state
                assert st is not None
                if st.state is ACQUIRED and st.member_id == member_id and st.rollback is None:
                    if b.first < p:
                        b = self._split(b, p)
                    if b.last > hi:
                        self._split(b, hi + 1)
                    self._force_archive(b.batch_state, b.size)  # type: ignore[arg-type]
            else:
                for o in range(p, min(hi, b.last) + 1):
                    st = b.offset_state[o]
                    if st.state is ACQUIRED and st.member_id == member_id and st.rollback is None:
                        self._force_archive(st, 1)
            p = b.last + 1

    # ---------------------------------------------------------------- acknowledge

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> StateWrite | None:
        """Apply ShareFetch/ShareAcknowledge acknowledgements of ``member_id``. Raises
        KafkaError INVALID_REQUEST for a malformed batch or a range past the in-flight
        records, INVALID_RECORD_STATE for a record this member does not hold; then nothing
        has changed. Otherwise returns the write to make durable before answering (None
        when only locks were renewed: nothing to persist)."""
        for ab in batches:
            n = ab.last_offset - ab.first_offset + 1
            types = ab.acknowledge_types
            if n <= 0 or ab.first_offset < 0 or len(types) not in (1, n):
                raise _invalid_request(f"bad acknowledgement batch {ab.first_offset}-{ab.last_offset}")
            if any(t not in AcknowledgeType._value2member_map_ for t in types):
                raise _invalid_request(f"invalid acknowledge type in {list(types)}")
        now = self._clock()
        pending: list[InFlightState] = []
        persist: list[PersistedBatch] = []
        renewed: list[tuple[InFlightState, int | None]] = []
        try:
            for ab in batches:
                if ab.last_offset < self.start_offset:
                    # below the SPSO nothing is in flight any more: Kafka's "batch record
                    # not found", whoever acknowledges it
                    raise _invalid_state("acknowledged offsets are not in flight")
                for b in self._ack_range(ab):
                    self._ack_batch(member_id, ab, b, now, pending, persist, renewed)
        except KafkaError:
            for st in pending:
                st.complete_transition(False, now, self.delivery_count_limit)
            for st, deadline in renewed:
                st.deadline = deadline
            raise
        if not persist:
            return None
        archived = sum(b.last_offset - b.first_offset + 1 for b in persist if b.delivery_state == ARCHIVED)
        return self._write(persist, pending, archived)

    def _ack_range(self, ab: AckBatch) -> list[InFlightBatch]:
        """The in-flight batches an acknowledgement range touches (Kafka's
        fetchSubMapForAcknowledgementBatch and its two errors)."""
        keys = self._keys
        i = bisect_right(keys, ab.first_offset) - 1
        if i < 0:
            if not keys or not (ab.first_offset < self.start_offset <= ab.last_offset):
                raise _invalid_state("acknowledged offsets are not in flight")
            i = 0
        j = bisect_right(keys, ab.last_offset) - 1
        if j < i:
            raise _invalid_state("acknowledged offsets are not in flight")
        last = self._batches[keys[j]]
        if last.last < ab.first_offset:
            raise _invalid_request("first acknowledged offset is past the acquired records")
        if ab.last_offset > last.last:
            raise _invalid_request("last acknowledged offset is past the acquired records")
        out = []
        for k in keys[i:j + 1]:
            b = self._batches[k]
            if b.last >= ab.first_offset and b.last >= self.start_offset:
                out.append(b)
        return out

    def _ack_batch(self, member_id: str, ab: AckBatch, b: InFlightBatch, now: int,
                   pending: list[InFlightState], persist: list[PersistedBatch],
                   renewed: list[tuple[InFlightState, int | None]]) -> None:
        types = ab.acknowledge_types
        per_offset = len(types) > 1
        if b.offset_state is None:
            st = b.batch_state
            assert st is not None
            self._check_held(st, member_id)
            whole = ab.first_offset <= b.first and b.last <= ab.last_offset
            if whole and not per_offset and b.first >= self.start_offset:
                self._ack_one(st, AcknowledgeType(types[0]), b.first, b.last, now, pending, persist, renewed)
                return
            b.explode()
        assert b.offset_state is not None
        lo = max(b.first, ab.first_offset, self.start_offset)
        for o in range(lo, min(b.last, ab.last_offset) + 1):
            st = b.offset_state[o]
            self._check_held(st, member_id)
            t = types[o - ab.first_offset] if per_offset else types[0]
            self._ack_one(st, AcknowledgeType(t), o, o, now, pending, persist, renewed)

    @staticmethod
    def _check_held(st: InFlightState, member_id: str) -> None:
        if st.state is not ACQUIRED or st.rollback is not None:
            raise _invalid_state("the records are not acquired")
        if st.member_id != member_id:
            raise _invalid_state("the records are acquired by another member")

    def _ack_one(self, st: InFlightState, t: AcknowledgeType, first: int, last: int, now: int,
                 pending: list[InFlightState], persist: list[PersistedBatch],
                 renewed: list[tuple[InFlightState, int | None]]) -> None:
        if t is AcknowledgeType.RENEW:
            # KIP-1222: keep the records, restart the lock; nothing to persist.
            renewed.append((st, st.deadline))
            st.deadline = now + self.record_lock_duration_ms
            # A timer entry at the new deadline; the old entry finds the lock moved and is
            # skipped (and an undone renewal leaves an entry that is skipped the same way).
            self._lock(first, last, st.deadline)
            return
        if not st.start_transition(ACK_TARGET[t], DeliveryCountOp.NO_OP, self.delivery_count_limit, None):
            raise _invalid_state("the records cannot be acknowledged")
        pending.append(st)
        persist.append(PersistedBatch(first, last, st.state, st.delivery_count))

    # ---------------------------------------------------------------- release, expiry

    def release_member(self, member_id: str) -> StateWrite | None:
        """The member left or closed its share session: its acquired records become
        AVAILABLE again with the delivery given back (Kafka's releaseAcquiredRecords:
        they were most likely never processed), or ARCHIVED below the SPSO."""
        pending: list[InFlightState] = []
        persist: list[PersistedBatch] = []
        start = self.start_offset
        for k in self._keys:
            b = self._batches[k]
            if b.offset_state is None:
                st = b.batch_state
                assert st is not None
                if st.state is not ACQUIRED or st.member_id != member_id or st.rollback is not None:
                    continue
                if b.first >= start or b.last < start:
                    target = ARCHIVED if b.last < start else AVAILABLE
                    st.start_transition(target, DeliveryCountOp.DECREASE, self.delivery_count_limit, None)
                    pending.append(st)
                    persist.append(PersistedBatch(b.first, b.last, st.state, st.delivery_count))
                    continue
                b.explode()  # the SPSO falls inside: the part below it is archived
            assert b.offset_state is not None
            for o, st in b.offset_state.items():
                if st.state is ACQUIRED and st.member_id == member_id and st.rollback is None:
                    target = ARCHIVED if o < start else AVAILABLE
                    st.start_transition(target, DeliveryCountOp.DECREASE, self.delivery_count_limit, None)
                    pending.append(st)
                    persist.append(PersistedBatch(o, o, st.state, st.delivery_count))
        if not persist:
            return None
        archived = sum(b.last_offset - b.first_offset + 1 for b in persist if b.delivery_state == ARCHIVED)
        return self._write(persist, pending, archived)

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock runs out (ms on the injected clock), or None.
        It may be a lock already released: expire_locks then finds nothing to do."""
        locks = self._locks
        while locks and not self._lock_live(locks[0]):
            heapq.heappop(locks)
        return locks[0][0] if locks else None

    def _lock_live(self, lock: tuple[int, int, int, int]) -> bool:
        deadline, _, first, last = lock
        for b in self._overlapping(first, last):
            for _f, _l, st in b.states(first, last):
                if st.state is ACQUIRED and st.deadline == deadline:
                    return True
                if st.rollback is not None and st.rollback[3] == deadline:
                    return True  # a pending acknowledgement may roll back to this lock
        return False

    def expire_locks(self, now: int | None = None) -> StateWrite | None:
        """Release every record whose lock ran out, as a release without an
        acknowledgement (AVAILABLE, or ARCHIVED at the delivery limit or below the SPSO).
        The write it returns is applied whatever its outcome (as Kafka does)."""
        if now is None:
            now = self._clock()
        persist: list[PersistedBatch] = []
        locks = self._locks
        while locks and locks[0][0] <= now:
            _, _, first, last = heapq.heappop(locks)
            for b in self._overlapping(first, last):
                self._expire_batch(b, first, last, now, persist)
        if not persist:
            return None
        self._find_next = True
        self.metrics.archived_records += sum(
            b.last_offset - b.first_offset + 1 for b in persist if b.delivery_state == ARCHIVED)
        return self._write(persist, [], 0)

    def _expire_batch(self, b: InFlightBatch, first: int, last: int, now: int,
                      persist: list[PersistedBatch]) -> None:
        start = self.start_offset
        if b.offset_state is None:
            st = b.batch_state
            assert st is not None
            if not self._expired(st, now):
                return
            if b.first >= start or b.last < start:
                st.try_update(ARCHIVED if b.last < start else AVAILABLE, DeliveryCountOp.NO_OP,
                              self.delivery_count_limit, None)
                persist.append(PersistedBatch(b.first, b.last, st.state, st.delivery_count))
                return
            b.explode()
        assert b.offset_state is not None
        for o in range(max(first, b.first), min(last, b.last) + 1):
            st = b.offset_state[o]
            if self._expired(st, now):
                st.try_update(ARCHIVED if o < start else AVAILABLE, DeliveryCountOp.NO_OP,
                              self.delivery_count_limit, None)
                persist.append(PersistedBatch(o, o, st.state, st.delivery_count))

    @staticmethod
    def _expired(st: InFlightState, now: int) -> bool:
        return st.state is ACQUIRED and st.rollback is None and st.deadline is not None and st.deadline <= now

    # ---------------------------------------------------------------- log start offset

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start past the SPSO: archive what is
        AVAILABLE below it and move the SPSO (Kafka's updateCacheAndOffsets). Acquired
        records below it are archived when their lock ends; nothing is persisted now, the
        next write carries the new start offset."""
        if log_start_offset <= self.start_offset:
            return
        self._archive_range(self.start_offset, log_start_offset - 1, gaps=False)
        self.start_offset = log_start_offset
        self._drop_below_start()
        if self._next_new < log_start_offset:
            self._next_new = log_start_offset
        self._find_next = True

    # ---------------------------------------------------------------- writes

    def _write(self, persist: list[PersistedBatch], pending: list[InFlightState], archived: int) -> StateWrite:
        return StateWrite(
            state_epoch=self.state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=self.start_offset,
            delivery_complete_count=self.delivery_complete_count(),
            state_batches=coalesce(persist),
            pending=pending,
            archived_on_commit=archived,
        )

    def complete_write(self, write: StateWrite, success: bool) -> None:
        """The outcome of making ``write`` durable. Success commits its transitions and
        moves the SPSO past a prefix of acknowledged/archived records (dropping those
        batches); failure rolls the transitions back (a record whose lock ran out meanwhile
        becomes AVAILABLE), and the client gets the error."""
        now = self._clock()
        for st in write.pending:
            st.complete_transition(success, now, self.delivery_count_limit)
        if success:
            self.metrics.archived_records += write.archived_on_commit
        if not success or any(b.delivery_state == AVAILABLE for b in write.state_batches):
            self._find_next = True
        if success or not write.pending:
            self._advance_start()

    def _advance_start(self) -> None:
        """Move the SPSO past acknowledged/archived records with no pending change; drop
        the batches wholly below it. Walks from the front and stops at the first record
        still in play, so it costs the batches it drops."""
        p = self.start_offset
        keys, batches = self._keys, self._batches
        stop = False
        for k in keys[self._first_overlapping(p):]:
            b = batches[k]
            if b.first > p:
                break  # a never-delivered offset
            for first, last, st in b.states(p, b.last):
                if st.rollback is not None or st.state not in TERMINAL:
                    p = first
                    stop = True
                    break
                p = last + 1
            if stop:
                break
        if p > self.start_offset:
            self.start_offset = p
            self._drop_below_start()
        if self._next_new < self.start_offset:
            self._next_new = self.start_offset

    def _drop_below_start(self) -> None:
        n = self._first_overlapping(self.start_offset)
        if n:
            for k in self._keys[:n]:
                del self._batches[k]
            del self._keys[:n]

    # ---------------------------------------------------------------- the batch index

    def _first_overlapping(self, offset: int) -> int:
        """Index in _keys of the first batch ending at or after ``offset``."""
        i = bisect_right(self._keys, offset) - 1
        if i >= 0 and self._batches[self._keys[i]].last >= offset:
            return i
        return i + 1

    def _overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        out = []
        keys = self._keys
        for i in range(self._first_overlapping(first), len(keys)):
            b = self._batches[keys[i]]
            if b.first > last:
                break
            out.append(b)
        return out

    def _insert(self, b: InFlightBatch) -> None:
        self._batches[b.first] = b
        if not self._keys or b.first > self._keys[-1]:
            self._keys.append(b.first)  # the usual case: new records at the end
        else:
            insort(self._keys, b.first)

    def _split(self, b: InFlightBatch, at: int) -> InFlightBatch:
        tail = b.split(at)
        self._insert(tail)
        return tail
