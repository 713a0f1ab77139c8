"""Loading groups from ``__consumer_offsets``: replaying a partition's records at start-up.

A partition is loading from :meth:`GroupLoader.start` (or its first records) until
:meth:`GroupLoader.finish`; meanwhile its groups answer COORDINATOR_LOAD_IN_PROGRESS. Replay
keeps only the last record per key (what compaction would keep), then builds the groups;
records that cannot be read are skipped, never fatal: a poisoned offsets log must not stop
the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from coordinator.classic.rebalance import Rebalancer
from coordinator.group import Group, GroupState, Member
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from coordinator.state import CoordinatorState

__all__ = ["GroupLoader", "LoadState"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadState:
    """What a loading partition has replayed so far: the last value per key (None: tombstone)."""

    offsets: dict[tuple[str, str, int], OffsetCommitValue | None] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    skipped: int = 0


class GroupLoader:
    """Replays ``__consumer_offsets`` partitions into the groups of ``state``."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer) -> None:
        self._state = state
        self._rebalance = rebalancer

    def start(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._state.loading.setdefault(p, LoadState())

    def is_loading(self, partition: int) -> bool:
        return partition in self._state.loading

    def replay(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        st = self._state.loading.setdefault(partition, LoadState())
        it = iter(records)
        while True:
            try:
                offset, key, value = next(it)
            except StopIteration:
                break
            except Exception:
                # The broker's record iterator failed (e.g. a corrupt batch): stop this
                # partition here rather than crash; what was read so far stays loaded.
                log.exception("__consumer_offsets-%d: reading records failed; loaded what was readable", partition)
                break
            try:
                self._replay_record(partition, st, key, value)
            except UnknownRecordVersion as e:
                st.skipped += 1
                log.debug("__consumer_offsets-%d offset %s: skipping record: %s", partition, offset, e)
            except RecordDecodeError as e:
                st.skipped += 1
                log.warning("__consumer_offsets-%d offset %s: skipping malformed record: %s", partition, offset, e)
            except Exception:
                st.skipped += 1
                log.exception("__consumer_offsets-%d offset %s: skipping record", partition, offset)

    def _replay_record(self, partition: int, st: LoadState, key: bytes | None, value: bytes | None) -> None:
        k = decode_key(key)
        owner = self._state.partition_for(k.group)
        if owner != partition:
            raise RecordDecodeError(f"group {k.group!r} belongs to partition {owner}")
        if isinstance(k, OffsetCommitKey):
            st.offsets[(k.group, k.topic, k.partition)] = None if value is None else decode_offset_commit_value(value)
        else:
            assert isinstance(k, GroupMetadataKey)
            st.groups[k.group] = None if value is None else decode_group_metadata_value(value)

    def finish(self, partition: int) -> None:
        """Replace the partition's groups with what was replayed and start serving them."""
        groups = self._state.groups
        st = self._state.loading.pop(partition, None) or LoadState()
        now = self._state.clock()
        for gid in [g for g, grp in groups.items() if grp.partition == partition]:
            del groups[gid]
        for gid, value in st.groups.items():
            if value is not None:
                groups[gid] = self._group_from_record(gid, partition, value)
        for (gid, topic, p), ov in st.offsets.items():
            if ov is None:
                continue
            group = groups.get(gid)
            if group is None:
                # Offsets without group metadata: a group that only stores offsets.
                group = groups[gid] = Group(gid, partition, state_timestamp=now)
            group.offsets[(topic, p)] = ov
        log.info(
            "__consumer_offsets-%d loaded: %d groups, %d records skipped",
            partition,
            sum(1 for g in groups.values() if g.partition == partition),
            st.skipped,
        )

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
