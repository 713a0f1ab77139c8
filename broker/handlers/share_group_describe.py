"""ShareGroupDescribe (key 77), v1: KIP-932 share groups with their state, epochs, assignor
and members, each with its assignment (coordinator/share/describe.py); a group of another
type answers GROUP_ID_NOT_FOUND, as in Kafka. DESCRIBE on each group, as Kafka checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..security import access
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.SHARE_GROUP_DESCRIBE, versions=(1, 1))
def share_group_describe(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return access.describe_groups_authorized(broker, ctx, req, groups.coordinator.share_group_describe, groups.call)
