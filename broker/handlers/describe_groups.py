"""DescribeGroups (key 15), v0-5: state, protocol and members of groups, with the group's
authorized operations when asked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..security.operations import ResourceType, authorized_operations
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_GROUPS, versions=(0, 5))
def describe_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return groups.call(groups.coordinator.describe_groups, req,
                       authorized_operations=lambda _group: authorized_operations(ResourceType.GROUP))
