"""TransactionCoordinator: Kafka's transaction coordinator as a pure state machine.

The broker (an asyncio shell) owns sockets, the clock source, the ``__transaction_state``
partition logs, producer id blocks and the network that carries markers; the coordinator
owns everything else. It follows Apache Kafka's TransactionCoordinator,
TransactionStateManager, TransactionMetadata and TransactionMarkerChannelManager
(core/.../coordinator/transaction/): same states, same error codes in the same precedence,
same records.

This class is the coordinator's one entry point. It creates the shared
:class:`~txn_coordinator.state.CoordinatorState` and composes the parts that act on it:

* ``init_producer_id.py``: InitProducerId (epochs, fencing, KIP-360),
* ``add_partitions.py``: AddPartitionsToTxn, AddOffsetsToTxn, partition verification,
* ``end_txn.py``: EndTxn and the coordinator's own aborts,
* ``markers.py``: markers and the Complete* records,
* ``loader.py``: replaying ``__transaction_state`` partitions, resignation,
* ``expiry.py``: aborting timed-out transactions, expiring transactional ids,
* ``admin.py``: DescribeTransactions, ListTransactions.

How the broker drives it
------------------------
* Construct ``TransactionCoordinator(config, clock, log, producer_ids, marker_sender,
  partition_for_group=...)``. ``clock()`` returns wall-clock ms; ``log.append(partition,
  [(key, value|None), ...])`` synchronously appends to ``__transaction_state-<partition>``
  or raises (:class:`~txn_coordinator.state.TransactionStateLog`);
  ``producer_ids.next_producer_id()`` hands out producer ids
  (:class:`~txn_coordinator.state.ProducerIdAllocator`, which broker.producer_ids.ProducerIdManager
  is); ``marker_sender.send(request, on_complete)`` writes markers
  (:class:`~txn_coordinator.state.MarkerSender`); ``partition_for_group(group_id)`` is the
  group coordinator's ``partition_for``.
* For every request call the operation with the kio request and a ``respond`` callback,
  called exactly once, before the operation returns.
* Call :meth:`poll` when :meth:`next_deadline_ms` says so (operations also run due timers on
  the way out).
* A ``__transaction_state`` partition is served only once loaded: on becoming its leader,
  :meth:`start_loading` (with the leader epoch as coordinator epoch),
  :meth:`load_legacy_partition` (unless :meth:`legacy_partition` is the partition itself),
  :meth:`load_partition`
  (any number of times, records in offset order), :meth:`finished_loading`; on losing it,
  :meth:`unload_partition`. Ids of partitions never loaded answer NOT_COORDINATOR, of
  partitions loading COORDINATOR_LOAD_IN_PROGRESS. A single broker loads every partition
  (an empty one when the topic was just created).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.placement import Relocation, legacy_partition
from txn_coordinator.add_partitions import AddPartitions
from txn_coordinator.admin import TransactionAdmin
from txn_coordinator.config import TransactionConfig
from txn_coordinator.end_txn import EndTransaction
from txn_coordinator.expiry import Expiry
from txn_coordinator.init_producer_id import InitProducerId
from txn_coordinator.loader import TransactionLoader
from txn_coordinator.markers import MarkerChannel, PendingCompleteTxn
from txn_coordinator.metadata import TransactionMetadata
from txn_coordinator.records import TopicPartition
from txn_coordinator.state import CoordinatorState, MarkerSender, ProducerIdAllocator, Respond, TransactionStateLog

__all__ = ["TransactionCoordinator"]

log = logging.getLogger(__name__)


class TransactionCoordinator:
    """All transactional ids of this broker. Not thread-safe; call from one thread (the loop)."""

    def __init__(
        self,
        config: TransactionConfig,
        clock: Callable[[], int],
        log: TransactionStateLog,
        producer_ids: ProducerIdAllocator,
        marker_sender: MarkerSender,
        *,
        partition_for_group: Callable[[str], int],
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        """``partition_exists(topic, partition)``, if given, makes AddPartitionsToTxn answer
        UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (Kafka's KafkaApis check)."""
        self.config = config
        self._state = state = CoordinatorState(config, clock, log, producer_ids)
        self._markers = MarkerChannel(state, marker_sender)
        self._end = EndTransaction(state, self._markers)
        self._init = InitProducerId(state, self._end)
        self._add = AddPartitions(state, partition_for_group, partition_exists)
        self._loader = TransactionLoader(state, self._markers)
        self._expiry = Expiry(state, self._end)
        self._admin = TransactionAdmin(state)

    # ================================================================ transactional ids
    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition (and so the coordinator) of a transactional id."""
        return self._state.partition_for(transactional_id)

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """Read-only view for the broker/CLI (do not mutate)."""
        entry = self._state.cache.get(self._state.partition_for(transactional_id))
        return None if entry is None else entry.txns.get(transactional_id)

    def transactions(self) -> list[TransactionMetadata]:
        return [m for entry in self._state.cache.values() for m in entry.txns.values()]

    def pending_markers(self) -> dict[str, PendingCompleteTxn]:
        """Transactional id -> its transaction still waiting for markers (for tests and metrics)."""
        return dict(self._markers.pending)

    # ================================================================ timers
    def next_deadline_ms(self) -> int:
        """Earliest time poll() has work to do."""
        nxt = self._expiry.next_deadline()
        retry = self._markers.next_deadline()
        return nxt if retry is None else min(nxt, retry)

    def poll(self) -> None:
        """Run what is due: marker and Complete* retries, the abort of timed-out transactions,
        the expiration of transactional ids."""
        now = self._state.clock()
        self._markers.poll(now)
        self._expiry.poll(now)

    # ================================================================ loading
    def start_loading(self, partition: int, coordinator_epoch: int = 0) -> None:
        """This broker leads ``__transaction_state-<partition>`` from ``coordinator_epoch``
        (the partition's leader epoch; any constant on a single broker)."""
        self._loader.start(partition, coordinator_epoch)

    def is_loading(self, partition: int) -> bool:
        return self._loader.is_loading(partition)

    def load_partition(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        """Replay (offset, key, value) records of ``__transaction_state-<partition>`` in log
        order, after start_loading. May be called repeatedly (chunks). Never raises for bad
        records: they are logged and skipped."""
        self._loader.replay(partition, records)

    def legacy_partition(self, partition: int) -> int:
        """The partition where Krait's former placement put some of ``partition``'s ids
        (coordinator/placement.py); the partition itself when none can be elsewhere."""
        return legacy_partition(partition, self.config.transaction_state_log_num_partitions)

    def load_legacy_partition(self, partition: int,
                              records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        """After start_loading, before load_partition: replay the records of
        :meth:`legacy_partition` (all of them; only this partition's ids are kept). Those
        ids are moved here when the load finishes."""
        self._loader.replay_legacy(partition, self.legacy_partition(partition), records)

    def finished_loading(self, partition: int) -> Relocation | None:
        """Serve the partition's ids; transactions found preparing to commit or abort send
        their markers again and complete. Ids found in the legacy partition are written into
        this one; the answer names their keys to delete there, which the broker does once
        those writes are durable (None: nothing to delete)."""
        return self._loader.finish(partition)

    def unload_partition(self, partition: int, coordinator_epoch: int | None = None) -> int:
        """Leadership moved away (Kafka's onResignation): forget the partition's ids, which
        answer NOT_COORDINATOR from now on, and stop their markers. Returns how many were dropped."""
        return self._loader.unload(partition, coordinator_epoch)

    def served_partitions(self) -> set[int]:
        return set(self._state.cache)

    # ================================================================ producers
    def init_producer_id(self, req: Any, respond: Respond) -> None:
        """InitProducerId v0-6 (PRODUCER_FENCED from v4; INVALID_PRODUCER_EPOCH before)."""
        try:
            self._init(req, respond)
        finally:
            self.poll()

    def add_partitions_to_txn(self, req: Any, respond: Respond) -> None:
        """AddPartitionsToTxn v0-5 (v4+: several transactions, verify_only)."""
        try:
            self._add.add_partitions_to_txn(req, respond)
        finally:
            self.poll()

    def add_offsets_to_txn(self, req: Any, respond: Respond) -> None:
        """AddOffsetsToTxn v0-4: adds the group's ``__consumer_offsets`` partition."""
        try:
            self._add.add_offsets_to_txn(req, respond)
        finally:
            self.poll()

    def end_txn(self, req: Any, respond: Respond) -> None:
        """EndTxn v0-5: answered once PrepareCommit/PrepareAbort is written; the markers follow."""
        try:
            self._end.end_txn(req, respond)
        finally:
            self.poll()

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """For the broker's produce path (KIP-890 part 1): are these partitions in the
        producer's ongoing transaction? NONE or TRANSACTION_ABORTABLE per partition."""
        return self._add.verify(transactional_id, producer_id, producer_epoch, partitions)

    # ================================================================ admin
    def describe_transactions(self, req: Any, respond: Respond) -> None:
        """DescribeTransactions v0."""
        self._admin.describe_transactions(req, respond)
        self.poll()

    def list_transactions(self, req: Any, respond: Respond) -> None:
        """ListTransactions v0-2 (state, producer id, duration and id pattern filters)."""
        self._admin.list_transactions(req, respond)
        self.poll()
