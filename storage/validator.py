"""Validation of a producer's batches before they are appended: Kafka's LogValidator
(plus the size checks of UnifiedLog.append). Storage owns it so that every way into a
log (Produce, the group coordinator's ``__consumer_offsets`` appends) is checked once,
in one place.

:func:`validate_for_append` checks, in Kafka's order: batch headers and CRC32C
(:func:`protocol.records.validate_batches`, which also refuses control batches with
INVALID_RECORD: markers come from the transaction coordinator only, while transactional
data batches are a producer's to send), each batch's size against
``max.message.bytes``, keys on compacted topics and timestamps against
``message.timestamp.before/after.max.ms`` (KIP-467 record errors), then re-compresses to
the topic's ``compression.type`` and checks the new sizes again.

Records are walked only where Kafka's LogValidator would refuse some of them and the
batch header cannot vouch for all: keys on compacted topics, timestamps outside
before/after.max.ms (only when the header's maxTimestamp or a finite before.max.ms
leaves doubt), batches being re-compressed. A batch refused because of some records names
them (:class:`RecordValidationError`), so that clients fail those records and report the
rest as collateral.
"""

from __future__ import annotations

from dataclasses import dataclass

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

from .config import LONG_MAX, LogConfig
from .errors import RecordTooLargeError

__all__ = ["ValidatedAppend", "RecordValidationError", "validate_for_append", "TOPIC_CODECS"]

#: topic compression.type -> codec the broker stores ("producer" keeps what was sent)
TOPIC_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4,
                "zstd": Codec.ZSTD}


@dataclass(slots=True)  # not frozen: a frozen one costs 0.2 us more per append to build
class ValidatedAppend:
    """Batches ready for :meth:`storage.log.PartitionLog.append`: the bytes to write (the
    producer's own, or re-compressed) and their headers."""

    buffer: bytearray | memoryview
    headers: list[BatchHeader]


class RecordValidationError(KafkaError):
    """A batch refused because of some of its records (Kafka's RecordValidationException):
    ``record_errors`` holds (index of the record within its batch, message) in index order."""

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[tuple[int, str]],
                 log_start_offset: int) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors
        self.log_start_offset = log_start_offset


def validate_for_append(records: bytes | bytearray | memoryview, config: LogConfig, now_ms: int, *,
                        topic_partition: str, log_start_offset: int) -> ValidatedAppend:
    """Check a producer's batches for one partition against its topic's ``config`` and
    return what to append. ``topic_partition`` (``topic-partition``) appears in record
    error messages; ``log_start_offset`` goes into :class:`RecordValidationError`.

    Raises :class:`protocol.errors.KafkaError` subclasses: CorruptRecordError /
    InvalidRecordError / CompressionError from the batch checks, RecordTooLargeError,
    RecordValidationError."""
    headers = validate_batches(records, topic_partition=topic_partition)
    max_bytes = config.max_message_bytes
    _check_sizes(headers, max_bytes)
    target = TOPIC_CODECS.get(config.compression_type)
    _validate_records(records, headers, config, now_ms, target, topic_partition, log_start_offset)
    if target is not None and any(h.compression != target for h in headers):
        # compression.type set on the topic: Kafka re-encodes; off the default path. The
        # new batches may be larger than the ones sent (Kafka checks them again too).
        records = recompress(records, headers, target)
        headers = validate_batches(records, from_client=False)
        _check_sizes(headers, max_bytes)
    if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
        # the log patches offsets in place: a writable buffer (the request frame's own, see
        # broker/server.py) is used as it is, anything else is copied once
        return ValidatedAppend(records, headers)
    return ValidatedAppend(bytearray(records), headers)


def _check_sizes(headers: list[BatchHeader], max_bytes: int) -> None:
    for h in headers:
        if h.size > max_bytes:
            raise RecordTooLargeError(f"batch of {h.size} bytes exceeds max.message.bytes {max_bytes}")


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


def _validate_records(records: bytes | bytearray | memoryview, headers: list[BatchHeader], cfg: LogConfig,
                      now_ms: int, target_codec: int | None, tp: str, log_start_offset: int) -> None:
    """Refuse the partition's batches if a record in them breaks the topic's rules, the
    way Kafka does: batch by batch, indexes counted within the batch, the first batch
    with record errors reported whole (Kafka stops there too).

    Records are walked only where the header cannot rule an error out. On the default
    path (CreateTime, before.max.ms unbounded, not compacted, no re-compression) that is
    one comparison per batch: maxTimestamp against now + after.max.ms."""
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
            code, errors = _record_errors(cfg, tp, h, infos, now_ms)
            if errors:
                if code == ErrorCode.invalid_timestamp:
                    message = "One or more records have been rejected due to invalid timestamp"
                else:
                    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
                    message = (f"One or more records have been rejected due to {len(errors)} record errors in "
                               f"total, and only showing the first three errors at most: [{shown}]")
                raise RecordValidationError(code, message, errors, log_start_offset)
        pos += h.batch_length + LOG_OVERHEAD  # (h.size, without a property call per batch)
