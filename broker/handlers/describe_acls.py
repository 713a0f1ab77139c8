"""DescribeAcls (key 29), v1-3 (Kafka's AclApis.handleDescribeAcls): DESCRIBE on the
cluster, then the bindings the filter matches, grouped by resource pattern in the
authorizer's order. Without an authorizer: SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import DecodeError, ErrorCode

from ..security import access
from ..security.acls import AclBinding, AclBindingFilter
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_ACLS, versions=(1, 3))
def describe_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.DESCRIBE_ACLS, ctx.version)
    auth = broker.authorizer
    if auth is None:
        return make(rtype, throttle_time=0, error_code=ErrorCode.security_disabled,
                    error_message="No Authorizer is configured on the broker", resources=[])
    if 0 in (req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type):
        raise DecodeError("Filter contain UNKNOWN elements")  # DescribeAclsRequest.validate
    if not access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        return make(rtype, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=access.UNAUTHORIZED_CLUSTER_MESSAGE, resources=[])
    acl_filter = AclBindingFilter.from_codes(req.resource_type_filter, req.resource_name_filter,
                                             req.pattern_type_filter, req.principal_filter, req.host_filter,
                                             req.operation, req.permission_type)
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, error_message=None,
                resources=resources(auth.acls(acl_filter)))


def resources(bindings: list[AclBinding]) -> list[dict]:
    """DescribeAclsResponse.aclsResources: one entry per resource pattern, its entries."""
    by_pattern: dict[Any, list[dict]] = {}
    for b in bindings:
        e = b.entry
        by_pattern.setdefault(b.pattern, []).append(dict(principal=e.principal, host=e.host,
                                                         operation=int(e.operation),
                                                         permission_type=int(e.permission_type)))
    return [dict(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type), acls=acls)
            for p, acls in by_pattern.items()]
