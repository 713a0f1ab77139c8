"""Loading ``__transaction_state`` partitions when this broker becomes their leader, and
dropping them when it resigns (Kafka's TransactionStateManager.loadTransactionsForTxnTopicPartition
and removeTransactionsForTxnTopicPartition, TransactionCoordinator.onElection/onResignation).

A partition is loading from :meth:`TransactionLoader.start` until :meth:`TransactionLoader.finish`;
meanwhile its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS. Replay keeps the last
record per transactional id (what compaction keeps; a tombstone removes the id). When the
load finishes, transactions found in PrepareCommit or PrepareAbort send their markers again
and complete, as Kafka resumes them. Records that cannot be read are logged and skipped: a
poisoned log must not stop the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from coordinator.records import replay_each
from txn_coordinator.config import TRANSACTION_STATE_TOPIC
from txn_coordinator.markers import MarkerChannel
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TransactionState
from txn_coordinator.records import (
    RecordDecodeError,
    TransactionLogValue,
    decode_key,
    decode_value,
)
from txn_coordinator.state import CoordinatorState, PartitionCache

__all__ = ["TransactionLoader", "LoadState"]

log = logging.getLogger(__name__)

_S = TransactionState


@dataclass(slots=True)
class LoadState:
    """What a loading partition has replayed so far: the last value per id (None: tombstone)."""

    coordinator_epoch: int
    txns: dict[str, TransactionLogValue | None] = field(default_factory=dict)
    skipped: int = 0


class TransactionLoader:
    """Replays ``__transaction_state`` partitions into the coordinator's cache."""

    def __init__(self, state: CoordinatorState, markers: MarkerChannel) -> None:
        self._state = state
        self._markers = markers
        self._loads: dict[int, LoadState] = {}

    def start(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads the partition at ``coordinator_epoch``. Whatever a previous
        leadership left behind (markers in flight) is dropped first, as Kafka's onElection does."""
        self._markers.remove_markers_for_partition(partition)
        self._loads[partition] = LoadState(coordinator_epoch)
        self._state.loading[partition] = coordinator_epoch

    def is_loading(self, partition: int) -> bool:
        return partition in self._state.loading

    def replay(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        st = self._loads.get(partition)
        if st is None:
            raise ValueError(f"__transaction_state-{partition} is not loading: call start_loading first")
        st.skipped += replay_each(TRANSACTION_STATE_TOPIC, partition, records,
                                  lambda item: self._replay_record(partition, st, item[1], item[2]),
                                  unknown_level=logging.WARNING)

    def _replay_record(self, partition: int, st: LoadState, key: bytes | None, value: bytes | None) -> None:
        tid = decode_key(key)
        owner = self._state.partition_for(tid)
        if owner != partition:
            raise RecordDecodeError(f"transactional id {tid!r} belongs to partition {owner}")
        if value is None:
            st.txns[tid] = None
            return
        v = decode_value(value)
        TransactionState(v.transaction_status)  # ValueError: not a state Kafka knows
        st.txns[tid] = v

    def finish(self, partition: int) -> None:
        """Serve the partition's ids from what was replayed; resume their markers."""
        st = self._loads.pop(partition, None)
        if st is None or self._state.loading.get(partition) != st.coordinator_epoch:
            return  # unloaded (or started again) meanwhile
        txns = {tid: TransactionMetadata.from_record(tid, v) for tid, v in st.txns.items() if v is not None}
        previous = self._state.cache.get(partition)
        if previous is not None:
            log.warning("__transaction_state-%d: replacing the ids loaded at epoch %d", partition, previous.coordinator_epoch)
        self._state.cache[partition] = PartitionCache(st.coordinator_epoch, txns)
        now = self._state.clock()
        resume = []
        for meta in txns.values():
            if meta.state is _S.PREPARE_COMMIT:
                resume.append((TransactionResult.COMMIT, meta, meta.prepare_complete(now)))
            elif meta.state is _S.PREPARE_ABORT:
                resume.append((TransactionResult.ABORT, meta, meta.prepare_complete(now)))
        # Served before the markers go out, so that their completion can be written.
        del self._state.loading[partition]
        log.info("__transaction_state-%d loaded at epoch %d: %d transactional ids, %d completing, %d records skipped",
                 partition, st.coordinator_epoch, len(txns), len(resume), st.skipped)
        for result, meta, transit in resume:
            log.info("%s: resuming %s markers after loading", meta.transactional_id, result.name)
            self._markers.add_markers_to_send(st.coordinator_epoch, result, meta, transit)

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> int:
        """Leadership moved away: forget the partition's ids (they answer NOT_COORDINATOR) and
        their markers. With ``coordinator_epoch``, only a load at that epoch is cancelled.
        Returns how many ids were dropped."""
        if coordinator_epoch is None or self._state.loading.get(partition) == coordinator_epoch:
            self._state.loading.pop(partition, None)
            self._loads.pop(partition, None)
        entry = self._state.cache.pop(partition, None)
        self._markers.remove_markers_for_partition(partition)
        return 0 if entry is None else len(entry.txns)
