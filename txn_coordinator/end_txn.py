"""Ending transactions: EndTxn from clients, and the aborts the coordinator starts itself
(fencing an ongoing transaction in InitProducerId, and timed-out transactions).

Kafka's TransactionCoordinator.endTransaction, for transaction version 0 (the epoch changes
only through InitProducerId): validate the producer, write PrepareCommit/PrepareAbort,
answer the client, then hand the markers to the :class:`~txn_coordinator.markers.MarkerChannel`,
which writes CompleteCommit/CompleteAbort once they are all written.

Served EndTxn versions: 0-5. Version 5 asks for KIP-890's epoch bump on every transaction,
which only a cluster with ``transaction.version`` 2 grants; Krait advertises no such
feature, so clients use v4 at most, and a v5 request is answered with transaction-version-0
semantics (producer id and epoch unchanged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.responses import response_for, version_of
from txn_coordinator.markers import MarkerChannel
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TransactionState, TxnTransit
from txn_coordinator.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txn_coordinator.state import CoordinatorState, Refused, Respond, reply

__all__ = ["EndTransaction", "EndCallback", "fenced_error"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = TransactionState

#: (error, producer id, producer epoch): what endTransaction reports to its caller.
EndCallback = Callable[[ErrorCode, int, int], None]


def fenced_error(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """Clients older than PRODUCER_FENCED know the same condition as INVALID_PRODUCER_EPOCH
    (KafkaApis translates it per API version)."""
    if error is E.producer_fenced and version < first_version_with_fenced:
        return E.invalid_producer_epoch
    return error


class EndTransaction:
    """EndTxn, and the coordinator's own aborts."""

    def __init__(self, state: CoordinatorState, markers: MarkerChannel) -> None:
        self._state = state
        self._markers = markers

    def end_txn(self, req: Any, respond: Respond) -> None:
        """EndTxn v0-5 (PRODUCER_FENCED from v2; older versions get INVALID_PRODUCER_EPOCH)."""
        version = version_of(req)

        def answer(error: ErrorCode, producer_id: int, producer_epoch: int) -> None:
            reply(respond, response_for(req, error_code=fenced_error(error, version, 2),
                                        producer_id=producer_id, producer_epoch=producer_epoch))

        result = TransactionResult.COMMIT if req.committed else TransactionResult.ABORT
        self.end_transaction(req.transactional_id, req.producer_id, req.producer_epoch, result,
                             from_client=True, callback=answer)

    def end_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                        result: TransactionResult, *, from_client: bool, callback: EndCallback) -> None:
        """Kafka's endTransaction. ``from_client`` False is the coordinator aborting on its own
        (a fence or a timeout), with the bumped epoch of a PrepareEpochFence already pending."""
        if not transactional_id:
            return callback(E.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        try:
            coordinator_epoch, meta = self._state.lookup(transactional_id)
        except Refused as r:
            return callback(r.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if meta is None:
            return callback(E.invalid_producer_id_mapping, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        current_id, current_epoch = meta.producer_id, meta.producer_epoch
        try:
            transit, is_epoch_fence = self._prepare(meta, producer_id, producer_epoch, result, from_client)
        except Refused as r:
            if r.code is E.none:
                # A retry of an EndTxn that already completed: success, as Kafka answers it.
                return callback(E.none, current_id, current_epoch)
            return callback(r.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        error = self._state.append(transactional_id, coordinator_epoch, transit)
        if error is not E.none:
            if is_epoch_fence and self._is_current(transactional_id, coordinator_epoch, meta):
                # The bumped epoch is in memory but not in the log, and was never handed out:
                # the next fence must not bump it again.
                meta.has_failed_epoch_fence = True
                log.warning("%s: writing the epoch fence failed (%s); epoch %d was not returned to a client",
                            transactional_id, error.name, meta.producer_epoch)
            return callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        try:
            complete = self._prepare_complete(transactional_id, coordinator_epoch, meta, producer_id, producer_epoch, result)
        except Refused as r:
            log.info("%s: not sending markers after %s was written: %s", transactional_id, transit.state.kafka_name, r.code.name)
            return callback(r.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        # The outcome is durable: answer now, then write the markers (Kafka does the same).
        callback(E.none, meta.producer_id, meta.producer_epoch)
        self._markers.add_markers_to_send(coordinator_epoch, result, meta, complete)

    def _is_current(self, transactional_id: str, coordinator_epoch: int, meta: TransactionMetadata) -> bool:
        try:
            epoch, current = self._state.lookup(transactional_id)
        except Refused:
            return False
        return current is meta and epoch == coordinator_epoch

    def _prepare(self, meta: TransactionMetadata, producer_id: int, producer_epoch: int, result: TransactionResult,
                 from_client: bool) -> tuple[TxnTransit, bool]:
        """The PrepareCommit/PrepareAbort transit and whether it completes an epoch fence;
        Refused(NONE) when the transaction already ended the way asked."""
        # A client must name the current epoch; the coordinator's own abort carries the
        # epoch it just bumped, which may be higher.
        valid_epoch = (not from_client or producer_epoch == meta.producer_epoch) and producer_epoch >= meta.producer_epoch
        if meta.producer_id != producer_id:
            raise Refused(E.invalid_producer_id_mapping)
        if not valid_epoch:
            raise Refused(E.producer_fenced)
        if meta.pending_state is not None and meta.pending_state is not _S.PREPARE_EPOCH_FENCE:
            raise Refused(E.concurrent_transactions)
        commit = result is TransactionResult.COMMIT
        state = meta.state
        if state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            is_epoch_fence = False
            if next_state is _S.PREPARE_ABORT and meta.pending_state is _S.PREPARE_EPOCH_FENCE:
                # The fence becomes this abort: clear it and take the bumped epoch in now, so
                # that the PrepareAbort record carries it and fences the old producer.
                is_epoch_fence = True
                meta.pending_state = None
                meta.producer_epoch = producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            return meta.prepare_abort_or_commit(next_state, self._state.clock()), is_epoch_fence
        if state is _S.COMPLETE_COMMIT or state is _S.COMPLETE_ABORT:
            if commit == (state is _S.COMPLETE_COMMIT):
                raise Refused(E.none)
        elif state is _S.PREPARE_COMMIT or state is _S.PREPARE_ABORT:
            if commit == (state is _S.PREPARE_COMMIT):
                raise Refused(E.concurrent_transactions)  # still writing markers: retry later
        elif state is _S.DEAD or state is _S.PREPARE_EPOCH_FENCE:
            # Never a completed state; Kafka treats it as fatal.
            log.error("%s: found in state %s, which is never completed", meta.transactional_id, state.kafka_name)
            raise Refused(E.unknown_server_error)
        log.debug("%s: %s requested in state %s", meta.transactional_id, result.name, state.kafka_name)
        raise Refused(E.invalid_txn_state)

    def _prepare_complete(self, transactional_id: str, coordinator_epoch: int, meta: TransactionMetadata,
                          producer_id: int, producer_epoch: int, result: TransactionResult) -> TxnTransit:
        """After PrepareCommit/PrepareAbort is written: re-check the id (Kafka's
        sendTxnMarkersCallback) and prepare its completion."""
        epoch, current = self._state.lookup(transactional_id)
        if current is not meta or epoch != coordinator_epoch:
            raise Refused(E.not_coordinator)
        if meta.producer_id != producer_id:
            raise Refused(E.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            raise Refused(E.producer_fenced)
        if meta.pending_state is not None:
            raise Refused(E.concurrent_transactions)
        expected = _S.PREPARE_COMMIT if result is TransactionResult.COMMIT else _S.PREPARE_ABORT
        if meta.state is not expected:
            raise Refused(E.invalid_txn_state)
        return meta.prepare_complete(self._state.clock())
