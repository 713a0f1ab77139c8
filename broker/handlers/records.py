"""DeleteRecords: move a partition's log start offset (offset -1 means the high watermark)."""

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


@handles(ApiKey.DELETE_RECORDS)
def delete_records(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = dict(partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.none)
            plog = broker.logs.get(t.name, p.partition_index)
            if plog is None:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                offset = plog.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > plog.high_watermark:
                    entry["error_code"] = ErrorCode.offset_out_of_range
                else:
                    try:
                        entry["low_watermark"] = plog.delete_records_before(offset)
                    except KafkaError as exc:
                        entry["error_code"] = exc.error_code
            parts.append(entry)
        topics.append(dict(name=t.name, partitions=parts))
    return make(apis.response_type(ApiKey.DELETE_RECORDS, ctx.version), throttle_time=0, topics=topics)
