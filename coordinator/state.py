"""The state every part of the group coordinator shares, and the helpers they all use.

:class:`CoordinatorState` holds the config, the injected clock and ``__consumer_offsets`` log,
every group of this broker, the partitions still loading, the timer queue and the index of
the groups holding each producer's pending transactional offsets. The
GroupCoordinator creates one and hands it to each part (membership, offsets, loading,
admin); the parts keep no group state of their own, so a group is always in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from coordinator.group import Group, GroupBase, GroupState
from coordinator.placement import java_string_hash, partition_for_key
from coordinator.records import OffsetCommitValue
from coordinator.share.group import ShareGroup, ShareGroupState
from coordinator.timers import TimerQueue
from coordinator.writes import UncommittedWrites

if TYPE_CHECKING:
    from coordinator.loader import LoadState

__all__ = [
    "AnyGroup",
    "CoordinatorState",
    "OffsetsLog",
    "Record",
    "Respond",
    "java_string_hash",
    "partition_for_group",
    "reply",
    "storage_error",
]

log = logging.getLogger(__name__)

Respond = Callable[[Any], None]
Record = tuple[bytes, bytes | None]
#: a group of any type: classic (coordinator/group.py), KIP-848 consumer
#: (coordinator/consumer/group.py) or KIP-932 share (coordinator/share/group.py); one id
#: names one group, of one type
AnyGroup = Group | ConsumerGroup | ShareGroup

E = ErrorCode


class OffsetsLog(Protocol):
    """Where the coordinator persists records: the ``__consumer_offsets`` partitions.

    A log that replicates them also has ``high_watermark(partition) -> int``: records below
    it are committed, and what the coordinator wrote above it shows only once the broker
    reports it committed (coordinator/writes.py). Without that method (a single broker's
    log may omit it) every appended record counts as committed at once."""

    def append(
        self, partition: int, records: list[Record], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> int | None:
        """Append (key, value) records (value None = tombstone) as one batch, durably enough
        for the broker's settings, before returning. Raise to report failure; an exception with
        an ``error_code: ErrorCode`` attribute is mapped the way Kafka maps append errors.

        With ``producer_id`` >= 0 (TxnOffsetCommit only; the keywords are passed only then,
        so a log that never sees transactions may omit them) the batch is a transactional
        batch of that producer and epoch, which opens (or continues) its transaction on
        the partition until the transaction coordinator writes the COMMIT/ABORT marker.

        Returns the log offset of the first record, or None if the log cannot tell (the
        coordinator then numbers records itself, in append order)."""
        ...


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """Kafka's GroupCoordinator.partitionFor (coordinator/placement.py)."""
    return partition_for_key(group_id, num_partitions)


def storage_error(exc: BaseException | ErrorCode, *, commit: bool) -> ErrorCode:
    """Kafka's mapping of append errors (an exception, or the code a replication wait
    reported) to what group clients understand (GroupMetadataManager.storeGroup /
    storeOffsets)."""
    code = exc if isinstance(exc, ErrorCode) else getattr(exc, "error_code", None)
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append, E.request_timed_out):
        return E.coordinator_not_available
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size if commit else E.unknown_server_error
    if isinstance(code, ErrorCode) and code is not E.none:
        return code
    return E.coordinator_not_available


def reply(respond: Respond, response: Any) -> None:
    """Hand ``response`` to the broker's callback."""
    try:
        respond(response)
    except Exception:  # the broker's callback must not corrupt group state half-way
        log.exception("respond callback failed")


class CoordinatorState:
    """Groups, loading partitions and timers of one coordinator, with its config, clock and log."""

    def __init__(self, config: CoordinatorConfig, clock: Callable[[], int], offsets_log: OffsetsLog) -> None:
        self.config = config
        self.clock = clock
        self.log = offsets_log
        self.groups: dict[str, AnyGroup] = {}
        # Filled by the loader; a partition listed here answers COORDINATOR_LOAD_IN_PROGRESS.
        self.loading: dict[int, LoadState] = {}
        self.timers = TimerQueue()
        #: the __consumer_offsets partitions this coordinator serves (None: all of them, a
        #: single broker); groups of the others answer NOT_COORDINATOR
        self.owned: set[int] | None = None
        #: producer id -> ids of the groups holding its pending transactional offsets (Kafka's
        #: openGroupsForProducer), so that a transaction's end finds them without a scan
        self.txn_groups: dict[int, set[str]] = {}
        #: per partition, the log offset after the last appended record: positions of
        #: records when the log does not report them (see OffsetsLog.append), and the offset
        #: the last write waits for (when_committed)
        self.log_end: dict[int, int] = {}
        #: appended records not yet below their partition's high watermark, and what to do
        #: once they are (or if their write fails)
        self.writes = UncommittedWrites(self._high_watermark)
        #: (group id, group config key) -> the group's override (a GROUP config resource) or
        #: None; set by the shell, which validated the values against the broker's bounds
        self.group_config: Callable[[str, str], str | None] = lambda _group_id, _key: None

    def group_int(self, group_id: str, key: str, default: int) -> int:
        """A group config (consumer.session.timeout.ms, share.heartbeat.interval.ms, ...) in
        force for ``group_id``: its override, else the broker's ``default``."""
        value = self.group_config(group_id, key)
        return default if value is None else int(value)

    def _high_watermark(self, partition: int) -> int | None:
        hw = getattr(self.log, "high_watermark", None)
        return None if hw is None else hw(partition)

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.config.offsets_topic_num_partitions)

    def serves(self, partition: int) -> bool:
        """Whether this coordinator serves the partition's groups (loaded or loading)."""
        return self.owned is None or partition in self.owned

    def group_error(self, group_id: str | None, *, allow_empty: bool) -> ErrorCode | None:
        """The error every group API checks first: a bad group id or a partition still loading."""
        # Kafka accepts the empty group id for OffsetCommit/OffsetFetch/DescribeGroups/
        # DeleteGroups (backwards compatibility) and refuses it for everything else.
        if group_id is None or (group_id == "" and not allow_empty):
            return E.invalid_group_id
        if self.owned is not None and self.partition_for(group_id) not in self.owned:
            return E.not_coordinator
        if self.loading and self.partition_for(group_id) in self.loading:
            return E.coordinator_load_in_progress
        return None

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_for(group_id), state_timestamp=self.clock())
        self.groups[group_id] = group
        return group

    def maybe_drop_unused(self, group: AnyGroup) -> None:
        # A group created by a failed first JoinGroup was never written anywhere: forget it.
        if (
            isinstance(group, Group)
            and group.is_(GroupState.EMPTY)
            and group.generation == 0
            and not group.members
            and not group.pending_members
            and not group.has_offsets()
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]

    def kill(self, group: AnyGroup) -> None:
        """The group is gone (deleted, or emptied of members and offsets): Dead, forgotten."""
        if isinstance(group, ConsumerGroup):
            group.state = ConsumerGroupState.DEAD
        elif isinstance(group, ShareGroup):
            group.state = ShareGroupState.DEAD
        else:
            group.transition(GroupState.DEAD, self.clock())
            group.pending_members.clear()
        group.offsets.clear()
        group.offset_positions.clear()
        group.unreplicated_offsets.clear()
        self.forget_pending(group)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def forget_pending(self, group: GroupBase) -> None:
        """Drop the group's pending transactional offsets (and their index entries)."""
        for pid in group.pending_txn_offsets:
            gids = self.txn_groups.get(pid)
            if gids is not None:
                gids.discard(group.group_id)
                if not gids:
                    del self.txn_groups[pid]
        group.pending_txn_offsets.clear()

    def append(self, group: GroupBase, records: list[Record], *, producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Persist records in the group's ``__consumer_offsets`` partition (raises on failure),
        as a transactional batch of ``producer_id`` if given. Returns the log offset of the
        first record (the coordinator's own count when the log does not say)."""
        return self.append_to(group.partition, records, producer_id=producer_id, producer_epoch=producer_epoch)

    def append_to(self, partition: int, records: list[Record], *, producer_id: int = -1, producer_epoch: int = -1) -> int:
        """:meth:`append` into a partition named directly (records of several groups)."""
        if producer_id >= 0:
            base = self.log.append(partition, records, producer_id=producer_id, producer_epoch=producer_epoch)
        else:
            base = self.log.append(partition, records)
        if not isinstance(base, int):
            base = self.log_end.get(partition, 0)
        # where this append ended, exactly: a leader's log truncated since an earlier
        # leadership ends lower than it did then, and when_committed waits for this offset
        self.log_end[partition] = base + len(records)
        return base

    def commit_when_written(self, group: GroupBase, written: list[tuple[tuple[str, int], OffsetCommitValue, int]]) -> None:
        """Right after appending the records of ``written`` ((topic, partition), value, log
        offset of its record): they become the group's committed offsets once their records
        are committed, the later record winning (Kafka's prepareOffsetCommit, then
        onOffsetCommitAppend); a failed write drops them (failPendingOffsetWrite) and leaves
        the committed offsets as they were."""
        gid = group.group_id
        staged = [(key, group.stage_offset(key, value, position)) for key, value, position in written]

        def committed() -> None:
            current = self.groups.get(gid)
            if current is None:
                return
            for key, entry in staged:
                if current.unstage_offset(key, entry) and (
                    key not in current.offsets or current.offset_positions.get(key, -1) < entry.position
                ):
                    current.commit_offset(key, entry.value, entry.position)

        def failed(_error: ErrorCode) -> None:
            current = self.groups.get(gid)
            if current is None:
                return
            for key, entry in staged:
                current.unstage_offset(key, entry)
            self.maybe_drop_unused(current)

        self.when_committed(group.partition, committed, failed)

    def when_committed(self, partition: int, on_commit: Callable[[], None],
                       on_fail: Callable[[ErrorCode], None]) -> None:
        """Right after an append to ``partition``: ``on_commit()`` once its records are
        committed (at once when they are), ``on_fail(error)`` if the write fails instead."""
        self.writes.after(partition, self.log_end.get(partition, 0), on_commit, on_fail)
