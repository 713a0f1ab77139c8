"""AlterPartitionReassignments (key 45, v0): start, replace or cancel (null replicas) the
reassignment of partitions to other brokers (KIP-455), on the controller (others answer
NOT_CONTROLLER, as Kafka's ZooKeeper mode); the controller completes each one once its
target replicas are in the ISR (broker.cluster.reassignment). A single node has nowhere
to move a partition: an assignment naming another broker is refused with
INVALID_REPLICA_ASSIGNMENT."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 0))
def alter_partition_reassignments(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.version)
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        # ALTER on the cluster; AlterPartitionReassignmentsRequest.getErrorResponse
        code, message = ErrorCode.cluster_authorization_failed, access.UNAUTHORIZED_CLUSTER_MESSAGE
        return make(rtype, throttle_time=0, error_code=code, error_message=message, responses=[
            dict(name=t.name, partitions=[dict(partition_index=p.partition_index, error_code=code,
                                               error_message=message) for p in t.partitions]) for t in req.topics])
    if not broker.cluster.is_controller():
        return make(rtype, throttle_time=0, error_code=ErrorCode.not_controller,
                    error_message="This is not the correct controller for this cluster.", responses=[])
    return _alter(broker, rtype, req)


async def _alter(broker: Broker, rtype, req) -> Any:
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, error_code=ErrorCode.none, error_message=None)
            try:
                replicas = None if p.replicas is None else list(p.replicas)
                await broker.cluster.reassignments.alter(t.name, p.partition_index, replicas)
            except KafkaError as exc:
                entry.update(error_code=exc.error_code, error_message=exc.message)
            parts.append(entry)
        responses.append(dict(name=t.name, partitions=parts))
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, error_message=None, responses=responses)
