"""DeleteRecords (key 21), v0-2: move a partition's log start offset (offset -1 means the
high watermark); the ReplicaManager does it."""

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


@handles(ApiKey.DELETE_RECORDS, versions=(0, 2))
def delete_records(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    allowed = None
    if broker.authorizer is not None:
        # KafkaApis.handleDeleteRecordsRequest: DELETE on the topic
        allowed = access.authorized_names(broker, ctx, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.none)
            if allowed is not None and t.name not in allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                parts.append(entry)
                continue
            try:
                entry["low_watermark"] = broker.replicas.delete_records(t.name, p.partition_index, p.offset)
            except KafkaError as exc:
                entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(name=t.name, partitions=parts))
    return make(apis.response_type(ApiKey.DELETE_RECORDS, ctx.version), throttle_time=0, topics=topics)
