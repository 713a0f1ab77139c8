"""Every served (api, version): request and response survive encode -> decode unchanged;
request header v0/v1/v2 parsing; response header v0/v1 choice."""

from __future__ import annotations

import struct

import pytest

from protocol import apis, framing
from protocol.build import make
from protocol.errors import DecodeError, UnsupportedVersionError

from .samples import sample

SERVED = [(k, v) for k, r in apis.SUPPORTED.items() for v in range(r.served_from, r.max_version + 1)]
IDS = [f"{apis.api_name(k)}-v{v}" for k, v in SERVED]


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_request_roundtrip(api_key, version, variant):
    obj = sample(apis.request_type(api_key, version), variant)
    frame = framing.encode_request(api_key, version, 1234, obj, client_id=None if variant else "cli-é")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    # variant 1 decodes from a writable receive buffer, as the server's BufferedProtocol has
    buf = memoryview(bytearray(frame) if variant else frame)[4:]
    h = framing.parse_request_header(buf)
    assert (h.api_key, h.api_version, h.correlation_id) == (api_key, version, 1234)
    assert h.client_id == (None if variant else "cli-é")
    assert framing.decode_request(h, buf) == obj


@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_response_roundtrip(api_key, version, variant):
    obj = sample(apis.response_type(api_key, version), variant)
    frame = framing.encode_response(api_key, version, -7, obj)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    cid, back = framing.decode_response(api_key, version, bytearray(frame[4:]) if variant else frame[4:])
    assert cid == -7
    assert back == obj


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_response_header_version(api_key, version):
    """Flexible responses carry header v1 (one empty tagged-field byte) except ApiVersions."""
    hdr = framing.response_header_bytes(api_key, version, 0x01020304)
    flexible = apis.response_type(api_key, version).__flexible__
    if flexible and api_key != apis.ApiKey.API_VERSIONS:
        assert hdr == b"\x01\x02\x03\x04\x00"
    else:
        assert hdr == b"\x01\x02\x03\x04"


def test_api_versions_v3_response_uses_header_v0():
    obj = make(apis.response_type(18, 3), error_code=0, api_keys=[dict(api_key=0, min_version=0, max_version=11)])
    frame = framing.encode_response(18, 3, 5, obj)
    # size, correlation id, then straight into the body: error_code int16 = 0
    assert frame[4:8] == b"\x00\x00\x00\x05"
    assert frame[8:10] == b"\x00\x00"


def _header(api_key, version, cid, client_id: bytes | None, tail=b""):
    out = struct.pack(">hhi", api_key, version, cid)
    out += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return out + tail


def test_request_header_v0_without_client_id():
    # header v0 (ControlledShutdown v0 only in Kafka): no client id; still yields the correlation id
    h = framing.parse_request_header(struct.pack(">hhi", 7, 0, 99))
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.body_offset) == (7, 0, 99, None, 8)


def test_request_header_v1_null_and_present_client_id():
    h = framing.parse_request_header(_header(3, 4, 1, None, b"body"))
    assert h.client_id is None and h.body_offset == 10
    h = framing.parse_request_header(_header(3, 4, 1, b"rdkafka", b"body"))
    assert h.client_id == "rdkafka" and h.body_offset == 17


def test_request_header_v2_tagged_fields_are_skipped():
    # Metadata v9 is flexible: header v2 ends with a tagged-field section
    tagged = b"\x02" + b"\x00\x03abc" + b"\x05\x01\xff"  # two fields: tag 0 (3 bytes), tag 5 (1 byte)
    body = framing.encode_body(sample(apis.request_type(3, 9)))
    frame = _header(3, 9, 42, b"kcat", tagged + body)
    h = framing.parse_request_header(frame)
    assert h.client_id == "kcat"
    assert h.body_offset == 8 + 2 + 4 + len(tagged)
    assert framing.decode_request(h, frame) == sample(apis.request_type(3, 9))


def test_request_header_v2_null_client_id():
    body = framing.encode_body(sample(apis.request_type(18, 3)))
    frame = _header(18, 3, 1, None, b"\x00" + body)
    h = framing.parse_request_header(frame)
    assert h.client_id is None and h.body_offset == 11


@pytest.mark.parametrize("bad", [
    b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x10abc",  # client id runs past the end
    b"\x00\x03\x00\x09\x00\x00\x00\x01\xff\xfe",  # length -2
    b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x01\xff",  # not UTF-8
    b"\x00\x03\x00\x09\x00\x00\x00\x01\xff\xff\x01\x00\x7f",  # tagged field runs past the end
    b"\x00\x03\x00",  # truncated fixed part
])
def test_bad_request_headers(bad):
    with pytest.raises(DecodeError):
        framing.parse_request_header(bad)


def test_unserved_versions_are_refused_but_answerable():
    # Produce v0-2 are advertised (librdkafka needs it) but not served
    frame = _header(0, 2, 77, b"old")
    h = framing.parse_request_header(frame)
    assert h.correlation_id == 77
    with pytest.raises(UnsupportedVersionError):
        framing.decode_request(h, frame)
    h = framing.parse_request_header(_header(1000, 0, 78, b"x"))
    assert h.correlation_id == 78
    with pytest.raises(UnsupportedVersionError):
        framing.decode_request(h, _header(1000, 0, 78, b"x"))
