"""CreateTopics, DeleteTopics, CreatePartitions (what kafka-topics.sh and AdminClient use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from . import handles
from .configs import topic_config_entries

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


def _check_assignments(broker: Broker, assignments) -> None:
    """Manual replica assignments may only name this broker (the whole cluster)."""
    for a in assignments:
        if any(b != broker.node_id for b in a.broker_ids):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Unknown broker in replica assignment {list(a.broker_ids)}")


@handles(ApiKey.CREATE_TOPICS)
def create_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    default_rf = broker.config["default.replication.factor"]
    for t in req.topics:
        entry = dict(name=t.name, topic_id=None, error_code=ErrorCode.none, error_message=None,
                     num_partitions=-1, replication_factor=-1, configs=None)
        try:
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise KafkaError(ErrorCode.invalid_request,
                                     "Both numPartitions or replicationFactor and replicasAssignments were set.")
                _check_assignments(broker, t.assignments)
                partitions = len(t.assignments)
                rf = len(t.assignments[0].broker_ids) if t.assignments else 1
            else:
                partitions = broker.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
                rf = default_rf if t.replication_factor == -1 else t.replication_factor
            if rf < 1:
                raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
            if rf > 1:
                raise KafkaError(ErrorCode.invalid_replication_factor,
                                 f"Unable to replicate the partition {rf} time(s): The target replication factor "
                                 f"of {rf} cannot be reached because only 1 broker(s) are registered.")
            configs = {c.name: c.value for c in t.configs}
            if any(v is None for v in configs.values()):
                raise KafkaError(ErrorCode.invalid_config, "Null value not supported for topic configs")
            info = broker.create_topic(t.name, partitions, configs, validate_only=req.validate_only)
            entry.update(num_partitions=partitions, replication_factor=1,
                         topic_id=None if req.validate_only else info.topic_id,
                         configs=topic_config_entries(broker, info))
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.CREATE_TOPICS, ctx.version), throttle_time=0, topics=results)


@handles(ApiKey.DELETE_TOPICS)
def delete_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    for name, topic_id in wanted:
        entry = dict(name=name, topic_id=topic_id, error_code=ErrorCode.none, error_message=None)
        try:
            if name is None and topic_id is not None:
                info = broker.registry.by_id.get(topic_id)
                if info is None:
                    raise KafkaError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
                name = info.name
                entry["name"] = name
            info = broker.delete_topic(name)
            entry["topic_id"] = info.topic_id
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.DELETE_TOPICS, ctx.version), throttle_time=0, responses=results)


@handles(ApiKey.CREATE_PARTITIONS)
def create_partitions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    for t in req.topics:
        entry = dict(name=t.name, error_code=ErrorCode.none, error_message=None)
        try:
            _check_assignments(broker, t.assignments or ())
            broker.add_partitions(t.name, t.count, validate_only=req.validate_only)
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.CREATE_PARTITIONS, ctx.version), throttle_time=0, results=results)
