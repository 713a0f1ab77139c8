"""The broker's side of moving a coordinator's keys out of the partition Krait's former
placement wrote them to (coordinator/placement.py): reading that legacy partition when a
coordinator loads a partition, and deleting the moved keys there once their copies are
durable (coordinator/relocation.py, txn_coordinator/loader.py).

The legacy partition is read from this broker's replica when it holds all of it: when
this broker leads it or is in its ISR (an in-sync replica has every committed record; a
single node leads them all). Otherwise it is fetched from its leader, as a consumer
would, and the partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS until then.
The tombstones go into the legacy partition after the copies are replicated and flushed
here (with an ISR of one, the flush is what makes them durable), appended here when this
broker leads it, else produced to
its leader with Kafka's admin client id, the one client id Kafka lets write an internal
topic. Any failure leaves the legacy records in place: the next load moves them again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from coordinator.loader import LoadItem
from coordinator.placement import Relocation
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.records import build_batch

from .cluster.broker_channel import BrokerChannel
from .coordinator_shell import CoordinatorShell, load_items, now_ms, read_partition
from .topics import ADMIN_CLIENT_ID

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("krait.coordinators")

FETCH_VERSION = 12
PRODUCE_VERSION = 9
FETCH_BYTES = 8 << 20
#: between two attempts to fetch a legacy partition from its leader
RETRY_S = 1.0

_NETWORK = (OSError, ConnectionError, TimeoutError, EOFError, asyncio.IncompleteReadError, ProtocolError, KafkaError)
TopicPartition = tuple[str, int]


class LegacyPartitions:
    """One coordinator topic's legacy partitions, for its driver (``shell``). ``broker``
    says who leads a partition and how to reach that broker (None: tests of one broker)."""

    def __init__(self, shell: CoordinatorShell, topic: str, broker: Broker | None = None) -> None:
        self.shell = shell
        self.replicas = shell.replicas
        self.topic = topic
        self.broker = broker
        self._channel: BrokerChannel | None = None
        self._tasks: set[asyncio.Task] = set()
        #: partition -> the token of its load waiting for a fetch (a newer load replaces it)
        self._waiting: dict[int, object] = {}

    # --- reading ------------------------------------------------------------------------
    def local(self, partition: int) -> list[LoadItem] | None:
        """The legacy partition's records from this broker's replica, or None when that
        replica may lack committed records (neither leader nor in the ISR)."""
        plog = self.replicas.local_log(self.topic, partition)
        part = self.replicas.partitions.get((self.topic, partition))
        if plog is None or part is None or not (part.is_leader or self.replicas.broker_id in part.isr):
            return None
        return list(read_partition(plog, plog.log_end_offset))

    def fetch_then(self, partition: int, source: int, load: Callable[[list[LoadItem]], None]) -> None:
        """Fetch ``source`` from its leader, then ``load(records)`` the loading ``partition``,
        unless :meth:`cancel` (or another fetch_then for it) came first. Retries until then."""
        token = self._waiting[partition] = object()

        async def run() -> None:
            while self._waiting.get(partition) is token:
                try:
                    records = await self.fetch(source)
                except _NETWORK as exc:
                    log.info("%s-%d: fetching legacy partition %d failed (%s); retrying", self.topic, partition,
                             source, exc)
                    await asyncio.sleep(RETRY_S)
                    continue
                if self._waiting.get(partition) is token:
                    del self._waiting[partition]
                    load(records)
                return

        self._track(run())

    def cancel(self, partition: int) -> None:
        """The partition is no longer loading here: drop its pending fetch."""
        self._waiting.pop(partition, None)

    async def fetch(self, partition: int) -> list[LoadItem]:
        """Every record of the partition up to its leader's high watermark (a consumer's
        Fetch at read_uncommitted: control batches included, transactions resolved on replay)."""
        if self.broker is None:
            raise ConnectionError("no cluster to fetch from")
        items: list[LoadItem] = []
        offset = 0
        while True:
            leader = self._leader(partition)
            resp = await self.channel().request(
                leader, ApiKey.FETCH, FETCH_VERSION, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=FETCH_BYTES,
                isolation_level=0, session_id=0, session_epoch=-1, topics=[dict(topic=self.topic, partitions=[dict(
                    partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=FETCH_BYTES)])],
                forgotten_topics_data=[], rack_id="")
            if resp.error_code:
                raise KafkaError(ErrorCode(resp.error_code), "fetch refused")
            p = resp.responses[0].partitions[0]
            if p.error_code == ErrorCode.offset_out_of_range and p.log_start_offset > offset:
                offset = p.log_start_offset  # the start was deleted or compacted away
                continue
            if p.error_code:
                raise KafkaError(ErrorCode(p.error_code), f"fetching {self.topic}-{partition}")
            if offset >= p.high_watermark or not p.records:
                return items
            nxt = _collect(load_items(p.records, offset, f"{self.topic}-{partition}@{leader}"), items)
            if nxt <= offset:
                return items
            offset = nxt

    # --- deleting -------------------------------------------------------------------------
    def delete(self, moved: Relocation, copied_into: int, copies: list[tuple[TopicPartition, int, int]]) -> None:
        """Tombstone the moved keys in ``moved.source`` once the copies written into
        ``copied_into`` (``copies``: their appends) are durable."""
        records = [(k, None) for k in moved.tombstones]
        self._track(self._delete_when_durable(moved.source, copied_into, records, copies))

    async def _delete_when_durable(self, source: int, copied_into: int, records: list[tuple[bytes, None]],
                                   copies: list[tuple[TopicPartition, int, int]]) -> None:
        if copies and not await self.shell.replicated(copies):
            log.warning("%s: copies of moved keys not replicated; %s-%d keeps them", self.topic, self.topic, source)
            return
        try:
            plog = self.replicas.local_log(self.topic, copied_into)
            if plog is not None:
                plog.flush()  # the copies reach the disk before their originals go
            leader = self._leader(source)
            if leader == self.replicas.broker_id:
                res = self._append_here(source, records)
                done = await self.shell.replicated([((self.topic, source), res.last_offset + 1,
                                                     self.replicas.leader_epoch_of(self.topic, source))])
                code = ErrorCode.none if done else ErrorCode.not_enough_replicas
            else:
                code = await self._produce(leader, source, records)
        except _NETWORK as exc:
            code = getattr(exc, "error_code", ErrorCode.network_exception)
        if code != ErrorCode.none:
            log.warning("%s-%d: deleting %d moved keys failed (%s); the next load tries again", self.topic, source,
                        len(records), ErrorCode(code).name)
        else:
            log.info("%s-%d: deleted %d keys moved to their partition", self.topic, source, len(records))

    def _append_here(self, source: int, records: list[tuple[bytes, None]]) -> Any:
        batch = build_batch(records, timestamp=now_ms())
        return self.replicas.append_records(self.topic, source, bytearray(batch), now_ms(), internal_ok=True, acks=-1)

    async def _produce(self, leader: int, source: int, records: list[tuple[bytes, None]]) -> ErrorCode:
        batch = build_batch(records, timestamp=now_ms())
        resp = await self.channel().request(
            leader, ApiKey.PRODUCE, PRODUCE_VERSION, client_id=ADMIN_CLIENT_ID, transactional_id=None, acks=-1,
            timeout=int(self.shell.commit_timeout_s * 1000),
            topic_data=[dict(name=self.topic, partition_data=[dict(index=source, records=bytes(batch))])])
        return ErrorCode(resp.responses[0].partition_responses[0].error_code)

    # --- plumbing ---------------------------------------------------------------------------
    def _leader(self, partition: int) -> int:
        if self.broker is None:
            return self.replicas.broker_id
        error, leader, *_ = self.broker.partition_metadata(self.topic, partition)
        if error != ErrorCode.none or leader < 0:
            raise KafkaError(ErrorCode.leader_not_available, f"{self.topic}-{partition} has no leader")
        return leader

    def channel(self) -> BrokerChannel:
        if self._channel is None:
            if self.broker is None:
                raise ConnectionError("no other broker to reach")
            cluster = self.broker.cluster
            self._channel = BrokerChannel(self.replicas.broker_id, cluster.endpoint_of,
                                          security=cluster.inter_broker_security)
        return self._channel

    def _track(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        self._waiting.clear()
        for t in self._tasks:
            t.cancel()
        if self._channel is not None:
            self._channel.close()


def _collect(gen: Generator[LoadItem, None, int], into: list[LoadItem]) -> int:
    """Append a :func:`load_items` walk's items to ``into``; its return value."""
    while True:
        try:
            into.append(next(gen))
        except StopIteration as stop:
            return stop.value
