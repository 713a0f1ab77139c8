"""CreateTopics (key 19), v2-7: partitions, replication factor (at most the live brokers),
or manual assignments naming live brokers, configs; TopicAdmin creates them all or nothing
(in cluster mode, in one ZooKeeper transaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.CREATE_TOPICS, versions=(2, 7))
async def create_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    default_rf = broker.config["default.replication.factor"]
    may_create = may_describe_configs = None
    if broker.authorizer is not None:
        # KafkaApis.handleCreateTopicsRequest: CREATE on the cluster or on each topic; the
        # configs (and counts) of a created topic only with DESCRIBE_CONFIGS on it
        names = [t.name for t in req.topics]
        may_create = (set(names) if access.authorize_cluster(broker, ctx, AclOperation.CREATE) else
                      access.authorized_names(broker, ctx, AclOperation.CREATE, ResourceType.TOPIC, names))
        may_describe_configs = access.authorized_names(broker, ctx, AclOperation.DESCRIBE_CONFIGS,
                                                       ResourceType.TOPIC, names)
    for t in req.topics:
        entry = dict(name=t.name, topic_id=None, error_code=ErrorCode.none, error_message=None,
                     num_partitions=-1, replication_factor=-1, configs=None)
        if may_create is not None:
            if t.name not in may_describe_configs:
                entry["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            if t.name not in may_create:
                entry.update(error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.",
                             configs=[])
                results.append(entry)
                continue
        try:
            assignment = None
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise KafkaError(ErrorCode.invalid_request,
                                     "Both numPartitions or replicationFactor and replicasAssignments were set.")
                broker.topics.check_assignments(t.assignments)
                assignment = {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
                if sorted(assignment) != list(range(len(assignment))):
                    raise KafkaError(ErrorCode.invalid_replica_assignment,
                                     "Partitions should be a consecutive 0-based integer sequence")
                partitions = len(t.assignments)
                rf = len(t.assignments[0].broker_ids)
            else:
                partitions = broker.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
                rf = default_rf if t.replication_factor == -1 else t.replication_factor
            configs = {c.name: c.value for c in t.configs}
            if any(v is None for v in configs.values()):
                raise KafkaError(ErrorCode.invalid_config, "Null value not supported for topic configs")
            info = await broker.topics.create_topic(t.name, partitions, configs, validate_only=req.validate_only,
                                              replication_factor=rf, assignment=assignment)
            entry.update(num_partitions=partitions, replication_factor=rf,
                         topic_id=None if req.validate_only else info.topic_id,
                         configs=broker.configs.topic_config_entries(info))
            if may_describe_configs is not None and t.name not in may_describe_configs:
                entry.update(num_partitions=-1, replication_factor=-1, configs=[])
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
            if may_create is not None:
                entry["topic_config_error_code"] = ErrorCode.none
        results.append(entry)
    return make(apis.response_type(ApiKey.CREATE_TOPICS, ctx.version), throttle_time=0, topics=results)
