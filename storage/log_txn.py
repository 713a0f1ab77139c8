"""The transactional side of a partition log (Kafka's UnifiedLog: lastStableOffset,
firstUnstableOffset, collectAbortedTransactions, appendAsLeader with origin
COORDINATOR for markers, the transaction verification state): :class:`LogTransactions`,
the part of :class:`storage.log.PartitionLog` it owns as ``plog.txns``.

- The *first unstable offset* is the first offset of the oldest transaction still open,
  or completed with its marker not yet below the high watermark; the *last stable offset*
  (LSO) is that offset when it lies below the high watermark, the high watermark
  otherwise. read_committed consumers read up to the LSO.
- :meth:`LogTransactions.append_control_batch` writes a COMMIT/ABORT marker the way the
  transaction coordinator's WriteTxnMarkers does; an ABORT of a transaction with data
  appends an AbortedTxn to the ``.txnindex`` of the segment the marker went into.
- :meth:`LogTransactions.collect_aborted_transactions` answers the aborted transactions
  of a fetch range from those indexes, segment by segment until an entry's LSO shows that
  no later segment can have more (Kafka's LocalLog.collectAbortedTransactions).

The state itself (open transactions, verification entries) is the log's
ProducerStateManager's; this object reads it with the log's offsets and segments, and
uses the log's clock and its failure path (an OSError takes the partition offline) as the
log's own code does.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from protocol.records import ATTR_CONTROL, BatchHeader, build_end_txn_marker, parse_control_batch, parse_header

from .log_types import AppendResult
from .segment import LogSegment
from .transactions import SENTINEL_GUARD, TxnAppend, VerificationGuard
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .log import PartitionLog

__all__ = ["LogTransactions"]


class LogTransactions:
    """The transactions of one partition log; ``PartitionLog.txns``."""

    def __init__(self, log: PartitionLog) -> None:
        self._log = log

    # --- offsets -------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """None when no transaction is open or unreplicated; never below the log start."""
        ps = self._log.producer_state
        if not ps.ongoing and not ps.unreplicated:
            return None
        # Completed transactions are forgotten once the high watermark passes their
        # marker (Kafka's onHighWatermarkUpdated), done here rather than on every HW move.
        ps.on_high_watermark_updated(self._log.high_watermark)
        first = ps.first_unstable_offset()
        return None if first is None else max(first, self._log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed fetches stop: min(first unstable offset, high watermark)."""
        first = self.first_unstable_offset
        hw = self._log.high_watermark
        return first if first is not None and first < hw else hw

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        return self._log.producer_state.has_ongoing_txn(producer_id)

    # --- transaction verification (KIP-890) ----------------------------------------

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationGuard:
        """The guard a transactional produce must carry to open a transaction here once
        the coordinator confirmed the partition is in it (Kafka's
        maybeStartTransactionVerification); the sentinel when one is already open."""
        ps = self._log.producer_state
        if ps.has_ongoing_txn(producer_id):
            return SENTINEL_GUARD
        return ps.maybe_create_verification_state_entry(producer_id, sequence, epoch, self._log._now_ms()).guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        return self._log.producer_state.verification_guard(producer_id)

    # --- markers -------------------------------------------------------------------

    def append_control_batch(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, *,
                             leader_epoch: int = 0, timestamp: int | None = None) -> AppendResult:
        """Write a COMMIT (``commit``) or ABORT marker for the producer's transaction.
        Raises InvalidProducerEpochError for an epoch older than the producer's, and
        TransactionCoordinatorFencedError for a coordinator epoch older than the last
        marker's. ``timestamp`` defaults to now."""
        ts = self._log._now_ms() if timestamp is None else timestamp
        buf = bytearray(build_end_txn_marker(producer_id=producer_id, producer_epoch=producer_epoch,
                                             coordinator_epoch=coordinator_epoch, commit=commit, timestamp=ts))
        return self._log.append(buf, [parse_header(buf)], leader_epoch=leader_epoch, coordinator=True)

    def end_txns(self, seg: LogSegment, txn: TxnAppend) -> None:
        """After a leader append was written into ``seg``: the transactions its markers
        completed end, aborts into the segment's ``.txnindex``."""
        try:
            for completed in txn.completed:
                self._log.producer_state.complete(completed, seg.txn_index)
        except OSError as e:
            raise self._log._fail(e) from e

    def replay_run(self, seg: LogSegment, buf: memoryview, pos: int, run: list[BatchHeader]) -> None:
        """Producer state from a follower's batches written into ``seg`` (from ``pos`` of
        ``buf``); markers complete transactions as on the leader. The caller handles an
        OSError (the segment's ``.txnindex`` write) with the rest of the append."""
        ps = self._log.producer_state
        for h in run:
            marker = parse_control_batch(buf, pos) if h.attributes & ATTR_CONTROL and h.producer_id >= 0 else None
            completed = ps.replay(h, marker)
            if completed is not None:
                ps.complete(completed, seg.txn_index)
            pos += h.size

    # --- aborted transactions ------------------------------------------------------

    def aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The AbortedTxn entries overlapping [start_offset, upper_bound_offset)."""
        log = self._log
        out: list[AbortedTxn] = []
        i = max(bisect.bisect_right(log._bases, start_offset) - 1, 0)
        try:
            for seg in log.segments[i:]:
                found = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
                out += found.aborted
                if found.complete:
                    break
        except OSError as e:
            raise log._fail(e) from e
        return out

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each transaction aborted in [start_offset,
        upper_bound_offset): what a read_committed Fetch returns with the records."""
        return [(t.producer_id, t.first_offset) for t in self.aborted_txns(start_offset, upper_bound_offset)]
