"""JoinGroup (key 11), v0-9: a member joins (or rejoins) a classic group; the coordinator
answers when the rebalance completes, so the response may be an awaitable."""

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


@handles(ApiKey.JOIN_GROUP, versions=(0, 9))
def join_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        # JoinGroupRequest.getErrorResponse
        return response_for(req, error_code=ErrorCode.group_authorization_failed, generation_id=-1,
                            protocol_name=None if ctx.version >= 7 else "", leader="", member_id="", members=[])
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.join_group, req, client_id=ctx.client_id, client_host="/" + ctx.client_host)
