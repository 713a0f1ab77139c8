"""The broker shell of the share-group offset admin APIs (KIP-932): Kafka's
GroupCoordinatorService.describeShareGroupOffsets / describeShareGroupAllOffsets,
alterShareGroupOffsets and deleteShareGroupOffsets. The group coordinator decides
(coordinator/share/offsets.py); this module makes the persister calls in between
(ReadShareGroupStateSummary, InitializeShareGroupState, DeleteShareGroupState, sent to the
share coordinator wherever it is) and drops the share-partitions this broker holds whose
state was replaced, so that the next fetch reads the new state.

Lag (KIP-1226, GroupCoordinatorService.computeShareGroupLagAndBuildResponse): the
partition's latest offset (ListOffsets LATEST: the high watermark) minus the start offset
minus the delivery-complete count, computed only when the summary has no error, a start
offset and a delivery-complete count; -1 otherwise.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode, KafkaError

from ..replica.manager import LATEST
from ..security.access import default_message

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("krait.share.admin")

#: PartitionFactory's UNINITIALIZED_START_OFFSET, DEFAULT_LEADER_EPOCH, UNINITIALIZED_LAG,
#: UNINITIALIZED_DELIVERY_COMPLETE_COUNT
NO_START_OFFSET = -1
NO_LEADER_EPOCH = -1
NO_LAG = -1
NO_DELIVERY_COMPLETE_COUNT = -1


def _persister(broker: Broker) -> Any:
    if broker.share is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "Share groups are not enabled on this broker.")
    return broker.share.persister


def _latest_offset(broker: Broker, topic: str, partition: int) -> int | None:
    """The partition's latest offset when this broker leads it; None when it does not (Kafka
    asks the leader; Krait's lag is unknown then)."""
    part = broker.replicas.partitions.get((topic, partition))
    if part is None or not part.is_leader:
        return None
    return broker.replicas.list_offset(topic, partition, LATEST)[0]


async def _describe_partition(broker: Broker, group_id: str, topic_id: uuid.UUID, topic: str,
                              partition: int) -> dict[str, Any]:
    out: dict[str, Any] = dict(partition_index=partition, start_offset=NO_START_OFFSET, leader_epoch=NO_LEADER_EPOCH,
                               lag=NO_LAG, error_code=ErrorCode.none, error_message=None)
    try:
        s = await _persister(broker).summary(group_id, topic_id, partition)
    except KafkaError as exc:
        # Kafka: a summary with an error reads as no offset (start -1, default leader epoch)
        log.info("share group %s %s-%d: no state summary (%s)", group_id, topic, partition, exc)
        return out
    out.update(start_offset=int(s.start_offset), leader_epoch=int(s.leader_epoch))
    dcc = int(getattr(s, "delivery_complete_count", NO_DELIVERY_COMPLETE_COUNT))
    if s.start_offset == NO_START_OFFSET or dcc == NO_DELIVERY_COMPLETE_COUNT:
        return out
    try:
        latest = _latest_offset(broker, topic, partition)
    except KafkaError as exc:
        return dict(partition_index=partition, start_offset=0, leader_epoch=0, lag=NO_LAG,
                    error_code=exc.error_code, error_message=exc.message)
    if latest is not None:
        out["lag"] = latest - int(s.start_offset) - dcc
    return out


async def describe_offsets(broker: Broker, group_id: str, topics: list[tuple[str, list[int]]] | None
                           ) -> dict[str, Any]:
    """One group of DescribeShareGroupOffsets (``topics`` None: every share-partition the
    group initialised). Topics that do not exist answer start offset -1 with no error."""
    groups = broker.groups.ready()
    registry = broker.registry
    wanted: list[tuple[uuid.UUID, str, list[int]]] = []
    missing: list[dict[str, Any]] = []
    if topics is None:
        err, parts = groups.coordinator.share_group_initialized_partitions(group_id)
        if err is not None:
            return dict(group_id=group_id, topics=[], error_code=err, error_message=None)
        for topic_id, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
            info = registry.by_id.get(topic_id)
            if info is not None:
                wanted.append((topic_id, info.name, sorted(ps)))
    else:
        for name, ps in topics:
            info = registry.get(name)
            if info is None:
                missing.append(dict(topic_name=name, topic_id=uuid.UUID(int=0), partitions=[
                    dict(partition_index=p, start_offset=NO_START_OFFSET, leader_epoch=0, lag=NO_LAG,
                         error_code=ErrorCode.none) for p in ps]))
            else:
                wanted.append((info.topic_id, name, list(ps)))
    out = []
    for topic_id, name, ps in wanted:
        partitions = [await _describe_partition(broker, group_id, topic_id, name, p) for p in ps]
        out.append(dict(topic_name=name, topic_id=topic_id, partitions=partitions))
    return dict(group_id=group_id, topics=out + missing, error_code=ErrorCode.none, error_message=None)


async def alter_offsets(broker: Broker, group_id: str, topics: Any) -> dict[str, Any]:
    """AlterShareGroupOffsets: the response's fields (error_code, error_message, responses)."""
    groups = broker.groups.ready()
    plan = groups.coordinator.alter_share_group_offsets(group_id, topics)
    if plan.error != ErrorCode.none:
        return dict(error_code=plan.error, error_message=plan.message, responses=[])
    failed: dict[tuple[uuid.UUID, int], KafkaError] = {}
    done: dict[uuid.UUID, frozenset[int]] = {}
    persister = _persister(broker)
    for (topic_id, p), offset in sorted(plan.offsets.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        try:
            await persister.initialize(group_id, topic_id, p, state_epoch=plan.state_epoch, start_offset=offset)
        except KafkaError as exc:
            log.warning("share group %s: initialising %s-%d at offset %d failed: %s", group_id, topic_id, p,
                        offset, exc)
            failed[(topic_id, p)] = exc
            continue
        done[topic_id] = done.get(topic_id, frozenset()) | {p}
    if broker.share is not None:
        # the new state replaces what this broker's share-partitions hold
        broker.share.forget(group_id, done)
    code, write_error = await groups.write_step(groups.coordinator.share_group_offsets_altered, group_id, done)
    code = code if code != ErrorCode.none else write_error
    if code != ErrorCode.none:
        return dict(error_code=code, error_message=None, responses=[])
    responses = []
    for name, topic_id, results in plan.topics:
        parts = []
        for p, err in results:
            exc = failed.get((topic_id, p)) if topic_id is not None else None
            if exc is not None:
                parts.append(dict(partition_index=p, error_code=exc.error_code, error_message=exc.message))
            elif err != ErrorCode.none:
                parts.append(dict(partition_index=p, error_code=err,
                                  error_message="This server does not host this topic-partition."))
            else:
                parts.append(dict(partition_index=p, error_code=ErrorCode.none, error_message=None))
        responses.append(dict(topic_name=name, topic_id=topic_id or uuid.UUID(int=0), partitions=parts))
    return dict(error_code=ErrorCode.none, error_message=None, responses=responses)


async def delete_offsets(broker: Broker, group_id: str, topic_names: list[str]) -> dict[str, Any]:
    """DeleteShareGroupOffsets: the response's fields (error_code, error_message, responses)."""
    groups = broker.groups.ready()
    plan, code = await groups.write_step(groups.coordinator.delete_share_group_offsets, group_id, topic_names)
    if plan.error != ErrorCode.none:
        return dict(error_code=plan.error, error_message=plan.message, responses=[])
    if code != ErrorCode.none:
        return dict(error_code=code, error_message=None, responses=[])
    responses = []
    deleted: list[uuid.UUID] = []
    persister = _persister(broker) if plan.delete else None
    for topic_id, (name, parts) in plan.delete.items():
        try:
            await persister.delete(group_id, topic_id, sorted(parts))
        except KafkaError as exc:
            # Kafka: the topic keeps its place in DeletingTopics and answers the error's
            # default message
            responses.append(dict(topic_name=name, topic_id=topic_id, error_code=exc.error_code,
                                  error_message=default_message(exc.error_code)))
            continue
        deleted.append(topic_id)
        responses.append(dict(topic_name=name, topic_id=topic_id, error_code=ErrorCode.none, error_message=None))
        if broker.share is not None:
            broker.share.forget(group_id, {topic_id: parts})
    _, code = await groups.write_step(groups.coordinator.share_group_offsets_deleted, group_id, deleted)
    if code != ErrorCode.none:
        return dict(error_code=code, error_message=None, responses=[])
    for name, err in plan.refused:
        responses.append(dict(topic_name=name, topic_id=uuid.UUID(int=0), error_code=err,
                              error_message="This server does not host this topic-partition."))
    return dict(error_code=ErrorCode.none, error_message=None, responses=responses)
