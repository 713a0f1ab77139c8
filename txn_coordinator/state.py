"""The state every part of the transaction coordinator shares, the interfaces the broker
implements, and the helpers every operation uses.

:class:`CoordinatorState` holds the config, the injected clock, ``__transaction_state`` log
and producer-id allocator, and Kafka's transaction metadata cache: per
``__transaction_state`` partition this coordinator leads, its coordinator epoch and its
transactional ids (TransactionStateManager.transactionMetadataCache), plus the partitions
still loading. :meth:`CoordinatorState.append` is Kafka's appendTransactionToLog: write a
transit, then apply it, or map the failure to a coordinator error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from coordinator.placement import partition_for_key
from txn_coordinator.config import TransactionConfig
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TxnTransit
from txn_coordinator.records import TopicPartition, encode_key, encode_value

__all__ = [
    "CoordinatorState",
    "TransactionStateLog",
    "ProducerIdAllocator",
    "MarkerSender",
    "MarkerRequest",
    "MarkerResults",
    "PartitionCache",
    "Record",
    "Respond",
    "Refused",
    "append_error",
    "partition_for_transactional_id",
    "reply",
]

log = logging.getLogger(__name__)

E = ErrorCode
Respond = Callable[[Any], None]
Record = tuple[bytes, bytes | None]


# ====================================================================== interfaces
class TransactionStateLog(Protocol):
    """Where the coordinator persists transaction state: the ``__transaction_state`` partitions."""

    def append(self, partition: int, records: list[Record]) -> None:
        """Append (key, value) records (value None = tombstone) to
        ``__transaction_state-<partition>`` as one uncompressed batch, with acks=all
        (Kafka's TransactionLog.EnforcedRequiredAcks), before returning. Raise to report
        failure; an exception with an ``error_code: ErrorCode`` attribute is mapped the way
        Kafka maps append errors (NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, ...)."""
        ...


class ProducerIdAllocator(Protocol):
    """Hands out producer ids never used before (broker.producer_ids.ProducerIdManager)."""

    def next_producer_id(self) -> int:
        """A fresh producer id; raise (with an ``error_code`` attribute if possible) when none
        can be allocated now, e.g. COORDINATOR_LOAD_IN_PROGRESS while no id block is at hand."""
        ...


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """One transaction's markers: Kafka's TxnMarkerEntry plus whose they are.

    The broker writes a COMMIT (``result`` COMMIT) or ABORT control batch for
    ``producer_id``/``producer_epoch`` stamped with ``coordinator_epoch`` to each of
    ``partitions`` (WriteTxnMarkers to their leaders in cluster mode)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]
    coordinator_epoch: int
    #: the ``__transaction_state`` partition of the transactional id
    txn_partition: int

    @property
    def committed(self) -> bool:
        """WriteTxnMarkers' TransactionResult field (true = COMMIT)."""
        return self.result is TransactionResult.COMMIT


#: What a marker write achieved per partition: an error code (NONE when the marker is
#: written), or None for a partition that no longer exists (no leader: deleted), which is
#: skipped as Kafka skips it. A partition of the request left out counts as not reached
#: (Kafka's disconnected request) and is sent again.
MarkerResults = Mapping[TopicPartition, ErrorCode | None]


class MarkerSender(Protocol):
    """Writes transaction markers (Kafka's TransactionMarkerChannelManager send side)."""

    def send(self, request: MarkerRequest, on_complete: Callable[[MarkerResults], None]) -> None:
        """Write the markers of ``request`` and call ``on_complete(results)`` once, from the
        coordinator's thread (now, or later from the event loop). The coordinator retries what
        failed with a retriable error and writes CompleteCommit/CompleteAbort when every
        partition has its marker."""
        ...


# ====================================================================== helpers
class Refused(Exception):
    """An operation's answer is this error code (Kafka's ``Left(error)``)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor (coordinator/placement.py)."""
    return partition_for_key(transactional_id, num_partitions)


def append_error(exc: BaseException) -> ErrorCode:
    """Kafka's mapping of a ``__transaction_state`` append error to what transactional
    clients understand (TransactionStateManager.appendTransactionToLog)."""
    code = getattr(exc, "error_code", None)
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append, E.request_timed_out):
        return E.coordinator_not_available  # retriable: the client tries again
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large):
        return E.unknown_server_error
    if isinstance(code, ErrorCode) and code is not E.none:
        return code
    if isinstance(exc, OSError):
        return E.not_coordinator  # a failed disk is Kafka's KAFKA_STORAGE_ERROR
    return E.unknown_server_error


def reply(respond: Respond, response: Any) -> None:
    """Hand ``response`` to the broker's callback."""
    try:
        respond(response)
    except Exception:  # the broker's callback must not leave a transition half-done
        log.exception("respond callback failed")


@dataclass(slots=True)
class PartitionCache:
    """The transactional ids of one ``__transaction_state`` partition this coordinator leads
    (Kafka's TxnMetadataCacheEntry)."""

    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


class CoordinatorState:
    """The metadata cache, loading partitions, config, clock, log and producer-id allocator."""

    def __init__(self, config: TransactionConfig, clock: Callable[[], int], txn_log: TransactionStateLog,
                 producer_ids: ProducerIdAllocator) -> None:
        self.config = config
        self.clock = clock
        self.log = txn_log
        self.producer_ids = producer_ids
        #: __transaction_state partition -> its ids; a partition absent here is not ours
        #: (NOT_COORDINATOR)
        self.cache: dict[int, PartitionCache] = {}
        #: partition -> coordinator epoch of a load in progress (COORDINATOR_LOAD_IN_PROGRESS)
        self.loading: dict[int, int] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.config.transaction_state_log_num_partitions)

    def lookup(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, metadata or None if unknown); raises Refused when the id's
        partition is loading or not led here (Kafka's getTransactionState)."""
        p = self.partition_for(transactional_id)
        if p in self.loading:
            raise Refused(E.coordinator_load_in_progress)
        entry = self.cache.get(p)
        if entry is None:
            raise Refused(E.not_coordinator)
        return entry.coordinator_epoch, entry.txns.get(transactional_id)

    def put_if_absent(self, meta: TransactionMetadata) -> tuple[int, TransactionMetadata]:
        """Kafka's putTransactionStateIfNotExists: the cached id, or ``meta`` now cached."""
        epoch, existing = self.lookup(meta.transactional_id)
        if existing is not None:
            return epoch, existing
        self.cache[self.partition_for(meta.transactional_id)].txns[meta.transactional_id] = meta
        return epoch, meta

    def allocate_producer_id(self) -> int:
        try:
            return self.producer_ids.next_producer_id()
        except Exception as exc:
            log.warning("producer id allocation failed: %s", exc)
            code = getattr(exc, "error_code", None)
            raise Refused(code if isinstance(code, ErrorCode) and code is not E.none else E.unknown_server_error) from None

    def append(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransit,
               retry_on_error: Callable[[ErrorCode], bool] | None = None) -> ErrorCode:
        """Write ``transit`` for the id and, once written, apply it to the cached metadata
        (Kafka's appendTransactionToLog). Returns NONE or the error for the client. On an
        error the pending state is cleared, unless ``retry_on_error(error)`` says the
        caller will write the same transit again."""
        try:
            epoch, meta = self.lookup(transactional_id)
        except Refused as r:
            return r.code
        if meta is None or epoch != coordinator_epoch:
            # The partition moved away and maybe back since the transition was prepared.
            return E.not_coordinator
        partition = self.partition_for(transactional_id)
        records: list[Record] = [(encode_key(transactional_id), encode_value(transit.to_record()))]
        try:
            self.log.append(partition, records)
        except Exception as exc:
            error = append_error(exc)
            log.info("%s: writing %s to __transaction_state-%d failed: %s", transactional_id,
                     transit.state.kafka_name, partition, exc)
            if retry_on_error is None or not retry_on_error(error):
                meta.pending_state = None
            return error
        try:
            epoch, current = self.lookup(transactional_id)
        except Refused as r:
            return r.code
        if current is not meta or epoch != coordinator_epoch:
            # Unloaded (and maybe reloaded) while the record was written: whoever owns the
            # partition now replays it from the log.
            return E.not_coordinator
        meta.complete_transition(transit)
        return E.none
