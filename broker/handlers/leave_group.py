"""LeaveGroup (key 13), v0-5: members (or static members by instance id, v3+) leave a group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LEAVE_GROUP, versions=(0, 5))
def leave_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.leave_group, req)
