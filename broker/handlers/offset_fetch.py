"""OffsetFetch (key 9), v1-9: a group's committed offsets (-1: none committed)."""

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


@handles(ApiKey.OFFSET_FETCH, versions=(1, 9))
def offset_fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    if broker.authorizer is None:
        return groups.call(groups.coordinator.offset_fetch, req)
    if ctx.version < 8:
        return _single_group(broker, ctx, groups, req)
    return _groups(broker, ctx, groups, req)


def _denied_topic(t: Any) -> dict:
    return dict(name=t.name, partitions=[dict(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                              metadata="", error_code=ErrorCode.topic_authorization_failed)
                                         for p in t.partition_indexes])


def _split(broker: Broker, ctx: RequestContext, topics: Any) -> tuple[Any, list[Any], set[str] | None]:
    """(the topics to ask the coordinator for, those refused, None or the DESCRIBE-able
    names of an all-topics fetch, whose answer is filtered afterwards)."""
    if topics is None:
        return None, [], None
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in topics])
    return tuple(t for t in topics if t.name in allowed), [t for t in topics if t.name not in allowed], allowed


def _visible(broker: Broker, ctx: RequestContext, topics: Any) -> list[Any]:
    names = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in topics])
    return [t for t in topics if t.name in names]


def _single_group(broker: Broker, ctx: RequestContext, groups: Any, req: Any) -> Any:
    """v1-7 (KafkaApis.handleOffsetFetchRequestFromCoordinator, one group): DESCRIBE on the
    group; topics the caller may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED when named,
    left out of an all-topics answer."""
    if not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
        return response_for(req, error_code=ErrorCode.group_authorization_failed, topics=[])
    kept, refused, _ = _split(broker, ctx, req.topics)
    result = groups.call(groups.coordinator.offset_fetch, req if not refused else access.replace(req, topics=kept))

    def merge(resp: Any) -> Any:
        if getattr(resp, "error_code", ErrorCode.none) != ErrorCode.none:
            return resp
        if req.topics is None:
            return access.replace(resp, topics=tuple(_visible(broker, ctx, resp.topics)))
        if not refused:
            return resp
        return response_for(req, error_code=ErrorCode.none, topics=list(resp.topics) + [_denied_topic(t) for t in refused])

    return access.then(result, merge)


def _groups(broker: Broker, ctx: RequestContext, groups: Any, req: Any) -> Any:
    """v8+: each group on its own, answered in the request's order."""
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                      [g.group_id for g in req.groups])
    asked = []
    refused_of: dict[int, list[Any]] = {}
    for i, g in enumerate(req.groups):
        if g.group_id not in allowed:
            continue
        kept, refused, _ = _split(broker, ctx, g.topics)
        refused_of[i] = refused
        asked.append(g if not refused else access.replace(g, topics=kept))
    if not asked:
        result: Any = None
    else:
        result = groups.call(groups.coordinator.offset_fetch, access.replace(req, groups=tuple(asked)))

    def merge(resp: Any) -> Any:
        answers = iter(resp.groups) if resp is not None else iter(())
        out = []
        for i, g in enumerate(req.groups):
            if i not in refused_of:
                out.append(dict(group_id=g.group_id, error_code=ErrorCode.group_authorization_failed, topics=[]))
                continue
            got = next(answers)
            if got.error_code != ErrorCode.none:
                out.append(got)
            elif g.topics is None:
                out.append(access.replace(got, topics=tuple(_visible(broker, ctx, got.topics))))
            else:
                out.append(response_for_group(got, refused_of[i]))
        return response_for(req, groups=out)

    def response_for_group(got: Any, refused: list[Any]) -> Any:
        if not refused:
            return got
        return dict(group_id=got.group_id, error_code=got.error_code,
                    topics=list(got.topics) + [_denied_topic(t) for t in refused])

    return merge(None) if result is None else access.then(result, merge)
