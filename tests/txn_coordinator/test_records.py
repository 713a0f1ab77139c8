"""__transaction_state codecs: bytes computed by hand from TransactionLogKey.json and
TransactionLogValue.json, round trips, the partition hash, and garbage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_coordinator import TopicPartition, partition_for_transactional_id
from txn_coordinator.metadata import TransactionMetadata, TransactionState, TxnTransit
from txn_coordinator.records import (
    RecordDecodeError,
    TransactionLogValue,
    UnknownRecordVersion,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

H = bytes.fromhex
TP = TopicPartition
PID = "00000000000003e8"  # 1000
LAST = "00000000000007d0"  # 2000
START = "00000000000003e9"  # 1001


def test_key_bytes() -> None:
    # int16 version 0 | string (int16 length) "txn"
    assert encode_key("txn") == H("0000" "0003" "74786e")
    assert decode_key(H("0000000374786e")) == "txn"
    assert encode_key("") == H("00000000")


def test_empty_value_v0_has_a_null_partition_array() -> None:
    v = TransactionLogValue(producer_id=1000, producer_epoch=0, transaction_timeout_ms=60000, transaction_status=0,
                            partitions=None, last_update_timestamp_ms=2000, start_timestamp_ms=-1)
    expected = H(
        "0000"  # version 0
        + PID
        + "0000"  # producer epoch 0
        + "0000ea60"  # timeout 60000
        + "00"  # status Empty
        + "ffffffff"  # null TransactionPartitions
        + LAST
        + "ffffffffffffffff"  # start -1
    )
    assert encode_value(v) == expected
    assert decode_value(expected) == v


ONGOING = TransactionLogValue(
    producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, transaction_status=1,
    partitions=frozenset({TP("t", 1), TP("u", 5), TP("t", 0)}), last_update_timestamp_ms=2000, start_timestamp_ms=1001,
)


def test_ongoing_value_v0_bytes() -> None:
    expected = H(
        "0000" + PID + "0003" + "0000ea60" + "01"
        + "00000002"  # two topics
        + "0001" "74" + "00000002" "00000000" "00000001"  # t: [0, 1]
        + "0001" "75" + "00000001" "00000005"  # u: [5]
        + LAST + START
    )
    assert encode_value(ONGOING) == expected
    assert decode_value(expected) == ONGOING


def test_value_v1_flexible_bytes_and_tagged_fields() -> None:
    v = TransactionLogValue(
        producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, transaction_status=1,
        partitions=frozenset({TP("t", 1), TP("u", 5), TP("t", 0)}), last_update_timestamp_ms=2000,
        start_timestamp_ms=1001, previous_producer_id=7, client_transaction_version=2,
    )
    expected = H(
        "0001" + PID + "0003" + "0000ea60" + "01"
        + "03"  # compact array: 2 topics
        + "0274" + "03" "00000000" "00000001" + "00"  # t: [0, 1], no tags
        + "0275" + "02" "00000005" + "00"  # u: [5]
        + LAST + START
        + "02"  # two tagged fields, in tag order
        + "00" "08" "0000000000000007"  # tag 0 PreviousProducerId = 7
        + "02" "02" "0002"  # tag 2 ClientTransactionVersion = 2 (tag 1 at its default is left out)
    )
    assert encode_value(v, 1) == expected
    assert decode_value(expected) == v
    # Defaults only: an empty tagged-field section; a null array is compact length 0.
    empty = TransactionLogValue(1000, 0, 60000, 0, None, 2000, -1)
    assert encode_value(empty, 1) == H("0001" + PID + "0000" "0000ea60" "00" "00" + LAST + "ffffffffffffffff" "00")
    assert decode_value(encode_value(empty, 1)) == empty


def test_unknown_tags_are_skipped_and_bad_known_tags_refused() -> None:
    base = encode_value(TransactionLogValue(1000, 0, 60000, 0, None, 2000, -1), 1)
    with_unknown = base[:-1] + H("01" "09" "02" "abcd")  # one tag (9) of 2 bytes
    assert decode_value(with_unknown) == decode_value(base)
    bad_size = base[:-1] + H("01" "00" "02" "abcd")  # PreviousProducerId must be 8 bytes
    with pytest.raises(RecordDecodeError):
        decode_value(bad_size)


def test_unknown_versions_and_garbage() -> None:
    with pytest.raises(UnknownRecordVersion):
        decode_key(H("0001" "000161"))
    with pytest.raises(UnknownRecordVersion):
        decode_value(H("0002") + encode_value(ONGOING)[2:])
    for bad in (None, b"", H("00"), encode_value(ONGOING)[:-1], encode_value(ONGOING) + b"\x00"):
        with pytest.raises(RecordDecodeError):
            decode_value(bad)
    with pytest.raises(RecordDecodeError):
        decode_key(None)
    with pytest.raises(RecordDecodeError):
        decode_key(H("0000" "0005" "61"))  # string longer than the record
    with pytest.raises(ValueError):
        encode_value(ONGOING, 2)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except RecordDecodeError:
            pass


@settings(max_examples=100, deadline=None)
@given(
    pid=st.integers(0, 2**63 - 1), epoch=st.integers(0, 32767), status=st.integers(0, 7),
    parts=st.frozensets(st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 2**31 - 1)), max_size=6),
    version=st.integers(0, 1), prev=st.integers(-1, 2**40), nxt=st.integers(-1, 2**40), tv=st.integers(0, 2),
)
def test_round_trip(pid, epoch, status, parts, version, prev, nxt, tv) -> None:
    v = TransactionLogValue(pid, epoch, 1000, status, frozenset(TP(t, p) for t, p in parts), 5, 4,
                            prev if version else -1, nxt if version else -1, tv if version else 0)
    assert decode_value(encode_value(v, version)) == v


def test_transit_records_as_kafka_writes_them() -> None:
    m = TransactionMetadata("x", producer_id=5, producer_epoch=2, txn_timeout_ms=100, state=TransactionState.EMPTY)
    t = TxnTransit(5, 5, -1, 3, 2, 100, TransactionState.EMPTY, frozenset(), -1, 77)
    rec = t.to_record()
    assert rec.partitions is None and rec.transaction_status == 0 and rec.producer_epoch == 3
    ongoing = TxnTransit(5, 5, -1, 3, 2, 100, TransactionState.ONGOING, frozenset({TP("a", 1)}), 70, 77).to_record()
    loaded = TransactionMetadata.from_record("x", decode_value(encode_value(ongoing)))
    assert (loaded.state, loaded.partitions, loaded.txn_start_timestamp, loaded.producer_epoch) == (
        TransactionState.ONGOING, {TP("a", 1)}, 70, 3)
    assert loaded.last_producer_epoch == -1  # not in the record: Kafka loads it as -1
    assert m.state is TransactionState.EMPTY


def test_partition_hash_is_kafkas() -> None:
    # Java: "abc".hashCode() == 96354; "polygenelubricants".hashCode() == Integer.MIN_VALUE,
    # which Kafka's Utils.abs maps to 0.
    assert partition_for_transactional_id("abc", 50) == 96354 % 50
    assert partition_for_transactional_id("polygenelubricants", 50) == 0
    # A negative hash: "my-txn".hashCode() == -1061187895; Utils.abs negates it (& 0x7fffffff
    # would be Utils.toPositive, the producer partitioner's rule, which gives 3).
    assert partition_for_transactional_id("my-txn", 50) == 1061187895 % 50 == 45
