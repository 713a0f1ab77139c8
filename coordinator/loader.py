"""Loading groups from ``__consumer_offsets``: replaying a partition's records at start-up.

A partition is loading from :meth:`GroupLoader.start` (or its first records) until
:meth:`GroupLoader.finish`; meanwhile its groups answer COORDINATOR_LOAD_IN_PROGRESS. Replay
keeps only the last record per key (what compaction would keep), then builds the groups;
records that cannot be read are skipped, never fatal: a poisoned offsets log must not stop
the broker.

Transactional offset commits (TxnOffsetCommit batches) are kept per producer until that
producer's COMMIT or ABORT marker (:class:`TxnMarker`): a commit makes them committed unless
a later record of the same partition is (the log offset decides, as in Kafka), an abort
drops them; those without a marker yet end up pending on their groups. A tombstone of an
offset removes it from every open transaction too (Kafka's OffsetMetadataManager.replay).

KIP-848 consumer-group records (key types 3-8) and KIP-932 share-group records (9-15) are
replayed in log order into the loading partition's consumer and share groups by the same code
that applies them live (coordinator/consumer/replay.py, coordinator/share/replay.py); at the
end the groups get their offsets and their members' session (and revocation) timers, as
Kafka's onLoaded.

Groups that Krait's former placement wrote into another partition are replayed from there
first (:meth:`GroupLoader.replay_legacy`) and moved when the load finishes
(coordinator/relocation.py); the records of such groups met in their legacy partition are
that other partition's, and left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from coordinator.classic.rebalance import Rebalancer
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import ConsumerGroupKey, decode_record
from coordinator.consumer.replay import ReplayError, replay
from coordinator.group import Group, GroupState, Member, TxnOffset
from coordinator.placement import Relocation, legacy_partition
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    decode_group_metadata_value,
    decode_offset_commit_value,
    replay_each,
)
from coordinator.relocation import LEGACY_SHIFT, LegacyGroups, attach_pending, relocate
from coordinator.share import records as share_records
from coordinator.share import replay as share_replay
from coordinator.share.group import ShareGroup
from coordinator.share.records import ShareGroupKey, decode_any_key
from coordinator.state import CoordinatorState

__all__ = ["GroupLoader", "LoadItem", "LoadState", "TxnMarker"]

log = logging.getLogger(__name__)

OffsetKey = tuple[str, str, int]  # (group, topic, partition)


class TxnMarker(NamedTuple):
    """A COMMIT (``commit``) or ABORT control batch of ``producer_id`` at ``offset``."""

    offset: int
    producer_id: int
    commit: bool


#: what load_partition replays: (offset, key, value), (offset, key, value, producer_id,
#: transactional) or a TxnMarker
LoadItem = tuple[int, bytes | None, bytes | None] | tuple[int, bytes | None, bytes | None, int, bool] | TxnMarker


@dataclass(slots=True)
class LoadState:
    """What a loading partition has replayed so far: the last value per key (None: tombstone)
    with the log offset of its record, and the transactional offsets of each producer whose
    marker has not been seen yet (producer id -> group -> (topic, partition) -> offset; a
    group stays listed while its producer's transaction is open, even with none left)."""

    offsets: dict[OffsetKey, OffsetCommitValue | None] = field(default_factory=dict)
    positions: dict[OffsetKey, int] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[tuple[str, int], TxnOffset]]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    #: the consumer groups replayed so far (records applied in log order)
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    #: the share groups replayed so far
    share_groups: dict[str, ShareGroup] = field(default_factory=dict)
    skipped: int = 0
    #: records of other partitions' groups, written here by the former placement
    strays: int = 0
    #: this partition's groups found in their legacy partition (replay_legacy)
    legacy: LegacyGroups | None = None
    #: one past the last offset replayed (where the coordinator's next record will go)
    end: int = 0
    #: the log's high watermark (None: every record is committed); an offset committed by
    #: a record at or past it goes to ``tail`` and shows once the records are committed
    hw: int | None = None
    tail: dict[OffsetKey, TxnOffset] = field(default_factory=dict)


class _LoadingGroups:
    """A loading partition's consumer groups, as replay sees them (a GroupSource)."""

    def __init__(self, st: LoadState, partition: int) -> None:
        self._st = st
        self._partition = partition

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self._st.consumer_groups.get(group_id)

    def create(self, group_id: str) -> ConsumerGroup:
        group = self._st.consumer_groups.get(group_id)
        if group is None:
            if self._st.groups.get(group_id) is not None:
                raise ReplayError(f"group {group_id} is a classic group")
            if group_id in self._st.share_groups:
                raise ReplayError(f"group {group_id} is a share group")
            group = self._st.consumer_groups[group_id] = ConsumerGroup(group_id, self._partition)
        return group

    def remove(self, group_id: str) -> None:
        self._st.consumer_groups.pop(group_id, None)


class _LoadingShareGroups:
    """A loading partition's share groups, as share-group replay sees them."""

    def __init__(self, st: LoadState, partition: int) -> None:
        self._st = st
        self._partition = partition

    def get(self, group_id: str) -> ShareGroup | None:
        return self._st.share_groups.get(group_id)

    def create(self, group_id: str) -> ShareGroup:
        group = self._st.share_groups.get(group_id)
        if group is None:
            if self._st.groups.get(group_id) is not None or group_id in self._st.consumer_groups:
                raise ReplayError(f"group {group_id} is not a share group")
            group = self._st.share_groups[group_id] = ShareGroup(group_id, self._partition)
        return group

    def remove(self, group_id: str) -> None:
        self._st.share_groups.pop(group_id, None)


class GroupLoader:
    """Replays ``__consumer_offsets`` partitions into the groups of ``state``.
    ``consumer_group_loaded(group)`` runs for every consumer group loaded (its timers), and
    ``share_group_loaded(group)`` for every share group."""

    def __init__(
        self,
        state: CoordinatorState,
        rebalancer: Rebalancer,
        consumer_group_loaded: Callable[[ConsumerGroup], None] | None = None,
        share_group_loaded: Callable[[ShareGroup], None] | None = None,
    ) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._consumer_group_loaded = consumer_group_loaded
        self._share_group_loaded = share_group_loaded

    def start(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._state.loading.setdefault(p, LoadState())

    def is_loading(self, partition: int) -> bool:
        return partition in self._state.loading

    def replay(self, partition: int, records: Iterable[LoadItem], high_watermark: int | None = None) -> None:
        st = self._state.loading.setdefault(partition, LoadState())
        if high_watermark is not None:
            st.hw = high_watermark

        def apply(item: LoadItem) -> None:
            offset = item[0]
            st.end = max(st.end, offset + 1)
            if isinstance(item, TxnMarker):
                self._replay_marker(st, item)
                return
            producer_id, transactional = (item[3], item[4]) if len(item) > 3 else (-1, False)
            self._replay_record(partition, st, offset, item[1], item[2], producer_id if transactional else -1)

        st.skipped += replay_each("__consumer_offsets", partition, records, apply)

    def replay_legacy(self, partition: int, source: int, records: Iterable[LoadItem]) -> None:
        """Before any record of the partition itself: replay the records that its groups
        have in ``source``, their partition under Krait's former placement, as older than
        all of the partition's own. The source's own groups are left to its load."""
        st = self._state.loading.setdefault(partition, LoadState())
        legacy = st.legacy = LegacyGroups(source)

        def apply(item: LoadItem) -> None:
            offset = item[0] - LEGACY_SHIFT
            if isinstance(item, TxnMarker):
                self._replay_marker(st, item._replace(offset=offset))
                return
            try:
                k = decode_any_key(item[1])
            except RecordDecodeError:
                return  # the source's load reports it
            if self._state.partition_for(k.group) != partition:
                return
            legacy.note(item[1], k.group, isinstance(k, OffsetCommitKey), item[2])
            transactional = len(item) > 3 and item[4]
            self._apply_record(partition, st, offset, k, item[2], item[3] if transactional else -1)

        st.skipped += replay_each("__consumer_offsets", source, records, apply)
        legacy.pending, st.pending = st.pending, {}

    def _replay_record(
        self, partition: int, st: LoadState, offset: int, key: bytes | None, value: bytes | None, producer_id: int
    ) -> None:
        """``producer_id`` >= 0: the record is in a transactional batch of that producer."""
        k = decode_any_key(key)
        n = self._state.config.offsets_topic_num_partitions
        owner = self._state.partition_for(k.group)
        if owner != partition:
            if legacy_partition(owner, n) == partition:
                st.strays += 1  # the owner's load moves it
                return
            raise RecordDecodeError(f"group {k.group!r} belongs to partition {owner}")
        if st.legacy is not None and key is not None:
            st.legacy.seen_in_partition(key)
        self._apply_record(partition, st, offset, k, value, producer_id)

    def _apply_record(
        self, partition: int, st: LoadState, offset: int,
        k: OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | ShareGroupKey, value: bytes | None, producer_id: int,
    ) -> None:
        if isinstance(k, ConsumerGroupKey):
            replay(_LoadingGroups(st, partition), decode_record(k, value))
        elif isinstance(k, ShareGroupKey):
            share_replay.replay(_LoadingShareGroups(st, partition), share_records.decode_record(k, value))
        elif isinstance(k, OffsetCommitKey):
            okey = (k.group, k.topic, k.partition)
            if value is None:
                st.offsets[okey] = None
                st.tail.pop(okey, None)
                tp = (k.topic, k.partition)
                for by_group in st.pending.values():
                    by_group.get(k.group, {}).pop(tp, None)
            elif producer_id >= 0:
                pending = st.pending.setdefault(producer_id, {}).setdefault(k.group, {})
                pending[(k.topic, k.partition)] = TxnOffset(decode_offset_commit_value(value), offset)
            elif st.hw is not None and offset >= st.hw:
                # a new leader's record the ISR may not have yet: the offset before it stays
                st.tail[okey] = TxnOffset(decode_offset_commit_value(value), offset)
            else:
                st.offsets[okey] = decode_offset_commit_value(value)
                st.positions[okey] = offset
        else:
            assert isinstance(k, GroupMetadataKey)
            if value is not None and (k.group in st.consumer_groups or k.group in st.share_groups):
                raise RecordDecodeError(f"group {k.group!r} is not a classic group")
            st.groups[k.group] = None if value is None else decode_group_metadata_value(value)
            if value is None:
                # the group was deleted (DeleteGroups): its open transactions no longer keep
                # it, as the live coordinator forgot them when it deleted the group
                for by_group in st.pending.values():
                    by_group.pop(k.group, None)

    @staticmethod
    def _replay_marker(st: LoadState, marker: TxnMarker) -> None:
        """Kafka's replayEndTransactionMarker: the producer's pending offsets end."""
        by_group = st.pending.pop(marker.producer_id, None)
        if by_group is None or not marker.commit:
            return
        uncommitted = st.hw is not None and marker.offset >= st.hw
        for gid, entries in by_group.items():
            for (topic, p), entry in entries.items():
                okey = (gid, topic, p)
                later = st.tail.get(okey)
                if later is not None and later.position > entry.position:
                    continue
                if uncommitted:
                    # shown once the marker is committed, as a live completion
                    if st.offsets.get(okey) is None or st.positions.get(okey, -1) < entry.position:
                        st.tail[okey] = entry
                    continue
                st.tail.pop(okey, None)
                # the later record wins, whichever kind it is
                if st.offsets.get(okey) is None or st.positions.get(okey, -1) < entry.position:
                    st.offsets[okey] = entry.value
                    st.positions[okey] = entry.position

    def finish(self, partition: int) -> Relocation | None:
        """Replace the partition's groups with what was replayed and start serving them.
        Groups replayed from a legacy partition are written into this one first; returns
        the legacy keys to delete once that is durable (None: none)."""
        state = self._state
        groups = state.groups
        st = state.loading.pop(partition, None) or LoadState()
        now = state.clock()
        for gid in [g for g, grp in groups.items() if grp.partition == partition]:
            state.forget_pending(groups.pop(gid))
        for gid, value in st.groups.items():
            if value is not None:
                groups[gid] = self._group_from_record(gid, partition, value)
        for gid, cgroup in st.consumer_groups.items():
            groups[gid] = cgroup
        for gid, sgroup in st.share_groups.items():
            groups[gid] = sgroup
        for (gid, topic, p), ov in st.offsets.items():
            if ov is None:
                continue
            group = groups.get(gid)
            if group is None:
                # Offsets without group metadata: a group that only stores offsets.
                group = groups[gid] = Group(gid, partition, state_timestamp=now)
            group.commit_offset((topic, p), ov, st.positions.get((gid, topic, p), -1))
        for pid, by_group in st.pending.items():
            for gid, entries in by_group.items():
                group = groups.get(gid)
                if group is None:
                    group = groups[gid] = Group(gid, partition, state_timestamp=now)
                group.pending_txn_offsets[pid] = dict(entries)
                state.txn_groups.setdefault(pid, set()).add(gid)
        state.log_end[partition] = max(state.log_end.get(partition, 0), st.end)
        self._stage_tail(partition, st, now)
        moved = None
        if st.legacy is not None:
            attach_pending(state, st.legacy, partition, now)
            moved = relocate(state, partition, st.legacy, st.offsets, st.positions)
        if self._consumer_group_loaded is not None:
            for cgroup in st.consumer_groups.values():
                self._consumer_group_loaded(cgroup)
        if self._share_group_loaded is not None:
            for sgroup in st.share_groups.values():
                self._share_group_loaded(sgroup)
        log.info(
            "__consumer_offsets-%d loaded: %d groups, %d records skipped, %d of other partitions' groups",
            partition,
            sum(1 for g in groups.values() if g.partition == partition),
            st.skipped,
            st.strays,
        )
        return moved

    def _stage_tail(self, partition: int, st: LoadState, now: int) -> None:
        """Offsets committed by records past the high watermark: staged until the loaded log
        end is committed (Kafka 4's coordinator loads them into its timeline above the last
        committed offset), over the offsets committed before them."""
        by_group: dict[str, list[tuple[tuple[str, int], OffsetCommitValue, int]]] = {}
        for (gid, topic, p), entry in st.tail.items():
            by_group.setdefault(gid, []).append(((topic, p), entry.value, entry.position))
        for gid, written in by_group.items():
            group = self._state.groups.get(gid)
            if group is None:
                group = self._state.groups[gid] = Group(gid, partition, state_timestamp=now)
            self._state.commit_when_written(group, written)

    def _group_from_record(self, gid: str, partition: int, v: GroupMetadataValue) -> Group:
        group = Group(gid, partition, generation=v.generation, protocol_type=v.protocol_type or None)
        group.state_timestamp = v.current_state_timestamp
        if v.members and v.protocol is None:
            log.warning("group %s: metadata with members but no protocol; loading it without members", gid)
        elif v.members:
            group.protocol_name = v.protocol
            for mm in v.members:
                m = Member(
                    member_id=mm.member_id,
                    group_instance_id=mm.group_instance_id,
                    client_id=mm.client_id,
                    client_host=mm.client_host,
                    # v0 records have no rebalance timeout; Kafka then uses the session timeout.
                    rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout != -1 else mm.session_timeout,
                    session_timeout_ms=mm.session_timeout,
                    protocol_type=v.protocol_type,
                    protocols=[(v.protocol, mm.subscription)],
                    assignment=mm.assignment,
                )
                group.add(m, None)
                # Loaded members get a full session to show up before they expire.
                self._rebalance.touch(group, m)
            if v.leader in group.members:
                group.leader_id = v.leader
            group.state = GroupState.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        return group
