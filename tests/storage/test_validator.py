"""storage.validator (Kafka's LogValidator) without a broker: every check, its error code,
the KIP-467 record errors (indexes within the failing batch, Kafka's messages), the
re-compression to the topic's compression.type, and which batches get their records
walked at all (the produce hot path compares one header field per batch)."""

import struct

import pytest
from crc32c import crc32c

import storage.validator as validator
from protocol.compression import Codec
from protocol.errors import CompressionError, CorruptRecordError, ErrorCode, InvalidRecordError, KafkaError
from protocol.records import HEADER_SIZE, build_batch, iter_records, parse_header, validate_batches
from storage.config import LONG_MAX, LogConfig
from storage.errors import RecordTooLargeError
from storage.validator import RecordValidationError, ValidatedAppend, validate_for_append

NOW = 1_700_000_000_000
DAY_MS = 86_400_000
TP = "orders-3"
COMPACT = LogConfig(cleanup_policy=("compact",))


def _validate(records, cfg=None, now_ms=NOW, log_start_offset=0) -> ValidatedAppend:
    return validate_for_append(records, cfg or LogConfig(), now_ms, topic_partition=TP,
                               log_start_offset=log_start_offset)


def _refused(records, cfg=None, now_ms=NOW, log_start_offset=0) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as e:
        _validate(records, cfg, now_ms, log_start_offset)
    return e.value


def _with_crc(batch: bytearray) -> bytes:
    """The batch with its batchLength and CRC32C made to fit whatever bytes it now holds."""
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def _timestamp_message(ts: int, offset: int, low: int, high: int) -> str:
    return (f"Timestamp {ts} of message with offset {offset} is out of range. "
            f"The timestamp should be within [{low}, {high}]")


# --- accepted batches --------------------------------------------------------------------


def test_valid_batches_come_back_as_sent():
    records = bytearray(build_batch([(b"k", b"v")] * 3, timestamp=NOW) + build_batch([(b"a", b"b")], timestamp=NOW))
    valid = _validate(records)
    assert valid.buffer is records  # a bytearray is appended in place, not copied
    assert valid.headers == validate_batches(records)
    assert [h.record_count for h in valid.headers] == [3, 1]
    valid = _validate(bytes(records))
    assert isinstance(valid.buffer, bytearray) and valid.buffer == records
    assert _validate(memoryview(bytes(records))).buffer == records


# --- batch header and CRC ------------------------------------------------------------------


def test_header_and_crc_checks():
    good = bytearray(build_batch([(b"k", b"v")], timestamp=NOW))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as e:
        _validate(bad_crc)
    assert e.value.error_code == ErrorCode.corrupt_message
    with pytest.raises(CorruptRecordError):
        _validate(good[:-3])  # truncated
    with pytest.raises(InvalidRecordError) as e:
        _validate(b"")
    assert e.value.error_code == ErrorCode.invalid_record
    with pytest.raises(InvalidRecordError, match="base offset 5 is not 0"):
        _validate(build_batch([(b"k", b"v")], base_offset=5))
    with pytest.raises(InvalidRecordError, match="Clients are not allowed to write control records in topic partition"):
        _validate(build_batch([(b"k", b"v")], control=True))


# --- max.message.bytes ----------------------------------------------------------------------


def test_batch_size_against_max_message_bytes():
    batch = bytearray(build_batch([(b"k", b"v" * 200)], timestamp=NOW))
    size = len(batch)
    assert _validate(batch, LogConfig(max_message_bytes=size)).headers[0].size == size
    with pytest.raises(RecordTooLargeError) as e:
        _validate(batch, LogConfig(max_message_bytes=size - 1))
    assert e.value.error_code == ErrorCode.message_too_large
    assert e.value.message == f"batch of {size} bytes exceeds max.message.bytes {size - 1}"
    # each batch on its own, not their sum
    _validate(batch + batch, LogConfig(max_message_bytes=size))


def test_size_is_checked_before_the_records():
    # Kafka's order: a too-large batch is MESSAGE_TOO_LARGE even with keyless records
    batch = build_batch([(None, b"v" * 200)], timestamp=NOW)
    with pytest.raises(RecordTooLargeError):
        _validate(batch, LogConfig(cleanup_policy=("compact",), max_message_bytes=100))


def test_size_is_checked_before_and_after_recompression():
    # sent compressed and small, stored uncompressed and too large (Kafka checks again)
    small = build_batch([(b"k", b"x" * 5000)], timestamp=NOW, compression=Codec.ZSTD)
    assert len(small) < 1000
    with pytest.raises(RecordTooLargeError, match=r"batch of \d+ bytes exceeds max.message.bytes 1000"):
        _validate(small, LogConfig(compression_type="uncompressed", max_message_bytes=1000))
    # sent too large, would fit once compressed: refused as sent
    big = build_batch([(b"k", b"x" * 5000)], timestamp=NOW)
    with pytest.raises(RecordTooLargeError):
        _validate(big, LogConfig(compression_type="zstd", max_message_bytes=1000))


# --- compaction keys ------------------------------------------------------------------------


def test_compacted_topic_names_each_keyless_record():
    batch = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4"), (None, b"5"), (None, b"6")],
                        timestamp=NOW)
    err = _refused(batch, COMPACT, log_start_offset=17)
    assert isinstance(err, KafkaError) and err.error_code == ErrorCode.invalid_record
    msg = f"Compacted topic cannot accept message without key in topic partition {TP}"
    assert err.record_errors == [(1, msg), (3, msg), (4, msg), (5, msg)]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{msg}')" for i in (1, 3, 4))
    assert err.message == ("One or more records have been rejected due to 4 record errors in total, "
                           f"and only showing the first three errors at most: [{shown}]")
    assert err.log_start_offset == 17
    # keys present: accepted; an empty key is a key
    _validate(build_batch([(b"a", b"1"), (b"", b"2")], timestamp=NOW), COMPACT)
    # not compacted: keyless records are fine
    _validate(batch)


def test_one_keyless_record_message():
    err = _refused(build_batch([(None, b"v")], timestamp=NOW), COMPACT)
    msg = f"Compacted topic cannot accept message without key in topic partition {TP}"
    assert err.record_errors == [(0, msg)]
    assert err.message == ("One or more records have been rejected due to 1 record errors in total, "
                           f"and only showing the first three errors at most: [RecordError(batchIndex=0, "
                           f"message='{msg}')]")


def test_indexes_count_within_the_first_failing_batch():
    # several batches (Kafka clients send one per partition): the index restarts at 0 in
    # every batch and the first batch with errors is reported, alone
    records = (build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=NOW)
               + build_batch([(b"a", b"1"), (b"b", b"2"), (None, b"3")], timestamp=NOW)
               + build_batch([(None, b"1")], timestamp=NOW))
    err = _refused(records, COMPACT)
    assert [i for i, _ in err.record_errors] == [2]


# --- timestamps ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
def test_timestamps_outside_before_and_after_max_ms(codec):
    cfg = LogConfig(message_timestamp_after_max_ms=60_000, message_timestamp_before_max_ms=120_000)
    ts = [NOW, NOW + DAY_MS, NOW - DAY_MS, -1, NOW + 50_000, NOW - 100_000, NOW + 61_000 + 60_000,
          NOW + 60_000, NOW - 120_000]
    err = _refused(build_batch([(b"k", b"v")] * len(ts), timestamp=ts, compression=codec), cfg)
    assert err.error_code == ErrorCode.invalid_timestamp
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    low, high = NOW - 120_000, NOW + 60_000
    # -1 (no timestamp) is not checked, and both bounds are inclusive, as in Kafka
    assert err.record_errors == [(i, _timestamp_message(ts[i], i, low, high)) for i in (1, 2, 6)]


def test_default_before_max_ms_bound_is_printed_like_kafka():
    # before.max.ms defaults to Long.MAX: Kafka prints now - Long.MAX_VALUE (wrapped as a long)
    err = _refused(build_batch([(b"k", b"v")], timestamp=NOW + DAY_MS))
    assert err.error_code == ErrorCode.invalid_timestamp
    assert err.record_errors == [(0, _timestamp_message(NOW + DAY_MS, 0, NOW - LONG_MAX, NOW + 3_600_000))]
    # the upper bound overflows too when after.max.ms is Long.MAX: never out of range
    _validate(build_batch([(b"k", b"v")], timestamp=NOW + DAY_MS),
              LogConfig(message_timestamp_after_max_ms=LONG_MAX))
    assert validator._java_long(NOW + LONG_MAX) == NOW + LONG_MAX - 2**64


def test_offsets_in_timestamp_messages_are_the_records_offsets():
    # record offsets are the batch's (gapped) ones, the index counts records
    batch = build_batch([(b"k", b"v")] * 3, timestamp=[NOW, NOW, NOW + DAY_MS], offset_deltas=[0, 1, 5])
    h = parse_header(batch)
    assert h.last_offset_delta + 1 != h.record_count  # not a client batch: check the walk only
    infos = validator.scan_records(batch, 0, h)
    code, errors = validator._record_errors(LogConfig(), TP, h, infos, NOW)
    assert code == ErrorCode.invalid_timestamp
    assert errors == [(2, _timestamp_message(NOW + DAY_MS, 5, NOW - LONG_MAX, NOW + 3_600_000))]


def test_log_append_time_topics_do_not_check_timestamps():
    cfg = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_after_max_ms=60_000,
                    message_timestamp_before_max_ms=60_000)
    _validate(build_batch([(b"k", b"v")] * 3, timestamp=[NOW + DAY_MS, NOW - DAY_MS, 1]), cfg)


@pytest.mark.parametrize("timestamp_type", ["LogAppendTime", "CreateTime"])
def test_log_append_time_flag_from_a_client(timestamp_type):
    cfg = LogConfig(message_timestamp_type=timestamp_type)
    batch = build_batch([(b"k", b"v"), (None, b"vv")], timestamp=[NOW, NOW], log_append_time=True)
    if timestamp_type == "CreateTime":
        # the records carry the batch's maxTimestamp, checked as CreateTime: fine here
        _validate(batch, cfg)
        return
    err = _refused(batch, cfg)
    assert err.error_code == ErrorCode.invalid_timestamp
    assert err.record_errors == [
        (0, f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=1 bytes, value=1 bytes). "
            "Producer should not set timestamp type to LogAppendTime."),
        (1, f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={NOW}, key=0 bytes, value=2 bytes). "
            "Producer should not set timestamp type to LogAppendTime."),
    ]


def test_log_append_time_flag_on_create_time_topic_checks_max_timestamp():
    batch = build_batch([(b"k", b"v")] * 2, timestamp=[NOW, NOW + DAY_MS], log_append_time=True)
    err = _refused(batch)
    # every record then carries the batch's maxTimestamp
    assert [i for i, _ in err.record_errors] == [0, 1]


def test_timestamp_and_key_errors_in_one_batch():
    # INVALID_TIMESTAMP wins as the batch's code; a keyless record reports the key only
    cfg = LogConfig(cleanup_policy=("compact",), message_timestamp_after_max_ms=1000)
    batch = build_batch([(None, b"1"), (b"k", b"2"), (None, b"3")], timestamp=[NOW + DAY_MS, NOW + DAY_MS, NOW])
    err = _refused(batch, cfg)
    assert err.error_code == ErrorCode.invalid_timestamp
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in err.record_errors] == [0, 1, 2]
    assert err.record_errors[0][1].startswith("Compacted topic cannot accept message without key")
    assert err.record_errors[1][1].startswith(f"Timestamp {NOW + DAY_MS} of message with offset 1 is out of range")


# --- records that do not decode ---------------------------------------------------------------


@pytest.mark.parametrize("cfg", [COMPACT, LogConfig(compression_type="zstd")])
def test_malformed_records_where_records_are_decoded(cfg):
    # a record whose length varint overstates its body, under a correct CRC: Kafka's
    # DefaultRecord.readFrom raises InvalidRecordException -> INVALID_RECORD, no record errors
    batch = bytearray(build_batch([(b"k", b"v"), (b"k2", b"v2")], timestamp=NOW))
    batch[HEADER_SIZE] += 2
    with pytest.raises(InvalidRecordError) as e:
        _validate(_with_crc(batch), cfg)
    assert not isinstance(e.value, RecordValidationError)
    # bytes left over after the declared number of records
    with pytest.raises(InvalidRecordError):
        _validate(_with_crc(bytearray(build_batch([(b"k", b"v")], timestamp=NOW)) + b"\x00\x00"), cfg)
    # a compressed body that does not decompress
    batch = bytearray(build_batch([(b"k", b"v" * 100)], timestamp=NOW, compression=Codec.LZ4))
    batch[HEADER_SIZE + 4:] = b"\xee" * (len(batch) - HEADER_SIZE - 4)
    with pytest.raises(CompressionError) as e:
        _validate(_with_crc(batch), cfg)
    assert e.value.error_code == ErrorCode.corrupt_message


# --- re-compression ------------------------------------------------------------------------------


@pytest.mark.parametrize("topic_codec,codec", [("zstd", Codec.ZSTD), ("lz4", Codec.LZ4), ("gzip", Codec.GZIP),
                                               ("snappy", Codec.SNAPPY), ("uncompressed", Codec.NONE)])
def test_recompression_to_the_topic_codec(topic_codec, codec):
    sent = (build_batch([(b"k1", b"v" * 300), (None, b"w", [("h", b"x")])], timestamp=[NOW, NOW + 5],
                        compression=Codec.GZIP if codec != Codec.GZIP else Codec.LZ4,
                        producer_id=7, producer_epoch=2, base_sequence=10)
            + build_batch([(b"k2", b"v")], timestamp=NOW, compression=codec))
    valid = _validate(sent, LogConfig(compression_type=topic_codec))
    assert [h.compression for h in valid.headers] == [codec, codec]
    assert valid.headers == validate_batches(valid.buffer, from_client=False)
    h = valid.headers[0]
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (7, 2, 10, 2)
    recs = [*iter_records(valid.buffer, 0), *iter_records(valid.buffer, h.size)]
    assert [(r.key, r.value, r.timestamp) for r in recs] == [(b"k1", b"v" * 300, NOW), (None, b"w", NOW + 5),
                                                             (b"k2", b"v", NOW)]
    # a batch already in the topic's codec is kept byte for byte
    second = sent[len(sent) - valid.headers[1].size:]
    assert valid.buffer[-valid.headers[1].size:] == second


def test_producer_compression_type_keeps_what_was_sent():
    sent = bytearray(build_batch([(b"k", b"v" * 300)], timestamp=NOW, compression=Codec.LZ4))
    assert _validate(sent, LogConfig(compression_type="producer")).buffer is sent


# --- which batches are walked ---------------------------------------------------------------------


@pytest.fixture
def walks(monkeypatch):
    """The batches (by first record timestamp) whose records the validator walked."""
    seen = []
    real = validator.scan_records

    def scan(buf, pos, h):
        seen.append(h.base_timestamp)
        return real(buf, pos, h)

    monkeypatch.setattr(validator, "scan_records", scan)
    return seen


def _three(ts_second=NOW, **kw):
    return (build_batch([(b"k", b"v")], timestamp=NOW + 1, **kw) + build_batch([(b"k", b"v")], timestamp=ts_second, **kw)
            + build_batch([(b"k", b"v")], timestamp=NOW + 3, **kw))


def test_default_path_walks_no_record(walks):
    # CreateTime, before.max.ms unbounded, not compacted, compression.type=producer: one
    # comparison of the header's maxTimestamp per batch
    _validate(_three())
    _validate(_three(compression=Codec.LZ4))
    _validate(_three(compression=Codec.LZ4), LogConfig(compression_type="lz4"))
    _validate(_three(), LogConfig(message_timestamp_type="LogAppendTime"))
    assert walks == []


def test_walked_where_the_header_cannot_vouch(walks):
    _validate(_three(), COMPACT)  # keys
    assert walks == [NOW + 1, NOW, NOW + 3]
    walks.clear()
    _validate(_three(), LogConfig(message_timestamp_before_max_ms=DAY_MS))  # no header bounds the smallest ts
    assert walks == [NOW + 1, NOW, NOW + 3]
    walks.clear()
    with pytest.raises(RecordValidationError):
        _validate(_three(ts_second=NOW + DAY_MS))  # only the batch whose maxTimestamp is too far ahead
    assert walks == [NOW + DAY_MS]
    walks.clear()
    mixed = build_batch([(b"k", b"v")], timestamp=NOW + 1) + build_batch([(b"k", b"v")], timestamp=NOW,
                                                                        compression=Codec.ZSTD)
    _validate(mixed, LogConfig(compression_type="zstd"))  # only the batch being re-compressed
    assert walks == [NOW + 1]
    walks.clear()
    _validate(build_batch([(b"k", b"v")], timestamp=NOW, log_append_time=True))  # the client set LogAppendTime
    assert walks == [NOW]
