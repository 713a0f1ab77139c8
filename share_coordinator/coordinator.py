"""ShareCoordinator: Kafka's share coordinator (KIP-932) as a pure state machine.

It keeps the durable state of share-partitions (which offsets of a topic partition a share
group has acknowledged, archived or handed out how often) in ``__share_group_state``, and
serves the five APIs the share-partition leaders call: InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary. It follows Apache Kafka 4.2's ShareCoordinatorService (request
splitting, empty answers for empty requests) and ShareCoordinatorShard (validation and
fencing in Kafka's order and with Kafka's error codes, the records written, replay).

No sockets, files or event loop: the broker shell owns those. The coordinator takes a kio
request and returns a :class:`Result`: per-share-partition outcomes and the
:class:`Write` s (records for one ``__share_group_state`` partition each) that must be
durable before the answer may go.

How the broker drives it
------------------------
* ``ShareCoordinator(config, clock, partition_exists=...)``: ``clock()`` returns wall-clock
  ms; ``partition_exists(topic_id, partition)``, if given, makes requests for partitions
  that do not exist answer UNKNOWN_TOPIC_OR_PARTITION (Kafka's metadata-image check).
* Requests: ``initialize_state``, ``read_state``, ``write_state``, ``delete_state``,
  ``read_state_summary``, each with the kio request (any version kio has). Append each of
  ``result.writes`` to ``__share_group_state-<write.partition>``; once durable call
  :meth:`ShareCoordinator.committed` (with the first record's offset) and answer
  ``result.response()``. If a write fails, call :meth:`ShareCoordinator.write_failed`
  (which undoes it and every later write of that partition, as Kafka's runtime reverts to
  its last committed snapshot) and answer ``result.response({write_id: error})`` for each
  undone write (Kafka answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE).
* The coordinator applies its records as it generates them, so a request that follows sees
  the state of those before it, committed or not (Kafka's runtime does the same).
* Partitions: on becoming leader of ``__share_group_state-<p>``, :meth:`start_loading`,
  :meth:`replay` (records ``(offset, key, value)`` in offset order, any number of times),
  :meth:`finish_loading`; :meth:`load_partition` does all three. On losing it,
  :meth:`unload`. Share-partitions of partitions never loaded answer NOT_COORDINATOR; of
  partitions loading, COORDINATOR_LOAD_IN_PROGRESS; after :meth:`shutdown`,
  COORDINATOR_NOT_AVAILABLE.
* Timers: call :meth:`poll` at :meth:`next_deadline_ms`; it returns the writes of cold
  share-partitions' snapshots. :meth:`on_topics_deleted` returns the tombstones of deleted
  topics' share-partitions. :meth:`last_redundant_offset` says below which offset a
  partition's records are no longer needed (for DeleteRecords).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from share_coordinator.combiner import combine_state_batches
from share_coordinator.config import ShareCoordinatorConfig
from share_coordinator.loader import ShareStateLoader
from share_coordinator.records import (
    NO_DELIVERY_COMPLETE_COUNT,
    SHARE_SNAPSHOT_RECORD_TYPE,
    SHARE_UPDATE_RECORD_TYPE,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    encode_key,
    encode_snapshot_value,
    encode_update_value,
)
from share_coordinator.responses import Api, Outcome, build_response
from share_coordinator.state import KeyState, PartitionState, apply_value, partition_for

__all__ = ["ShareCoordinator", "Result", "Write"]

log = logging.getLogger(__name__)

# ShareCoordinatorShard's messages for INVALID_REQUEST.
NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED_SHARE_PARTITION = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_SHARE_PARTITION = "Read operation on uninitialized share partition not allowed."

# PartitionFactory's defaults, answered for a share-partition with no state.
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
# ShareGroupOffset.UNINITIALIZED_EPOCH: the leader epoch an initialization writes.
UNINITIALIZED_EPOCH = 0

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append to ``__share_group_state-<partition>``, in order."""

    partition: int
    write_id: int
    records: tuple[Record, ...]


@dataclass(slots=True)
class Result:
    """What one request did: the answer per share-partition, and the writes it waits for."""

    api: Api
    version: int
    outcomes: list[Outcome]
    writes: list[Write] = field(default_factory=list)

    def response(self, failed: Mapping[int, ErrorCode] | None = None) -> Any:
        """The kio response; ``failed`` maps the id of each write that did not become
        durable to the error its share-partitions answer instead."""
        outcomes = self.outcomes
        if failed:
            outcomes = [Outcome.failed(o.topic_id, o.partition, failed[o.write_id])
                        if o.write_id in failed else o for o in outcomes]
        return build_response(self.api, self.version, outcomes)


class _Target(NamedTuple):
    """A share-partition that passed the checks: its coordinator partition, key, state."""

    ps: PartitionState
    key: SharePartitionKey
    cur: KeyState | None


@dataclass(slots=True)
class _Pending:
    """An uncommitted write: what it replaced, to put back if it fails."""

    write_id: int
    undo: list[tuple[SharePartitionKey, KeyState | None]]
    #: (record type, key, tombstone) of each record, to note offsets once committed
    written: list[tuple[int, SharePartitionKey, bool]]


class ShareCoordinator:
    """All ``__share_group_state`` partitions of this broker. Not thread-safe: call from one
    thread (the loop)."""

    def __init__(self, config: ShareCoordinatorConfig, clock: Callable[[], int], *,
                 partition_exists: Callable[[uuid.UUID, int], bool] | None = None) -> None:
        self.config = config
        self._clock = clock
        self._partition_exists = partition_exists
        self._active = True
        self._partitions: dict[int, PartitionState] = {}
        self._loader = ShareStateLoader()
        self._pending: dict[int, list[_Pending]] = {}
        self._next_write_id = 0

    # ================================================================ placement
    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The ``__share_group_state`` partition (and so the coordinator) of a share-partition."""
        return partition_for(group_id, topic_id, partition, self.config.state_topic_num_partitions)

    # ================================================================ partitions
    def start_loading(self, partition: int) -> None:
        """This broker now leads ``__share_group_state-<partition>``: its share-partitions
        answer COORDINATOR_LOAD_IN_PROGRESS until :meth:`finish_loading`."""
        self.unload(partition)
        self._loader.start(partition)

    def replay(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> int:
        """Replay records ``(offset, key, value)`` of a loading partition, in offset order.
        Returns how many could not be read (logged and skipped)."""
        return self._loader.replay(partition, records)

    def finish_loading(self, partition: int) -> None:
        state = self._loader.finish(partition)
        state.next_cold_check_ms = self._clock() + self.config.cold_partition_snapshot_interval_ms
        self._partitions[partition] = state
        log.info("__share_group_state-%d loaded: %d share-partitions", partition, len(state.keys))

    def load_partition(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        self.start_loading(partition)
        self.replay(partition, records)
        self.finish_loading(partition)

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: forget it (uncommitted writes too)."""
        self._loader.abort(partition)
        self._partitions.pop(partition, None)
        self._pending.pop(partition, None)

    def is_loaded(self, partition: int) -> bool:
        return partition in self._partitions

    def shutdown(self) -> None:
        """Stop serving: every request answers COORDINATOR_NOT_AVAILABLE."""
        self._active = False
        for p in list(self._partitions):
            self.unload(p)

    # ================================================================ views
    def state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> KeyState | None:
        """Read-only view of a share-partition (tests, tools)."""
        ps = self._partitions.get(self.partition_for(group_id, topic_id, partition))
        return None if ps is None else ps.keys.get(SharePartitionKey(group_id, topic_id, partition))

    def last_redundant_offset(self, partition: int) -> int | None:
        ps = self._partitions.get(partition)
        return None if ps is None else ps.last_redundant_offset()

    # ================================================================ write outcomes
    def committed(self, partition: int, write_id: int, first_offset: int | None = None) -> None:
        """A write (and every earlier one of the partition) is durable; ``first_offset`` is
        its first record's offset, which lets :meth:`last_redundant_offset` advance."""
        pending = self._pending.get(partition, [])
        ps = self._partitions.get(partition)
        while pending and pending[0].write_id <= write_id:
            done = pending.pop(0)
            if ps is not None and first_offset is not None and done.write_id == write_id:
                for i, (record_type, key, deleted) in enumerate(done.written):
                    ps.note_offset(record_type, key, deleted, first_offset + i)

    def write_failed(self, partition: int, write_id: int) -> list[int]:
        """A write did not become durable: undo it and every later write of the partition
        (their records were appended after it, so they failed too). Returns the ids undone."""
        pending = self._pending.get(partition, [])
        ps = self._partitions.get(partition)
        undone = []
        while pending and pending[-1].write_id >= write_id:
            p = pending.pop()
            undone.append(p.write_id)
            if ps is None:
                continue
            for key, old in reversed(p.undo):
                if old is None:
                    ps.keys.pop(key, None)
                else:
                    ps.keys[key] = old
        return sorted(undone)

    # ================================================================ requests
    def initialize_state(self, request: Any) -> Result:
        """InitializeShareGroupState: a fresh snapshot (empty batches) at the request's state
        epoch and start offset; fenced by a higher state epoch already stored."""
        return self._run(Api.INITIALIZE, request, self._initialize_one)

    def read_state(self, request: Any) -> Result:
        """ReadShareGroupState: the state, for a share-partition leader starting up. A leader
        epoch higher than any seen is recorded (a ShareUpdate), fencing older leaders."""
        return self._run(Api.READ, request, self._read_one)

    def write_state(self, request: Any) -> Result:
        """WriteShareGroupState: a ShareUpdate, or every N updates a ShareSnapshot."""
        return self._run(Api.WRITE, request, self._write_one)

    def delete_state(self, request: Any) -> Result:
        """DeleteShareGroupState: a tombstone for each share-partition that has state."""
        return self._run(Api.DELETE, request, self._delete_one)

    def read_state_summary(self, request: Any) -> Result:
        """ReadShareGroupStateSummary: start offset, epochs and delivery-complete count (for
        describing offsets and lag); no fencing, no records."""
        return self._run(Api.SUMMARY, request, self._summary_one)

    # ================================================================ timers
    def next_deadline_ms(self) -> int | None:
        return min((ps.next_cold_check_ms for ps in self._partitions.values()), default=None)

    def poll(self) -> list[Write]:
        """Snapshot the share-partitions not written for ``cold.partition.snapshot.interval.ms``
        (ShareCoordinatorShard.snapshotColdPartitions), so that records older than that are
        never the only copy of a state (``__share_group_state`` is deleted by retention)."""
        now = self._clock()
        interval = self.config.cold_partition_snapshot_interval_ms
        writes = []
        for ps in self._partitions.values():
            if ps.next_cold_check_ms > now:
                continue
            ps.next_cold_check_ms = now + interval
            records = []
            for key, ks in list(ps.keys.items()):
                o = ks.offset
                # create == write marks a snapshot made by a write: one a cold snapshot
                # already copied (create != write) is not copied again and again.
                if now - o.write_timestamp > interval and o.create_timestamp == o.write_timestamp:
                    value = ShareSnapshotValue(o.snapshot_epoch + 1, o.state_epoch, o.leader_epoch, o.start_offset,
                                               o.create_timestamp, now, o.state_batches, o.delivery_complete_count)
                    records.append((SHARE_SNAPSHOT_RECORD_TYPE, key, value))
            if records:
                writes.append(self._apply(ps, records))
        return writes

    def on_topics_deleted(self, topic_ids: Iterable[uuid.UUID]) -> list[Write]:
        """Tombstones for the share-partitions of deleted topics (maybeCleanupShareState)."""
        ids = set(topic_ids)
        writes = []
        for ps in self._partitions.values():
            records = [(SHARE_SNAPSHOT_RECORD_TYPE, key, None) for key in ps.keys if key.topic_id in ids]
            if records:
                writes.append(self._apply(ps, records))
        return writes

    # ================================================================ internals
    def _run(self, api: Api, request: Any, one: Callable[[str, uuid.UUID | None, Any], tuple[Outcome, list]]) -> Result:
        version = int(getattr(request, "__version__", 0))
        result = Result(api, version, [])
        # ShareCoordinatorService: an empty request, or one naming a topic with no
        # partitions, or no group, gets an empty answer.
        if not request.topics or any(not t.partitions for t in request.topics) or not request.group_id:
            log.error("%s: empty topics, partitions or group id: %s", api.name, request)
            return result
        for t in request.topics:
            for p in t.partitions:
                if not self._active:
                    result.outcomes.append(Outcome.failed(t.topic_id, p.partition, ErrorCode.coordinator_not_available,
                                                          "Share coordinator is not available."))
                    continue
                outcome, records = one(request.group_id, t.topic_id, p)
                if records:
                    ps = self._partitions[self.partition_for(request.group_id, t.topic_id, p.partition)]
                    write = self._apply(ps, records)
                    outcome.write_id = write.write_id
                    result.writes.append(write)
                result.outcomes.append(outcome)
        return result

    def _apply(self, ps: PartitionState, records: list[tuple[int, SharePartitionKey, Any]]) -> Write:
        """Apply generated records now (keeping what they replace) and package them."""
        write_id = self._next_write_id
        self._next_write_id += 1
        undo = []
        encoded = []
        written = []
        for record_type, key, value in records:
            undo.append((key, ps.keys.get(key)))
            new = apply_value(ps.keys.get(key), record_type, value)
            if new is None:
                ps.keys.pop(key, None)
            else:
                ps.keys[key] = new
            if value is None:
                encoded.append((encode_key(record_type, key), None))
            elif record_type == SHARE_SNAPSHOT_RECORD_TYPE:
                encoded.append((encode_key(record_type, key), encode_snapshot_value(value)))
            else:
                encoded.append((encode_key(record_type, key), encode_update_value(value)))
            written.append((record_type, key, value is None))
        self._pending.setdefault(ps.partition, []).append(_Pending(write_id, undo, written))
        return Write(ps.partition, write_id, tuple(encoded))

    def _check(self, group_id: str, topic_id: uuid.UUID | None, p: Any, *, uninitialized: str | None = None,
               fence_leader: bool = False, fence_state: bool = False) -> _Target | Outcome:
        """Where a share-partition's state lives, or the error it answers, checked in
        Kafka's order: the coordinator partition (runtime), then the shard's checks: the
        partition index, no state (``uninitialized`` is the message; None: allowed), a
        leader or state epoch older than one seen (-1: not given, never fenced), and last
        whether the topic partition exists."""
        if topic_id is None:
            return Outcome.failed(topic_id, p.partition, ErrorCode.invalid_request, NULL_TOPIC_ID)
        coordinator_partition = self.partition_for(group_id, topic_id, p.partition)
        ps = self._partitions.get(coordinator_partition)
        if ps is None:
            if self._loader.is_loading(coordinator_partition):
                return Outcome.failed(topic_id, p.partition, ErrorCode.coordinator_load_in_progress)
            return Outcome.failed(topic_id, p.partition, ErrorCode.not_coordinator)
        if p.partition < 0:
            return Outcome.failed(topic_id, p.partition, ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
        key = SharePartitionKey(group_id, topic_id, p.partition)
        cur = ps.keys.get(key)
        if cur is None and uninitialized is not None:
            return Outcome.failed(topic_id, p.partition, ErrorCode.invalid_request, uninitialized)
        if cur is not None:
            if fence_leader and p.leader_epoch != -1 and cur.leader_epoch > p.leader_epoch:
                return Outcome.failed(topic_id, p.partition, ErrorCode.fenced_leader_epoch)
            if fence_state and p.state_epoch != -1 and cur.state_epoch > p.state_epoch:
                return Outcome.failed(topic_id, p.partition, ErrorCode.fenced_state_epoch)
        if self._partition_exists is not None and not self._partition_exists(topic_id, p.partition):
            return Outcome.failed(topic_id, p.partition, ErrorCode.unknown_topic_or_partition)
        return _Target(ps, key, cur)

    def _state_record(self, key: SharePartitionKey, cur: KeyState, leader_epoch: int, state_epoch: int,
                      start_offset: int, delivery_complete_count: int, batches: tuple[StateBatch, ...]
                      ) -> tuple[int, SharePartitionKey, Any]:
        """ShareCoordinatorShard.generateShareStateRecord: an update, or a snapshot once
        the cadence says so. -1 fields keep the current value."""
        o = cur.offset
        if cur.updates_since_snapshot >= self.config.snapshot_update_records_per_snapshot:
            start = o.start_offset if start_offset == -1 else start_offset
            now = self._clock()
            return SHARE_SNAPSHOT_RECORD_TYPE, key, ShareSnapshotValue(
                snapshot_epoch=o.snapshot_epoch + 1,
                state_epoch=o.state_epoch if state_epoch == -1 else state_epoch,
                leader_epoch=o.leader_epoch if leader_epoch == -1 else leader_epoch,
                start_offset=start,
                create_timestamp=now,
                write_timestamp=now,
                state_batches=combine_state_batches(o.state_batches, batches, start),
                delivery_complete_count=(o.delivery_complete_count
                                         if delivery_complete_count == NO_DELIVERY_COMPLETE_COUNT
                                         else delivery_complete_count),
            )
        return SHARE_UPDATE_RECORD_TYPE, key, ShareUpdateValue(
            snapshot_epoch=o.snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            state_batches=combine_state_batches((), batches, start_offset),
            delivery_complete_count=delivery_complete_count,
        )

    # --- one share-partition each ----------------------------------------------------
    def _initialize_one(self, group_id: str, topic_id: uuid.UUID | None, p: Any) -> tuple[Outcome, list]:
        t = self._check(group_id, topic_id, p, fence_state=True)
        if isinstance(t, Outcome):
            return t, []
        # A fresh start: nothing of the previous state is merged in.
        now = self._clock()
        value = ShareSnapshotValue(
            snapshot_epoch=0 if t.cur is None else t.cur.offset.snapshot_epoch + 1,
            state_epoch=p.state_epoch,
            leader_epoch=UNINITIALIZED_EPOCH,
            start_offset=p.start_offset,
            create_timestamp=now,
            write_timestamp=now,
            # No start offset yet: no lag either. An explicit one (AlterShareGroupOffsets)
            # starts counting completed deliveries from there.
            delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT if p.start_offset == UNINITIALIZED_START_OFFSET else 0,
        )
        return Outcome(topic_id, p.partition), [(SHARE_SNAPSHOT_RECORD_TYPE, t.key, value)]

    def _read_one(self, group_id: str, topic_id: uuid.UUID | None, p: Any) -> tuple[Outcome, list]:
        t = self._check(group_id, topic_id, p, uninitialized=READ_UNINITIALIZED_SHARE_PARTITION, fence_leader=True)
        if isinstance(t, Outcome):
            return t, []
        assert t.cur is not None
        o = t.cur.offset
        outcome = Outcome(topic_id, p.partition, fields={
            "state_epoch": o.state_epoch, "start_offset": o.start_offset, "state_batches": o.state_batches})
        if p.leader_epoch == -1 or t.cur.leader_epoch == p.leader_epoch:
            return outcome, []
        # A new leader's first read: record its epoch, which fences the old leader's writes.
        log.info("share-partition %s: leader epoch %d recorded by a read", t.key.coordinator_key, p.leader_epoch)
        return outcome, [self._state_record(t.key, t.cur, p.leader_epoch, o.state_epoch, o.start_offset,
                                            NO_DELIVERY_COMPLETE_COUNT, ())]

    def _write_one(self, group_id: str, topic_id: uuid.UUID | None, p: Any) -> tuple[Outcome, list]:
        t = self._check(group_id, topic_id, p, uninitialized=WRITE_UNINITIALIZED_SHARE_PARTITION,
                        fence_leader=True, fence_state=True)
        if isinstance(t, Outcome):
            return t, []
        assert t.cur is not None
        batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in p.state_batches)
        dcc = getattr(p, "delivery_complete_count", NO_DELIVERY_COMPLETE_COUNT)  # v1+ (KIP-1226)
        return Outcome(topic_id, p.partition), [
            self._state_record(t.key, t.cur, p.leader_epoch, p.state_epoch, p.start_offset, dcc, batches)]

    def _delete_one(self, group_id: str, topic_id: uuid.UUID | None, p: Any) -> tuple[Outcome, list]:
        t = self._check(group_id, topic_id, p)
        if isinstance(t, Outcome):
            return t, []
        if t.cur is None:
            return Outcome(topic_id, p.partition), []  # nothing to delete, nothing written
        return Outcome(topic_id, p.partition), [(SHARE_SNAPSHOT_RECORD_TYPE, t.key, None)]

    def _summary_one(self, group_id: str, topic_id: uuid.UUID | None, p: Any) -> tuple[Outcome, list]:
        t = self._check(group_id, topic_id, p)
        if isinstance(t, Outcome):
            return t, []
        if t.cur is None:
            # PartitionFactory's defaults for a share-partition with no state.
            fields = {"state_epoch": DEFAULT_STATE_EPOCH, "leader_epoch": DEFAULT_LEADER_EPOCH,
                      "start_offset": UNINITIALIZED_START_OFFSET,
                      "delivery_complete_count": NO_DELIVERY_COMPLETE_COUNT}
        else:
            o = t.cur.offset
            fields = {"state_epoch": o.state_epoch, "leader_epoch": o.leader_epoch,
                      "start_offset": o.start_offset, "delivery_complete_count": o.delivery_complete_count}
        return Outcome(topic_id, p.partition, fields=fields), []
