"""Heartbeat (key 12), v0-4: keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

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


@handles(ApiKey.HEARTBEAT, versions=(0, 4))
def heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed)
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.heartbeat, req)
