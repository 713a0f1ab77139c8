"""JoinGroup (key 11), v0-9: a member joins (or rejoins) a classic group; the coordinator
answers when the rebalance completes, so the response may be an awaitable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.JOIN_GROUP, versions=(0, 9))
def join_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.join_group, req, client_id=ctx.client_id, client_host="/" + ctx.client_host)
