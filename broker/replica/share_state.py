"""The value types of a share-partition (KIP-932): record states, the in-flight state of a
batch or of one record, the batches a log read hands in, the acquired ranges handed out, the
acknowledgement batches a client sends and the state write a change produces.

Pure data and per-state rules (Kafka's RecordState, InFlightState, InFlightBatch,
PersisterStateBatch); :mod:`broker.replica.share_partition` is the state machine that uses
them. ``merge_state_batches`` is the share coordinator's side of a write (a newer batch
overrides the ranges it covers, batches below the start offset are dropped), kept here so a
write's meaning is checked in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple


class RecordState(IntEnum):
    """Kafka's RecordState ids (the DeliveryState of a persisted state batch)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191 (dead-letter queues); never entered here
    ARCHIVED = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(IntEnum):
    """AcknowledgeTypes of ShareFetch/ShareAcknowledge; RENEW is KIP-1222 (Kafka 4.2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


# What each acknowledgement does to an ACQUIRED record (RENEW keeps it acquired).
ACK_TARGET = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


class DeliveryCountOp(IntEnum):
    """Kafka's DeliveryCountOps: acquisition counts a delivery; a member leaving gives the
    count back (its records were most likely never handed to the application)."""

    INCREASE = 1
    DECREASE = -1
    NO_OP = 0


class FetchedBatch(NamedTuple):
    """One record batch a log read returned: its header fields only (no record is decoded).
    ``is_abort_marker`` is meaningful for control batches: the marker is an ABORT."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False
    is_abort_marker: bool = False


class AbortedTxn(NamedTuple):
    """FetchResponse's AbortedTransaction: the producer and the offset its aborted
    transaction began at (what the log's transaction index answers for read_committed)."""

    producer_id: int
    first_offset: int


class AcquiredRecords(NamedTuple):
    """ShareFetchResponse's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AckBatch(NamedTuple):
    """ShareAcknowledgementBatch: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: Sequence[int]


class PersistedBatch(NamedTuple):
    """A StateBatch of Read/WriteShareGroupState."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True)
class InFlightState:
    """State, delivery count, owner and lock deadline of a batch or of one record.

    A change that waits for a state write keeps the previous values in ``rollback``
    (Kafka's startStateTransition); while it is set no other change may touch the state.
    ``forced_terminal`` marks a record archived outside the write cycle (log start offset
    moved, aborted transaction) so that a rollback cannot make it available again.
    """

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline: int | None = None
    rollback: tuple[RecordState, int, str | None, int | None] | None = None
    forced_terminal: bool = False

    def copy(self) -> InFlightState:
        return InFlightState(self.state, self.delivery_count, self.member_id, self.deadline,
                             self.rollback, self.forced_terminal)

    def try_update(self, new: RecordState, op: DeliveryCountOp, max_delivery: int,
                   member_id: str | None) -> bool:
        """Kafka's tryUpdateState: a release past the delivery limit archives instead.
        Returns False (and changes nothing) for a transition the state machine forbids."""
        if self.rollback is not None:
            return False
        if new is RecordState.AVAILABLE and op is not DeliveryCountOp.DECREASE \
                and self.delivery_count >= max_delivery:
            new = RecordState.ARCHIVED
        cur = self.state
        if cur is new or cur in TERMINAL or (cur is RecordState.AVAILABLE and new is not RecordState.ACQUIRED):
            return False
        if new is not RecordState.ARCHIVED:
            self.delivery_count += op
        self.state = new
        self.member_id = member_id
        if new is not RecordState.ACQUIRED:
            self.deadline = None
        return True

    def start_transition(self, new: RecordState, op: DeliveryCountOp, max_delivery: int,
                         member_id: str | None) -> bool:
        """A change that becomes final only when its state write succeeds."""
        saved = (self.state, self.delivery_count, self.member_id, self.deadline)
        if not self.try_update(new, op, max_delivery, member_id):
            return False
        # try_update cleared the deadline; keep it while the write is pending so a rollback
        # can tell whether the lock ran out meanwhile.
        self.deadline = saved[3]
        self.rollback = saved
        return True

    def complete_transition(self, commit: bool, now: int, max_delivery: int) -> None:
        saved = self.rollback
        if saved is None:
            return
        self.rollback = None
        if commit or self.forced_terminal:
            if self.state is not RecordState.ACQUIRED:
                self.deadline = None
            return
        state, count, member, deadline = saved
        self.delivery_count = count
        if state is RecordState.ACQUIRED and deadline is not None and deadline <= now:
            # The lock ran out while the write was pending: the rollback is a lock expiry.
            self.state = RecordState.ARCHIVED if count >= max_delivery else RecordState.AVAILABLE
            self.member_id = None
            self.deadline = None
        else:
            self.state, self.member_id, self.deadline = state, member, deadline


class InFlightBatch:
    """Records ``first``..``last`` (inclusive) in flight. One ``batch_state`` covers them
    all until some record needs a state of its own; then ``offset_state`` holds one state
    per offset (in offset order) and ``batch_state`` is None (Kafka's InFlightBatch)."""

    __slots__ = ("first", "last", "batch_state", "offset_state")

    def __init__(self, first: int, last: int, state: InFlightState) -> None:
        self.first = first
        self.last = last
        self.batch_state: InFlightState | None = state
        self.offset_state: dict[int, InFlightState] | None = None

    def __repr__(self) -> str:
        inner = self.batch_state if self.offset_state is None else f"{len(self.offset_state)} offsets"
        return f"InFlightBatch({self.first}-{self.last}, {inner})"

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def explode(self) -> None:
        """Switch to per-offset states (Kafka's maybeInitializeOffsetStateUpdate)."""
        if self.offset_state is None:
            st = self.batch_state
            assert st is not None
            self.offset_state = {o: st.copy() for o in range(self.first, self.last + 1)}
            self.batch_state = None

    def split(self, at: int) -> InFlightBatch:
        """Cut a batch-state batch before offset ``at``: this keeps first..at-1, the returned
        batch holds at..last with a copy of the state. Used where acquisition boundaries fall
        inside a batch whose records all share one state, so no per-offset map is needed."""
        st = self.batch_state
        assert st is not None and self.first < at <= self.last
        tail = InFlightBatch(at, self.last, st.copy())
        self.last = at - 1
        return tail

    def states(self, lo: int, hi: int) -> Iterator[tuple[int, int, InFlightState]]:
        """(first, last, state) runs covering lo..hi ∩ this batch: one run for a batch
        state, one per offset otherwise."""
        lo = max(lo, self.first)
        hi = min(hi, self.last)
        if lo > hi:
            return
        if self.offset_state is None:
            assert self.batch_state is not None
            yield lo, hi, self.batch_state
            return
        os = self.offset_state
        for o in range(lo, hi + 1):
            yield o, o, os[o]


@dataclass
class StateWrite:
    """What a change must make durable (WriteShareGroupState for one partition) before the
    client is answered. ``state_batches`` are the ranges this change touched, as Kafka's
    SharePartition sends them; the share coordinator merges them over the stored state
    (:func:`merge_state_batches`). Hand it back with ``SharePartition.complete_write``."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: list[PersistedBatch]
    # the transitions that wait on this write (empty for a lock expiry, which Kafka applies
    # whether or not its write succeeds)
    pending: list[InFlightState] = field(default_factory=list, repr=False)
    archived_on_commit: int = field(default=0, repr=False)


def coalesce(batches: Iterable[PersistedBatch]) -> list[PersistedBatch]:
    """Sort and join adjacent ranges with the same state and count (fewer, equal batches)."""
    out: list[PersistedBatch] = []
    for b in sorted(batches):
        if out:
            p = out[-1]
            if p.last_offset + 1 == b.first_offset and p.delivery_state == b.delivery_state \
                    and p.delivery_count == b.delivery_count:
                out[-1] = p._replace(last_offset=b.last_offset)
                continue
        out.append(b)
    return out


def merge_state_batches(start_offset: int, batches: Sequence[PersistedBatch],
                        write: StateWrite) -> tuple[int, list[PersistedBatch]]:
    """The stored state after ``write`` (the share coordinator's merge): the start offset
    only moves forward, the write's batches override what they cover, and nothing below
    the start offset is kept."""
    start = max(start_offset, write.start_offset) if write.start_offset >= 0 else start_offset
    new = coalesce(write.state_batches)
    kept: list[PersistedBatch] = []
    for b in batches:
        pieces = [b]
        for n in new:
            nxt = []
            for p in pieces:
                if n.last_offset < p.first_offset or n.first_offset > p.last_offset:
                    nxt.append(p)
                    continue
                if p.first_offset < n.first_offset:
                    nxt.append(p._replace(last_offset=n.first_offset - 1))
                if p.last_offset > n.last_offset:
                    nxt.append(p._replace(first_offset=n.last_offset + 1))
            pieces = nxt
        kept.extend(pieces)
    out = []
    for b in coalesce([*kept, *new]):
        if b.last_offset < start:
            continue
        if b.first_offset < start:
            b = b._replace(first_offset=start)
        out.append(b)
    return start, out
