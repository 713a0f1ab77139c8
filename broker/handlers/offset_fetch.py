"""OffsetFetch (key 9), v1-9: a group's committed offsets (-1: none committed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.OFFSET_FETCH, versions=(1, 9))
def offset_fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.offset_fetch, req)
