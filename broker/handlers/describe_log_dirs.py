"""DescribeLogDirs (key 35), v1-4: every configured log dir with the size of its volume and,
for the requested partitions (null: all), each replica it holds: size on disk, offset lag,
and whether it is the future replica of a move in progress (the LogDirs service)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_LOG_DIRS, versions=(1, 4))
def describe_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        # KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster
        return make(apis.response_type(ApiKey.DESCRIBE_LOG_DIRS, ctx.version), throttle_time=0,
                    error_code=ErrorCode.cluster_authorization_failed, results=[])
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    return make(apis.response_type(ApiKey.DESCRIBE_LOG_DIRS, ctx.version), throttle_time=0,
                error_code=ErrorCode.none, results=broker.log_dirs_admin.describe(wanted))
