"""DescribeTopicPartitions (KIP-966): topic metadata in pages, which Kafka 3.8+ admin
clients use for describeTopics. Kafka's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse, step for step:

* no topics asked means every topic; topics are answered in name order, starting at the
  cursor's topic (and, for that topic, at the cursor's partition);
* a page holds at most ResponsePartitionLimit partitions, capped by the broker's
  ``max.request.partition.size.limit`` (2000) and at least 1; when a topic does not fit,
  NextCursor names the first partition left out;
* topics asked for that do not exist get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
  for an illegal name); with no topics asked, nothing is reported about missing ones;
* a cursor whose topic is not among the topics asked, or with a negative partition, is an
  invalid request: every topic asked gets INVALID_REQUEST.

A single broker leads every partition (epoch 0) and is its only replica, so eligible
leader replicas (ELR) and the last known ELR are always empty.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType, authorized_operations
from ..topics import INTERNAL_TOPICS, topic_name_error
from . import handles
from .metadata import partition_entry

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

_ZERO_UUID = uuid.UUID(int=0)


def _response(ctx: RequestContext, topics: list[dict], next_cursor: dict | None = None) -> Any:
    return make(apis.response_type(ApiKey.DESCRIBE_TOPIC_PARTITIONS, ctx.version), throttle_time=0, topics=topics,
                next_cursor=next_cursor)


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, versions=(0, 0))
def describe_topic_partitions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    reg = broker.registry
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    names = reg.topics.keys() if fetch_all else {t.name for t in req.topics}
    topics = sorted(n for n in names if n >= cursor_topic)
    if (cursor is not None and not fetch_all and cursor.topic_name not in topics) or \
            (cursor is not None and cursor.partition_index < 0):
        return _response(ctx, [dict(error_code=ErrorCode.invalid_request, name=t.name, topic_id=_ZERO_UUID,
                                    is_internal=False, partitions=[]) for t in req.topics])
    limit = broker.config["max.request.partition.size.limit"]
    remaining = max(min(limit, req.response_partition_limit), 1)
    ops = authorized_operations(ResourceType.TOPIC)
    refused: list[dict] = []
    if broker.authorizer is not None:
        # DescribeTopicPartitionsRequestHandler: topics the caller may not DESCRIBE are
        # skipped, and answered TOPIC_AUTHORIZATION_FAILED after the others when named
        allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
        if not fetch_all:
            refused = [dict(error_code=ErrorCode.topic_authorization_failed, name=n, topic_id=_ZERO_UUID,
                            is_internal=False, partitions=[]) for n in topics if n not in allowed]
        topics = [n for n in topics if n in allowed]
    out: list[dict] = []
    next_cursor = None
    for name in topics:
        if remaining == 0:
            # the previous topic filled the page exactly: the next page starts with this one
            next_cursor = dict(topic_name=name, partition_index=0)
            break
        info = reg.get(name)
        if info is None:
            if not fetch_all:
                error = ErrorCode.invalid_topic_exception if topic_name_error(name) else \
                    ErrorCode.unknown_topic_or_partition
                out.append(dict(error_code=error, name=name, topic_id=_ZERO_UUID, is_internal=name in INTERNAL_TOPICS,
                                partitions=[], topic_authorized_operations=_ops(broker, ctx, name, ops)))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(info.partitions, start + remaining)
        out.append(dict(
            error_code=ErrorCode.none, name=name, topic_id=info.topic_id, is_internal=info.internal,
            topic_authorized_operations=_ops(broker, ctx, name, ops),
            partitions=[dict(partition_entry(broker, name, p), eligible_leader_replicas=(), last_known_elr=())
                        for p in range(start, upper)]))
        if upper < info.partitions:
            next_cursor = dict(topic_name=name, partition_index=upper)
            break
        remaining -= max(upper - start, 0)
    return _response(ctx, out + refused, next_cursor)


def _ops(broker: Broker, ctx: RequestContext, name: str, default: int) -> int:
    if broker.authorizer is None:
        return default
    return access.authorized_operations_bits(broker, ctx, ResourceType.TOPIC, name)
