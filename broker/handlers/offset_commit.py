"""OffsetCommit (key 8), v2-9: committed offsets, persisted by the group coordinator in
__consumer_offsets before the answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.OFFSET_COMMIT, versions=(2, 9))
def offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.offset_commit, req)
    return _authorized(broker, ctx, groups, req)


def _authorized(broker: Broker, ctx: RequestContext, groups: Any, req: Any) -> Any:
    """KafkaApis.handleOffsetCommitRequest: READ on the group (else every partition is
    GROUP_AUTHORIZATION_FAILED), READ on each topic (else its partitions are
    TOPIC_AUTHORIZATION_FAILED and it is not committed)."""
    if not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return response_for(req, topics=_errors(req.topics, ErrorCode.group_authorization_failed))
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in req.topics])
    denied = _errors([t for t in req.topics if t.name not in allowed], ErrorCode.topic_authorization_failed)
    if not denied:
        return groups.call(groups.coordinator.offset_commit, req)
    kept = tuple(t for t in req.topics if t.name in allowed)
    if not kept:
        return response_for(req, topics=denied)
    result = groups.call(groups.coordinator.offset_commit, access.replace(req, topics=kept))
    return access.then(result, lambda resp: response_for(req, topics=denied + list(resp.topics)))


def _errors(topics: Any, code: ErrorCode) -> list[dict]:
    return [dict(name=t.name, partitions=[dict(partition_index=p.partition_index, error_code=code)
                                          for p in t.partitions]) for t in topics]
