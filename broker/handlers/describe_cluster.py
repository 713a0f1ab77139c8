"""DescribeCluster (key 60), v0-1: this broker is the whole cluster and its controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import ResourceType, authorized_operations
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_CLUSTER, versions=(0, 1))
def describe_cluster(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    brokers = [dict(broker_id=bid, host=host, port=port, rack=None) for bid, host, port in broker.live_brokers(ctx.conn.listener_name)]
    return make(apis.response_type(ApiKey.DESCRIBE_CLUSTER, ctx.version), throttle_time=0,
                error_code=ErrorCode.none, error_message=None, endpoint_type=1, cluster_id=broker.registry.cluster_id,
                controller_id=broker.controller_id(), brokers=brokers,
                cluster_authorized_operations=authorized_operations(
                    ResourceType.CLUSTER, bool(req.include_cluster_authorized_operations))
                if broker.authorizer is None else
                access.cluster_operations_bits(broker, ctx, bool(req.include_cluster_authorized_operations)))
