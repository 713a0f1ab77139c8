"""ConsumerGroupDescribe (key 69), v0 (the versions of the JSON specs Krait follows):
consumer-protocol groups (KIP-848) with their epochs, assignor and members, each with its
current and target assignment; a classic group answers GROUP_ID_NOT_FOUND, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType, authorized_operations
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 0))
def consumer_group_describe(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.consumer_group_describe, req,
                           authorized_operations=lambda _group: authorized_operations(ResourceType.GROUP))
    # Kafka: the groups the caller may not DESCRIBE come first
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_ids)
    denied = [dict(group_id=g, error_code=ErrorCode.group_authorization_failed, error_message=None, group_state="",
                   group_epoch=0, assignment_epoch=0, assignor_name="", members=[])
              for g in req.group_ids if g not in allowed]
    result = groups.call(groups.coordinator.consumer_group_describe,
                         access.replace(req, group_ids=tuple(g for g in req.group_ids if g in allowed)),
                         authorized_operations=lambda group: access.authorized_operations_bits(
                             broker, ctx, ResourceType.GROUP, group))
    return access.then(result, lambda resp: response_for(req, groups=denied + list(resp.groups)))
