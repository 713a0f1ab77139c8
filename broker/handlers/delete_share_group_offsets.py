"""DeleteShareGroupOffsets (key 92), v0: delete the share-group state of whole topics of an
empty share group (DeleteShareGroupState through the share coordinator) and the group's
record of their share-partitions (coordinator/share/offsets.py, broker/share/offsets_admin.py):
GROUP_ID_NOT_FOUND for an unknown group or one of another type, NON_EMPTY_GROUP while it has
members; a topic the group has no state for is UNKNOWN_TOPIC_OR_PARTITION.

KafkaApis.handleDeleteShareGroupOffsetsRequest: DELETE on the group
(GROUP_AUTHORIZATION_FAILED), then per topic READ (TOPIC_AUTHORIZATION_FAILED) and existence
(UNKNOWN_TOPIC_OR_PARTITION)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..share.offsets_admin import delete_offsets
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions=(0, 0))
async def delete_share_group_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    group_id = str(req.group_id)
    if not access.authorize(broker, ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        code = ErrorCode.group_authorization_failed
        return response_for(req, error_code=code, error_message=access.default_message(code), responses=[])
    names = list(dict.fromkeys(str(t.topic_name) for t in req.topics))
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC, names)
    refused, kept = [], []
    for name in names:
        code = (ErrorCode.topic_authorization_failed if name not in allowed
                else ErrorCode.unknown_topic_or_partition if broker.registry.get(name) is None else None)
        if code is None:
            kept.append(name)
        else:
            refused.append(dict(topic_name=name, topic_id=uuid.UUID(int=0), error_code=code,
                                error_message=access.default_message(code)))
    out = await delete_offsets(broker, group_id, kept)
    if out["error_code"] != ErrorCode.none:
        return response_for(req, error_code=out["error_code"], error_message=out["error_message"], responses=[])
    return response_for(req, error_code=ErrorCode.none, error_message=None, responses=refused + out["responses"])
