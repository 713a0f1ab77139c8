"""Kafka error codes (re-exported from kio, generated from Kafka's own list) and Krait's
one exception type, :class:`KafkaError`: a Kafka error code and an optional message.

Every layer raises it (or a subclass whose class fixes the code, like Kafka's
ApiException subclasses), and the broker answers ``exc.error_code`` / ``exc.message`` for
the request, topic or partition concerned, without re-wrapping. Every decoder in
protocol/ raises a subclass of :class:`ProtocolError` on bad input and nothing else, so
the broker can close one connection or reject one batch without guessing what went wrong.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "KafkaError",
    "ProtocolError",
    "DecodeError",
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedVersionError",
    "CompressionError",
]


class KafkaError(Exception):
    """A Kafka error code with an optional message. ``KafkaError(code, message)``; the
    subclasses below fix the code in the class and take only the message."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, error_code: ErrorCode | None = None, message: str | None = None) -> None:
        if error_code is not None:
            self.error_code = error_code
        self.message = message
        super().__init__(message if message is not None else self.error_code.name)


class CodedError(KafkaError):
    """Base of the exception classes whose class fixes the error code."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(None, message)


class ProtocolError(CodedError):
    """Base of every error the codec raises."""


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
