"""Fast path for encoding Fetch responses (the broker's hottest encode).

kio copies the record bytes of every partition into one buffer (~300 µs for a 1 MiB
response against ~25 µs for a plain copy). This encoder writes the small fixed fields
itself and returns a list of chunks in which each partition's record bytes stand as they
came from the segment file, so the transport can write them without a copy. It is
tested byte for byte against kio's encoding for every version we serve.

Layout: ../shared/kafka-message-specs/clients/FetchResponse.json (versions 4-17 here; v17
changed only the request).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from .varint import encode_uvarint

__all__ = ["FetchPartition", "FetchTopic", "encode_fetch_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_FIXED = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
_PART_FIXED_V4 = struct.Struct(">ihqq")  # v4 has no log start offset
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iqB")  # EpochEndOffset: epoch, end offset, no tagged fields
_LEADER = struct.Struct(">iiB")  # LeaderIdAndEpoch: leader id, epoch, no tagged fields


@dataclass(slots=True)
class FetchPartition:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: (producer id, first offset) pairs, or None for a null array
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    #: record bytes (whole batches) or None for null records
    records: bytes | memoryview | None = None
    #: v12+ tagged field 0 for a follower whose log diverged: (epoch, end offset)
    diverging_epoch: tuple[int, int] | None = None
    #: v12+ tagged field 1 with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH: (leader id, epoch)
    current_leader: tuple[int, int] | None = None


@dataclass(slots=True)
class FetchTopic:
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartition] = field(default_factory=list)


def _array_len(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return encode_uvarint(0 if n is None else n + 1)
    return _I32.pack(-1 if n is None else n)


def _partition_tags(p: FetchPartition) -> bytes:
    """The partition's tagged fields, in tag order; one zero byte when all are defaults."""
    tags = []
    if p.diverging_epoch is not None:
        tags.append(b"\x00" + encode_uvarint(_EPOCH_END.size) + _EPOCH_END.pack(*p.diverging_epoch, 0))
    if p.current_leader is not None:
        tags.append(b"\x01" + encode_uvarint(_LEADER.size) + _LEADER.pack(*p.current_leader, 0))
    return encode_uvarint(len(tags)) + b"".join(tags)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopic],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> tuple[list[bytes | memoryview], int]:
    """Encode a whole Fetch response frame (size prefix included) as chunks.

    Returns (chunks, total size in bytes).
    """
    if not 4 <= version <= 17:
        raise ValueError(f"fetch v{version} is not served by the fast path")
    flexible = version >= 12
    chunks: list[bytes | memoryview] = []
    head = bytearray(_I32.pack(correlation_id))
    if flexible:
        head.append(0)  # response header v1: no tagged fields
    head += _I32.pack(throttle_time_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += _array_len(len(topics), flexible)
    for t in topics:
        if version >= 13:
            head += t.topic_id.bytes
        else:
            name = t.name.encode()
            head += encode_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            head += name
        head += _array_len(len(t.partitions), flexible)
        for p in t.partitions:
            if version >= 5:
                head += _PART_FIXED.pack(p.partition_index, p.error_code, p.high_watermark,
                                         p.last_stable_offset, p.log_start_offset)
            else:
                head += _PART_FIXED_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            head += _array_len(None if aborted is None else len(aborted), flexible)
            if aborted:
                for pid, first in aborted:
                    head += _ABORTED.pack(pid, first)
                    if flexible:
                        head.append(0)
            if version >= 11:
                head += _I32.pack(p.preferred_read_replica)
            recs = p.records
            if recs is None:
                head += b"\x00" if flexible else _I32.pack(-1)
            else:
                head += encode_uvarint(len(recs) + 1) if flexible else _I32.pack(len(recs))
                if len(recs):
                    chunks.append(bytes(head))
                    chunks.append(recs)
                    head = bytearray()
            if flexible:
                head += _partition_tags(p)
        if flexible:
            head.append(0)  # topic tagged fields
    if flexible:
        head.append(0)  # top-level tagged fields (NodeEndpoints omitted: empty)
    chunks.append(bytes(head))
    total = sum(len(c) for c in chunks)
    chunks.insert(0, _I32.pack(total))
    return chunks, total + 4
