"""ListGroups (key 16), v0-5: every group this coordinator knows, with state and type filters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_GROUPS, versions=(0, 5))
def list_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    result = groups.call(groups.coordinator.list_groups, req)
    if broker.authorizer is None or access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        return result
    # without DESCRIBE on the cluster, only the groups the caller may describe
    return access.then(result, lambda resp: access.replace(resp, groups=tuple(
        g for g in resp.groups if access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id))))
