"""DescribeProducers: the active idempotent producers of each partition (producer id,
epoch, last sequence, last timestamp), from the partition's producer state, as
kafka-transactions.sh --describe-producers shows them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..topics import topic_name_error
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


def _partition(broker: Broker, topic: str, index: int) -> dict:
    try:
        entries = broker.replicas.active_producers(topic, index)
    except KafkaError as exc:
        return dict(partition_index=index, error_code=exc.error_code, error_message=None, active_producers=[])
    producers = [dict(producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.current_txn_first_offset) for e in entries]
    return dict(partition_index=index, error_code=ErrorCode.none, error_message=None, active_producers=producers)


@handles(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0))
def describe_producers(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None:
        return make(apis.response_type(ApiKey.DESCRIBE_PRODUCERS, ctx.version), throttle_time=0,
                    topics=[_topic_authorized(broker, ctx, t) for t in req.topics])
    topics = [dict(name=t.name, partitions=[_partition(broker, t.name, i) for i in t.partition_indexes])
              for t in req.topics]
    return make(apis.response_type(ApiKey.DESCRIBE_PRODUCERS, ctx.version), throttle_time=0, topics=topics)


def _topic_authorized(broker: Broker, ctx: RequestContext, t: Any) -> dict:
    """KafkaApis.handleDescribeProducersRequest: a valid topic name, then READ on the topic."""
    if not topic_name_error(t.name) and not access.authorize(broker, ctx, AclOperation.READ, ResourceType.TOPIC, t.name):
        code = ErrorCode.topic_authorization_failed
        return dict(name=t.name, partitions=[dict(partition_index=i, error_code=code,
                                                  error_message=access.default_message(code), active_producers=[])
                                             for i in t.partition_indexes])
    return dict(name=t.name, partitions=[_partition(broker, t.name, i) for i in t.partition_indexes])
