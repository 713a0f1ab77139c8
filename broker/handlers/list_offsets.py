"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local (-4,
v8+), latest tiered (-5, v9+), or the first offset whose timestamp is >= the one asked (via
the .timeindex). Without tiered storage the whole log is local, so -4 is the log start
offset and -5 finds nothing, as in Kafka. v10's TimeoutMs bounds remote-storage lookups,
which Krait never makes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
LEADER_EPOCH = 0
#: what Kafka answers for -5 when remote storage is off: no offset, no timestamp, epoch -1
NO_LEADER_EPOCH = -1


def lookup(plog, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) for one ListOffsets query against a partition log."""
    if timestamp == LATEST:
        return plog.high_watermark, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        return (found[0], found[1]) if found else (-1, -1)
    found = plog.offset_for_timestamp(timestamp)
    return (found[0], found[1]) if found else (-1, -1)


@handles(ApiKey.LIST_OFFSETS)
def list_offsets(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, error_code=ErrorCode.none, timestamp=-1, offset=-1,
                         leader_epoch=LEADER_EPOCH)
            plog = broker.logs.get(t.name, p.partition_index)
            if plog is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif getattr(p, "current_leader_epoch", -1) > LEADER_EPOCH:
                entry["error_code"] = ErrorCode.unknown_leader_epoch
            else:
                try:
                    entry["offset"], entry["timestamp"] = lookup(plog, p.timestamp)
                    if p.timestamp == LATEST_TIERED:
                        entry["leader_epoch"] = NO_LEADER_EPOCH
                except KafkaError as exc:
                    entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(name=t.name, partitions=parts))
    return make(apis.response_type(ApiKey.LIST_OFFSETS, ctx.version), throttle_time=0, topics=topics)


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def offset_for_leader_epoch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Every partition has had one leader epoch (0), so epoch 0 ends at the log end."""
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition=p.partition, error_code=ErrorCode.none, leader_epoch=-1, end_offset=-1)
            plog = broker.logs.get(t.topic, p.partition)
            if plog is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            elif p.current_leader_epoch > LEADER_EPOCH:
                entry["error_code"] = ErrorCode.unknown_leader_epoch
            elif p.current_leader_epoch >= 0 and p.current_leader_epoch < LEADER_EPOCH:
                entry["error_code"] = ErrorCode.fenced_leader_epoch
            elif p.leader_epoch <= LEADER_EPOCH:
                entry["leader_epoch"] = LEADER_EPOCH
                entry["end_offset"] = plog.log_end_offset
            parts.append(entry)
        topics.append(dict(topic=t.topic, partitions=parts))
    return make(apis.response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.version), throttle_time=0, topics=topics)
