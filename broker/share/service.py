"""ShareService: ShareFetch and ShareAcknowledge on this broker (Kafka's
SharePartitionManager): share sessions, the share-partitions of the partitions this broker
leads, their durable state through a persister, lock expiry and long polls.

A share-partition (group, topic id, partition) is created at its first fetch: its state is
read through the persister (the share coordinator's ReadShareGroupState), or, for a new one,
starts where the group's ``share.auto.offset.reset`` says. A fetch reads whole batches from
the log at the share-partition's next fetch offset (up to the high watermark, or the last
stable offset under ``share.isolation.level=read_committed``), acquires what it can for the
member, and answers with those batches' bytes and the acquired ranges: the client delivers
only acquired offsets, so no record is decoded or re-encoded here. An acknowledgement (or a
lock expiry, or a member's share session closing) changes states in the pure
:class:`broker.replica.share_partition.SharePartition`, whose StateWrite is made durable
through the persister before the client hears of it; a failed write rolls the change back.

A fetch that acquires nothing waits up to its MaxWaitMs for an append to one of its
partitions or for records to come back (release, reject of a lock, expiry).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.share.membership import ShareGroupHooks, SharePartitions
from protocol.errors import ErrorCode, KafkaError
from protocol.records import CONTROL_ABORT, iter_headers, parse_control_batch

from ..group_configs import parse_share_auto_offset_reset
from ..replica.manager import EARLIEST, LATEST
from ..replica.share_partition import SharePartition
from ..replica.share_state import AbortedTxn, AckBatch, AcquiredRecords, FetchedBatch, PersistedBatch, StateWrite
from .sessions import ShareSessionCache

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("krait.share")

#: (group id, topic id, partition)
SPKey = tuple[str, uuid.UUID, int]


@dataclass
class PersistedState:
    """ReadShareGroupState's answer for one share-partition (start offset -1: never
    initialised, so ``share.auto.offset.reset`` decides)."""

    state_epoch: int = 0
    start_offset: int = -1
    batches: tuple[PersistedBatch, ...] = ()


class Persister(Protocol):
    """Kafka's Persister: where share-partition state is made durable (the share
    coordinator's __share_group_state). Errors are KafkaErrors with Kafka's codes."""

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, write: StateWrite) -> None: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> None: ...


@dataclass
class _Held:
    """A share-partition this broker serves, and its initialisation."""

    key: SPKey
    topic: str
    sp: SharePartition | None = None
    ready: asyncio.Future | None = None
    read_committed: bool = False
    #: members that acquired records here (to release on leave)
    members: set[str] = field(default_factory=set)


@dataclass
class PartitionFetch:
    """What one partition answers a ShareFetch with."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    records: bytes | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


def _fetched_batches(data: bytes, read_committed: bool) -> list[FetchedBatch]:
    """The header facts of each batch read (a control batch's marker only under
    read_committed, where aborted transactions matter)."""
    out = []
    for pos, h in iter_headers(data):
        abort = False
        if h.is_control and read_committed:
            marker = parse_control_batch(data, pos)
            abort = marker is not None and marker.control_type == CONTROL_ABORT
        out.append(FetchedBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control,
                                abort))
    return out


def _now_ms() -> int:
    return int(time.time() * 1000)


class ShareService:
    """The share-partitions of this broker and the share sessions of their members."""

    def __init__(self, broker: Broker, persister: Persister, clock: Callable[[], int] = _now_ms) -> None:
        self.broker = broker
        self.persister = persister
        self.clock = clock
        self.sessions = ShareSessionCache(broker.config["group.share.max.share.sessions"])
        self.partitions: dict[SPKey, _Held] = {}
        self._timer: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.ensure_future(self._expire_loop())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- configuration --------------------------------------------------------------------
    def _group_config(self, group_id: str) -> dict[str, Any]:
        return self.broker.configs.group_configs(group_id)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_config(group_id)["share.record.lock.duration.ms"])

    # --- share-partitions -----------------------------------------------------------------
    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.broker.registry.by_id.get(topic_id)
        return info.name if info is not None else None

    async def _partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> _Held:
        """The share-partition, initialised (KafkaError if it cannot be)."""
        key = (group_id, topic_id, partition)
        held = self.partitions.get(key)
        if held is None:
            topic = self._topic_name(topic_id)
            if topic is None:
                raise KafkaError(ErrorCode.unknown_topic_id)
            held = _Held(key, topic)
            self.partitions[key] = held
        if held.ready is None:
            held.ready = asyncio.ensure_future(self._initialise(held))
        try:
            await asyncio.shield(held.ready)
        except Exception as exc:
            # the next fetch tries again: a failed initialisation is never kept as the
            # answer to every later fetch
            if self.partitions.get(key) is held and held.ready is not None and held.ready.done():
                held.ready = None
            if isinstance(exc, KafkaError):
                raise
            log.exception("share-partition %s %s-%d: initialisation failed", group_id, held.topic, partition)
            raise KafkaError(ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}") from exc
        return held

    async def _initialise(self, held: _Held) -> None:
        group_id, topic_id, partition = held.key
        replicas = self.broker.replicas
        replicas.leader(held.topic, partition)  # NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
        epoch = replicas.leader_epoch_of(held.topic, partition)
        state = await self.persister.read(group_id, topic_id, partition, epoch)
        cfg = self._group_config(group_id)
        sp = SharePartition(self.clock, max_record_locks=int(cfg["share.partition.max.record.locks"]),
                            delivery_count_limit=int(cfg["share.delivery.count.limit"]),
                            record_lock_duration_ms=int(cfg["share.record.lock.duration.ms"]), leader_epoch=epoch)
        reset = None
        if state.start_offset < 0:
            reset = self._reset_offset(held.topic, partition, str(cfg["share.auto.offset.reset"]))
        sp.initialize(state.start_offset, state.state_epoch, state.batches, reset_offset=reset)
        held.read_committed = cfg["share.isolation.level"] == "read_committed"
        held.sp = sp
        log.info("share-partition %s %s-%d: initialised at offset %d (state epoch %d, %d state batches)",
                 group_id, held.topic, partition, sp.next_fetch_offset(), state.state_epoch, len(state.batches))

    def _reset_offset(self, topic: str, partition: int, reset: str) -> int:
        kind, duration_ms = parse_share_auto_offset_reset(reset)
        replicas = self.broker.replicas
        if kind == "earliest":
            return replicas.list_offset(topic, partition, EARLIEST)[0]
        if kind == "latest":
            return replicas.list_offset(topic, partition, LATEST)[0]
        assert duration_ms is not None
        offset = replicas.list_offset(topic, partition, self.clock() - duration_ms)[0]
        # nothing at or after that time: start at the end, as Kafka does
        return offset if offset >= 0 else replicas.list_offset(topic, partition, LATEST)[0]

    # --- fetch ----------------------------------------------------------------------------
    def _leader(self, topic: str, partition: int) -> tuple[int, int]:
        try:
            return self.broker.node_id, self.broker.replicas.leader_epoch_of(topic, partition)
        except KafkaError:
            return -1, -1

    async def _acquire(self, group_id: str, member_id: str, key: tuple[uuid.UUID, int], max_bytes: int,
                       max_records: int, batch_size: int | None, cfg: dict[str, Any]) -> PartitionFetch:
        topic_id, partition = key
        try:
            held = await self._partition(group_id, topic_id, partition)
        except KafkaError as exc:
            return PartitionFetch(exc.error_code, exc.message)
        sp = held.sp
        assert sp is not None
        # a group config altered since the share-partition started applies from this fetch
        # on, as Kafka reads the group's config at each acquisition
        sp.record_lock_duration_ms = int(cfg["share.record.lock.duration.ms"])
        sp.delivery_count_limit = int(cfg["share.delivery.count.limit"])
        sp.max_record_locks = int(cfg["share.partition.max.record.locks"])
        held.read_committed = cfg["share.isolation.level"] == "read_committed"
        leader_id, leader_epoch = self._leader(held.topic, partition)
        out = PartitionFetch(leader_id=leader_id, leader_epoch=leader_epoch)
        if not sp.can_acquire():
            return out
        replicas = self.broker.replicas
        try:
            replicas.leader(held.topic, partition)
            plog = replicas.local_log(held.topic, partition)
            if plog is None:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            offset = sp.next_fetch_offset()
            if offset < plog.log_start_offset:
                sp.update_log_start_offset(plog.log_start_offset)
                offset = sp.next_fetch_offset()
            read = replicas.read(plog, offset, max_bytes, min_one_batch=True, read_committed=held.read_committed)
        except KafkaError as exc:
            return PartitionFetch(exc.error_code, exc.message, leader_id=leader_id, leader_epoch=leader_epoch)
        if not read.records:
            return out
        batches = _fetched_batches(read.records, held.read_committed)
        aborted = ([AbortedTxn(pid, first) for pid, first in read.aborted_transactions]
                   if held.read_committed and read.aborted_transactions else None)
        result = sp.acquire(member_id, offset, batches, max_records, batch_size=batch_size,
                            aborted_transactions=aborted)
        if result.records:
            held.members.add(member_id)
            out.records = bytes(read.records)
            out.acquired = list(result.records)
        return out

    async def fetch(self, group_id: str, member_id: str, partitions: list[tuple[uuid.UUID, int]], max_wait_ms: int,
                    max_bytes: int, max_records: int, batch_size: int | None) -> dict[tuple[uuid.UUID, int],
                                                                                      PartitionFetch]:
        """Acquire records for ``member_id`` from ``partitions``; long-polls up to
        ``max_wait_ms`` while none is acquired."""
        deadline = time.monotonic() + max_wait_ms / 1000
        cfg = self._group_config(group_id)
        while True:
            out: dict[tuple[uuid.UUID, int], PartitionFetch] = {}
            budget = max_bytes
            for key in partitions:
                pf = await self._acquire(group_id, member_id, key, max(budget, 1), max_records, batch_size, cfg)
                out[key] = pf
                if pf.records:
                    budget -= len(pf.records)
            if any(pf.acquired for pf in out.values()) or any(pf.error for pf in out.values()):
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not partitions:
                return out
            tps = [(self._topic_name(tid), p) for tid, p in partitions]
            await self.broker.replicas.wait_for_appends([tp for tp in tps if tp[0] is not None],
                                                        min(remaining, 0.5))

    # --- acknowledgements -----------------------------------------------------------------
    async def _persist(self, held: _Held, write: StateWrite | None) -> None:
        """Make ``write`` durable, then hand the outcome back (KafkaError if it failed)."""
        if write is None:
            return
        sp = held.sp
        assert sp is not None
        group_id, topic_id, partition = held.key
        try:
            await self.persister.write(group_id, topic_id, partition, write)
        except KafkaError as exc:
            sp.complete_write(write, False)
            if exc.error_code == ErrorCode.fenced_state_epoch:
                # The state was re-initialised at a higher state epoch (AlterShareGroupOffsets
                # on another broker): this copy is stale. Kafka's SharePartitionManager drops a
                # fenced share-partition; the next fetch reads the new state.
                log.info("share-partition %s %s-%d: state epoch fenced, dropped", group_id, held.topic, partition)
                self.forget(group_id, {topic_id: frozenset({partition})})
            raise
        except Exception as exc:  # a persister bug must not leave the change pending forever
            sp.complete_write(write, False)
            raise KafkaError(ErrorCode.unknown_server_error, str(exc)) from exc
        sp.complete_write(write, True)
        # records may have come back: parked fetches of this partition look again
        self.broker.replicas.wake([(held.topic, partition)])

    async def acknowledge(self, group_id: str, member_id: str,
                          acks: dict[tuple[uuid.UUID, int], list[AckBatch]]) -> dict[tuple[uuid.UUID, int],
                                                                                     KafkaError | None]:
        """Apply acknowledgements; per partition None or the error."""
        out: dict[tuple[uuid.UUID, int], KafkaError | None] = {}
        pending = []
        for key, batches in acks.items():
            held = self.partitions.get((group_id, *key))
            if held is None or held.sp is None:
                out[key] = self._not_held(key)
                continue
            try:
                write = held.sp.acknowledge(member_id, batches)
            except KafkaError as exc:
                out[key] = exc
                continue
            pending.append((key, held, write))
        results = await asyncio.gather(*(self._persist(h, w) for _, h, w in pending), return_exceptions=True)
        for (key, _h, _w), r in zip(pending, results, strict=True):
            out[key] = r if isinstance(r, KafkaError) else None
            if isinstance(r, BaseException) and not isinstance(r, KafkaError):
                out[key] = KafkaError(ErrorCode.unknown_server_error, str(r))
        return out

    def _not_held(self, key: tuple[uuid.UUID, int]) -> KafkaError:
        """Why an acknowledgement finds no share-partition here: this broker does not lead
        the partition (the client looks the leader up again), or it has nothing in flight
        for the group (INVALID_RECORD_STATE, Kafka's "batch record not found")."""
        topic = self._topic_name(key[0])
        if topic is None:
            return KafkaError(ErrorCode.unknown_topic_id)
        try:
            self.broker.replicas.leader(topic, key[1])
        except KafkaError as exc:
            return exc
        return KafkaError(ErrorCode.invalid_record_state, "The share-partition holds no records of this member.")

    # --- members leaving, lock expiry -----------------------------------------------------
    async def release_member(self, group_id: str, member_id: str,
                             partitions: Iterable[tuple[uuid.UUID, int]] | None = None) -> None:
        """Give back what ``member_id`` holds (on the given partitions, or all)."""
        helds = [h for k, h in self.partitions.items() if k[0] == group_id and h.sp is not None
                 and member_id in h.members and (partitions is None or (k[1], k[2]) in set(partitions))]
        for held in helds:
            held.members.discard(member_id)
            assert held.sp is not None
            try:
                await self._persist(held, held.sp.release_member(member_id))
            except KafkaError as exc:
                log.warning("share-partition %s %s-%d: releasing member %s's records failed: %s", held.key[0],
                            held.topic, held.key[2], member_id, exc)

    def forget(self, group_id: str, partitions: SharePartitions) -> None:
        """Drop the share-partitions held here whose state was replaced or deleted
        (AlterShareGroupOffsets, DeleteShareGroupOffsets, a fenced state epoch): the next
        fetch reads their state from the share coordinator again."""
        for topic_id, parts in partitions.items():
            for p in parts:
                self.partitions.pop((group_id, topic_id, p), None)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> None:
        try:
            await self.persister.delete(group_id, topic_id, partitions)
        except KafkaError as exc:
            log.warning("deleting the share state of group %s failed: %s", group_id, exc)

    def connection_closed(self, connection: object) -> None:
        for session in self.sessions.connection_closed(connection):
            self._spawn(self.release_member(session.group_id, session.member_id))

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            now = self.clock()
            for held in list(self.partitions.values()):
                sp = held.sp
                if sp is None:
                    continue
                deadline = sp.next_deadline()
                if deadline is None or deadline > now:
                    continue
                write = sp.expire_locks(now)
                if write is not None:
                    self._spawn(self._persist_quietly(held, write))
                else:
                    self.broker.replicas.wake([(held.topic, held.key[2])])

    async def _persist_quietly(self, held: _Held, write: StateWrite) -> None:
        try:
            await self._persist(held, write)
        except KafkaError as exc:
            log.warning("share-partition %s %s-%d: writing expired locks failed: %s", held.key[0], held.topic,
                        held.key[2], exc)

    # --- leadership -----------------------------------------------------------------------
    def follow_leadership(self) -> None:
        """After every metadata change: share-partitions of partitions this broker no longer
        leads (or leads at a new epoch) go; the leader reads their state back from the share
        coordinator at its first fetch."""
        for key, held in list(self.partitions.items()):
            part = self.broker.replicas.partitions.get((held.topic, key[2]))
            epoch = held.sp.leader_epoch if held.sp is not None else None
            if part is None or not part.is_leader or (epoch is not None and part.leader_epoch != epoch):
                del self.partitions[key]

    def metrics(self) -> list[tuple[str, str, int, dict[str, int]]]:
        """(group, topic, partition, counters) of every share-partition initialised here."""
        out = []
        for (group_id, _tid, partition), held in self.partitions.items():
            sp = held.sp
            if sp is None:
                continue
            m = sp.metrics
            out.append((group_id, held.topic, partition, dict(
                in_flight_records=sp.in_flight_records, in_flight_batches=sp.in_flight_batches,
                acquired_records=m.acquired_records, redelivered_records=m.redelivered_records,
                archived_records=m.archived_records)))
        return out


class BrokerShareHooks(ShareGroupHooks):
    """What the group coordinator tells this broker about share groups: a deleted group's
    state is deleted. Work is scheduled on the loop, never run inside the coordinator's
    call."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def member_left(self, group_id: str, member_id: str) -> None:
        # Nothing here, as in Kafka, where the group coordinator may be another broker and
        # the share-partition leaders never hear of it: a member's records go back when its
        # share session closes (its last ShareFetch/ShareAcknowledge, which a client sends
        # after its leaving heartbeat, or its connection closing) or when their locks expire.
        # Releasing them here would refuse the acknowledgements of that last request.
        return None

    def group_deleted(self, group_id: str, partitions: SharePartitions) -> None:
        share = self.broker.share
        if share is None:
            return
        for key in [k for k in share.partitions if k[0] == group_id]:
            del share.partitions[key]
        for topic_id, parts in partitions.items():
            share._spawn(share.delete_state(group_id, topic_id, sorted(parts)))
