"""One transactional id's state machine: Kafka's TransactionState, TransactionMetadata and
TxnTransitMetadata (core/.../coordinator/transaction/TransactionMetadata.scala).

A change happens in two steps, as in Kafka. ``prepare_*`` checks that the move is legal,
sets ``pending_state`` and returns a :class:`TxnTransit` (the would-be metadata); the
coordinator writes that transit to ``__transaction_state`` and only then calls
:meth:`TransactionMetadata.complete_transition`, which applies it. While a transition is
pending, every other operation on the id answers CONCURRENT_TRANSACTIONS.

Krait serves transaction version 0 (no epoch bump on every EndTxn, KIP-890 part 2), so
Kafka's ``clientTransactionVersion.supportsEpochBump()`` branches are absent; the version a
loaded record carries is kept and written back unchanged.

Nothing here does I/O. A broken invariant (a bug, never a client's doing) raises
:class:`IllegalTransition`.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import NoReturn

from txn_coordinator.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition, TransactionLogValue

__all__ = [
    "TransactionState",
    "TransactionResult",
    "TxnTransit",
    "TransactionMetadata",
    "IllegalTransition",
    "is_epoch_exhausted",
    "EXPIRATION_ALLOWED",
]

log = logging.getLogger(__name__)

#: Short.MaxValue: Kafka keeps this epoch back so the coordinator can always fence.
MAX_EPOCH = 32767


class TransactionState(enum.IntEnum):
    """Values are the ids in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show (``"PrepareCommit"``)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {s: "".join(w.capitalize() for w in s.name.split("_")) for s in TransactionState}
_BY_NAME = {n: s for s, n in _NAMES.items()}

# TransactionState.validPreviousStates: a prepare_* from anything else is a bug.
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

#: TransactionState.isExpirationAllowed: only ids without a live transaction may expire.
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class TransactionResult(enum.IntEnum):
    """What the markers say; values are Kafka's control record types (ABORT 0, COMMIT 1)."""

    ABORT = 0
    COMMIT = 1


class IllegalTransition(RuntimeError):
    """A transition Kafka's state machine forbids (Kafka: IllegalStateException)."""


def is_epoch_exhausted(epoch: int) -> bool:
    # Kafka refuses to hand out Short.MaxValue so that a fence can always bump once more.
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a transition will leave behind once written (Kafka's TxnTransitMetadata)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0

    def to_record(self) -> TransactionLogValue:
        """The TransactionLogValue Kafka writes for this transit (TransactionLog.valueToBytes)."""
        if self.state is _S.EMPTY and self.partitions:
            raise IllegalTransition(f"an Empty transaction cannot have partitions: {self}")
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=int(self.state),
            partitions=None if self.state is _S.EMPTY else self.partitions,
            last_update_timestamp_ms=self.txn_last_update_timestamp,
            start_timestamp_ms=self.txn_start_timestamp,
            previous_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    """The coordinator's view of one transactional id."""

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 0
    state: TransactionState = _S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    #: the state a written-but-not-yet-applied (or being written) transition leads to
    pending_state: TransactionState | None = None
    #: a fence's log write failed after the epoch was bumped in memory: do not bump again
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_record(cls, transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
        """Kafka's TransactionLog.readTxnRecordValue: the last producer epoch is not in the
        record, so a loaded id has none; Empty ids get no partitions."""
        state = TransactionState(v.transaction_status)  # ValueError for unknown ids
        return cls(
            transactional_id=transactional_id,
            producer_id=v.producer_id,
            previous_producer_id=v.previous_producer_id,
            next_producer_id=v.next_producer_id,
            producer_epoch=v.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=v.transaction_timeout_ms,
            state=state,
            partitions=set() if state is _S.EMPTY else set(v.partitions or ()),
            txn_start_timestamp=v.start_timestamp_ms,
            txn_last_update_timestamp=v.last_update_timestamp_ms,
            client_transaction_version=v.client_transaction_version,
        )

    # ------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker reached ``tp``: it no longer waits for one."""
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: removing a partition whose marker was written in {self.state.kafka_name}")
        self.partitions.discard(tp)

    # ------------------------------------------------------------------ prepare
    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer before aborting its transaction."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalTransition("cannot fence a producer whose epoch is Short.MaxValue")
        # After a failed fence write the in-memory epoch is already bumped (and was never
        # handed out), so it is reused rather than bumped twice.
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(_S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             frozenset(self.partitions), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(
        self, new_timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """InitProducerId on a finished transaction: the next epoch, or None when the
        producer's expected epoch is stale (the caller answers PRODUCER_FENCED)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition(f"no producer epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # A new producer instance: bump, and forget the last epoch so the old instance
            # cannot pass for a retry.
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # KIP-360: the current producer recovering from an error; remember its epoch so
            # a retry of this very request is recognised.
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the same epoch again.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("%s: expected producer epoch %d is neither the current %d nor the last %d",
                     self.transactional_id, expected_epoch, self.producer_epoch, self.last_producer_epoch)
            return None
        return self._prepare(_S.EMPTY, self.producer_id, epoch, last, new_timeout_ms, frozenset(), -1, now)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: continue with a new producer id at epoch 0."""
        if self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            raise IllegalTransition("cannot rotate producer ids while a transaction is pending")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, new_producer_id, 0, last, new_timeout_ms, frozenset(), -1, now)

    def prepare_add_partitions(self, added: frozenset[TopicPartition] | set[TopicPartition], now: int) -> TxnTransit:
        # The transaction starts with its first partition.
        start = now if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions | set(added)), start, now)

    def prepare_abort_or_commit(self, new_state: TransactionState, now: int, client_version: int = 0) -> TxnTransit:
        """EndTxn (or an abort by the coordinator). ``client_version`` is the client's
        transaction version, recorded as Kafka does; Krait's clients all use version 0."""
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp, now,
                             client_version=client_version)

    def prepare_complete(self, now: int) -> TxnTransit:
        """Every marker is written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        # The state change reached the log, so a fence that failed earlier is resolved.
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch, self.producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now,
                             client_version=self.client_transaction_version)

    def prepare_dead(self) -> TxnTransit:
        """The id expired: its tombstone is about to be written."""
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start: int, now: int, *, client_version: int = 0) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: preparing {state.kafka_name} while {self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransition(f"illegal producer id {producer_id}")
        # A new id keeps epoch -1 until its first InitProducerId completes; only Dead may carry it.
        if state is not _S.DEAD and epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name} is not a valid transition")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, NO_PRODUCER_ID, epoch, last_epoch, timeout_ms, state,
                          partitions, start, now, client_version)

    # ------------------------------------------------------------------ complete
    def complete_transition(self, t: TxnTransit) -> None:
        """Apply a transit whose record was written (Kafka's completeTransitionTo, with its
        sanity checks: a failure is a coordinator bug)."""
        to = self.pending_state
        if to is None or to is not t.state:
            self._fail(t, f"pending state is {to}")
        if to is _S.EMPTY:  # InitProducerId
            bumped = t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0 and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not bumped) or t.partitions or t.txn_start_timestamp != -1:
                self._fail(t, "not a valid epoch bump")
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to is _S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if not self._same_producer(t) or not self.partitions <= t.partitions or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t, "partitions may only be added by the current producer")
            self.txn_start_timestamp = t.txn_start_timestamp
            self.partitions |= t.partitions
        elif to in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):  # EndTxn
            if (not self._same_producer(t) or self.partitions != t.partitions
                    or self.txn_timeout_ms != t.txn_timeout_ms or self.txn_start_timestamp != t.txn_start_timestamp):
                self._fail(t, "EndTxn must keep the transaction as it is")
        elif to in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):  # markers written
            if not self._same_producer(t) or self.txn_timeout_ms != t.txn_timeout_ms or t.txn_start_timestamp == -1:
                self._fail(t, "completion must keep the producer and the transaction's start")
            self.txn_start_timestamp = t.txn_start_timestamp
            self.partitions.clear()
        else:
            # PrepareEpochFence is only ever pending (EndTxn replaces it with PrepareAbort);
            # Dead ends with the id's removal from the cache, never with a completed state.
            self._fail(t, f"{to.kafka_name} is never completed")
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    def _same_producer(self, t: TxnTransit) -> bool:
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _fail(self, t: TxnTransit, why: str) -> NoReturn:
        raise IllegalTransition(f"{self.transactional_id}: transition from {self.state.kafka_name} to {t} failed: {why}")
