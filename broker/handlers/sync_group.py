"""SyncGroup (key 14), v0-5: the leader hands in the assignment, every member gets its share."""

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


@handles(ApiKey.SYNC_GROUP, versions=(0, 5))
def sync_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, assignment=b"")
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.sync_group, req)
