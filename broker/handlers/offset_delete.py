"""OffsetDelete (key 47), v0: delete a group's committed offsets for partitions it no longer
subscribes to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.OFFSET_DELETE, versions=(0, 0))
def offset_delete(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.offset_delete, req)
    # KafkaApis.handleOffsetDeleteRequest: DELETE on the group, READ on each topic
    if not access.authorize(broker, ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, topics=[])
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in req.topics])
    if len(allowed) == len({t.name for t in req.topics}):
        return groups.call(groups.coordinator.offset_delete, req)
    denied = [dict(name=t.name, partitions=[dict(partition_index=p.partition_index,
                                                 error_code=ErrorCode.topic_authorization_failed)
                                            for p in t.partitions]) for t in req.topics if t.name not in allowed]
    result = groups.call(groups.coordinator.offset_delete,
                         access.replace(req, topics=tuple(t for t in req.topics if t.name in allowed)))

    def merge(resp: Any) -> Any:
        if resp.error_code != ErrorCode.none:
            return resp
        return response_for(req, error_code=resp.error_code, topics=denied + list(resp.topics))

    return access.then(result, merge)
