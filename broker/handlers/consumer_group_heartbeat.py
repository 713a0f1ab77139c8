"""ConsumerGroupHeartbeat (key 68), v0-1: the next-generation consumer group protocol
(KIP-848). A member joins, heartbeats and leaves with it; the coordinator answers its
member epoch, its assignment when that changed and the heartbeat interval. Not served
(UNSUPPORTED_VERSION) when ``group.coordinator.rebalance.protocols`` leaves out
``consumer``."""

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


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1))
def consumer_group_heartbeat(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP,
                                                              req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, error_message=None)
    groups = broker.groups.ready()
    # Kafka reports the member's host as InetAddress.toString() does: "/ip"
    return groups.call(groups.coordinator.consumer_group_heartbeat, req, client_id=ctx.client_id,
                       client_host=f"/{ctx.client_host}")
