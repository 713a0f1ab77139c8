"""DeleteGroups (key 42), v0-2: remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DELETE_GROUPS, versions=(0, 2))
def delete_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.delete_groups, req)
    names = list(dict.fromkeys(req.groups_names))
    allowed = access.authorized_names(broker, ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    denied = [dict(group_id=g, error_code=ErrorCode.group_authorization_failed) for g in names if g not in allowed]
    result = groups.call(groups.coordinator.delete_groups,
                         access.replace(req, groups_names=tuple(g for g in names if g in allowed)))
    return access.then(result, lambda resp: response_for(req, results=list(resp.results) + denied))
