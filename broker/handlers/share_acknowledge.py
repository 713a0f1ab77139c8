"""ShareAcknowledge (key 79), v1-2: KIP-932 share groups. A member acknowledges records it
acquired (accept, release, reject, renew) in its share session, without fetching; epoch -1
acknowledges and then closes the session (the member's other records go back to the
group). Answered once the new states are durable in the share coordinator. Authorisation
as ShareFetch's: READ on the group, READ on each topic."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..share.sessions import FINAL_EPOCH, ShareSessionError
from . import handles
from .share_fetch import ShareRequest, acknowledgements, denied_topics, node_endpoints

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.SHARE_ACKNOWLEDGE, versions=(1, 2))
async def share_acknowledge(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    share = broker.share
    sr = ShareRequest(broker, ctx, req, ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge")
    if sr.refusal is not None:
        return sr.refusal
    group_id, member_id = sr.group_id, sr.member_id
    try:
        session = share.sessions.acknowledge_context(group_id, member_id, req.share_session_epoch)
    except ShareSessionError as exc:
        return sr.error(exc.code, str(exc))
    acks = acknowledgements(req.topics)
    denied = denied_topics(broker, ctx, {tid for tid, _ in acks})
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for key in acks:
        if key[0] in denied:
            errors[key] = ErrorCode.topic_authorization_failed
        elif key[0] not in broker.registry.by_id:
            errors[key] = ErrorCode.unknown_topic_id
    results = await share.acknowledge(group_id, member_id, {k: v for k, v in acks.items() if k not in errors})
    if req.share_session_epoch == FINAL_EPOCH:
        await share.release_member(group_id, member_id, list(session.partitions))
        share.sessions.remove(group_id, member_id)
    topics: dict[uuid.UUID, list[dict]] = {}
    leader_moved = False
    for key in acks:
        err = results.get(key)
        code = errors.get(key, err.error_code if err is not None else ErrorCode.none)
        leader_moved |= code == ErrorCode.not_leader_or_follower
        topics.setdefault(key[0], []).append(dict(
            partition_index=key[1], error_code=code, error_message=err.message if err is not None else None,
            current_leader=dict(leader_id=-1, leader_epoch=-1)))
    return sr.response(ErrorCode.none, None, [dict(topic_id=tid, partitions=parts) for tid, parts in topics.items()],
                       node_endpoints(broker, ctx) if leader_moved else [])
