"""What the share coordinator knows, and how a record changes it (Kafka's
ShareCoordinatorShard.replay, ShareGroupOffset and ShareCoordinatorOffsetsManager).

Per ``__share_group_state`` partition this broker serves, a :class:`PartitionState` holds
each share-partition's :class:`KeyState`: the combined state (last snapshot + the updates
after it), the highest leader and state epochs seen (what fencing compares against) and the
number of updates since the last snapshot (the snapshot cadence).

:func:`apply_record` is the one way a record becomes state, at load and at run time alike:
the coordinator applies the records it generates at once (as Kafka's runtime replays them),
keeping what it replaced until the write is committed, so that a failed write can be undone.

Placement: a share-partition lives in ``__share_group_state`` partition
``Utils.abs(key.asCoordinatorKey().hashCode()) % share.coordinator.state.topic.num.partitions``
(ShareCoordinatorService.partitionFor), the coordinator key being
``groupId:topicId:partition`` with Kafka's base64 topic id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from coordinator.placement import partition_for_key
from share_coordinator.combiner import combine_state_batches
from share_coordinator.records import (
    NO_DELIVERY_COMPLETE_COUNT,
    SHARE_SNAPSHOT_RECORD_TYPE,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
)

__all__ = [
    "KeyState",
    "PartitionState",
    "ShareGroupOffset",
    "apply_record",
    "apply_value",
    "partition_for",
]


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of a share-partition (and so its coordinator)."""
    return partition_for_key(SharePartitionKey(group_id, topic_id, partition).coordinator_key, num_partitions)


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """A share-partition's combined state (Kafka's ShareGroupOffset): the fields of a
    ShareSnapshotValue. Timestamps come from snapshots only; updates carry none."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp: int
    write_timestamp: int

    @classmethod
    def from_snapshot(cls, v: ShareSnapshotValue) -> ShareGroupOffset:
        return cls(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count,
                   v.state_batches, v.create_timestamp, v.write_timestamp)

    def to_snapshot(self) -> ShareSnapshotValue:
        return ShareSnapshotValue(self.snapshot_epoch, self.state_epoch, self.leader_epoch, self.start_offset,
                                  self.create_timestamp, self.write_timestamp, self.state_batches,
                                  self.delivery_complete_count)

    def merge(self, u: ShareUpdateValue) -> ShareGroupOffset:
        """This state with an update applied (ShareCoordinatorShard.merge): -1 fields are not
        updated; batches combine from the (possibly new) start offset."""
        start = self.start_offset if u.start_offset == -1 else u.start_offset
        return replace(
            self,
            leader_epoch=self.leader_epoch if u.leader_epoch == -1 else u.leader_epoch,
            start_offset=start,
            delivery_complete_count=(self.delivery_complete_count
                                     if u.delivery_complete_count == NO_DELIVERY_COMPLETE_COUNT
                                     else u.delivery_complete_count),
            state_batches=combine_state_batches(self.state_batches, u.state_batches, start),
        )


@dataclass(frozen=True, slots=True)
class KeyState:
    """One share-partition. Immutable: a change replaces it, so undoing a write is putting
    the old object back."""

    offset: ShareGroupOffset
    #: the highest leader epoch any record carried (Kafka's leaderEpochMap); -1 allowed
    leader_epoch: int
    #: the highest state epoch any snapshot carried (Kafka's stateEpochMap)
    state_epoch: int
    #: ShareUpdates since the last ShareSnapshot; a write makes a snapshot once this
    #: reaches share.coordinator.snapshot.update.records.per.snapshot
    updates_since_snapshot: int = 0


def apply_value(current: KeyState | None, record_type: int,
                value: ShareSnapshotValue | ShareUpdateValue | None) -> KeyState | None:
    """The state after one record of a key (None: the key has no state).

    A snapshot replaces the state; an update merges into it (an update for a key with no
    snapshot becomes its state as is, as Kafka's replay does); a null value is a tombstone.
    """
    if value is None:
        return None
    if record_type == SHARE_SNAPSHOT_RECORD_TYPE:
        assert isinstance(value, ShareSnapshotValue)
        offset = ShareGroupOffset.from_snapshot(value)
        if current is None:
            return KeyState(offset, value.leader_epoch, value.state_epoch)
        # Snapshots reset the cadence. (Kafka resets its counter only once it has reached
        # the limit, and starts it at 0 on the first update, so its first cycle has N + 1
        # updates; here every cycle has N.)
        return KeyState(offset, max(current.leader_epoch, value.leader_epoch),
                        max(current.state_epoch, value.state_epoch))
    assert isinstance(value, ShareUpdateValue)
    if current is None:
        # An update with no snapshot before it (a log cut by retention): it is all we know.
        offset = ShareGroupOffset(value.snapshot_epoch, 0, value.leader_epoch, value.start_offset,
                                  value.delivery_complete_count, value.state_batches, 0, 0)
        return KeyState(offset, value.leader_epoch, 0, 1)
    return KeyState(current.offset.merge(value), max(current.leader_epoch, value.leader_epoch),
                    current.state_epoch, current.updates_since_snapshot + 1)


@dataclass(slots=True)
class PartitionState:
    """One ``__share_group_state`` partition served here."""

    partition: int
    keys: dict[SharePartitionKey, KeyState] = field(default_factory=dict)
    #: offset of each key's latest snapshot in the log, where known (load, committed writes):
    #: records before the smallest are redundant (ShareCoordinatorOffsetsManager)
    snapshot_offsets: dict[SharePartitionKey, int] = field(default_factory=dict)
    #: next time (ms) cold share-partitions are looked for
    next_cold_check_ms: int = 0

    def last_redundant_offset(self) -> int | None:
        """The offset below which every record of the partition has been superseded (a
        newer snapshot of its key, or its key deleted); None while nothing is."""
        if not self.snapshot_offsets:
            return None
        low = min(self.snapshot_offsets.values())
        return low if low > 0 else None

    def note_offset(self, record_type: int, key: SharePartitionKey, deleted: bool, offset: int) -> None:
        if deleted:
            self.snapshot_offsets.pop(key, None)
        elif record_type == SHARE_SNAPSHOT_RECORD_TYPE:
            self.snapshot_offsets[key] = offset


def apply_record(state: PartitionState, key_bytes: bytes | None, value_bytes: bytes | None,
                 offset: int | None = None) -> None:
    """Replay one record of the partition's log into ``state`` (raises RecordDecodeError and
    its UnknownRecordVersion subclass for records it cannot read, leaving ``state`` as it was)."""
    record_type, key = decode_key(key_bytes)
    value: ShareSnapshotValue | ShareUpdateValue | None = None
    if value_bytes is not None:
        value = (decode_snapshot_value(value_bytes) if record_type == SHARE_SNAPSHOT_RECORD_TYPE
                 else decode_update_value(value_bytes))
    new = apply_value(state.keys.get(key), record_type, value)
    if new is None:
        state.keys.pop(key, None)
    else:
        state.keys[key] = new
    if offset is not None:
        state.note_offset(record_type, key, value is None, offset)
