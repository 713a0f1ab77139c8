"""Transaction markers: from PrepareCommit/PrepareAbort to CompleteCommit/CompleteAbort
(Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Once EndTxn (or an abort by the coordinator) has written PrepareCommit/PrepareAbort, the
transaction's metadata holds the completing transition as its pending state and
:meth:`MarkerChannel.add_markers_to_send` hands a :class:`~txn_coordinator.state.MarkerRequest`
to the broker's :class:`~txn_coordinator.state.MarkerSender`. Each partition whose marker is
written leaves the transaction's partition set; when none is left, CompleteCommit/
CompleteAbort is written to ``__transaction_state``. Retriable failures are sent again after
a backoff; a changed coordinator epoch, a resignation or a fenced producer ends the attempt
(the next leader of the ``__transaction_state`` partition resumes it when it loads).

Where Kafka would stop its marker thread (an unexpected error code for a marker, or for the
Complete* write), Krait logs the error and retries with backoff instead, so that one bad
answer never wedges every transaction of the broker.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from txn_coordinator.config import MARKER_RETRY_BACKOFF_MS
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TxnTransit
from txn_coordinator.records import TopicPartition
from txn_coordinator.state import CoordinatorState, MarkerRequest, MarkerResults, MarkerSender, Refused

__all__ = ["MarkerChannel", "PendingCompleteTxn", "MAX_RETRY_BACKOFF_MS"]

log = logging.getLogger(__name__)

E = ErrorCode

#: Kafka's retry.backoff.max.ms: retries back off exponentially from MARKER_RETRY_BACKOFF_MS.
MAX_RETRY_BACKOFF_MS = 1000

# What the completion handler does with each marker error (TransactionMarkerRequestCompletionHandler).
_RETRIABLE = frozenset({
    E.unknown_topic_or_partition, E.not_leader_or_follower, E.not_enough_replicas,
    E.not_enough_replicas_after_append, E.request_timed_out, E.kafka_storage_error,
})
_PRODUCER_OR_COORDINATOR_MOVED_ON = frozenset({E.invalid_producer_epoch, E.transaction_coordinator_fenced})
# The producer could not have written to these partitions, so they need no marker.
_NO_MARKER_NEEDED = frozenset({E.unsupported_for_message_format, E.unsupported_version})
_SKIP_COMPLETION = frozenset({E.not_coordinator, E.coordinator_load_in_progress})


def _error_code(value: ErrorCode | int | None) -> ErrorCode | None:
    """The broker may report plain ints; a code Kafka does not define is an unknown error."""
    if value is None or isinstance(value, ErrorCode):
        return value
    try:
        return ErrorCode(int(value))
    except ValueError:
        return E.unknown_server_error


@dataclass(slots=True, eq=False)
class PendingCompleteTxn:
    """A transaction waiting for its markers, and the Complete* transit to write after them."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransit
    result: TransactionResult
    attempts: int = 0


class MarkerChannel:
    """Sends the markers of completing transactions and writes their completion."""

    def __init__(self, state: CoordinatorState, sender: MarkerSender) -> None:
        self._state = state
        self._sender = sender
        #: transactional id -> its transaction waiting for markers (transactionsWithPendingMarkers)
        self.pending: dict[str, PendingCompleteTxn] = {}
        # (deadline, seq, txn, partitions to send again, or None to retry the Complete* write)
        self._retries: list[tuple[int, int, PendingCompleteTxn, frozenset[TopicPartition] | None]] = []
        self._seq = 0

    # ------------------------------------------------------------------ start
    def add_markers_to_send(self, coordinator_epoch: int, result: TransactionResult, meta: TransactionMetadata,
                            transit: TxnTransit) -> None:
        """``meta`` is in PrepareCommit/PrepareAbort with ``transit`` (its completion) pending."""
        tid = meta.transactional_id
        txn = PendingCompleteTxn(tid, coordinator_epoch, meta, transit, result)
        if tid in self.pending:
            log.info("%s: replacing the transaction already waiting for markers", tid)
        self.pending[tid] = txn
        self._send(txn, frozenset(meta.partitions))
        # A transaction without partitions (or whose markers were written synchronously)
        # completes at once.
        self.maybe_write_completion(tid)

    def _send(self, txn: PendingCompleteTxn, partitions: frozenset[TopicPartition]) -> None:
        if not partitions:
            return
        meta = txn.metadata
        req = MarkerRequest(
            transactional_id=txn.transactional_id,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            result=txn.result,
            partitions=partitions,
            coordinator_epoch=txn.coordinator_epoch,
            txn_partition=self._state.partition_for(txn.transactional_id),
        )
        answered = False

        def on_complete(results: MarkerResults) -> None:
            nonlocal answered
            if answered:
                log.warning("%s: markers reported complete twice; ignoring the second report", txn.transactional_id)
                return
            answered = True
            try:
                self._on_complete(txn, req, results)
            except Exception:  # never let a bug escape into the broker's sender
                log.exception("%s: handling the marker results failed", txn.transactional_id)

        try:
            self._sender.send(req, on_complete)
        except Exception:
            log.exception("%s: the marker sender failed; sending again later", txn.transactional_id)
            if not answered:
                answered = True
                self._schedule(txn, partitions)

    # ------------------------------------------------------------------ results
    def _on_complete(self, txn: PendingCompleteTxn, req: MarkerRequest, results: MarkerResults) -> None:
        tid = txn.transactional_id
        try:
            epoch, meta = self._state.lookup(tid)
        except Refused as r:
            # No longer ours, or being loaded again (the load resumes the markers).
            log.info("%s: %s; no more markers for this transaction from here", tid, r.code.name)
            self.remove_markers_for_txn(txn)
            return
        if meta is None or meta is not txn.metadata or epoch != req.coordinator_epoch:
            log.info("%s: the coordinator epoch or metadata changed; cancelling its markers", tid)
            self.remove_markers_for_txn(txn)
            return
        retry: set[TopicPartition] = set()
        stop = False
        for tp in req.partitions:
            if tp not in results:
                retry.add(tp)  # not reached, like Kafka's disconnected request
                continue
            error = _error_code(results[tp])
            if error is None or error is E.none or error in _NO_MARKER_NEEDED:
                # written, or the partition is gone (Kafka: no leader => deleted)
                meta.remove_partition(tp)
            elif error in _RETRIABLE:
                log.info("%s: marker for %s failed with %s; retrying", tid, tp, error.name)
                retry.add(tp)
            elif error in _PRODUCER_OR_COORDINATOR_MOVED_ON:
                log.info("%s: marker for %s failed with %s; this transaction is superseded", tid, tp, error.name)
                self.remove_markers_for_txn(txn)
                stop = True
            else:
                log.error("%s: unexpected marker error %s for %s; retrying", tid, error.name, tp)
                retry.add(tp)
        if stop:
            return
        if retry:
            self._schedule(txn, frozenset(retry))
        else:
            self.maybe_write_completion(tid)

    def remove_markers_for_txn(self, txn: PendingCompleteTxn) -> None:
        if self.pending.get(txn.transactional_id) is txn:
            del self.pending[txn.transactional_id]

    def remove_markers_for_partition(self, txn_partition: int) -> None:
        """Resignation or a new load of a ``__transaction_state`` partition: forget its
        transactions' markers (their queued retries lapse with them)."""
        for tid in [t for t in self.pending if self._state.partition_for(t) == txn_partition]:
            del self.pending[tid]

    # ------------------------------------------------------------------ completion
    def maybe_write_completion(self, transactional_id: str) -> None:
        txn = self.pending.get(transactional_id)
        if txn is not None and not txn.metadata.partitions:
            del self.pending[transactional_id]
            self._write_completion(txn)

    def _write_completion(self, txn: PendingCompleteTxn) -> None:
        if self._still_current(txn):
            self._try_append(txn)

    def _still_current(self, txn: PendingCompleteTxn) -> bool:
        try:
            epoch, meta = self._state.lookup(txn.transactional_id)
        except Refused as r:
            log.info("%s: %s; not writing %s here", txn.transactional_id, r.code.name, txn.transit.state.kafka_name)
            return False
        if meta is not txn.metadata or epoch != txn.coordinator_epoch or meta.pending_state is not txn.transit.state:
            log.info("%s: the metadata changed since its markers were sent; not writing %s",
                     txn.transactional_id, txn.transit.state.kafka_name)
            return False
        return True

    def _try_append(self, txn: PendingCompleteTxn) -> None:
        error = self._state.append(txn.transactional_id, txn.coordinator_epoch, txn.transit,
                                   retry_on_error=lambda e: e not in _SKIP_COMPLETION)
        if error is E.none:
            log.debug("%s: transaction completed (%s)", txn.transactional_id, txn.transit.state.kafka_name)
        elif error in _SKIP_COMPLETION:
            log.info("%s: %s while writing %s; the partition's next load completes it",
                     txn.transactional_id, error.name, txn.transit.state.kafka_name)
        else:
            # Kafka retries COORDINATOR_NOT_AVAILABLE and treats anything else as fatal.
            level = logging.INFO if error is E.coordinator_not_available else logging.ERROR
            log.log(level, "%s: writing %s failed with %s; retrying", txn.transactional_id,
                    txn.transit.state.kafka_name, error.name)
            self._schedule(txn, None)

    # ------------------------------------------------------------------ retries
    def _schedule(self, txn: PendingCompleteTxn, partitions: frozenset[TopicPartition] | None) -> None:
        delay = min(MARKER_RETRY_BACKOFF_MS * (1 << min(txn.attempts, 16)), MAX_RETRY_BACKOFF_MS)
        txn.attempts += 1
        self._seq += 1
        heapq.heappush(self._retries, (self._state.clock() + delay, self._seq, txn, partitions))

    def next_deadline(self) -> int | None:
        return self._retries[0][0] if self._retries else None

    def poll(self, now: int) -> None:
        """Send again the markers (and Complete* writes) whose backoff has passed."""
        while self._retries and self._retries[0][0] <= now:
            _, _, txn, partitions = heapq.heappop(self._retries)
            try:
                if partitions is None:
                    if self._still_current(txn):
                        self._try_append(txn)
                elif self.pending.get(txn.transactional_id) is txn:
                    # Only partitions still waiting (another attempt may have reached some).
                    self._send(txn, partitions & frozenset(txn.metadata.partitions))
                    self.maybe_write_completion(txn.transactional_id)
            except Exception:
                log.exception("%s: retrying markers failed", txn.transactional_id)
