"""ElectLeaders: the controller elects (PREFERRED or UNCLEAN) and writes the new states to
the metadata store; another broker answers NOT_CONTROLLER, as in Kafka's ZooKeeper mode.
A partition that already has the desired leader answers ELECTION_NOT_NEEDED when named
and is left out of a request for all partitions (on a single node: every partition)."""

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

PREFERRED, UNCLEAN = 0, 1


@handles(ApiKey.ELECT_LEADERS, versions=(0, 2))
def elect_leaders(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.ELECT_LEADERS, ctx.version)
    if broker.authorizer is not None and not access.authorize_cluster(broker, ctx, AclOperation.ALTER):
        # KafkaApis.handleElectLeaders: ALTER on the cluster
        code = ErrorCode.cluster_authorization_failed
        results = [dict(topic=t.topic, partition_result=[dict(partition_id=p, error_code=code, error_message=None)
                                                         for p in t.partitions]) for t in req.topic_partitions or ()]
        return make(rtype, throttle_time=0, error_code=code, replica_election_results=results)
    election = getattr(req, "election_type", PREFERRED)
    if election not in (PREFERRED, UNCLEAN):
        return make(rtype, throttle_time=0, error_code=ErrorCode.invalid_request, replica_election_results=[])
    named = None if req.topic_partitions is None else [(t.topic, p) for t in req.topic_partitions
                                                       for p in t.partitions]
    return _elect(broker, rtype, election == UNCLEAN, named)


async def _elect(broker: Broker, rtype, unclean: bool, named) -> Any:
    outcome = await broker.cluster.elect_leaders(unclean, named)
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (code, message) in sorted(outcome.items()):
        by_topic.setdefault(topic, []).append(dict(partition_id=p, error_code=code, error_message=message))
    results = [dict(topic=t, partition_result=parts) for t, parts in by_topic.items()]
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, replica_election_results=results)
