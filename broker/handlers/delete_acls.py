"""DeleteAcls (key 31), v1-3 (Kafka's AclApis.handleDeleteAcls): ALTER on the cluster, then
per filter the bindings it matched (each filter sees the ACLs as they were before the
request, as Kafka's controller does), and the ACL set is persisted in the security store.
Without an authorizer every filter fails with SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import DecodeError, ErrorCode, KafkaError

from ..security import NO_AUTHORIZER, access
from ..security.acls import AclBindingFilter
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DELETE_ACLS, versions=(1, 3))
async def delete_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.DELETE_ACLS, ctx.version)
    auth = broker.authorizer
    if auth is None:
        results = [dict(error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER, matching_acls=[])
                   for _ in req.filters]
        return make(rtype, throttle_time=0, filter_results=results)
    if any(0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type) for f in req.filters):
        raise DecodeError("Filters contain UNKNOWN elements")  # DeleteAclsRequest.normalizeAndValidate
    if not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        return make(rtype, throttle_time=0, filter_results=[
            dict(error_code=ErrorCode.cluster_authorization_failed, error_message=access.UNAUTHORIZED_CLUSTER_MESSAGE,
                 matching_acls=[]) for _ in req.filters])
    filters = [AclBindingFilter.from_codes(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                           f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    outcome = auth.delete_acls(filters)
    failed: KafkaError | None = None
    if any(isinstance(r, list) and r for r in outcome):
        try:
            await broker.security_store.set_acls(auth.to_dicts())
        except KafkaError as exc:
            # ZooKeeper is unreachable: the store has put the authorizer back to what it
            # holds; a binding still there was not deleted (Kafka's AclDeleteResult carries
            # the error per binding)
            failed = exc

    def error(b: Any) -> tuple[ErrorCode, str | None]:
        return (failed.error_code, failed.message) if failed is not None and b in auth else (ErrorCode.none, None)

    results = []
    for r in outcome:
        if isinstance(r, list):
            results.append(dict(error_code=ErrorCode.none, error_message=None, matching_acls=[
                dict(error_code=error(b)[0], error_message=error(b)[1], resource_type=int(b.pattern.resource_type),
                     resource_name=b.pattern.name, pattern_type=int(b.pattern.pattern_type),
                     principal=b.entry.principal, host=b.entry.host, operation=int(b.entry.operation),
                     permission_type=int(b.entry.permission_type)) for b in r]))
        else:
            results.append(dict(error_code=r.error_code, error_message=r.message, matching_acls=[]))
    return make(rtype, throttle_time=0, filter_results=results)
