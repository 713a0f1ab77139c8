"""Adding partitions to a transaction: AddPartitionsToTxn v0-5 and AddOffsetsToTxn v0-4
(Kafka's KafkaApis checks, then TransactionCoordinator.handleAddPartitionsToTransaction
and handleVerifyPartitionsInTransaction).

* AddPartitionsToTxn v0-3 comes from producers: one transaction; internal topics are
  refused with TOPIC_AUTHORIZATION_FAILED (Kafka never authorizes clients to write them)
  and unknown partitions with UNKNOWN_TOPIC_OR_PARTITION, the other partitions of the
  request then answering OPERATION_NOT_ATTEMPTED.
* v4+ comes from brokers (KIP-890 part 1): several transactions, and ``verify_only``
  transactions that only ask whether partitions are already in the transaction
  (TRANSACTION_ABORTABLE when not). :meth:`AddPartitions.verify` answers the same question
  for a broker that asks its own coordinator in process.
* AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition, so that the markers
  reach the offsets a TxnOffsetCommit stores there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.responses import response_for, version_of
from txn_coordinator.config import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from txn_coordinator.end_txn import fenced_error
from txn_coordinator.metadata import IllegalTransition, TransactionState
from txn_coordinator.records import TopicPartition
from txn_coordinator.state import CoordinatorState, Refused, Respond, reply

__all__ = ["AddPartitions", "INTERNAL_TOPICS"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = TransactionState

#: Kafka's Topic.INTERNAL_TOPICS: producers may not add these to a transaction.
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, "__share_group_state"})


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_error_code": error})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    # Kafka collects them into a set: a partition named twice is answered once.
    return list(dict.fromkeys(TopicPartition(t.name, int(p)) for t in topics for p in t.partitions))


class AddPartitions:
    """AddPartitionsToTxn, AddOffsetsToTxn and partition verification.

    ``partition_exists(topic, partition)``, if given, refuses partitions that do not exist
    (Kafka's metadata cache check); ``partition_for_group(group_id)`` is the group's
    ``__consumer_offsets`` partition (GroupCoordinator.partition_for)."""

    def __init__(self, state: CoordinatorState, partition_for_group: Callable[[str], int],
                 partition_exists: Callable[[str, int], bool] | None = None) -> None:
        self._state = state
        self._partition_for_group = partition_for_group
        self._partition_exists = partition_exists

    # ------------------------------------------------------------------ AddPartitionsToTxn
    def add_partitions_to_txn(self, req: Any, respond: Respond) -> None:
        version = version_of(req)
        if version < 4:
            errors = self._transaction(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                       req.v3_and_below_producer_epoch, req.v3_and_below_topics,
                                       verify_only=False, from_client=True, version=version)
            reply(respond, response_for(req, results_by_topic_v3_and_below=_topic_results(errors)))
            return
        results = []
        for t in req.transactions:
            errors = self._transaction(t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                                       verify_only=bool(t.verify_only), from_client=False, version=version)
            results.append({"transactional_id": t.transactional_id, "topic_results": _topic_results(errors)})
        reply(respond, response_for(req, error_code=E.none, results_by_transaction=results))

    def _transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, topics: Iterable[Any], *,
                     verify_only: bool, from_client: bool, version: int) -> dict[TopicPartition, ErrorCode]:
        partitions = _partitions(topics)
        refused: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            if from_client and tp.topic in INTERNAL_TOPICS:
                refused[tp] = E.topic_authorization_failed
            elif self._partition_exists is not None and not self._partition_exists(tp.topic, tp.partition):
                refused[tp] = E.unknown_topic_or_partition
        if refused:
            # One bad partition fails the whole request; the others were not attempted.
            return {tp: refused.get(tp, E.operation_not_attempted) for tp in partitions}
        if verify_only:
            return self.verify(transactional_id, producer_id, producer_epoch, partitions)
        error = fenced_error(self.add(transactional_id, producer_id, producer_epoch, partitions), version, 2)
        return dict.fromkeys(partitions, error)

    # ------------------------------------------------------------------ AddOffsetsToTxn
    def add_offsets_to_txn(self, req: Any, respond: Respond) -> None:
        partition = TopicPartition(GROUP_METADATA_TOPIC, self._partition_for_group(req.group_id))
        error = self.add(req.transactional_id, req.producer_id, req.producer_epoch, [partition])
        reply(respond, response_for(req, error_code=fenced_error(error, version_of(req), 2)))

    # ------------------------------------------------------------------ the coordinator
    def add(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
            partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: add and persist, or the error."""
        if not transactional_id:
            return E.invalid_request
        added = frozenset(partitions)
        state = self._state
        try:
            coordinator_epoch, meta = state.lookup(transactional_id)
            if meta is None:
                raise Refused(E.invalid_producer_id_mapping)
            if meta.producer_id != producer_id:
                raise Refused(E.invalid_producer_id_mapping)
            if meta.producer_epoch != producer_epoch:
                raise Refused(E.producer_fenced)
            if meta.pending_transition_in_progress or meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                raise Refused(E.concurrent_transactions)  # retriable: the client backs off
            if meta.state is _S.ONGOING and added <= meta.partitions:
                return E.none  # already there: nothing to write
            transit = meta.prepare_add_partitions(added, state.clock())
        except Refused as r:
            log.debug("%s: AddPartitions refused: %s", transactional_id, r.code.name)
            return r.code
        except IllegalTransition:
            log.exception("%s: AddPartitions in an impossible state", transactional_id)
            return E.unknown_server_error
        return state.append(transactional_id, coordinator_epoch, transit)

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction: per partition, NONE if it is in the
        producer's ongoing transaction, else TRANSACTION_ABORTABLE (or the error that applies
        to the whole transaction). Writes nothing."""
        wanted = list(dict.fromkeys(partitions))
        if not transactional_id:
            return dict.fromkeys(wanted, E.invalid_request)
        try:
            _, meta = self._state.lookup(transactional_id)
        except Refused as r:
            return dict.fromkeys(wanted, r.code)
        # The pending state is not checked: the append that follows is validated again.
        if meta is None or meta.producer_id != producer_id:
            error = E.invalid_producer_id_mapping
        elif meta.producer_epoch != producer_epoch:
            error = E.producer_fenced
        elif meta.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            error = E.concurrent_transactions
        else:
            return {tp: E.none if tp in meta.partitions else E.transaction_abortable for tp in wanted}
        return dict.fromkeys(wanted, error)
