"""DescribeShareGroupOffsets (key 90), v0-1: each share-partition's start offset and the
leader epoch the share coordinator holds, and (v1, KIP-1226) its lag; all the share-partitions
the group initialised when a group's topics are null (broker/share/offsets_admin.py).

KafkaApis.handleDescribeShareGroupOffsetsRequest: DESCRIBE on each group
(GROUP_AUTHORIZATION_FAILED); with topics named, each topic without DESCRIBE answers
TOPIC_AUTHORIZATION_FAILED per partition (start offset -1), and with topics null the topics
without DESCRIBE are left out. As in Kafka, the group is not looked up: an unknown group, or
one of another type, has no offsets (start offset -1, or no topics)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..share.offsets_admin import describe_offsets
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


async def _group(broker: Broker, ctx: RequestContext, g: Any) -> dict[str, Any]:
    group_id = str(g.group_id)
    if not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return dict(group_id=group_id, topics=[], error_code=ErrorCode.group_authorization_failed)
    if g.topics is None:
        out = await describe_offsets(broker, group_id, None)
        allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                          [t["topic_name"] for t in out["topics"]])
        out["topics"] = [t for t in out["topics"] if t["topic_name"] in allowed]
        return out
    if not g.topics:
        return dict(group_id=group_id, topics=[], error_code=ErrorCode.none)
    names = [str(t.topic_name) for t in g.topics]
    allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    out = await describe_offsets(broker, group_id, [(str(t.topic_name), [int(p) for p in t.partitions])
                                                    for t in g.topics if t.topic_name in allowed])
    if out["error_code"] != ErrorCode.none:
        return out
    denied = ErrorCode.topic_authorization_failed
    out["topics"] += [dict(topic_name=t.topic_name, topic_id=uuid.UUID(int=0), partitions=[
        dict(partition_index=p, start_offset=-1, leader_epoch=0, error_code=denied,
             error_message=access.default_message(denied)) for p in t.partitions])
        for t in g.topics if t.topic_name not in allowed]
    return out


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 1))
async def describe_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    # response_for leaves Lag out of a v0 answer
    return response_for(req, groups=[await _group(broker, ctx, g) for g in req.groups])
