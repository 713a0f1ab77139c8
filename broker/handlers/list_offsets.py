"""ListOffsets (key 2), v1-10: earliest (-2), latest (-1), max timestamp (-3, v7+),
earliest local (-4, v8+), latest tiered (-5, v9+), or the first offset whose timestamp is
>= the one asked (via the .timeindex). The lookups are the ReplicaManager's. v10's
TimeoutMs bounds remote-storage lookups, which Krait never makes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_OFFSETS, versions=(1, 10))
def list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, error_code=ErrorCode.none, timestamp=-1, offset=-1,
                         leader_epoch=-1)
            try:
                entry["offset"], entry["timestamp"], entry["leader_epoch"] = broker.replicas.list_offset(
                    t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1))
            except KafkaError as exc:
                entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(name=t.name, partitions=parts))
    return make(apis.response_type(ApiKey.LIST_OFFSETS, ctx.version), throttle_time=0, topics=topics)
