"""LeaveGroup (key 13), v0-5: members (or static members by instance id, v3+) leave a group."""

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


@handles(ApiKey.LEAVE_GROUP, versions=(0, 5))
def leave_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, members=[])
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.leave_group, req)
