"""The coordinator's periodic jobs, run from :meth:`TransactionCoordinator.poll` on the
injected clock (Kafka schedules the same two tasks, each first after one interval):

* every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, transactions
  Ongoing for longer than their timeout are aborted: the producer's epoch is bumped (so a
  producer that comes back is fenced) and the abort's markers are written, so a dead
  producer never holds the last stable offset back for longer than its timeout
  (TransactionCoordinator.abortTimedOutTransactions);
* every ``transaction.remove.expired.transaction.cleanup.interval.ms``, transactional ids
  without a live transaction and untouched for ``transactional.id.expiration.ms`` get a
  tombstone and are forgotten (TransactionStateManager.removeExpiredTransactionalIds).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from txn_coordinator.end_txn import EndTransaction
from txn_coordinator.metadata import (
    EXPIRATION_ALLOWED,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TxnTransit,
)
from txn_coordinator.records import encode_key
from txn_coordinator.state import CoordinatorState, PartitionCache, Record, Refused, append_error

__all__ = ["Expiry", "TOMBSTONE_BATCH_BYTES"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = TransactionState

#: Kafka fills each tombstone batch up to the partition's max.message.bytes (1 MiB by
#: default) and starts another when it is full.
TOMBSTONE_BATCH_BYTES = 1_000_000
# Per-record overhead of a tombstone in a v2 batch, beyond its key (a generous bound).
_RECORD_OVERHEAD = 24


class Expiry:
    def __init__(self, state: CoordinatorState, ender: EndTransaction) -> None:
        self._state = state
        self._end = ender
        now = state.clock()
        cfg = state.config
        self.next_abort_ms = now + cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self.next_expire_ms = now + cfg.transaction_remove_expired_transaction_cleanup_interval_ms

    def next_deadline(self) -> int:
        return min(self.next_abort_ms, self.next_expire_ms)

    def poll(self, now: int) -> None:
        cfg = self._state.config
        if now >= self.next_abort_ms:
            self.next_abort_ms = now + cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
            self.abort_timed_out_transactions(now)
        if now >= self.next_expire_ms:
            self.next_expire_ms = now + cfg.transaction_remove_expired_transaction_cleanup_interval_ms
            self.remove_expired_transactional_ids(now)

    # ------------------------------------------------------------------ timed-out transactions
    def timed_out(self, now: int) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, epoch) of Ongoing transactions past their timeout."""
        return [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for entry in self._state.cache.values()
            for m in entry.txns.values()
            if m.pending_state is None and m.state is _S.ONGOING and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def abort_timed_out_transactions(self, now: int) -> None:
        for tid, producer_id, _ in self.timed_out(now):
            try:
                _, meta = self._state.lookup(tid)
            except Refused:
                continue
            if meta is None or meta.producer_id != producer_id or meta.pending_transition_in_progress:
                continue
            try:
                self._abort(meta)
            except Exception:
                log.exception("%s: aborting the timed-out transaction failed", tid)

    def _abort(self, meta: TransactionMetadata) -> None:
        tid = meta.transactional_id
        fence = meta.prepare_fence_producer_epoch()

        def done(error: ErrorCode, _pid: int, _epoch: int) -> None:
            if error is E.none:
                log.info("%s: rolled back the transaction that outlived its timeout", tid)
            elif error in (E.invalid_producer_id_mapping, E.producer_fenced, E.concurrent_transactions):
                log.debug("%s: timed-out rollback cancelled: %s", tid, error.name)
            else:
                log.warning("%s: timed-out rollback failed: %s", tid, error.name)

        log.info("%s: transaction of producer %d epoch %d timed out after %d ms; aborting",
                 tid, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms)
        self._end.end_transaction(tid, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT,
                                  from_client=False, callback=done)
        if meta.pending_state is _S.PREPARE_EPOCH_FENCE:
            meta.pending_state = None  # the abort was refused before it took the fence over

    # ------------------------------------------------------------------ expired ids
    def should_expire(self, meta: TransactionMetadata, now: int) -> bool:
        return (meta.pending_state is None and meta.state in EXPIRATION_ALLOWED
                and meta.txn_last_update_timestamp <= now - self._state.config.transactional_id_expiration_ms)

    def remove_expired_transactional_ids(self, now: int) -> None:
        for partition, entry in list(self._state.cache.items()):
            if partition in self._state.loading:
                continue  # being loaded again: what is cached is about to be replaced
            batch: list[tuple[TransactionMetadata, TxnTransit]] = []
            size = 0
            for meta in list(entry.txns.values()):
                if not self.should_expire(meta, now):
                    continue
                key_size = len(encode_key(meta.transactional_id)) + _RECORD_OVERHEAD
                if batch and size + key_size > TOMBSTONE_BATCH_BYTES:
                    self._write_tombstones(partition, entry, batch)
                    batch, size = [], 0
                batch.append((meta, meta.prepare_dead()))
                size += key_size
            if batch:
                self._write_tombstones(partition, entry, batch)

    def _write_tombstones(self, partition: int, entry: PartitionCache, batch: list[tuple[TransactionMetadata, TxnTransit]]) -> None:
        records: list[Record] = [(encode_key(meta.transactional_id), None) for meta, _ in batch]
        error = E.none
        try:
            self._state.log.append(partition, records)
        except Exception as exc:
            error = append_error(exc)
            log.warning("__transaction_state-%d: writing %d expiry tombstones failed: %s", partition, len(records), exc)
        still_ours = self._state.cache.get(partition) is entry
        for meta, transit in batch:
            tid = meta.transactional_id
            if (error is E.none and still_ours and entry.txns.get(tid) is meta and meta.pending_state is _S.DEAD
                    and meta.producer_epoch == transit.producer_epoch):
                del entry.txns[tid]
                log.info("%s: transactional id expired", tid)
            else:
                meta.pending_state = None
