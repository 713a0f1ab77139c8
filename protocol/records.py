"""Record batches (magic 2): the one format shared by the wire and the disk.

The broker's hot paths only ever look at the 61-byte batch header: :func:`validate_batches`
checks structure and CRC32C, :func:`assign_offsets` patches baseOffset and
partitionLeaderEpoch in place (both lie outside the CRC). Records themselves are decoded
only by those who need them (Spark, compaction, tools) through :func:`iter_records`, or
walked without copying by :func:`scan_records` when the broker must check them (keys on
compacted topics, timestamps the header cannot vouch for), and built by
:func:`build_batch` for internal topics and tests.

Layout (Kafka's DefaultRecordBatch)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32 | records...

The CRC32C covers attributes .. end of batch. batchLength counts from
partitionLeaderEpoch to the end (i.e. total size - 12).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from .compression import Codec, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .varint import read_varlong, write_varlong

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "Record",
    "parse_header",
    "iter_headers",
    "validate_batches",
    "assign_offsets",
    "iter_records",
    "RecordInfo",
    "scan_records",
    "build_batch",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "EndTxnMarker",
    "build_end_txn_marker",
    "parse_control_batch",
]

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
MAGIC = 2
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40  # baseTimestamp holds the delete horizon (the cleaner sets it)
#: control record types (Kafka's ControlRecordType) of the end-transaction markers
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAX_TS = struct.Struct(">q")
_ATTR = struct.Struct(">h")
_OFFSET_CRC = 17
_OFFSET_ATTRIBUTES = 21
_OFFSET_MAX_TIMESTAMP = 35


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the 61-byte header at ``pos``; raises CorruptRecordError if it is short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header at {pos} is truncated ({len(buf) - pos} bytes)")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in buf[pos:end]; stop at a torn tail.

    No CRC check: this is the cheap walk used by index lookups and reads.
    """
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def check_batch(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader, end: int) -> None:
    """Structural and CRC check of one batch whose header is ``h``."""
    if h.magic != MAGIC:
        raise CorruptRecordError(f"batch at {pos}: unsupported magic {h.magic}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at {pos}: batchLength {h.batch_length} is below the header size")
    if pos + h.size > end:
        raise CorruptRecordError(f"batch at {pos}: batchLength {h.batch_length} runs past the end ({end - pos} bytes left)")
    if h.record_count < 0 or h.last_offset_delta < 0:
        raise CorruptRecordError(f"batch at {pos}: negative record count or offset delta")
    actual = crc32c(memoryview(buf)[pos + _OFFSET_ATTRIBUTES : pos + h.size])
    if actual != h.crc:
        raise CorruptRecordError(f"batch at {pos}: CRC mismatch (stored {h.crc:#010x}, computed {actual:#010x})")


def validate_batches(buf: bytes | bytearray | memoryview, *, from_client: bool = True,
                     topic_partition: str = "") -> list[BatchHeader]:
    """Validate the batches a producer sent for one partition, header and CRC only.

    Raises CorruptRecordError for structural/CRC damage (CORRUPT_MESSAGE) and
    InvalidRecordError for batches Kafka refuses from clients (INVALID_RECORD), with
    Kafka's messages (``topic_partition`` names the partition in them).
    """
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("empty record set")
    pos = 0
    headers = []
    while pos < end:
        h = parse_header(buf, pos)
        check_batch(buf, pos, h, end)
        if from_client:
            if h.record_count == 0 or h.last_offset_delta + 1 != h.record_count:
                raise InvalidRecordError(
                    f"batch at {pos}: lastOffsetDelta {h.last_offset_delta} does not match record count {h.record_count}"
                )
            if h.base_offset != 0:
                raise InvalidRecordError(f"batch at {pos}: base offset {h.base_offset} is not 0")
            if h.attributes & ATTR_CONTROL:
                # transactional data batches are fine; markers come from the coordinator only
                raise InvalidRecordError(
                    f"Clients are not allowed to write control records in topic partition {topic_partition}")
        headers.append(h)
        pos += h.size
    return headers


def assign_offsets(
    buf: bytearray | memoryview,
    headers: Iterable[BatchHeader],
    base_offset: int,
    *,
    leader_epoch: int = 0,
    log_append_time: int | None = None,
) -> int:
    """Patch offsets (and the leader epoch) of consecutive batches in place.

    For LogAppendTime topics pass ``log_append_time`` (ms): maxTimestamp is set and the
    timestamp-type bit raised, which changes CRC-covered bytes, so the CRC is recomputed.
    Returns the next offset after the last batch.
    """
    mv = memoryview(buf)
    pos = 0
    offset = base_offset
    for h in headers:
        _BASE_OFFSET.pack_into(mv, pos, offset)
        _EPOCH.pack_into(mv, pos + 12, leader_epoch)
        if log_append_time is not None:
            _ATTR.pack_into(mv, pos + _OFFSET_ATTRIBUTES, h.attributes | ATTR_TIMESTAMP_TYPE)
            _MAX_TS.pack_into(mv, pos + _OFFSET_MAX_TIMESTAMP, log_append_time)
            _CRC.pack_into(mv, pos + _OFFSET_CRC, crc32c(mv[pos + _OFFSET_ATTRIBUTES : pos + h.size]))
        offset += h.last_offset_delta + 1
        pos += h.size
    return offset


# --- record level ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varlong(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError("record field runs past the end of the batch")
    return buf[pos : pos + n], pos + n


def decode_records(h: BatchHeader, body: bytes) -> Iterator[Record]:
    """Decode the (already decompressed) records section of a batch."""
    pos = 0
    end = len(body)
    for _ in range(h.record_count):
        length, pos = read_varlong(body, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptRecordError("record length runs past the end of the batch")
        attributes = body[pos]
        pos += 1
        ts_delta, pos = read_varlong(body, pos)
        off_delta, pos = read_varlong(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        nh, pos = read_varlong(body, pos)
        if nh < 0 or nh > length:
            raise CorruptRecordError("bad header count")
        headers = []
        for _ in range(nh):
            hk, pos = _read_bytes(body, pos)
            hv, pos = _read_bytes(body, pos)
            if hk is None:
                raise CorruptRecordError("null header key")
            try:
                headers.append((hk.decode(), hv))
            except UnicodeDecodeError:
                raise CorruptRecordError("header key is not UTF-8") from None
        if pos != rec_end:
            raise CorruptRecordError("record length does not match its fields")
        ts = h.max_timestamp if h.is_log_append_time else h.base_timestamp + ts_delta
        yield Record(h.base_offset + off_delta, ts, key, value, tuple(headers), attributes)


class RecordInfo(NamedTuple):
    """What a broker checks of one record when it validates a produced batch."""

    offset: int
    timestamp: int
    key_size: int  # -1: null key
    value_size: int  # -1: null value


def scan_records(buf: bytes | bytearray | memoryview, pos: int = 0, h: BatchHeader | None = None) -> list[RecordInfo]:
    """Walk every record of the batch at ``pos`` (header ``h`` if already parsed) as Kafka's
    broker does when it validates a produced batch, skipping keys, values and headers
    instead of copying them.

    Kafka reads records with DefaultRecord.readFrom, which is stricter than
    :func:`decode_records` and reports differently: a record whose fields do not fit its
    length, or bytes left after the declared record count, raise InvalidRecordError
    (INVALID_RECORD) with Kafka's messages. A body that does not decompress raises
    CompressionError (CORRUPT_MESSAGE).
    """
    if h is None:
        h = parse_header(buf, pos)
    if pos + h.size > len(buf):
        raise CorruptRecordError("batch is truncated")
    body = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + h.size])
    if h.compression:
        body = decompress(h.compression, body)
    try:
        return _scan_records(h, body)
    except (CorruptRecordError, IndexError):  # ran off the end: Kafka's BufferUnderflowException
        raise InvalidRecordError("Found invalid record structure") from None


def _scan_records(h: BatchHeader, body: bytes) -> list[RecordInfo]:
    # Nearly every varint here is one byte: those are decoded inline, since a call per
    # varint would cost more than the rest of the walk. Running off the end of ``body``
    # raises IndexError or CorruptRecordError, which scan_records reports as Kafka does.
    read = read_varlong
    end = len(body)
    base_offset = h.base_offset
    # a LogAppendTime batch's records all carry its maxTimestamp (Kafka's Record.timestamp())
    fixed_ts = h.max_timestamp if h.is_log_append_time else None
    out = []
    pos = 0
    for _ in range(h.record_count):
        b = body[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = read(body, pos)
        if length < 0 or pos + length > end:
            raise InvalidRecordError(f"Invalid record size: expected {length} bytes in record payload, but instead "
                                     f"the buffer has only {end - pos} remaining bytes.")
        start = pos
        pos += 1  # attributes
        b = body[pos]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            ts_delta, pos = read(body, pos)
        b = body[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = read(body, pos)
        b = body[pos]
        if b < 0x80:
            key_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            key_size, pos = read(body, pos)
        if key_size > 0:
            pos += key_size
        b = body[pos]
        if b < 0x80:
            value_size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            value_size, pos = read(body, pos)
        if value_size > 0:
            pos += value_size
        b = body[pos]
        if b < 0x80:
            n_headers = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n_headers, pos = read(body, pos)
        if n_headers:
            if n_headers < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {n_headers}")
            if n_headers > end - pos:
                raise InvalidRecordError(f"Found invalid number of record headers. {n_headers} is larger than the "
                                         "remaining size of the buffer")
            for _ in range(n_headers):
                size, pos = read(body, pos)
                if size < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {size}")
                size, pos = read(body, pos + size)
                if size > 0:
                    pos += size
        if pos != start + length:
            raise InvalidRecordError(f"Invalid record size: expected to read {length} bytes in record payload, "
                                     f"but instead read {pos - start}")
        out.append(RecordInfo(base_offset + off_delta, h.base_timestamp + ts_delta if fixed_ts is None else fixed_ts,
                              key_size if key_size >= 0 else -1, value_size if value_size >= 0 else -1))
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return out


def iter_records(batch: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[Record]:
    """Decode every record of the batch at ``pos`` (decompressing it if needed)."""
    h = parse_header(batch, pos)
    if pos + h.size > len(batch):
        raise CorruptRecordError("batch is truncated")
    body = bytes(memoryview(batch)[pos + HEADER_SIZE : pos + h.size])
    if h.compression:
        body = decompress(h.compression, body)
    return decode_records(h, body)


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = ()) -> None:
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    write_varlong(body, timestamp_delta)
    write_varlong(body, offset_delta)
    for field in (key, value):
        if field is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(field))
            body += field
    headers = list(headers)
    write_varlong(body, len(headers))
    for hk, hv in headers:
        hkb = hk.encode()
        write_varlong(body, len(hkb))
        body += hkb
        if hv is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(hv))
            body += hv
    write_varlong(out, len(body))
    out += body


def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Iterable[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    timestamp: int | Iterable[int] = 0,
    compression: int = Codec.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    offset_deltas: Iterable[int] | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Build one magic-2 batch from (key, value[, headers]) tuples.

    ``timestamp`` is one timestamp for all records or one per record. ``offset_deltas``
    lets compaction keep the original (gapped) offsets. ``delete_horizon_ms`` (the
    cleaner's) becomes the baseTimestamp with the delete-horizon attribute bit, as Kafka
    writes it; record timestamps stay what they were (their deltas may go negative).
    """
    records = list(records)
    if not records:
        raise ValueError("a batch needs at least one record")
    timestamps = [timestamp] * len(records) if isinstance(timestamp, int) else list(timestamp)
    deltas = list(range(len(records))) if offset_deltas is None else list(offset_deltas)
    base_ts = timestamps[0] if delete_horizon_ms is None else delete_horizon_ms
    body = bytearray()
    for rec, ts, delta in zip(records, timestamps, deltas, strict=True):
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else ()
        encode_record(body, delta, ts - base_ts, key, value, headers)
    if compression:
        body = compress(compression, body)
    attributes = compression & ATTR_COMPRESSION_MASK
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
    last_delta = deltas[-1]
    size = HEADER_SIZE + len(body)
    out = bytearray(size)
    _HEADER.pack_into(
        out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0, attributes,
        last_delta, base_ts, max(timestamps), producer_id, producer_epoch, base_sequence, len(records),
    )
    out[HEADER_SIZE:] = body
    _CRC.pack_into(out, _OFFSET_CRC, crc32c(memoryview(out)[_OFFSET_ATTRIBUTES:]))
    return bytes(out)


def rebuild_batch(h: BatchHeader, records: list[Record], codec: int | None = None, *,
                  delete_horizon_ms: int | None = None) -> bytes:
    """A batch holding ``records`` with everything else taken from header ``h``: offsets
    (gaps kept), timestamps, producer id/epoch/sequence, transactional and control flags,
    leader epoch, delete horizon (or ``delete_horizon_ms``, set by the cleaner). ``codec``
    None keeps the batch's own. Compaction and re-compression both need this."""
    if delete_horizon_ms is None and h.attributes & ATTR_DELETE_HORIZON:
        delete_horizon_ms = h.base_timestamp
    return build_batch(
        [(r.key, r.value, r.headers) for r in records],
        base_offset=h.base_offset,
        timestamp=[r.timestamp for r in records],
        compression=h.compression if codec is None else codec,
        log_append_time=h.is_log_append_time,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        transactional=h.is_transactional,
        control=h.is_control,
        partition_leader_epoch=h.partition_leader_epoch,
        offset_deltas=[r.offset - h.base_offset for r in records],
        delete_horizon_ms=delete_horizon_ms,
    )


def recompress(buf: bytes | bytearray | memoryview, headers: Iterable[BatchHeader], codec: int) -> bytearray:
    """Re-encode batches with another codec, keeping every record, timestamp, header and
    the producer id/epoch/sequence. Used only when a topic's compression.type asks for a
    codec other than the producer's (Kafka does the same); never on the default path."""
    out = bytearray()
    pos = 0
    for h in headers:
        if h.compression == codec:
            out += memoryview(buf)[pos : pos + h.size]
        else:
            out += rebuild_batch(h, list(iter_records(buf, pos)), codec)
        pos += h.size
    return out


# --- control batches: end-transaction markers -----------------------------------------

_CONTROL_KEY = struct.Struct(">hh")  # version int16 (0), type int16 (Kafka's ControlRecordType key)
_END_TXN_VALUE = struct.Struct(">hi")  # version int16 (0), coordinatorEpoch int32 (EndTransactionMarker)


class EndTxnMarker(NamedTuple):
    """What a COMMIT/ABORT control record says (Kafka's EndTransactionMarker)."""

    control_type: int
    coordinator_epoch: int

    @property
    def commit(self) -> bool:
        return self.control_type == CONTROL_COMMIT


def build_end_txn_marker(*, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                         timestamp: int, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """The control batch Kafka's MemoryRecords.withEndTransactionMarker writes: transactional
    and control bits, no sequence, uncompressed, one record with key (version 0, type
    COMMIT=1/ABORT=0) and value (version 0, coordinatorEpoch), byte for byte."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch([(key, value)], base_offset=base_offset, timestamp=timestamp, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)


def parse_control_batch(batch: bytes | bytearray | memoryview, pos: int = 0) -> EndTxnMarker | None:
    """The marker in the control batch at ``pos``; None for an empty batch (its
    transaction was cleaned away) or a control type that is no transaction marker. A key
    or value too short for its schema is InvalidRecordError, as in Kafka."""
    for rec in iter_records(batch, pos):
        if rec.key is None or len(rec.key) < _CONTROL_KEY.size:
            raise InvalidRecordError("Invalid value size found for end control record key")
        version, ctype = _CONTROL_KEY.unpack_from(rec.key)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for control record: {version}")
        if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
            return None
        if rec.value is None or len(rec.value) < _END_TXN_VALUE.size:
            raise InvalidRecordError("Invalid value size found for end transaction marker")
        vversion, coordinator_epoch = _END_TXN_VALUE.unpack_from(rec.value)
        if vversion < 0:
            raise InvalidRecordError(f"Invalid version found for end transaction marker: {vversion}")
        return EndTxnMarker(ctype, coordinator_epoch)
    return None
