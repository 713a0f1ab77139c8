"""What every coordinator driver does on the event loop (the group and the transaction
coordinators are pure state machines with an injected clock and log): turn an
operation's ``respond`` callback into a value or an awaitable for the connection, hold the
answer until the records the operation wrote are replicated (Kafka appends
coordinator records with acks=all), and run the core's timers when it says they are due.
An answer whose records did not reach the ISR (leadership moved, or the wait timed out)
is never a success: it carries the error Kafka's coordinators map the append's error to.
A core that acts on its writes' outcome (``tracks_writes``: the group coordinator shows a
committed offset only once its record is) hears of each append's, through
:meth:`CoordinatorShell.write_settled`, before the answers of the operation are released;
appends made outside a request (timers) are settled in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from coordinator.loader import LoadItem, TxnMarker
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.records import iter_headers, iter_records, parse_control_batch
from storage.log import PartitionLog

from .replica.manager import ReplicaManager
from .topic_admin import TopicAdmin

TopicPartition = tuple[str, int]

_log = logging.getLogger("krait.coordinators")


def now_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorShell:
    """Subclasses provide ``next_deadline_ms()`` and ``poll()`` of their core, and record
    each append of the running operation with :meth:`appended`."""

    #: whether :meth:`write_settled` tells the core of each append's outcome
    tracks_writes = False

    def __init__(self, replicas: ReplicaManager, commit_timeout_s: float, log: logging.Logger) -> None:
        self.replicas = replicas
        self.commit_timeout_s = commit_timeout_s
        self.log = log
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._stopped = False
        #: (partition, next offset, leader epoch) of appends made by the current call
        self._appended: list[tuple[TopicPartition, int, int]] = []
        #: background waits for appends no answer waits for
        self._settling: set[asyncio.Task] = set()

    # --- to implement ---------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        raise NotImplementedError

    def poll(self) -> None:
        raise NotImplementedError

    def write_settled(self, tp: TopicPartition, end: int, epoch: int, code: ErrorCode) -> None:
        """(``tracks_writes``) The append to ``tp`` ending at ``end``, made at leader
        ``epoch``, is committed (``code`` NONE) or failed; runs as one step of the core."""

    # --- appends --------------------------------------------------------------------------
    def appended(self, tp: TopicPartition, next_offset: int) -> None:
        """Note an append of the running operation: its answer waits for the ISR to have it."""
        self._appended.append((tp, next_offset, self.replicas.leader_epoch_of(*tp)))

    def uncommitted(self) -> list[tuple[TopicPartition, int, int]]:
        """Earlier appends not yet replicated that an answer read from the core's state may
        reflect, as (partition, log end, leader epoch): such an answer waits for them, as
        Kafka 4's coordinators answer only from committed state. None by default."""
        return []

    # --- the internal topic -------------------------------------------------------------------
    @staticmethod
    def create_internal_topic(topics: TopicAdmin, name: str, partitions: int, replication_factor: int,
                              configs: dict[str, str]) -> None:
        """Create a coordinator's topic on first use, as Kafka does, with the configured
        replication factor but never more than the live brokers (nor a min.insync.replicas
        above it: a single broker must still write its coordinator's state). Another broker
        creating it a moment earlier is fine. On ZooKeeper the creation runs in the
        background (the write is off the event loop): the coordinator's
        partitions have no leader until it lands, which FindCoordinator answers with
        COORDINATOR_NOT_AVAILABLE, as Kafka does while it creates the topic."""
        rf = max(1, min(replication_factor, len(topics.live_brokers())))
        if int(configs.get("min.insync.replicas", 1)) > rf:
            configs = {**configs, "min.insync.replicas": str(rf)}
        try:
            topics.ensure_created(name, partitions, configs, replication_factor=rf)
        except KafkaError as exc:
            if exc.error_code != ErrorCode.topic_already_exists:
                raise

    # --- calling the core -----------------------------------------------------------------
    @contextlib.contextmanager
    def operation(self) -> Iterator[list[tuple[TopicPartition, int, int]]]:
        """One step of the core (a request, a timer, a load): yields the list that collects
        its appends, so that nothing written by an earlier step is waited for again."""
        appended: list[tuple[TopicPartition, int, int]] = []
        self._appended = appended
        try:
            yield appended
        finally:
            self._appended = []

    def call(self, op: Callable[..., None], req: Any, **kwargs: Any) -> Any:
        """Run one core operation; returns the response, or a Future of it."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def respond(resp: Any) -> None:
            if not fut.done():
                fut.set_result(resp)

        with self.operation() as appended:
            op(req, respond, **kwargs)
        self.reschedule()
        appended = appended or self.uncommitted()
        if appended:
            return self._after_replication(fut, appended)
        if fut.done():
            return fut.result()
        return fut

    async def replicated(self, appended: list[tuple[TopicPartition, int, int]]) -> bool:
        """Wait until the ISR holds these appends (or the commit timeout); True when it does."""
        return not await self._not_replicated(appended)

    async def _not_replicated(self, appended: list[tuple[TopicPartition, int, int]]) -> dict[TopicPartition, ErrorCode]:
        codes = await self.replicas.wait_for_high_watermark(appended, self.commit_timeout_s)
        bad = {tp: c for tp, c in codes.items() if c != ErrorCode.none}
        if bad:
            self.log.warning("coordinator records not replicated: %s",
                             {f"{t}-{p}": c.name for (t, p), c in bad.items()})
        return bad

    async def _after_replication(self, fut: asyncio.Future, appended: list) -> Any:
        bad = await self._not_replicated(appended)
        # the core learns the outcome first: what the answer says is done shows before it goes
        self.settle(appended, bad)
        resp = await fut
        if not bad:
            return resp
        # GroupMetadataManager / TransactionStateManager: a leader that lost the partition
        # says NOT_COORDINATOR (the client looks the coordinator up again), anything else
        # (a timeout, too few replicas) COORDINATOR_NOT_AVAILABLE; both are retried
        moved = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error} & set(bad.values())
        return with_error(resp, ErrorCode.not_coordinator if moved else ErrorCode.coordinator_not_available)

    # --- outcome of appends ----------------------------------------------------------------
    def settle(self, appended: list[tuple[TopicPartition, int, int]], bad: dict[TopicPartition, ErrorCode]) -> None:
        """Report each append's outcome (``bad``: the partitions whose wait failed) to the
        core, as one step of it; what that step appends is settled in the background."""
        if not self.tracks_writes or self._stopped:
            return
        with self.operation() as more:
            for tp, end, epoch in appended:
                try:
                    self.write_settled(tp, end, epoch, bad.get(tp, ErrorCode.none))
                except Exception:
                    self.log.exception("reporting the outcome of an append to %s-%d failed", *tp)
        self.reschedule()
        self.settle_later(more)

    def settle_later(self, appended: list[tuple[TopicPartition, int, int]]) -> None:
        """Wait for these appends in the background, then :meth:`settle` them."""
        if not appended or not self.tracks_writes or self._stopped:
            return
        self.background(self._settle(appended))

    async def _settle(self, appended: list[tuple[TopicPartition, int, int]]) -> None:
        self.settle(appended, await self._not_replicated(appended))

    def background(self, coro: Any) -> None:
        """Run ``coro`` on the loop, cancelled at :meth:`stop`."""
        task = asyncio.ensure_future(coro)
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    # --- timers ---------------------------------------------------------------------------
    def reschedule(self) -> None:
        if self._stopped:
            return
        nxt = self.next_deadline_ms()
        if nxt is None:
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + max(0.0, (nxt - now_ms()) / 1000)
        if self._timer is not None and self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._fire)

    def reschedule_soon(self) -> None:
        try:
            self.reschedule()
        except RuntimeError:
            pass  # no running loop (tools opening storage): nothing to schedule

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        appended: list[tuple[TopicPartition, int, int]] = []
        try:
            with self.operation() as appended:
                self.poll()
        except Exception:
            self.log.exception("coordinator timer failed")
        self.reschedule()
        self.settle_later(appended)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._settling):
            task.cancel()


def with_error(resp: Any, code: ErrorCode) -> Any:
    """``resp`` (a kio response) with every error code that says NONE, at any depth, set to
    ``code``: what the operation did is not to be taken as done."""
    if not dataclasses.is_dataclass(resp) or isinstance(resp, type):
        return resp
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(resp):
        value = getattr(resp, f.name)
        if f.name == "error_code" or f.name.endswith("_error_code"):
            if value == ErrorCode.none:
                changes[f.name] = code
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            changes[f.name] = tuple(with_error(v, code) for v in value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = with_error(value, code)
    return dataclasses.replace(resp, **changes) if changes else resp


def read_partition(plog: PartitionLog, end: int | None = None, start: int | None = None) -> Iterator[LoadItem]:
    """What a coordinator replays from its internal topic, from ``start`` (default: the log
    start) up to ``end`` (default: the high watermark): (offset, key, value, producer id,
    transactional) per record, and a TxnMarker per COMMIT/ABORT control batch. A damaged
    batch is logged and skipped: it must never stop the broker."""
    offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
    end = plog.high_watermark if end is None else end
    while offset < end:
        region = plog.read(offset, 8 << 20, max_offset=end)
        if region is None or region.length == 0:
            break
        last = yield from load_items(region.read(), offset, str(plog))
        if last <= offset:
            break
        offset = last


def load_items(data: bytes | bytearray | memoryview, offset: int, where: str) -> Generator[LoadItem, None, int]:
    """:func:`read_partition`'s items of the whole batches in ``data`` (as a log read or a
    fetch returns them), from ``offset`` on; returns the offset after the last batch."""
    last = offset
    for pos, h in iter_headers(data):
        last = h.next_offset
        if h.is_control:
            if h.producer_id >= 0 and h.base_offset >= offset:
                try:
                    marker = parse_control_batch(data, pos)
                except ProtocolError as exc:
                    _log.warning("skipping unreadable control batch at offset %d of %s: %s", h.base_offset, where, exc)
                    continue
                if marker is not None:
                    yield TxnMarker(h.base_offset, h.producer_id, marker.commit)
            continue
        txn = h.is_transactional
        try:
            for rec in iter_records(data, pos):
                if rec.offset >= offset:
                    yield rec.offset, rec.key, rec.value, h.producer_id, txn
        except ProtocolError as exc:
            # A damaged batch in the offsets log must never stop the broker.
            _log.warning("skipping undecodable batch at offset %d of %s: %s", h.base_offset, where, exc)
    return last
