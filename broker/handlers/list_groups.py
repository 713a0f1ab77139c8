"""ListGroups (key 16), v0-5: every group this coordinator knows, with state and type filters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_GROUPS, versions=(0, 5))
def list_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.list_groups, req)
