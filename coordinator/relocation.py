"""Moving groups that Krait's former placement wrote into the wrong ``__consumer_offsets``
partition into the one Kafka's rule names (coordinator/placement.py).

The loader of partition P first replays the records that P's groups have in P's legacy
partition Q (the one partition the former rule could have put them in), as older than any
record of P itself: a group found there is served from P with everything it had, and what
P says since wins, as it would in one log. When P finishes loading, each such group's state
that only Q holds (the last value of each key, transactions resolved) is written into P,
and the loader hands back the keys to delete in Q (:class:`~coordinator.placement.Relocation`):
the broker writes those tombstones only once the copies in P are durable, so that a group
is never without a copy and P's load finds it again if the broker stops half-way (the
copies are not written twice: a key P holds already is P's).

A group with transactional offsets still open in Q is not moved yet: its markers go to Q
(the transaction coordinator recorded Q), so it keeps its records there, is served from P
with those offsets pending (a marker in Q or in P completes them: both belong to the one
transaction its producer has open) and moves at a later load, once they are resolved.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from coordinator.group import Group, TxnOffset
from coordinator.placement import Relocation
from coordinator.records import OffsetCommitValue, encode_offset_commit_key, encode_offset_commit_value
from coordinator.state import CoordinatorState, Record

__all__ = ["LEGACY_SHIFT", "LegacyGroups", "attach_pending", "relocate"]

log = logging.getLogger(__name__)

#: subtracted from the log offsets of legacy records: they stay in their own order and
#: come before every record of the partition itself (positions decide which record wins)
LEGACY_SHIFT = 1 << 62

OffsetKey = tuple[str, str, int]
Pending = dict[int, dict[str, dict[tuple[str, int], TxnOffset]]]


@dataclass(slots=True)
class LegacyGroups:
    """What a loading partition found of its groups in its legacy partition ``source``."""

    source: int
    #: key -> (group, whether an offset commit, last value; None: tombstone), in log order
    last: dict[bytes, tuple[str, bool, bytes | None]] = field(default_factory=dict)
    #: keys of ``last`` the partition itself has records of (its own are newer)
    own: set[bytes] = field(default_factory=set)
    #: the source's transactional offsets without a marker there, kept apart from the
    #: partition's own: a marker in the partition's log is no answer for them
    pending: Pending = field(default_factory=dict)

    def note(self, key: bytes, group: str, is_offset: bool, value: bytes | None) -> None:
        self.last.pop(key, None)  # re-inserted: the dict keeps the log order of last records
        self.last[key] = (group, is_offset, value)

    def seen_in_partition(self, key: bytes) -> None:
        if key in self.last:
            self.own.add(key)


def attach_pending(state: CoordinatorState, legacy: LegacyGroups, partition: int, now: int) -> None:
    """Give the loaded groups the source's open transactional offsets (the partition's own,
    later records of the same producer, win on the same key)."""
    groups = state.groups
    for pid, by_group in legacy.pending.items():
        for gid, entries in by_group.items():
            group = groups.get(gid)
            if group is None:
                group = groups[gid] = Group(gid, partition, state_timestamp=now)
            mine = group.pending_txn_offsets.get(pid, {})
            group.pending_txn_offsets[pid] = {**entries, **mine}
            state.txn_groups.setdefault(pid, set()).add(gid)


def relocate(state: CoordinatorState, partition: int, legacy: LegacyGroups,
             offsets: dict[OffsetKey, OffsetCommitValue | None], positions: dict[OffsetKey, int]) -> Relocation | None:
    """Write into ``partition`` the state of its groups that only the source holds, and
    return the source's keys to delete once that is durable (None: nothing to do).
    ``offsets``/``positions``: the loaded offsets and their log positions (negative: from
    the source), transactions resolved."""
    waiting = {gid for by_group in legacy.pending.values() for gid in by_group}
    #: per group its records to copy, each with the offset's (topic, partition) if one
    copies: dict[str, list[tuple[Record, tuple[str, int] | None]]] = {}
    tombstones: dict[str, list[bytes]] = {}
    for key, (gid, is_offset, value) in legacy.last.items():
        if gid in waiting or value is None:
            continue
        tombstones.setdefault(gid, []).append(key)
        # offsets are copied from the loaded values below: their last record may be a
        # transactional one, committed or aborted by a marker
        if not is_offset and key not in legacy.own:
            copies.setdefault(gid, []).append(((key, value), None))
    for (gid, topic, p), value in offsets.items():
        if gid in tombstones and value is not None and positions.get((gid, topic, p), 0) < 0:
            record = (encode_offset_commit_key(gid, topic, p), encode_offset_commit_value(value))
            copies.setdefault(gid, []).append((record, (topic, p)))
    if waiting:
        log.info("__consumer_offsets-%d: %d groups in partition %d wait for their transactions before moving",
                 partition, len(waiting), legacy.source)
    moved: list[bytes] = []
    groups = 0
    for gid, keys in tombstones.items():
        records = copies.get(gid)
        if records:
            try:
                base = state.append_to(partition, [r for r, _ in records])
            except Exception as exc:
                # the source keeps the group's records: the next load tries again
                log.warning("group %s: copying its records from __consumer_offsets-%d into %d failed: %s",
                            gid, legacy.source, partition, exc)
                continue
            group = state.groups.get(gid)
            for i, (_, tp) in enumerate(records):
                if group is not None and tp is not None and tp in group.offsets:
                    group.offset_positions[tp] = base + i
        moved.extend(keys)
        groups += 1
    if groups:
        log.info("__consumer_offsets-%d: moved %d groups from partition %d (former placement)",
                 partition, groups, legacy.source)
    return Relocation(legacy.source, moved) if moved else None
