"""Tagged fields at their default value are not written: kcat and librdkafka < 2.2 fail
to parse responses that carry them. Expected bytes are built by hand from the JSON specs."""

from __future__ import annotations

import struct
import uuid

import pytest

from protocol import apis, framing
from protocol.build import make
from protocol.varint import encode_uvarint

uv = encode_uvarint


def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return uv(len(b) + 1) + b


def i16(n):
    return struct.pack(">h", n)


def i32(n):
    return struct.pack(">i", n)


def i64(n):
    return struct.pack(">q", n)


def body(api_key, version, obj):
    return framing.encode_body(obj)


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_response(version):
    obj = make(apis.response_type(18, version), error_code=0, throttle_time=0,
               api_keys=[dict(api_key=0, min_version=0, max_version=11), dict(api_key=18, min_version=0, max_version=4)])
    expected = (i16(0) + uv(3)
                + i16(0) + i16(0) + i16(11) + b"\x00"
                + i16(18) + i16(0) + i16(4) + b"\x00"
                + i32(0) + b"\x00")  # SupportedFeatures, FinalizedFeaturesEpoch, ... all omitted
    assert framing.encode_body(obj) == expected
    frame = framing.encode_response(18, version, 9, obj)
    assert frame == i32(4 + len(expected)) + i32(9) + expected  # header v0


def test_api_versions_non_default_tagged_field_is_written():
    obj = make(apis.response_type(18, 3), error_code=0, api_keys=[], zk_migration_ready=True)
    assert framing.encode_body(obj).endswith(b"\x01" + uv(3) + uv(1) + b"\x01")


@pytest.mark.parametrize("version", [9, 10, 11, 12])
def test_metadata_response(version):
    topic_id = uuid.UUID(int=5)
    obj = make(apis.response_type(3, version), throttle_time=0, cluster_id="c1", controller_id=1,
               brokers=[dict(node_id=1, host="h", port=9092, rack=None)],
               topics=[dict(error_code=0, name="t", topic_id=topic_id, is_internal=False, topic_authorized_operations=-2147483648,
                            partitions=[dict(error_code=0, partition_index=0, leader_id=1, leader_epoch=0,
                                             replica_nodes=[1], isr_nodes=[1], offline_replicas=[])])],
               cluster_authorized_operations=-2147483648)
    part = i16(0) + i32(0) + i32(1) + i32(0) + uv(2) + i32(1) + uv(2) + i32(1) + uv(1) + b"\x00"
    topic = i16(0) + cstr("t") + (topic_id.bytes if version >= 10 else b"") + b"\x00" + uv(2) + part + i32(-2147483648) + b"\x00"
    expected = (i32(0) + uv(2) + i32(1) + cstr("h") + i32(9092) + cstr(None) + b"\x00"
                + cstr("c1") + i32(1) + uv(2) + topic
                + (i32(-2147483648) if version <= 10 else b"") + b"\x00")
    assert framing.encode_body(obj) == expected
    frame = framing.encode_response(3, version, 1, obj)
    assert frame[4:9] == i32(1) + b"\x00"  # response header v1, no tagged fields


@pytest.mark.parametrize("version", range(12, 17))
def test_fetch_response(version):
    recs = b"R" * 10
    obj = make(apis.response_type(1, version), throttle_time=0, error_code=0, session_id=0, responses=[
        dict(topic="t", topic_id=uuid.UUID(int=1), partitions=[
            dict(partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5, log_start_offset=0,
                 aborted_transactions=None, preferred_read_replica=-1, records=recs)])])
    part = (i32(0) + i16(0) + i64(5) + i64(5) + i64(0) + b"\x00" + i32(-1) + uv(len(recs) + 1) + recs
            + b"\x00")  # DivergingEpoch, CurrentLeader, SnapshotId at defaults: omitted
    name = uuid.UUID(int=1).bytes if version >= 13 else cstr("t")
    expected = i32(0) + i16(0) + i32(0) + uv(2) + name + uv(2) + part + b"\x00" + b"\x00"  # NodeEndpoints omitted
    assert framing.encode_body(obj) == expected


@pytest.mark.parametrize("version", [10, 11])
def test_produce_response(version):
    obj = make(apis.response_type(0, version), throttle_time=0, responses=[
        dict(name="t", partition_responses=[dict(index=0, error_code=0, base_offset=3, log_append_time=-1,
                                                 log_start_offset=0, record_errors=[], error_message=None)])])
    part = i32(0) + i16(0) + i64(3) + i64(-1) + i64(0) + uv(1) + cstr(None) + b"\x00"  # CurrentLeader omitted
    expected = uv(2) + cstr("t") + uv(2) + part + b"\x00" + i32(0) + b"\x00"  # NodeEndpoints omitted
    assert framing.encode_body(obj) == expected


@pytest.mark.parametrize("version", [5, 6, 7])
def test_create_topics_response_topic_config_error_code_omitted(version):
    obj = make(apis.response_type(19, version), throttle_time=0, topics=[
        dict(name="t", topic_id=uuid.UUID(int=0), error_code=0, error_message=None, num_partitions=1,
             replication_factor=1, configs=None)])
    encoded = framing.encode_body(obj)
    # the topic entry ends with: configs (null compact array = 0) then an empty tagged section
    assert encoded.endswith(b"\x00\x00\x00")
    with_error = make(apis.response_type(19, version), topics=[dict(name="t", topic_config_error_code=5)])
    assert len(framing.encode_body(with_error)) > len(framing.encode_body(make(apis.response_type(19, version),
                                                                                topics=[dict(name="t")])))
