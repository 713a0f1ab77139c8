"""Drives the pure share coordinator (share_coordinator/) from the event loop: creates and
replays ``__share_group_state``, appends the coordinator's ShareSnapshot/ShareUpdate
records, answers a state request only once its records are replicated (Kafka appends them
with acks=all) and undoes a write that failed, and runs the coordinator's timers.

The coordinator of a share-partition is the leader of its ``__share_group_state``
partition: this driver loads a partition when this broker becomes its leader and unloads it
when leadership moves (:meth:`ShareCoordinatorDriver.follow_leadership`), as the group and
transaction drivers do. The five state APIs (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary) are served through :meth:`ShareCoordinatorDriver.handle`, by
their handlers for other brokers and directly by this broker's share-partitions
(:class:`LocalPersister`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest
from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest
from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest

from protocol.build import make
from protocol.errors import ErrorCode, KafkaError
from protocol.records import build_batch
from share_coordinator import SHARE_GROUP_STATE_TOPIC, Result, ShareCoordinator, ShareCoordinatorConfig

from ..coordinator_shell import CoordinatorShell, now_ms, read_partition
from ..replica.share_state import PersistedBatch, StateWrite
from .service import PersistedState

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("krait.share.coordinator")


class ShareCoordinatorDriver(CoordinatorShell):
    def __init__(self, broker: Broker) -> None:
        cfg = broker.config
        super().__init__(broker.replicas, cfg["offsets.commit.timeout.ms"] / 1000, log)
        self.broker = broker
        self.registry = broker.registry
        self.topics = broker.topics
        self.config = ShareCoordinatorConfig.from_properties(cfg.values)
        self.coordinator = ShareCoordinator(self.config, now_ms, partition_exists=self._partition_exists)
        #: the leader epoch each served partition was loaded at
        self._epochs: dict[int, int] = {}
        self.topics.internal_topic_creators[SHARE_GROUP_STATE_TOPIC] = self.ensure_topic
        self.follow_leadership()

    def _partition_exists(self, topic_id: uuid.UUID, partition: int) -> bool:
        info = self.registry.by_id.get(topic_id)
        return info is not None and 0 <= partition < info.partitions

    # --- the core's interfaces ------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        return self.coordinator.next_deadline_ms()

    def poll(self) -> None:
        for w in self.coordinator.poll():
            self.background(self._write(w))

    # --- __share_group_state --------------------------------------------------------------
    def ensure_topic(self) -> None:
        if self.registry.get(SHARE_GROUP_STATE_TOPIC) is not None:
            return
        cfg = self.config
        self.create_internal_topic(self.topics, SHARE_GROUP_STATE_TOPIC, cfg.state_topic_num_partitions,
                                   cfg.state_topic_replication_factor, cfg.topic_configs())
        self.follow_leadership()

    def follow_leadership(self) -> None:
        """After every metadata change: serve exactly the __share_group_state partitions this
        broker leads, each loaded from its log at the epoch it is led at."""
        led = {tp[1]: part.leader_epoch for tp, part in self.replicas.partitions.items()
               if tp[0] == SHARE_GROUP_STATE_TOPIC and part.is_leader}
        for p in sorted(set(self._epochs) - set(led)):
            del self._epochs[p]
            self.coordinator.unload(p)
            log.info("%s-%d moved away: unloaded", SHARE_GROUP_STATE_TOPIC, p)
        for p, epoch in sorted(led.items()):
            if self._epochs.get(p) == epoch and self.coordinator.is_loaded(p):
                continue
            self._epochs[p] = epoch
            plog = self.replicas.local_log(SHARE_GROUP_STATE_TOPIC, p)
            # the new leader's log is the truth now: all of it, up to its end
            records = [r[:3] for r in read_partition(plog, plog.log_end_offset)] if plog is not None else []
            self.coordinator.unload(p)
            self.coordinator.load_partition(p, records)
            log.info("leading %s-%d at epoch %d: loaded %d records", SHARE_GROUP_STATE_TOPIC, p, epoch, len(records))
        self.reschedule_soon()

    def coordinator_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        """(__share_group_state partition, its leader or -1) of a share-partition."""
        p = self.coordinator.partition_for(group_id, topic_id, partition)
        error, leader, *_ = self.broker.partition_metadata(SHARE_GROUP_STATE_TOPIC, p)
        return p, leader if error == ErrorCode.none else -1

    # --- requests -------------------------------------------------------------------------
    async def _write(self, w: Any) -> ErrorCode:
        """Append one core write and wait for the ISR; tell the core how it went."""
        try:
            batch = build_batch(list(w.records), timestamp=now_ms())
            res = self.replicas.append_records(SHARE_GROUP_STATE_TOPIC, w.partition, bytearray(batch), now_ms(),
                                               internal_ok=True, acks=-1)
            appended = [((SHARE_GROUP_STATE_TOPIC, w.partition), res.last_offset + 1,
                         self.replicas.leader_epoch_of(SHARE_GROUP_STATE_TOPIC, w.partition))]
        except KafkaError as exc:
            self.coordinator.write_failed(w.partition, w.write_id)
            log.warning("%s-%d: appending share state failed: %s", SHARE_GROUP_STATE_TOPIC, w.partition, exc)
            return ErrorCode.not_coordinator
        bad = await self._not_replicated(appended)
        if bad:
            self.coordinator.write_failed(w.partition, w.write_id)
            moved = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error} & set(bad.values())
            return ErrorCode.not_coordinator if moved else ErrorCode.coordinator_not_available
        self.coordinator.committed(w.partition, w.write_id, res.base_offset)
        return ErrorCode.none

    async def handle(self, op: Callable[[Any], Result], request: Any) -> Any:
        """Run one state request through the core; the answer once its records are durable."""
        self.ensure_topic()
        result = op(request)
        self.reschedule_soon()
        failed: dict[int, ErrorCode] = {}
        for w in result.writes:
            code = await self._write(w)
            if code != ErrorCode.none:
                failed[w.write_id] = code
        return result.response(failed)


def _error(code: int, message: str | None) -> KafkaError:
    return KafkaError(ErrorCode(code), message)


class LocalPersister:
    """This broker's share-partitions' persister when their share coordinator is this
    broker (a single node always; in a cluster, when this broker leads the
    __share_group_state partition of the key). Errors are KafkaErrors."""

    def __init__(self, driver: ShareCoordinatorDriver) -> None:
        self.driver = driver

    def _coordinator_here(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        _p, leader = self.driver.coordinator_of(group_id, topic_id, partition)
        if leader != self.driver.broker.node_id:
            # TODO(issue 25): reach a share coordinator on another broker with the state APIs
            raise KafkaError(ErrorCode.coordinator_not_available if leader < 0 else ErrorCode.not_coordinator,
                             "The share coordinator of this share-partition is on another broker.")

    @staticmethod
    def _one(resp: Any) -> Any:
        return resp.results[0].partitions[0]

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        d = self.driver
        d.ensure_topic()
        self._coordinator_here(group_id, topic_id, partition)
        req = make(ReadShareGroupStateRequest, group_id=group_id, topics=[dict(
            topic_id=topic_id, partitions=[dict(partition=partition, leader_epoch=leader_epoch)])])
        r = self._one(await d.handle(d.coordinator.read_state, req))
        if r.error_code == ErrorCode.invalid_request and d.coordinator.state(group_id, topic_id, partition) is None:
            # never initialised: the group coordinator had not initialised it yet (or its
            # initialisation was lost); a new share-partition starts from the reset policy
            await self.initialize(group_id, topic_id, partition, state_epoch=0, start_offset=-1)
            r = self._one(await d.handle(d.coordinator.read_state, req))
        if r.error_code != ErrorCode.none:
            raise _error(r.error_code, r.error_message)
        return PersistedState(r.state_epoch, r.start_offset, tuple(
            PersistedBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in r.state_batches))

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                         start_offset: int) -> None:
        d = self.driver
        self._coordinator_here(group_id, topic_id, partition)
        req = make(InitializeShareGroupStateRequest, group_id=group_id, topics=[dict(
            topic_id=topic_id, partitions=[dict(partition=partition, state_epoch=state_epoch,
                                                start_offset=start_offset)])])
        r = self._one(await d.handle(d.coordinator.initialize_state, req))
        if r.error_code != ErrorCode.none:
            raise _error(r.error_code, r.error_message)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, write: StateWrite) -> None:
        d = self.driver
        self._coordinator_here(group_id, topic_id, partition)
        req = make(WriteShareGroupStateRequest, group_id=group_id, topics=[dict(
            topic_id=topic_id, partitions=[dict(
                partition=partition, state_epoch=write.state_epoch, leader_epoch=write.leader_epoch,
                start_offset=write.start_offset, delivery_complete_count=write.delivery_complete_count,
                state_batches=[dict(first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in write.state_batches])])])
        r = self._one(await d.handle(d.coordinator.write_state, req))
        if r.error_code != ErrorCode.none:
            raise _error(r.error_code, r.error_message)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> None:
        d = self.driver
        req = make(DeleteShareGroupStateRequest, group_id=group_id, topics=[dict(
            topic_id=topic_id, partitions=[dict(partition=p) for p in partitions])])
        resp = await d.handle(d.coordinator.delete_state, req)
        for t in resp.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise _error(p.error_code, p.error_message)
