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
their handlers for other brokers and directly by this broker's share-partitions;
:class:`SharePersister` sends each call where its coordinator is.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError
from protocol.records import build_batch
from share_coordinator import SHARE_GROUP_STATE_TOPIC, Result, ShareCoordinator, ShareCoordinatorConfig
from share_coordinator.responses import Api, Outcome, build_response

from ..cluster.broker_channel import CHANNEL_FAILURES, BrokerChannel
from ..coordinator_shell import CoordinatorShell, now_ms, read_partition
from ..replica.share_state import PersistedBatch, StateWrite
from ..security import access
from ..security.operations import AclOperation
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

    def op(self, api_key: int) -> Callable[[Any], Result]:
        """The core's operation for a state API."""
        c = self.coordinator
        return {ApiKey.INITIALIZE_SHARE_GROUP_STATE: c.initialize_state, ApiKey.READ_SHARE_GROUP_STATE: c.read_state,
                ApiKey.WRITE_SHARE_GROUP_STATE: c.write_state, ApiKey.DELETE_SHARE_GROUP_STATE: c.delete_state,
                ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: c.read_state_summary}[api_key]

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


_APIS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: Api.INITIALIZE, ApiKey.READ_SHARE_GROUP_STATE: Api.READ,
         ApiKey.WRITE_SHARE_GROUP_STATE: Api.WRITE, ApiKey.DELETE_SHARE_GROUP_STATE: Api.DELETE,
         ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: Api.SUMMARY}


async def serve_state_request(broker: Broker, ctx: Any, api_key: int, req: Any) -> Any:
    """A state API from another broker's share-partitions (Kafka's KafkaApis handlers):
    CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition."""
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.CLUSTER_ACTION):
        outcomes = [Outcome.failed(t.topic_id, p.partition, ErrorCode.cluster_authorization_failed)
                    for t in req.topics for p in t.partitions]
        return build_response(_APIS[api_key], ctx.version, outcomes)
    driver = broker.share_coordinator
    return await driver.handle(driver.op(api_key), req)


def _error(code: int, message: str | None) -> KafkaError:
    return KafkaError(ErrorCode(code), message)


#: the versions this broker sends the state APIs at (Kafka 4.2's)
_VERSIONS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0, ApiKey.READ_SHARE_GROUP_STATE: 0,
             ApiKey.WRITE_SHARE_GROUP_STATE: 1, ApiKey.DELETE_SHARE_GROUP_STATE: 0,
             ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 1}


class SharePersister:
    """Kafka's DefaultStatePersister: the share-partitions' state calls, sent to the share
    coordinator of each key, the leader of its __share_group_state partition. When that is
    this broker the driver answers at once; else the state API goes over a broker channel
    (a NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE answer is retried a few times while
    leadership settles, as Kafka's persister does). Errors are KafkaErrors."""

    RETRIES = 10
    BACKOFF_S = 0.2

    def __init__(self, driver: ShareCoordinatorDriver) -> None:
        self.driver = driver
        broker = driver.broker
        self._channel = BrokerChannel(broker.node_id, broker.cluster.endpoint_of,
                                      security=broker.cluster.inter_broker_security)

    async def _call(self, api_key: int, group_id: str, topic_id: uuid.UUID, partition: int, fields: dict) -> Any:
        """One share-partition's answer (a PartitionResult) to a state API; KafkaError with
        its error code when it has one."""
        d = self.driver
        d.ensure_topic()
        last: Any = None
        for attempt in range(self.RETRIES):
            _p, leader = d.coordinator_of(group_id, topic_id, partition)
            version = _VERSIONS[api_key]
            if leader == d.broker.node_id:
                req = make(apis.request_type(api_key, version), **fields)
                resp = await d.handle(d.op(api_key), req)
            elif leader >= 0:
                try:
                    resp = await self._channel.request(leader, api_key, version, **fields)
                except CHANNEL_FAILURES as exc:
                    log.info("share coordinator %d unreachable (%s): retrying", leader, exc)
                    resp = None
            else:
                resp = None
            if resp is not None:
                last = resp.results[0].partitions[0]
                if last.error_code == ErrorCode.none:
                    return last
                if last.error_code not in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                                           ErrorCode.coordinator_load_in_progress):
                    raise _error(last.error_code, last.error_message)
            await asyncio.sleep(self.BACKOFF_S * (attempt + 1))
        if last is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "The share coordinator cannot be reached.")
        raise _error(last.error_code, last.error_message)

    @staticmethod
    def _fields(group_id: str, topic_id: uuid.UUID, partition: dict) -> dict:
        return dict(group_id=group_id, topics=[dict(topic_id=topic_id, partitions=[partition])])

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PersistedState:
        fields = self._fields(group_id, topic_id, dict(partition=partition, leader_epoch=leader_epoch))
        try:
            r = await self._call(ApiKey.READ_SHARE_GROUP_STATE, group_id, topic_id, partition, fields)
        except KafkaError as exc:
            if exc.error_code != ErrorCode.invalid_request:
                raise
            # never initialised (the group coordinator had not, or its initialisation was
            # lost): a new share-partition starts from the reset policy
            await self.initialize(group_id, topic_id, partition, state_epoch=0, start_offset=-1)
            r = await self._call(ApiKey.READ_SHARE_GROUP_STATE, group_id, topic_id, partition, fields)
        return PersistedState(r.state_epoch, r.start_offset, tuple(
            PersistedBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in r.state_batches))

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                         start_offset: int) -> None:
        await self._call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, group_id, topic_id, partition, self._fields(
            group_id, topic_id, dict(partition=partition, state_epoch=state_epoch, start_offset=start_offset)))

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, write: StateWrite) -> None:
        await self._call(ApiKey.WRITE_SHARE_GROUP_STATE, group_id, topic_id, partition, self._fields(
            group_id, topic_id, dict(
                partition=partition, state_epoch=write.state_epoch, leader_epoch=write.leader_epoch,
                start_offset=write.start_offset, delivery_complete_count=write.delivery_complete_count,
                state_batches=[dict(first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in write.state_batches])))

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Any:
        """ReadShareGroupStateSummary's PartitionResult (start offset -1: no state yet)."""
        return await self._call(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group_id, topic_id, partition, self._fields(
            group_id, topic_id, dict(partition=partition, leader_epoch=-1)))

    async def delete(self, group_id: str, topic_id: uuid.UUID, partitions: list[int]) -> None:
        for p in partitions:
            await self._call(ApiKey.DELETE_SHARE_GROUP_STATE, group_id, topic_id, p,
                             self._fields(group_id, topic_id, dict(partition=p)))
