"""Produce: per partition, validate the batch headers and CRC32C, assign offsets and
append the bytes as received, wake parked fetches, answer. acks=0 sends nothing back
(and, as in Kafka, an error closes the connection so the client notices).

Records are walked only where Kafka's LogValidator would refuse some of them and the
batch header cannot vouch for all: keys on compacted topics, timestamps outside
message.timestamp.before/after.max.ms (only when the header's maxTimestamp or a finite
before.max.ms leaves doubt), batches being re-compressed. A batch refused because of
some records names them in the response (KIP-467 record_errors, Produce v8+), so that
clients fail those records and report the rest as collateral."""

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
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    BatchHeader,
    RecordInfo,
    recompress,
    scan_records,
    validate_batches,
)
from storage.config import LONG_MAX, LogConfig

from ..topics import INTERNAL_TOPICS
from . import handles

if TYPE_CHECKING:
    from storage.log import PartitionLog

    from ..broker import Broker
    from ..server import RequestContext


log = logging.getLogger("krait.produce")

# topic compression.type -> codec the broker stores ("producer" keeps what was sent)
_TOPIC_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4,
                 "zstd": Codec.ZSTD}


class RecordValidationError(KafkaError):
    """A batch refused because of some of its records (Kafka's RecordValidationException):
    ``record_errors`` holds (index of the record within its batch, message) in index order."""

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[tuple[int, str]],
                 log_start_offset: int):
        super().__init__(error_code, message)
        self.record_errors = record_errors
        self.log_start_offset = log_start_offset


def _java_long(v: int) -> int:
    """``v`` wrapped to a signed 64-bit value, as Java's long arithmetic prints it."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _record_errors(cfg: LogConfig, tp: str, h: BatchHeader, infos: list[RecordInfo], now_ms: int
                   ) -> tuple[ErrorCode, list[tuple[int, str]]]:
    """Kafka's LogValidator.validateRecord over one batch: a keyless record on a compacted
    topic is INVALID_RECORD, else a timestamp out of range is INVALID_TIMESTAMP. Returns
    the batch's error code (INVALID_TIMESTAMP if any record has it) and its record errors."""
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    before_ms, after_ms = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
    compact, create_time = cfg.compact, not cfg.log_append_time
    for index, r in enumerate(infos):
        if compact and r.key_size < 0:
            errors.append((index, f"Compacted topic cannot accept message without key in topic partition {tp}"))
        elif create_time and r.timestamp != -1:
            diff = now_ms - r.timestamp
            if diff > before_ms or -diff > after_ms:
                timestamp_error = True
                errors.append((index, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                                      f"The timestamp should be within [{_java_long(now_ms - before_ms)}, "
                                      f"{_java_long(now_ms + after_ms)}]"))
        elif h.is_log_append_time:
            timestamp_error = True
            errors.append((index, f"Invalid timestamp type in message DefaultRecord(offset={r.offset}, "
                                  f"timestamp={r.timestamp}, key={max(r.key_size, 0)} bytes, "
                                  f"value={max(r.value_size, 0)} bytes). Producer should not set timestamp type "
                                  "to LogAppendTime."))
    return (ErrorCode.invalid_timestamp if timestamp_error else ErrorCode.invalid_record), errors


def _validate_records(plog: PartitionLog, topic: str, partition: int, records: bytes | bytearray | memoryview,
                      headers: list[BatchHeader], now_ms: int, target_codec: int | None) -> None:
    """Refuse the partition's batches if a record in them breaks the topic's rules, the
    way Kafka does: batch by batch, indexes counted within the batch, the first batch
    with record errors reported whole (Kafka stops there too).

    Records are walked only where the header cannot rule an error out. On the default
    path (CreateTime, before.max.ms unbounded, not compacted, no re-compression) that is
    one comparison per batch: maxTimestamp against now + after.max.ms."""
    cfg = plog.config
    create_time = not cfg.log_append_time
    # No header field bounds the smallest record timestamp (deltas may be negative), so a
    # finite before.max.ms needs every batch's records; so do keys on compacted topics.
    every_batch = cfg.compact or (create_time and cfg.message_timestamp_before_max_ms != LONG_MAX)
    # LogAppendTime topics overwrite timestamps: no bound to check
    upper_ms = now_ms + cfg.message_timestamp_after_max_ms if create_time else LONG_MAX
    pos = 0
    for h in headers:
        # Clients never set the LogAppendTime bit themselves: Kafka refuses it on
        # LogAppendTime topics, and on CreateTime ones checks the maxTimestamp all the
        # batch's records then carry. Re-compressed batches are decoded anyway.
        if (every_batch or h.max_timestamp > upper_ms or h.attributes & ATTR_TIMESTAMP_TYPE
                or (target_codec is not None and h.attributes & ATTR_COMPRESSION_MASK != target_codec)):
            infos = scan_records(records, pos, h)
            code, errors = _record_errors(cfg, f"{topic}-{partition}", h, infos, now_ms)
            if errors:
                if code == ErrorCode.invalid_timestamp:
                    message = "One or more records have been rejected due to invalid timestamp"
                else:
                    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
                    message = (f"One or more records have been rejected due to {len(errors)} record errors in "
                               f"total, and only showing the first three errors at most: [{shown}]")
                raise RecordValidationError(code, message, errors, plog.log_start_offset)
        pos += h.batch_length + LOG_OVERHEAD  # (h.size, without a property call per batch)


def append_partition(broker: Broker, topic: str, partition: int, records, now_ms: int, *, internal_ok: bool = False):
    """Validate and append one partition's records; returns the AppendResult."""
    if topic in INTERNAL_TOPICS and not internal_ok:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                              f"Cannot append to internal topic {topic}")
    plog = broker.logs.get(topic, partition)
    if plog is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition)
    if records is None:
        raise KafkaError(ErrorCode.corrupt_message, "null records")
    cfg = plog.config
    headers = validate_batches(records)
    for h in headers:
        if h.size > cfg.max_message_bytes:
            raise KafkaError(ErrorCode.message_too_large,
                                  f"batch of {h.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}")
    target = _TOPIC_CODECS.get(cfg.compression_type)
    _validate_records(plog, topic, partition, records, headers, now_ms, target)
    if target is not None and any(h.compression != target for h in headers):
        # compression.type set on the topic: Kafka re-encodes; off the default path
        records = recompress(records, headers, target)
        headers = validate_batches(records, from_client=False)
    buf = records if isinstance(records, bytearray) else bytearray(records)
    result = plog.append(buf, headers, leader_epoch=0, log_append_time_ms=now_ms if cfg.log_append_time else None)
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
                except KafkaError as exc:
                    entry["error_code"] = exc.error_code
                    entry["error_message"] = exc.message
                    if isinstance(exc, RecordValidationError):
                        # make() drops both fields for versions before 8
                        entry["record_errors"] = [dict(batch_index=i, batch_index_error_message=m)
                                                  for i, m in exc.record_errors]
                        entry["log_start_offset"] = exc.log_start_offset
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
