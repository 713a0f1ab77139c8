"""OffsetDelete (key 47), v0: delete a group's committed offsets for partitions it no longer
subscribes to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.OFFSET_DELETE, versions=(0, 0))
def offset_delete(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.offset_delete, req)
