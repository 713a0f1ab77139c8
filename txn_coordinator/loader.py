"""Loading ``__transaction_state`` partitions when this broker becomes their leader, and
dropping them when it resigns (Kafka's TransactionStateManager.loadTransactionsForTxnTopicPartition
and removeTransactionsForTxnTopicPartition, TransactionCoordinator.onElection/onResignation).

A partition is loading from :meth:`TransactionLoader.start` until :meth:`TransactionLoader.finish`;
meanwhile its transactional ids answer COORDINATOR_LOAD_IN_PROGRESS. Replay keeps the last
record per transactional id (what compaction keeps; a tombstone removes the id). When the
load finishes, transactions found in PrepareCommit or PrepareAbort send their markers again
and complete, as Kafka resumes them. Records that cannot be read are logged and skipped: a
poisoned log must not stop the broker.

Transactional ids that Krait's former placement wrote into another partition (its legacy
partition, coordinator/placement.py) are replayed from there first
(:meth:`TransactionLoader.replay_legacy`), as older than the partition's own records; when
the load finishes, the last record of each id that only the legacy partition holds is
written into the partition, and the ids to delete there are handed back to the broker,
which writes those tombstones once the copies are durable. Records of such ids met in
their legacy partition are left to their own partition's load.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from coordinator.placement import Relocation, legacy_partition
from coordinator.records import replay_each
from txn_coordinator.config import TRANSACTION_STATE_TOPIC
from txn_coordinator.markers import MarkerChannel
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TransactionState
from txn_coordinator.records import (
    RecordDecodeError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
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
    #: records of other partitions' ids, written here by the former placement
    strays: int = 0
    #: the legacy partition replayed first, and the last record there of each of this
    #: partition's ids (raw value; None: tombstone)
    legacy_source: int | None = None
    legacy: dict[str, bytes | None] = field(default_factory=dict)
    #: ids of ``legacy`` this partition has records of (its own are newer)
    own: set[str] = field(default_factory=set)


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

    def replay_legacy(self, partition: int, source: int,
                      records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        """Before the partition's own records: replay those of its ids in ``source``, their
        partition under the former placement (the source's own ids are left alone)."""
        st = self._loads.get(partition)
        if st is None:
            raise ValueError(f"__transaction_state-{partition} is not loading: call start_loading first")
        st.legacy_source = source

        def apply(item: tuple[int, bytes | None, bytes | None]) -> None:
            try:
                tid = decode_key(item[1])
            except RecordDecodeError:
                return  # the source's load reports it
            if self._state.partition_for(tid) != partition:
                return
            self._apply(st, tid, item[2])
            st.legacy.pop(tid, None)  # re-inserted: copies keep the log order
            st.legacy[tid] = item[2]

        st.skipped += replay_each(TRANSACTION_STATE_TOPIC, source, records, apply, unknown_level=logging.WARNING)

    def _replay_record(self, partition: int, st: LoadState, key: bytes | None, value: bytes | None) -> None:
        tid = decode_key(key)
        owner = self._state.partition_for(tid)
        if owner != partition:
            if legacy_partition(owner, self._state.config.transaction_state_log_num_partitions) == partition:
                st.strays += 1  # the owner's load moves it
                return
            raise RecordDecodeError(f"transactional id {tid!r} belongs to partition {owner}")
        if tid in st.legacy:
            st.own.add(tid)
        self._apply(st, tid, value)

    @staticmethod
    def _apply(st: LoadState, tid: str, value: bytes | None) -> None:
        if value is None:
            st.txns[tid] = None
            return
        v = decode_value(value)
        TransactionState(v.transaction_status)  # ValueError: not a state Kafka knows
        st.txns[tid] = v

    def finish(self, partition: int) -> Relocation | None:
        """Serve the partition's ids from what was replayed; resume their markers. Ids
        replayed from the legacy partition are written into this one first; returns the
        legacy keys to delete once that is durable (None: none)."""
        st = self._loads.pop(partition, None)
        if st is None or self._state.loading.get(partition) != st.coordinator_epoch:
            return None  # unloaded (or started again) meanwhile
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
        log.info("__transaction_state-%d loaded at epoch %d: %d transactional ids, %d completing, %d records skipped, "
                 "%d of other partitions' ids", partition, st.coordinator_epoch, len(txns), len(resume), st.skipped,
                 st.strays)
        # Copied before any marker resumes: the Complete* record that follows must come
        # after the id's copy in this partition.
        moved = self._relocate(partition, st)
        for result, meta, transit in resume:
            log.info("%s: resuming %s markers after loading", meta.transactional_id, result.name)
            self._markers.add_markers_to_send(st.coordinator_epoch, result, meta, transit)
        return moved

    def _relocate(self, partition: int, st: LoadState) -> Relocation | None:
        """Write into the partition the last record of each id only the legacy partition
        holds; the ids' legacy records to delete (None: nothing to move)."""
        live = [tid for tid, v in st.legacy.items() if v is not None]
        if st.legacy_source is None or not live:
            return None
        copies = [(encode_key(tid), st.legacy[tid]) for tid in live if tid not in st.own]
        if copies:
            try:
                self._state.log.append(partition, copies)
            except Exception as exc:
                # the legacy partition keeps them: the next load tries again
                log.warning("__transaction_state-%d: copying %d transactional ids from partition %d failed: %s",
                            partition, len(copies), st.legacy_source, exc)
                return None
        log.info("__transaction_state-%d: moved %d transactional ids from partition %d (former placement)",
                 partition, len(live), st.legacy_source)
        return Relocation(st.legacy_source, [encode_key(tid) for tid in live])

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
