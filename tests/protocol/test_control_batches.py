"""End-transaction markers (control batches) in Kafka's layout, the attribute bits, the
delete horizon, and the refusal of control batches from clients."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from protocol.errors import ErrorCode, InvalidRecordError
from protocol.records import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    EndTxnMarker,
    build_batch,
    build_end_txn_marker,
    iter_records,
    parse_control_batch,
    parse_header,
    rebuild_batch,
    validate_batches,
)


def _kafka_marker(offset: int, ts: int, leader_epoch: int, pid: int, epoch: int, ctype: int, coord: int) -> bytes:
    """Kafka's MemoryRecords.withEndTransactionMarker, written out from the format spec
    (DefaultRecordBatch + DefaultRecord), independently of protocol.records."""
    key = struct.pack(">hh", 0, ctype)
    value = struct.pack(">hi", 0, coord)
    # attributes, timestampDelta, offsetDelta, keyLength, key, valueLength, value, headerCount
    record = bytes([0, 0, 0, 4 * 2]) + key + bytes([6 * 2]) + value + bytes([0])
    record = bytes([len(record) * 2]) + record  # zigzag varint length (16 -> 32)
    attrs = ATTR_TRANSACTIONAL | ATTR_CONTROL
    after_crc = struct.pack(">hiqqqhii", attrs, 0, ts, ts, pid, epoch, -1, 1) + record
    crc = crc32c(after_crc)
    head = struct.pack(">qiibI", offset, 4 + 1 + 4 + len(after_crc), leader_epoch, 2, crc)
    return head + after_crc


@pytest.mark.parametrize("commit", [True, False])
def test_marker_is_kafkas_bytes(commit):
    got = build_end_txn_marker(producer_id=4242, producer_epoch=7, coordinator_epoch=3, commit=commit,
                               timestamp=1_700_000_000_123, base_offset=99, partition_leader_epoch=5)
    want = _kafka_marker(99, 1_700_000_000_123, 5, 4242, 7, CONTROL_COMMIT if commit else CONTROL_ABORT, 3)
    assert got == want
    assert len(got) == 78  # RECORD_BATCH_OVERHEAD 61 + CURRENT_END_TXN_SCHEMA_RECORD_SIZE 17
    h = parse_header(got)
    assert h.is_control and h.is_transactional and h.base_sequence == -1 and h.record_count == 1
    assert h.attributes == 0x30
    assert parse_control_batch(got) == EndTxnMarker(CONTROL_COMMIT if commit else CONTROL_ABORT, 3)
    assert parse_control_batch(got).commit is commit
    # the CRC is right: a replica accepts it
    assert validate_batches(got, from_client=False) == [h]


def test_parse_control_batch_edge_cases():
    # another control type (KRaft's LEADER_CHANGE = 2): no transaction marker
    other = build_batch([(struct.pack(">hh", 0, 2), b"\x00\x00")], control=True, transactional=False)
    assert parse_control_batch(other) is None
    with pytest.raises(InvalidRecordError):
        parse_control_batch(build_batch([(b"\x00", b"")], control=True))  # key too short
    with pytest.raises(InvalidRecordError):
        parse_control_batch(build_batch([(struct.pack(">hh", 0, 1), b"\x00\x00")], control=True))  # value too short
    with pytest.raises(InvalidRecordError):
        parse_control_batch(build_batch([(struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1))], control=True))
    # a marker at a later position of a buffer
    buf = build_batch([(b"k", b"v")]) + build_end_txn_marker(producer_id=1, producer_epoch=0, coordinator_epoch=9,
                                                             commit=False, timestamp=5)
    assert parse_control_batch(buf, len(buf) - 78) == EndTxnMarker(CONTROL_ABORT, 9)


def test_clients_may_send_transactional_batches_but_no_control_batches():
    txn = build_batch([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=0, transactional=True)
    [h] = validate_batches(txn)
    assert h.is_transactional and not h.is_control
    marker = build_end_txn_marker(producer_id=3, producer_epoch=0, coordinator_epoch=0, commit=True, timestamp=1)
    with pytest.raises(InvalidRecordError) as e:
        validate_batches(marker, topic_partition="orders-3")
    assert e.value.error_code == ErrorCode.invalid_record
    assert str(e.value) == "Clients are not allowed to write control records in topic partition orders-3"


def test_delete_horizon_and_rebuild_keep_control_and_transactional_bits():
    marker = build_end_txn_marker(producer_id=8, producer_epoch=2, coordinator_epoch=1, commit=True,
                                  timestamp=1000, base_offset=40, partition_leader_epoch=3)
    h = parse_header(marker)
    out = rebuild_batch(h, list(iter_records(marker)), delete_horizon_ms=90_000)
    h2 = parse_header(out)
    assert h2.attributes == ATTR_CONTROL | ATTR_TRANSACTIONAL | ATTR_DELETE_HORIZON
    assert h2.base_timestamp == 90_000 and h2.max_timestamp == 1000  # the horizon; records keep their time
    assert (h2.base_offset, h2.producer_id, h2.producer_epoch, h2.partition_leader_epoch) == (40, 8, 2, 3)
    [rec] = iter_records(out)
    assert rec.timestamp == 1000
    assert parse_control_batch(out) == EndTxnMarker(CONTROL_COMMIT, 1)
    validate_batches(out, from_client=False)
    # rebuilding again keeps the horizon already set
    again = rebuild_batch(h2, list(iter_records(out)))
    assert parse_header(again).base_timestamp == 90_000 and parse_header(again).attributes & ATTR_DELETE_HORIZON
