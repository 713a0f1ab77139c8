"""DescribeGroups (key 15), v0-5: state, protocol and members of groups, with the group's
authorized operations when asked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType, authorized_operations
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_GROUPS, versions=(0, 5))
def describe_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.describe_groups, req,
                           authorized_operations=lambda _group: authorized_operations(ResourceType.GROUP))
    # Kafka: the groups the caller may not DESCRIBE come first, as DescribeGroupsResponse.groupError
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.groups)
    denied = [dict(group_id=g, error_code=ErrorCode.group_authorization_failed, group_state="", protocol_type="",
                   protocol_data="", members=[]) for g in req.groups if g not in allowed]
    result = groups.call(groups.coordinator.describe_groups,
                         access.replace(req, groups=tuple(g for g in req.groups if g in allowed)),
                         authorized_operations=lambda group: access.authorized_operations_bits(
                             broker, ctx, ResourceType.GROUP, group))
    return access.then(result, lambda resp: response_for(req, groups=denied + list(resp.groups)))
