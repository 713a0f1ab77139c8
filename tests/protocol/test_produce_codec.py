"""The Produce fast path agrees with kio for every served version: requests decode to the
same fields (records as writable views into a bytearray frame), responses encode to the
same bytes, and a damaged request is a DecodeError, never another exception."""

import datetime

import pytest

from protocol import apis, framing
from protocol.build import make
from protocol.errors import DecodeError
from protocol.produce_codec import FIRST_VERSION, LAST_VERSION, decode_produce_request, encode_produce_response
from protocol.records import build_batch

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)


def _request_frame(version: int, transactional_id: str | None = "tx-é") -> tuple[bytes, list]:
    recs = build_batch([(b"k", b"v" * 100)] * 3, compression=0)
    topics = [dict(name="alpha", partition_data=[dict(index=0, records=recs), dict(index=7, records=None),
                                                 dict(index=2, records=recs + recs)]),
              dict(name="beta-é", partition_data=[]),
              dict(name="gamma", partition_data=[dict(index=1, records=b"")])]
    obj = make(apis.request_type(apis.ApiKey.PRODUCE, version), transactional_id=transactional_id, acks=-1,
               timeout=datetime.timedelta(milliseconds=1500), topic_data=topics)
    frame = framing.encode_request(apis.ApiKey.PRODUCE, version, 9, obj, client_id="c")[4:]
    return frame, topics


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("txn", ["tx-é", None])
def test_request_decodes_as_kio_does(version, txn):
    frame, _ = _request_frame(version, txn)
    header = framing.parse_request_header(frame)
    slow = framing.decode_request(header, frame)
    fast = decode_produce_request(bytearray(frame), header.body_offset, version)
    assert (fast.transactional_id, fast.acks, fast.timeout) == (slow.transactional_id, slow.acks, slow.timeout)
    assert [t.name for t in fast.topic_data] == [t.name for t in slow.topic_data]
    for ft, st in zip(fast.topic_data, slow.topic_data, strict=True):
        assert [p.index for p in ft.partition_data] == [p.index for p in st.partition_data]
        for fp, sp in zip(ft.partition_data, st.partition_data, strict=True):
            assert (None if fp.records is None else bytes(fp.records)) == sp.records


def test_records_are_writable_views_into_a_bytearray_frame():
    frame, _ = _request_frame(9)
    header = framing.parse_request_header(frame)
    buf = bytearray(frame)
    req = decode_produce_request(buf, header.body_offset, 9)
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    records[0:8] = b"\x00" * 7 + b"\x2a"  # the log patches the base offset like this
    assert bytes(buf).count(b"\x00" * 7 + b"\x2a") >= 1
    # a bytes frame gives read-only views (the validator copies those)
    assert decode_produce_request(frame, header.body_offset, 9).topic_data[0].partition_data[0].records.readonly


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_every_truncation_and_trailing_garbage_is_a_decode_error(version):
    frame, _ = _request_frame(version)
    header = framing.parse_request_header(frame)
    for cut in range(header.body_offset, len(frame)):
        with pytest.raises(DecodeError):
            decode_produce_request(frame[:cut], header.body_offset, version)
    with pytest.raises(DecodeError):
        decode_produce_request(frame + b"\x00", header.body_offset, version)


@pytest.mark.parametrize("version", [3, 9])
def test_absurd_lengths_are_decode_errors(version):
    frame, _ = _request_frame(version, None)
    header = framing.parse_request_header(frame)
    body = header.body_offset
    bad = bytearray(frame)
    # the topic array's count: right after the null transactional id, acks and timeout
    at = body + (1 if version >= 9 else 2) + 6
    if version >= 9:
        bad[at] = 0x7F  # 126 topics in a few dozen bytes
    else:
        bad[at : at + 4] = (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(DecodeError):
        decode_produce_request(bytes(bad), body, version)


def _responses():
    return [
        dict(name="alpha", partition_responses=[
            dict(index=0, error_code=0, base_offset=100, log_start_offset=0),
            dict(index=1, error_code=0, base_offset=5, log_start_offset=2,
                 log_append_time=datetime.datetime.fromtimestamp(1_700_000_000.123, tz=datetime.UTC)),
            dict(index=2, error_code=87, base_offset=-1, log_start_offset=3, error_message="bad é records",
                 record_errors=[dict(batch_index=0, batch_index_error_message="no key"),
                                dict(batch_index=4, batch_index_error_message=None)]),
        ]),
        dict(name="beta-é", partition_responses=[]),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_response_encodes_as_kio_does(version):
    fast = bytes(encode_produce_response(version, 42, _responses(), 17))
    obj = make(apis.response_type(apis.ApiKey.PRODUCE, version), responses=_responses(), throttle_time=17)
    assert fast == framing.encode_response(apis.ApiKey.PRODUCE, version, 42, obj)
