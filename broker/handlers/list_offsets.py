"""ListOffsets (key 2), v1-10: earliest (-2), latest (-1), max timestamp (-3, v7+),
earliest local (-4, v8+), latest tiered (-5, v9+), or the first offset whose timestamp is
>= the one asked (via the .timeindex). The lookups are the ReplicaManager's. v10's
TimeoutMs bounds remote-storage lookups, which Krait never makes.

Isolation (v2+; v1 has none and reads as read_uncommitted, like Kafka's default): a
consumer (replica id -1) gets offsets it can fetch, below the high watermark, or below
the last stable offset with read_committed, where latest is the LSO; any other replica id
(followers, -2 for debugging) is answered up to the log end, as Kafka does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..replica.manager import READ_UNCOMMITTED
from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

#: the replica id consumers send; others are brokers (Kafka's ListOffsetsRequest constants)
CONSUMER_REPLICA_ID = -1


@handles(ApiKey.LIST_OFFSETS, versions=(1, 10))
def list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    isolation_level: int | None = getattr(req, "isolation_level", READ_UNCOMMITTED)
    if req.replica_id != CONSUMER_REPLICA_ID:
        isolation_level = None
    topics = []
    refused = []
    allowed = None
    if broker.authorizer is not None:
        # Kafka: DESCRIBE on each topic; the refused ones are answered after the others
        allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          [t.name for t in req.topics])
    for t in req.topics:
        if allowed is not None and t.name not in allowed:
            refused.append(dict(name=t.name, partitions=[
                dict(partition_index=p.partition_index, error_code=ErrorCode.topic_authorization_failed,
                     timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions]))
            continue
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, error_code=ErrorCode.none, timestamp=-1, offset=-1,
                         leader_epoch=-1)
            try:
                entry["offset"], entry["timestamp"], entry["leader_epoch"] = broker.replicas.list_offset(
                    t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1), isolation_level)
            except KafkaError as exc:
                entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(name=t.name, partitions=parts))
    return make(apis.response_type(ApiKey.LIST_OFFSETS, ctx.version), throttle_time=0, topics=topics + refused)
