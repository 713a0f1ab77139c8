"""ListPartitionReassignments (key 46, v0): the ongoing reassignments (replicas, adding,
removing) as the topic znodes hold them; all of them, or those of the named partitions.
Answered by the controller (NOT_CONTROLLER elsewhere); a single node has none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..cluster.reassignment import ongoing
from ..security import access
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0))
def list_partition_reassignments(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.version)
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        return make(rtype, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=access.UNAUTHORIZED_CLUSTER_MESSAGE, topics=[])
    cluster = broker.cluster
    if not cluster.is_controller():
        return make(rtype, throttle_time=0, error_code=ErrorCode.not_controller,
                    error_message="This is not the correct controller for this cluster.", topics=[])
    current = ongoing(cluster.metadata) if cluster.metadata is not None else {}
    if req.topics is not None:
        wanted = {(t.name, p) for t in req.topics for p in t.partition_indexes}
        current = {tp: r for tp, r in current.items() if tp in wanted}
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), r in sorted(current.items()):
        by_topic.setdefault(topic, []).append(dict(partition_index=p, replicas=r.replicas, adding_replicas=r.adding,
                                                   removing_replicas=r.removing))
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, error_message=None,
                topics=[dict(name=t, partitions=ps) for t, ps in by_topic.items()])
