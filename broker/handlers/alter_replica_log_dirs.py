"""AlterReplicaLogDirs (key 34), v1-2: move partitions to another of this broker's log dirs;
the LogDirs service answers at once and moves in the background (see broker/log_dirs.py)."""

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


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(1, 2))
def alter_replica_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        # KafkaApis.handleAlterReplicaLogDirsRequest: ALTER on the cluster
        code = ErrorCode.cluster_authorization_failed
        return make(apis.response_type(ApiKey.ALTER_REPLICA_LOG_DIRS, ctx.version), throttle_time=0,
                    results=[dict(topic_name=t.name, partitions=[dict(partition_index=p, error_code=code)
                                                                 for p in t.partitions])
                             for d in req.dirs for t in d.topics])
    # Kafka builds a map: a partition named under two dirs goes to the last one
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path
    results: dict[str, list[dict]] = {}
    for (topic, partition), path in wanted.items():
        code = broker.log_dirs_admin.alter(topic, partition, path)
        results.setdefault(topic, []).append(dict(partition_index=partition, error_code=code))
    return make(apis.response_type(ApiKey.ALTER_REPLICA_LOG_DIRS, ctx.version), throttle_time=0,
                results=[dict(topic_name=t, partitions=parts) for t, parts in results.items()])
