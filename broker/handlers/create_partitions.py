"""CreatePartitions (key 37), v0-3: grow a topic's partition count (TopicAdmin); manual
assignments may only name this broker."""

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


@handles(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def create_partitions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    allowed = None
    if broker.authorizer is not None:
        allowed = access.authorized_names(broker, ctx, AclOperation.ALTER, ResourceType.TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        entry = dict(name=t.name, error_code=ErrorCode.none, error_message=None)
        if allowed is not None and t.name not in allowed:
            # KafkaApis.handleCreatePartitionsRequest: ALTER on the topic
            entry.update(error_code=ErrorCode.topic_authorization_failed,
                         error_message="The topic authorization is failed.")
            results.append(entry)
            continue
        try:
            broker.topics.check_assignments(t.assignments or ())
            await broker.topics.add_partitions(t.name, t.count, validate_only=req.validate_only)
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.CREATE_PARTITIONS, ctx.version), throttle_time=0, results=results)
