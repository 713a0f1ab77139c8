"""Framing: the 4-byte size prefix, request headers v0/v1/v2, response headers v0/v1,
and decoding/encoding message bodies through kio.

Which header version goes with which (API, version) follows Kafka: flexible requests use
request header v2, others v1; flexible responses use response header v1, except
ApiVersions, whose responses always use v0 so that a client can read the error of a
version it does not know.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from . import apis
from .bounds import check_entity
from .describe_transactions_codec import decode_describe_transactions_v0
from .errors import DecodeError, UnsupportedVersionError
from .varint import skip_tagged_fields

__all__ = [
    "RequestHeader",
    "parse_request_header",
    "decode_request",
    "encode_response",
    "encode_request",
    "decode_response",
    "response_header_bytes",
]

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    #: offset of the request body within the frame
    body_offset: int


def _readonly(frame: bytes | bytearray | memoryview) -> bytes | memoryview:
    """kio's reader refuses writable buffers ("Received writable byte buffer where
    read-only was expected"), e.g. a bytearray receive buffer: hand it a read-only view
    (no copy; kio copies what it keeps)."""
    if isinstance(frame, bytes):
        return frame
    mv = memoryview(frame)
    return mv if mv.readonly else mv.toreadonly()


def parse_request_header(frame: bytes | memoryview) -> RequestHeader:
    """Parse the request header of a frame (without its size prefix).

    Hand-written rather than kio's because it must work for API keys and versions we do
    not serve: the correlation id is needed to answer them.
    """
    if len(frame) < 8:
        raise DecodeError(f"request header truncated ({len(frame)} bytes)")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    pos = 8
    client_id = None
    if len(frame) >= 10:
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2
        if n >= 0:
            if pos + n > len(frame):
                raise DecodeError("client id runs past the end of the frame")
            try:
                client_id = bytes(frame[pos : pos + n]).decode()
            except UnicodeDecodeError:
                raise DecodeError("client id is not UTF-8") from None
            pos += n
        elif n != -1:
            raise DecodeError(f"bad client id length {n}")
    if apis.has_schema(api_key, api_version) and apis.is_flexible_request(api_key, api_version):
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(header: RequestHeader, frame: bytes | memoryview) -> Any:
    """Decode the body of a request into its kio dataclass."""
    if not apis.has_schema(header.api_key, header.api_version):
        raise UnsupportedVersionError(
            f"{apis.api_name(header.api_key)} v{header.api_version} is not supported"
        )
    rtype = apis.request_type(header.api_key, header.api_version)
    frame = _readonly(frame)
    # kio preallocates arrays from their length prefix: check lengths first (bounds.py)
    check_entity(rtype, frame, header.body_offset)
    try:
        obj, size = entity_reader(rtype)(frame, header.body_offset)
    except Exception as exc:  # kio raises assorted errors on malformed input
        raise DecodeError(f"malformed {rtype.__name__} v{header.api_version}: {exc}") from None
    return obj


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    """Response header (v0: correlation id; v1: plus an empty tagged-field section)."""
    if api_key != apis.ApiKey.API_VERSIONS and apis.response_type(api_key, version).__flexible__:
        return struct.pack(">iB", correlation_id, 0)
    return struct.pack(">i", correlation_id)


def encode_body(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def encode_response(api_key: int, version: int, correlation_id: int, obj: Any) -> bytes:
    """A whole response frame: size prefix, header, body."""
    body = encode_body(obj)
    header = response_header_bytes(api_key, version, correlation_id)
    return _SIZE.pack(len(header) + len(body)) + header + body


# --- client side, used by the CLI, tests and benchmarks ---------------------------------


def encode_request(api_key: int, version: int, correlation_id: int, obj: Any, client_id: str | None = "krait") -> bytes:
    """A whole request frame, size prefix included."""
    rtype = apis.request_type(api_key, version)
    out = bytearray(_HEADER_FIXED.pack(api_key, version, correlation_id))
    if client_id is None:
        out += _I16.pack(-1)
    else:
        cid = client_id.encode()
        out += _I16.pack(len(cid)) + cid
    if rtype.__flexible__:
        out.append(0)
    out += encode_body(obj)
    return _SIZE.pack(len(out)) + bytes(out)


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) into (correlation id, kio object)."""
    try:
        rtype = apis.response_type(api_key, version)
    except (KeyError, LookupError):
        raise UnsupportedVersionError(f"{apis.api_name(api_key)} v{version} has no response schema") from None
    if len(frame) < 4:
        raise DecodeError(f"response header truncated ({len(frame)} bytes)")
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    pos = 4
    if api_key != apis.ApiKey.API_VERSIONS and rtype.__flexible__:
        pos = skip_tagged_fields(frame, pos)
    frame = _readonly(frame)
    if api_key == apis.ApiKey.DESCRIBE_TRANSACTIONS and version == 0:
        return correlation_id, decode_describe_transactions_v0(frame, pos)  # kio refuses its -1 times
    check_entity(rtype, frame, pos)
    try:
        obj, _ = entity_reader(rtype)(frame, pos)
    except Exception as exc:
        raise DecodeError(f"malformed {rtype.__name__} v{version}: {exc}") from None
    return correlation_id, obj
