"""__consumer_offsets codecs: hand-computed bytes from the JSON specs, round trips, garbage."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.coordinator import java_string_hash, partition_for_group
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)

H = bytes.fromhex


def test_offset_commit_key_bytes() -> None:
    # int16 version 1 | string "grp" | string "tp" | int32 7
    assert encode_offset_commit_key("grp", "tp", 7) == H("0001" "0003677270" "00027470" "00000007")
    assert encode_offset_commit_key("grp", "tp", 7, version=0) == H("0000" "0003677270" "00027470" "00000007")
    assert decode_key(H("0000" "0003677270" "00027470" "00000007")) == OffsetCommitKey("grp", "tp", 7)
    assert decode_key(H("0001" "0003677270" "00027470" "00000007")) == OffsetCommitKey("grp", "tp", 7)


def test_group_metadata_key_bytes() -> None:
    assert encode_group_metadata_key("g") == H("0002" "000167")
    assert decode_key(H("0002000167")) == GroupMetadataKey("g")


OFFSET = "000000000000002a"  # 42
TS = "00000000000003e8"  # 1000


def test_offset_commit_value_bytes_every_version() -> None:
    v = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    # Kafka's default: v3 = offset, leaderEpoch, metadata, commitTimestamp
    assert encode_offset_commit_value(v) == H("0003" + OFFSET + "00000005" + "00016d" + TS)
    # v0 and v2: offset, metadata, commitTimestamp
    assert encode_offset_commit_value(v, 0) == H("0000" + OFFSET + "00016d" + TS)
    assert encode_offset_commit_value(v, 2) == H("0002" + OFFSET + "00016d" + TS)
    # v4 flexible: compact string (len+1 as uvarint) and an empty tagged-field section
    assert encode_offset_commit_value(v, 4) == H("0004" + OFFSET + "00000005" + "026d" + TS + "00")
    # v1 carries the expire timestamp; Kafka writes v1 exactly when one is set
    ve = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, expire_timestamp=2000)
    assert encode_offset_commit_value(ve) == H("0001" + OFFSET + "00016d" + TS + "00000000000007d0")
    for version in range(5):
        back = decode_offset_commit_value(encode_offset_commit_value(v, version))
        assert back.offset == 42 and back.metadata == "m" and back.commit_timestamp == 1000
        assert back.leader_epoch == (5 if version >= 3 else -1)
    assert decode_offset_commit_value(encode_offset_commit_value(ve)) == ve


MEMBER = MemberMetadata(
    member_id="m1", client_id="c", client_host="/h", session_timeout=10000,
    subscription=b"\x01", assignment=b"\x02\x03", group_instance_id=None, rebalance_timeout=300000,
)
GROUP = GroupMetadataValue(
    protocol_type="consumer", generation=1, protocol="range", leader="m1", members=(MEMBER,),
    current_state_timestamp=1000,
)


def test_group_metadata_value_v3_bytes() -> None:
    expected = H(
        "0003"
        "0008" + b"consumer".hex() + "00000001" + "0005" + b"range".hex() + "0002" + b"m1".hex() + TS
        + "00000001"  # one member
        + "0002" + b"m1".hex()  # memberId
        + "ffff"  # groupInstanceId null
        + "0001" + b"c".hex() + "0002" + b"/h".hex()
        + "000493e0"  # rebalanceTimeout 300000
        + "00002710"  # sessionTimeout 10000
        + "0000000101" + "000000020203"
    )
    assert encode_group_metadata_value(GROUP) == expected
    assert decode_group_metadata_value(expected) == GROUP


def test_group_metadata_value_v4_flexible_bytes() -> None:
    expected = H(
        "0004"
        "09" + b"consumer".hex() + "00000001" + "06" + b"range".hex() + "03" + b"m1".hex() + TS
        + "02"  # compact array: 1 member
        + "03" + b"m1".hex() + "00" + "02" + b"c".hex() + "03" + b"/h".hex()
        + "000493e0" + "00002710" + "0201" + "030203"
        + "00"  # member tags
        + "00"  # top-level tags
    )
    assert encode_group_metadata_value(GROUP, 4) == expected
    assert decode_group_metadata_value(expected) == GROUP


def test_group_metadata_value_old_versions_and_empty_group() -> None:
    # v0: no currentStateTimestamp, no rebalanceTimeout, no groupInstanceId
    v0 = H(
        "0000" "0008" + b"consumer".hex() + "00000001" + "0005" + b"range".hex() + "0002" + b"m1".hex()
        + "00000001" + "0002" + b"m1".hex() + "0001" + b"c".hex() + "0002" + b"/h".hex()
        + "00002710" + "0000000101" + "000000020203"
    )
    assert encode_group_metadata_value(GROUP, 0) == v0
    d = decode_group_metadata_value(v0)
    assert d.current_state_timestamp == -1 and d.members[0].rebalance_timeout == -1
    for version in range(5):
        back = decode_group_metadata_value(encode_group_metadata_value(GROUP, version))
        assert back.members[0].assignment == b"\x02\x03"
    empty = GroupMetadataValue("consumer", 3, None, None, (), 5)
    # null protocol and leader are int16 -1; the empty members array is int32 0
    assert encode_group_metadata_value(empty) == H(
        "0003" "0008" + b"consumer".hex() + "00000003" + "ffff" + "ffff" + "0000000000000005" + "00000000"
    )
    assert decode_group_metadata_value(encode_group_metadata_value(empty, 4)) == empty


def test_static_member_and_tagged_fields() -> None:
    m = MemberMetadata("m", "c", "h", 6000, b"", b"", group_instance_id="inst", rebalance_timeout=1)
    g = GroupMetadataValue("consumer", 2, "range", "m", (m,), 7)
    assert decode_group_metadata_value(encode_group_metadata_value(g)) == g
    # Unknown tagged fields written by a newer broker are skipped.
    raw = bytearray(encode_offset_commit_value(OffsetCommitValue(1, "", 2), 4))
    raw[-1:] = H("01" "05" "02" "abcd")  # one tag (5) of 2 bytes
    assert decode_offset_commit_value(bytes(raw)) == OffsetCommitValue(1, "", 2)


def test_unknown_versions_are_reported() -> None:
    with pytest.raises(UnknownRecordVersion) as ei:
        decode_key(H("0003" "000167"))  # KIP-848 consumer-group record
    assert ei.value.version == 3
    with pytest.raises(UnknownRecordVersion):
        decode_offset_commit_value(H("0005") + b"\x00" * 30)
    with pytest.raises(UnknownRecordVersion):
        decode_group_metadata_value(H("ffff"))
    assert issubclass(UnknownRecordVersion, RecordDecodeError)


@pytest.mark.parametrize(
    "data",
    [
        encode_offset_commit_key("grp", "tp", 1),
        encode_group_metadata_key("grp"),
    ],
)
def test_every_truncation_of_a_key_is_refused(data: bytes) -> None:
    for n in range(len(data)):
        with pytest.raises(RecordDecodeError):
            decode_key(data[:n])
    with pytest.raises(RecordDecodeError):
        decode_key(data + b"\x00")  # trailing bytes
    with pytest.raises(RecordDecodeError):
        decode_key(None)


def test_every_truncation_of_a_value_is_refused() -> None:
    for version in range(5):
        g = encode_group_metadata_value(GROUP, version)
        o = encode_offset_commit_value(OffsetCommitValue(42, "meta", 1000, 5), version)
        for n in range(len(g)):
            with pytest.raises(RecordDecodeError):
                decode_group_metadata_value(g[:n])
        for n in range(len(o)):
            with pytest.raises(RecordDecodeError):
                decode_offset_commit_value(o[:n])


def test_malformed_fields() -> None:
    with pytest.raises(RecordDecodeError):
        decode_key(H("0001" "ffff" "0000" "00000000"))  # null group (non-nullable)
    with pytest.raises(RecordDecodeError):
        decode_key(H("0002" "0002" "c328"))  # invalid UTF-8
    with pytest.raises(RecordDecodeError):
        decode_group_metadata_value(H("0003" "0000" "00000000" "ffff" "ffff" + TS + "7fffffff"))  # huge array


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_raise_only_decode_errors(data: bytes) -> None:
    for fn in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            fn(data)
        except RecordDecodeError:
            pass


def test_bit_flips_raise_only_decode_errors() -> None:
    rng = random.Random(7)
    good = [encode_group_metadata_value(GROUP, v) for v in range(5)]
    for _ in range(3000):
        b = bytearray(rng.choice(good))
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        try:
            decode_group_metadata_value(bytes(b))
        except RecordDecodeError:
            pass


def test_flexible_values_skip_tagged_fields() -> None:
    # Tagged fields written by a newer broker (here tag 0 of 2 bytes and tag 5 of 0 bytes in
    # the member, tag 1 of 1 byte at the top level) are skipped, not misread.
    v4 = encode_group_metadata_value(GROUP, 4)
    tagged = v4[:-2] + H("02" "00" "02" "abcd" "05" "00") + H("01" "01" "01" "ff")
    assert decode_group_metadata_value(tagged) == GROUP
    ov = encode_offset_commit_value(OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000), 4)
    assert decode_offset_commit_value(ov[:-1] + H("01" "07" "03" "010203")).offset == 42
    # a tagged field running past the end, an unterminated varint: decode errors, nothing else
    for bad in (v4[:-1] + H("01" "01" "05" "ff"), v4[:-1] + H("ff"), v4[:-1] + H("0180808080")):
        with pytest.raises(RecordDecodeError):
            decode_group_metadata_value(bad)


def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("abc") == 96354
    # Overflow wraps like Java int arithmetic.
    assert java_string_hash("hello world") == 1794106052
    # Non-BMP characters hash as two UTF-16 code units (surrogates D83D DE00).
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for_group("polygenelubricants", 50) == 0
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # A negative hash: Kafka's Utils.abs(h) is -h (not h & 0x7fffffff: that is Utils.toPositive).
    h = java_string_hash("polygenelubricants!")
    assert partition_for_group("polygenelubricants!", 50) == -h % 50 == 15
