"""DeleteTopics (key 20), v1-6: by name, or by topic id from v6; internal topics and
delete.topic.enable=false are refused (TopicAdmin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DELETE_TOPICS, versions=(1, 6))
async def delete_topics(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    for name, topic_id in wanted:
        entry = dict(name=name, topic_id=topic_id, error_code=ErrorCode.none, error_message=None)
        by_id = name is None and topic_id is not None
        try:
            if by_id:
                info = broker.registry.by_id.get(topic_id)
                if info is None:
                    raise KafkaError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
                name = info.name
                entry["name"] = name
            if broker.authorizer is not None:
                # KafkaApis.handleDeleteTopicsRequest: DELETE on the topic; a name the caller
                # may not DESCRIBE is not revealed for an id
                if by_id and not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    entry["name"] = None
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if not access.authorize(broker, ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                    raise KafkaError(ErrorCode.topic_authorization_failed)
            info = await broker.topics.delete_topic(name)
            entry["topic_id"] = info.topic_id
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.DELETE_TOPICS, ctx.version), throttle_time=0, responses=results)
