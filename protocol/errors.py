"""Kafka error codes (re-exported from kio, generated from Kafka's own list) and the
codec's exception types.

Every decoder in protocol/ raises a subclass of :class:`ProtocolError` on bad input and
nothing else, so the broker can close one connection or reject one batch without
guessing what went wrong.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "ProtocolError",
    "DecodeError",
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedVersionError",
    "CompressionError",
]


class ProtocolError(Exception):
    """Base of every error the codec raises."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class DecodeError(ProtocolError):
    """Bytes that do not form a valid frame, header or message."""

    error_code = ErrorCode.corrupt_message


class CorruptRecordError(DecodeError):
    """A record batch whose structure or CRC is wrong (Kafka: CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(ProtocolError):
    """A well-formed batch that the broker must still refuse (Kafka: INVALID_RECORD)."""

    error_code = ErrorCode.invalid_record


class UnsupportedVersionError(ProtocolError):
    """An API key or version we do not serve."""

    error_code = ErrorCode.unsupported_version


class CompressionError(CorruptRecordError):
    """Compressed data that does not decompress."""

    error_code = ErrorCode.corrupt_message
