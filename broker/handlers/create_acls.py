"""CreateAcls (key 30), v1-3 (Kafka's AclApis.handleCreateAcls): ALTER on the cluster, then
each binding is validated and added by the authorizer (a duplicate is a success), and the
ACL set is persisted in the security store, which reloads every authorizer from it.
Without an authorizer every creation fails with SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import DecodeError, ErrorCode, KafkaError

from ..security import NO_AUTHORIZER, access
from ..security.acls import AclBinding
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.CREATE_ACLS, versions=(1, 3))
async def create_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.CREATE_ACLS, ctx.version)
    auth = broker.authorizer
    if auth is None:
        results = [dict(error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER) for _ in req.creations]
        return make(rtype, throttle_time=0, results=results)
    # CreateAclsRequest.validate: an UNKNOWN (0) code fails the request's parsing, which
    # closes the connection
    if any(0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type) for c in req.creations):
        raise DecodeError("CreatableAcls contain unknown elements")
    if not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        return make(rtype, throttle_time=0, results=[
            dict(error_code=ErrorCode.cluster_authorization_failed, error_message=access.UNAUTHORIZED_CLUSTER_MESSAGE)
            for _ in req.creations])
    try:
        bindings = [AclBinding.from_codes(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                          c.host, c.operation, c.permission_type) for c in req.creations]
    except ValueError:
        # ANY / MATCH: Java's constructors throw IllegalArgumentException, which fails the
        # whole request as UNKNOWN_SERVER_ERROR, without a message
        return make(rtype, throttle_time=0, results=[
            dict(error_code=ErrorCode.unknown_server_error, error_message=None) for _ in req.creations])
    outcome: list = auth.create_acls(bindings)
    if any(e is None for e in outcome):
        try:
            await broker.security_store.set_acls(auth.to_dicts())
        except KafkaError as exc:
            # ZooKeeper refused the write (a resource name it cannot hold) or is unreachable;
            # the store has put the authorizer back to what it holds, so the new bindings
            # that are not there did not take
            outcome = [exc if e is None and b not in auth else e for e, b in zip(outcome, bindings, strict=True)]
    results = [dict(error_code=ErrorCode.none, error_message=None) if e is None else
               dict(error_code=e.error_code, error_message=e.message) for e in outcome]
    return make(rtype, throttle_time=0, results=results)
