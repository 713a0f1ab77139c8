"""Produce: per partition, validate the batch headers and CRC32C, assign offsets and
append the bytes as received (no record is decoded, except to check keys on compacted
topics), wake parked fetches, answer. acks=0 sends nothing back (and, as in Kafka, an
error closes the connection so the client notices)."""

from __future__ import annotations

import datetime
import logging
import struct
import time
from typing import TYPE_CHECKING, Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.compression import Codec
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import iter_records, recompress, validate_batches
from storage.errors import StorageError

from ..errors import ApiError
from ..topics import INTERNAL_TOPICS
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


log = logging.getLogger("krait.produce")

# topic compression.type -> codec the broker stores ("producer" keeps what was sent)
_TOPIC_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4,
                 "zstd": Codec.ZSTD}


def append_partition(broker: Broker, topic: str, partition: int, records, now_ms: int, *, internal_ok: bool = False):
    """Validate and append one partition's records; returns the AppendResult."""
    if topic in INTERNAL_TOPICS and not internal_ok:
        raise ApiError(ErrorCode.invalid_topic_exception,
                              f"Cannot append to internal topic {topic}")
    plog = broker.logs.get(topic, partition)
    if plog is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition)
    if records is None:
        raise ApiError(ErrorCode.corrupt_message, "null records")
    cfg = plog.config
    try:
        headers = validate_batches(records)
    except ProtocolError as exc:
        raise ApiError(exc.error_code, str(exc)) from None
    for h in headers:
        if h.size > cfg.max_message_bytes:
            raise ApiError(ErrorCode.message_too_large,
                                  f"batch of {h.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}")
    if cfg.compact:
        # Compaction needs a key on every record; checking means decoding this batch,
        # which Kafka does too for compacted topics.
        try:
            pos = 0
            for h in headers:
                for rec in iter_records(records, pos):
                    if rec.key is None:
                        raise ApiError(ErrorCode.invalid_record,
                                              "Compacted topic cannot accept message without key")
                pos += h.size
        except ProtocolError as exc:
            raise ApiError(exc.error_code, str(exc)) from None
    target = _TOPIC_CODECS.get(cfg.compression_type)
    if target is not None and any(h.compression != target for h in headers):
        # compression.type set on the topic: Kafka re-encodes; off the default path
        try:
            records = recompress(records, headers, target)
            headers = validate_batches(records, from_client=False)
        except ProtocolError as exc:
            raise ApiError(exc.error_code, str(exc)) from None
    buf = records if isinstance(records, bytearray) else bytearray(records)
    try:
        result = plog.append(buf, headers, leader_epoch=0,
                             log_append_time_ms=now_ms if cfg.log_append_time else None)
    except StorageError as exc:
        raise ApiError(exc.error_code, str(exc)) from None
    if not result.duplicate:
        broker.purgatory.notify((topic, partition))
    return result


@handles(ApiKey.PRODUCE)
def produce(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    acks = req.acks
    now_ms = int(time.time() * 1000)
    bad_acks = acks not in (0, 1, -1)
    any_error = False
    topics_out = []
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            entry = dict(index=pd.index, error_code=ErrorCode.none, base_offset=-1, log_start_offset=-1)
            if bad_acks:
                entry["error_code"] = ErrorCode.invalid_required_acks
            else:
                try:
                    res = append_partition(broker, td.name, pd.index, pd.records, now_ms)
                    entry["base_offset"] = res.base_offset
                    entry["log_start_offset"] = res.log_start_offset
                    if res.log_append_time_ms >= 0:
                        entry["log_append_time"] = datetime.datetime.fromtimestamp(
                            res.log_append_time_ms / 1000, tz=datetime.UTC)
                except ApiError as exc:
                    entry["error_code"] = exc.error_code
                    entry["error_message"] = exc.message
                    any_error = True
                    if exc.error_code not in (ErrorCode.unknown_topic_or_partition,):
                        log.info("produce to %s-%d from %s rejected: %s %s", td.name, pd.index, ctx.client_id,
                                 exc.error_code.name, exc.message or "")
            parts.append(entry)
        topics_out.append(dict(name=td.name, partition_responses=parts))
    if acks == 0:
        if any_error:
            ctx.conn.close()
        return None
    return make(apis.response_type(ApiKey.PRODUCE, ctx.version), responses=topics_out, throttle_time=0)


def legacy_produce_response(header, frame: bytes) -> list[bytes] | None:
    """Produce v0-2 (advertised, like Kafka, so that old librdkafka keeps compression on)
    carries magic 0/1 message sets, which Krait does not store. Answer every partition
    with UNSUPPORTED_VERSION instead of dropping the connection, so the client reports a
    clear error. v0-2 requests are v3 without the transactional id, and v2/v3 responses
    share a layout (v1 lacks the append time, v0 also the throttle time)."""
    if header.api_version >= 3:
        return None
    body = b"\xff\xff" + bytes(memoryview(frame)[header.body_offset:])  # null transactional id
    v3 = framing.RequestHeader(header.api_key, 3, header.correlation_id, header.client_id, 0)
    req = framing.decode_request(v3, body)
    if req.acks == 0:
        return None
    out = bytearray()
    out += struct.pack(">i", len(req.topic_data))
    for td in req.topic_data:
        name = td.name.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(td.partition_data))
        for pd in td.partition_data:
            out += struct.pack(">ihq", pd.index, ErrorCode.unsupported_version, -1)
            if header.api_version >= 2:
                out += struct.pack(">q", -1)
    if header.api_version >= 1:
        out += struct.pack(">i", 0)  # throttle time
    return [struct.pack(">ii", len(out) + 4, header.correlation_id), bytes(out)]
