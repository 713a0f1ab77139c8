"""AlterShareGroupOffsets (key 91), v0: new share-partition start offsets for an empty share
group, initialised in the share coordinator at a higher state epoch
(coordinator/share/offsets.py, broker/share/offsets_admin.py): GROUP_ID_NOT_FOUND for an
unknown group or one of another type, NON_EMPTY_GROUP ("The group is not empty.") while it has
members, as Kafka's ShareGroup.validateOffsetsAlterable.

KafkaApis.handleAlterShareGroupOffsetsRequest: READ on the group
(GROUP_AUTHORIZATION_FAILED for the whole request), then per topic READ
(TOPIC_AUTHORIZATION_FAILED) and existence (UNKNOWN_TOPIC_OR_PARTITION) for each of its
partitions; the topics left go to the group coordinator."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..share.offsets_admin import alter_offsets
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions=(0, 0))
async def alter_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    group_id = str(req.group_id)
    if not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        code = ErrorCode.group_authorization_failed
        return response_for(req, error_code=code, error_message=access.default_message(code), responses=[])
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC,
                                      [t.topic_name for t in req.topics])
    refused, kept = [], []
    for t in req.topics:
        code = (ErrorCode.topic_authorization_failed if t.topic_name not in allowed
                else ErrorCode.unknown_topic_or_partition if broker.registry.get(t.topic_name) is None
                else None)
        if code is None:
            kept.append(t)
            continue
        info = broker.registry.get(t.topic_name)
        refused.append(dict(topic_name=t.topic_name, topic_id=info.topic_id if info else uuid.UUID(int=0), partitions=[
            dict(partition_index=p.partition_index, error_code=code, error_message=access.default_message(code))
            for p in t.partitions]))
    out = await alter_offsets(broker, group_id, kept)
    if out["error_code"] != ErrorCode.none:
        return response_for(req, error_code=out["error_code"], error_message=out["error_message"], responses=[])
    return response_for(req, error_code=ErrorCode.none, error_message=None, responses=refused + out["responses"])
