"""DescribeTransactionsResponse v0, decoded by hand.

Kafka answers TransactionStartTimeMs = -1 for a transactional id with no transaction
(Empty), and kio's native reader refuses a negative timestamp, so Krait's own tools could
not describe such an id. This decoder reads the same layout (the JSON spec's, flexible
v0) into kio's response objects, with ``transaction_start_time`` None for -1.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

from . import apis
from .build import make
from .errors import DecodeError, ProtocolError
from .varint import read_uvarint, skip_tagged_fields

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int) -> None:
        self.data, self.pos = data, pos

    def take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def uvarint(self) -> int:
        v, self.pos = read_uvarint(self.data, self.pos)
        return v

    def string(self) -> str:
        n = self.uvarint() - 1
        s = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return s

    def tags(self) -> None:
        self.pos = skip_tagged_fields(self.data, self.pos)


def decode_describe_transactions_v0(frame: bytes | memoryview, pos: int) -> Any:
    """The response body at ``pos`` (after the response header) as kio's object."""
    r = _Reader(frame, pos)
    try:
        throttle = r.take(">i")
        states = []
        for _ in range(r.uvarint() - 1):
            error = r.take(">h")
            tid, state = r.string(), r.string()
            timeout, start, pid, epoch = r.take(">i"), r.take(">q"), r.take(">q"), r.take(">h")
            topics = []
            for _ in range(r.uvarint() - 1):
                topic = r.string()
                topics.append(dict(topic=topic, partitions=[r.take(">i") for _ in range(r.uvarint() - 1)]))
                r.tags()
            r.tags()
            states.append(dict(error_code=error, transactional_id=tid, transaction_state=state,
                               transaction_timeout=timeout, producer_id=pid, producer_epoch=epoch, topics=topics,
                               transaction_start_time=None if start < 0
                               else _EPOCH + datetime.timedelta(milliseconds=start)))
        r.tags()
    except (struct.error, IndexError, UnicodeDecodeError, ProtocolError) as exc:
        raise DecodeError(f"malformed DescribeTransactionsResponse v0: {exc}") from None
    return make(apis.response_type(apis.ApiKey.DESCRIBE_TRANSACTIONS, 0), throttle_time=throttle,
                transaction_states=states)
