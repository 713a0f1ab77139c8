"""How clients (the tools, and the broker when it connects to other brokers) turn Kafka
error codes into exceptions and one-line text.

Names and codes come from kio's :class:`ErrorCode` enum, which kio generates from Kafka's
own error list (``NON_EMPTY_GROUP`` = 68); kio keeps no message at run time, so when the
broker sent none the text is Kafka's default message for the code
(protocol/error_messages.py, generated from Kafka's Errors.java: "The group is not
empty."); a message the broker sent is always kept. Errors are :class:`protocol.errors.KafkaError`,
the one error type of every layer; :class:`ClientError` is the subclass for trouble on
the client's side of the wire (as Kafka's clients raise NetworkException).
"""

from __future__ import annotations

from protocol.error_messages import MESSAGES
from protocol.errors import ErrorCode, KafkaError

__all__ = ["ClientError", "check", "default_message", "describe", "error_name", "kafka_error"]


class ClientError(KafkaError):
    """What the client cannot do: connect, send, receive in time, decode an answer, or
    use the arguments it was given."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.network_exception, message)


def _known(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(int(code))
    except ValueError:  # a code newer than kio
        return None


def error_name(code: int) -> str:
    """Kafka's name for an error code, e.g. 68 -> ``NON_EMPTY_GROUP``."""
    known = _known(code)
    return known.name.upper() if known is not None else f"UNKNOWN_ERROR_{int(code)}"


def default_message(code: int) -> str:
    """Kafka's message for a code the broker sent without one: 68 -> ``The group is not empty.``"""
    text = MESSAGES.get(int(code))
    if text is not None:
        return text
    known = _known(code)
    if known is None:
        return f"Error code {int(code)} (unknown to this client)."
    return known.name.replace("_", " ").capitalize() + "."


def kafka_error(code: int, message: str | None = None, context: str | None = None) -> KafkaError:
    """The exception for an error code from a response: the broker's message or the
    derived one, after ``context`` (what was asked) when given."""
    known = _known(code)
    text = message or default_message(code)
    if context:
        text = f"{context}: {text}"
    if known is None:
        # keep the number: UNKNOWN_SERVER_ERROR alone would hide what the broker said
        return KafkaError(ErrorCode.unknown_server_error, text)
    return KafkaError(known, text)


def check(code: int, message: str | None = None, context: str | None = None) -> None:
    """Raise :func:`kafka_error` unless ``code`` is NONE."""
    if int(code) != 0:
        raise kafka_error(code, message, context)


def describe(exc: BaseException) -> str:
    """One line for a user: ``NAME: message`` for a broker error, the message for a
    :class:`ClientError` (its code says nothing the message does not)."""
    if isinstance(exc, ClientError) or not isinstance(exc, KafkaError):
        return str(exc)
    return f"{error_name(exc.error_code)}: {exc.message or default_message(exc.error_code)}"
