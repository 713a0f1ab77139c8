"""InitProducerId v0-6: producer ids and epochs for idempotent and transactional producers
(Kafka's TransactionCoordinator.handleInitProducerId and prepareInitProducerIdTransit).

* No transactional id: a fresh producer id at epoch 0, nothing written.
* A new transactional id: a fresh producer id; epoch 0 once the Empty record is written.
* A known one whose transaction is finished: the epoch is bumped, which fences every older
  producer instance; an exhausted epoch moves to a new producer id at epoch 0.
* A known one with an ongoing transaction: the coordinator fences it (PrepareEpochFence),
  aborts the transaction and answers CONCURRENT_TRANSACTIONS; the client retries and gets
  its epoch once the abort has completed.
* KIP-360 (v3+): a producer that names its current id and epoch resumes with a bumped
  epoch; a retry of a bump that succeeded gets the same epoch again; anyone else is
  PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.responses import ms, response_for, version_of
from txn_coordinator.end_txn import EndTransaction, fenced_error
from txn_coordinator.metadata import (
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)
from txn_coordinator.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from txn_coordinator.state import CoordinatorState, Refused, Respond, reply

__all__ = ["InitProducerId", "InitCallback"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = TransactionState

#: (error, producer id, producer epoch)
InitCallback = Callable[[ErrorCode, int, int], None]


class InitProducerId:
    def __init__(self, state: CoordinatorState, ender: EndTransaction) -> None:
        self._state = state
        self._end = ender

    def __call__(self, req: Any, respond: Respond) -> None:
        version = version_of(req)

        def answer(error: ErrorCode, producer_id: int, producer_epoch: int) -> None:
            reply(respond, response_for(req, error_code=fenced_error(error, version, 4),
                                        producer_id=producer_id, producer_epoch=producer_epoch))

        expected: tuple[int, int] | None = None
        if version >= 3:
            # KafkaApis: both or neither of producer id and epoch.
            pid, epoch = int(req.producer_id), int(req.producer_epoch)
            if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
                return answer(E.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if pid != NO_PRODUCER_ID:
                expected = (pid, epoch)
        self.init_producer_id(req.transactional_id, ms(req.transaction_timeout), expected, answer)

    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, expected: tuple[int, int] | None,
                         callback: InitCallback) -> None:
        """``expected`` is the producer's (id, epoch) of KIP-360, or None."""
        state = self._state
        if transactional_id is None:
            # An idempotent producer: any broker hands out ids, nothing is persisted.
            try:
                return callback(E.none, state.allocate_producer_id(), 0)
            except Refused as r:
                return callback(r.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if transactional_id == "":
            # The producer client refuses an empty id too; the coordinator agrees.
            return callback(E.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not 0 < timeout_ms <= state.config.transaction_max_timeout_ms:
            return callback(E.invalid_transaction_timeout, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        try:
            coordinator_epoch, meta = state.lookup(transactional_id)
            if meta is None:
                # Cached before anything is written, as Kafka does; its epoch stays -1 until
                # the Empty record below is written.
                created = TransactionMetadata(transactional_id, state.allocate_producer_id(),
                                              txn_timeout_ms=timeout_ms, txn_last_update_timestamp=state.clock())
                coordinator_epoch, meta = state.put_if_absent(created)
            transit = self._prepare(meta, timeout_ms, expected)
        except Refused as r:
            return callback(r.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        if transit.state is _S.PREPARE_EPOCH_FENCE:
            self._fence_and_abort(meta, transit, callback)
            return
        error = state.append(transactional_id, coordinator_epoch, transit)
        if error is not E.none:
            log.info("%s: InitProducerId failed: %s", transactional_id, error.name)
            return callback(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        log.info("%s: initialized with producer id %d and epoch %d on __transaction_state-%d", transactional_id,
                 transit.producer_id, transit.producer_epoch, state.partition_for(transactional_id))
        callback(E.none, transit.producer_id, transit.producer_epoch)

    def _fence_and_abort(self, meta: TransactionMetadata, fence: TxnTransit, callback: InitCallback) -> None:
        # The bumped epoch is never returned: the client retries after the abort and then
        # bumps the epoch once more (or rotates the producer id if the fence exhausted it).
        def after_abort(error: ErrorCode, _pid: int, _epoch: int) -> None:
            callback(error if error is not E.none else E.concurrent_transactions, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        self._end.end_transaction(meta.transactional_id, fence.producer_id, fence.producer_epoch,
                                  TransactionResult.ABORT, from_client=False, callback=after_abort)
        if meta.pending_state is _S.PREPARE_EPOCH_FENCE:
            # The abort was refused before it took the fence over: do not leave the id locked.
            meta.pending_state = None

    def _prepare(self, meta: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None) -> TxnTransit:
        """Kafka's prepareInitProducerIdTransit: the transit to write, or Refused."""

        def is_valid_producer_id(pid: int, epoch: int) -> bool:
            # Fence the requester unless: the id was just created (a producer recovering from
            # UNKNOWN_PRODUCER_ID gets the new id), it names the current producer id (the
            # epoch is checked when bumping), or it names the previous producer id with an
            # exhausted epoch (a retry after a rotation whose answer was lost).
            return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                    or (pid == meta.previous_producer_id and is_epoch_exhausted(epoch)))

        if meta.pending_transition_in_progress:
            raise Refused(E.concurrent_transactions)  # retriable: the client backs off
        if expected is not None and not is_valid_producer_id(*expected):
            raise Refused(E.producer_fenced)
        state = meta.state
        if state is _S.PREPARE_ABORT or state is _S.PREPARE_COMMIT:
            raise Refused(E.concurrent_transactions)
        if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            now = self._state.clock()
            if meta.is_producer_epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                return meta.prepare_producer_id_rotation(self._state.allocate_producer_id(), timeout_ms, now,
                                                         record_last_epoch=expected is not None)
            transit = meta.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
            if transit is None:
                raise Refused(E.producer_fenced)
            return transit
        if state is _S.ONGOING:
            # Abort the ongoing transaction first (the fenced epoch is never returned).
            return meta.prepare_fence_producer_epoch()
        log.error("%s: found in state %s, which is never completed", meta.transactional_id, state.kafka_name)
        raise Refused(E.unknown_server_error)
