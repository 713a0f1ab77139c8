"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch, which clients
use to detect log truncation after a leader change (the ReplicaManager answers)."""

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


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(2, 4))
def offset_for_leader_epoch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    refused = []
    allowed = None
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.CLUSTER_ACTION):
        # KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION (followers) or DESCRIBE
        # on the topic (consumers, KIP-320); the refused ones are answered last
        allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          [t.topic for t in req.topics])
    for t in req.topics:
        if allowed is not None and t.topic not in allowed:
            refused.append(dict(topic=t.topic, partitions=[
                dict(partition=p.partition, error_code=ErrorCode.topic_authorization_failed, leader_epoch=-1,
                     end_offset=-1) for p in t.partitions]))
            continue
        parts = []
        for p in t.partitions:
            entry = dict(partition=p.partition, error_code=ErrorCode.none, leader_epoch=-1, end_offset=-1)
            try:
                entry["leader_epoch"], entry["end_offset"] = broker.replicas.end_offset_for_epoch(
                    t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
            except KafkaError as exc:
                entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(topic=t.topic, partitions=parts))
    return make(apis.response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.version), throttle_time=0,
                topics=topics + refused)
