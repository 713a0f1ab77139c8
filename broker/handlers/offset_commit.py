"""OffsetCommit (key 8), v2-9: committed offsets, persisted by the group coordinator in
__consumer_offsets before the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.OFFSET_COMMIT, versions=(2, 9))
def offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.offset_commit, req)
