"""ShareGroupHeartbeat (key 76), v1: KIP-932 share groups. A member joins (epoch 0),
heartbeats and leaves (epoch -1); the coordinator answers its member epoch, its assignment
when it (re)joined or the assignment changed, and the heartbeat interval
(coordinator/share/heartbeat.py). READ on the group, as Kafka checks."""

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


@handles(ApiKey.SHARE_GROUP_HEARTBEAT, versions=(1, 1))
def share_group_heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, error_message=None,
                            member_epoch=0, heartbeat_interval=0)
    groups = broker.groups.ready()
    # Kafka reports the member's host as InetAddress.toString() does: "/ip"
    return groups.call(groups.coordinator.share_group_heartbeat, req, client_id=ctx.client_id,
                       client_host=f"/{ctx.client_host}")
