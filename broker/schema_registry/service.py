"""Runs the pure Schema Registry (``schema_registry/``) over the ``_schemas`` topic, as
Confluent's KafkaStore does: every broker replays its local replica of ``_schemas``-0 up to
the high watermark before it answers (reads are served by every broker that holds a
replica), and one broker writes: the leader of ``_schemas``-0. A write runs under one lock
on that leader: it first waits until everything in its log is replicated and applied, so a
new id is the highest id in the committed log plus one, then appends the records with
acks=all and answers once they are committed. A new leader reads its whole log before its
first write, so a failover neither reuses an id nor skips one inconsistently. Other brokers
forward writes (and, holding no replica, reads) to the leader's registry
(:mod:`broker.schema_registry.rest`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coordinator.loader import TxnMarker
from protocol.errors import ErrorCode, KafkaError
from protocol.records import build_batch
from schema_registry import errors, providers  # noqa: F401  (fills the schema types)
from schema_registry.registry import Outcome, SchemaRegistry
from schema_registry.state import RegistryState

from ..coordinator_shell import CoordinatorShell, now_ms, read_partition

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("krait.schema_registry")

#: Confluent's kafkastore.topic settings: one partition, compacted, replicated (3 at most)
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
REPLICATION_FACTOR = 3


class NotWriter(Exception):
    """This broker does not lead ``_schemas``-0: the request goes to ``leader`` (-1: none yet)."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"the schema registry's writer is broker {leader}")
        self.leader = leader


class SchemaRegistryService:
    def __init__(self, broker: Broker) -> None:
        cfg = broker.config
        self.broker = broker
        self.topic: str = cfg["krait.schema.registry.topic"]
        self.timeout_s = cfg["krait.schema.registry.timeout.ms"] / 1000
        self.core = SchemaRegistry(RegistryState(), default_compatibility=cfg["krait.schema.registry.compatibility.level"])
        self._lock = asyncio.Lock()
        #: (leader epoch, log start) of the replica the state was read from
        self._source: tuple[int, int] | None = None

    # --- reading the log ----------------------------------------------------------------------
    def _log(self):
        return self.broker.replicas.local_log(self.topic, 0) if self.broker.replicas is not None else None

    def holds_replica(self) -> bool:
        """Whether reads can be answered here: this broker holds a replica of ``_schemas``-0,
        or the topic does not exist yet (an empty registry)."""
        return self.broker.registry.get(self.topic) is None or self._log() is not None

    def catch_up(self, end: int | None = None) -> None:
        """Apply the local replica's records up to ``end`` (default: its high watermark)."""
        plog = self._log()
        state = self.core.state
        if plog is None:
            if self.broker.registry.get(self.topic) is None and state.next_offset:
                self.core.state = RegistryState()  # the topic was deleted
            return
        end = plog.high_watermark if end is None else end
        if plog.log_end_offset < state.next_offset or plog.log_start_offset > state.next_offset > 0:
            # truncated below what was applied, or deleted records gone from under it: read again
            log.info("%s-0 changed under the registry (truncation or deletion): reading it again", self.topic)
            self.core.state = state = RegistryState()
        if end <= state.next_offset:
            return
        for item in read_partition(plog, end, start=state.next_offset):
            if isinstance(item, TxnMarker):
                continue
            offset, key, value = item[0], item[1], item[2]
            state.apply(offset, key, value)
        state.next_offset = max(state.next_offset, end)

    def read(self, op: Callable[[SchemaRegistry], Any]) -> Any:
        """A read answered from this broker's replica, caught up to its high watermark."""
        self.catch_up()
        return op(self.core)

    # --- the writer -----------------------------------------------------------------------------
    def leader(self) -> int:
        """The broker that writes (the leader of ``_schemas``-0), -1 when none."""
        if self.broker.registry.get(self.topic) is None:
            return -1
        error, leader, *_ = self.broker.partition_metadata(self.topic, 0)
        return leader if error == ErrorCode.none else -1

    def _is_writer(self) -> bool:
        part = self.broker.replicas.partitions.get((self.topic, 0))
        return part is not None and part.is_leader

    async def _ensure_topic(self) -> None:
        """Create ``_schemas`` on the first write, as Confluent's KafkaStore does, and wait
        for its leader."""
        if self.broker.registry.get(self.topic) is None:
            try:
                CoordinatorShell.create_internal_topic(self.broker.topics, self.topic, 1, REPLICATION_FACTOR,
                                                       dict(TOPIC_CONFIGS))
            except KafkaError as exc:
                raise errors.store_error(f"Error in the backend data store: cannot create {self.topic}: {exc}") from None
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while self.leader() < 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)

    async def write(self, op: Callable[[SchemaRegistry], Outcome]) -> Any:
        """Run a write on the leader of ``_schemas``-0: NotWriter elsewhere."""
        await self._ensure_topic()
        if not self._is_writer():
            raise NotWriter(self.leader())
        async with self._lock:
            if not self._is_writer():
                raise NotWriter(self.leader())
            plog = self._log()
            epoch = self.broker.replicas.leader_epoch_of(self.topic, 0)
            # everything in the log (an earlier leader's last records too) is committed and
            # applied before an id is chosen
            end = plog.log_end_offset
            if plog.high_watermark < end and not await self._replicated(end, epoch):
                raise errors.operation_timeout()
            self.catch_up(end)
            outcome = op(self.core)
            if not outcome.writes:
                return outcome.body
            batch = build_batch(outcome.writes, timestamp=now_ms())
            try:
                res = self.broker.replicas.append_records(self.topic, 0, bytearray(batch), now_ms(),
                                                          internal_ok=True, acks=-1)
            except KafkaError as exc:
                if exc.error_code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
                    raise errors.invalid_schema(f"Invalid schema: too large for the {self.topic} topic "
                                                f"(max.message.bytes)") from None
                if exc.error_code == ErrorCode.not_leader_or_follower:
                    raise NotWriter(self.leader()) from None
                raise errors.store_error() from None
            if not await self._replicated(res.last_offset + 1, epoch):
                raise errors.operation_timeout("Operation timed out: the write to the schema store was not "
                                               "replicated in time")
            self.catch_up(res.last_offset + 1)
            return outcome.body

    async def _replicated(self, end: int, epoch: int) -> bool:
        codes = await self.broker.replicas.wait_for_high_watermark([((self.topic, 0), end, epoch)], self.timeout_s)
        bad = {tp: c for tp, c in codes.items() if c != ErrorCode.none}
        if bad:
            log.warning("%s-0: registry records not replicated: %s", self.topic, {str(k): c.name for k, c in bad.items()})
        return not bad
