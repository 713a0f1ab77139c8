"""SyncGroup (key 14), v0-5: the leader hands in the assignment, every member gets its share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.SYNC_GROUP, versions=(0, 5))
def sync_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.sync_group, req)
