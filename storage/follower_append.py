"""What a follower append writes: Kafka's UnifiedLog.appendAsFollower (AppendOrigin.REPLICATION)
up to the point of writing, for :meth:`storage.log.PartitionLog.append_as_follower`.

The leader's batches arrive as a fetch response holds them: offsets and
partitionLeaderEpoch set, to be stored byte for byte. This module finds the whole batches
(a fetch response may end with a partial one), checks them (magic 2, CRC32C, offsets
increasing from the log end, gaps allowed: a compacted leader has them), picks out the
epochs the leader epoch cache must learn, and cuts the batches into runs that each go
into one segment with one write: a run ends where the log would roll before the next
batch (the rules of ``PartitionLog._maybe_roll``, applied batch by batch as if the
leader's batches had been appended one at a time) or at an offset gap (a segment append
counts offsets on from its first batch).
"""

from __future__ import annotations

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, check_batch, parse_header

from .config import LogConfig
from .errors import UnexpectedAppendOffsetError
from .segment import INT32_MAX, LogSegment

__all__ = ["whole_batches", "check_offsets", "new_epochs", "run_end"]

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def whole_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Headers of the whole batches at the start of ``buf``, each checked (structure,
    magic 2, CRC32C: CorruptRecordError, i.e. CORRUPT_MESSAGE); a trailing partial batch
    is left out, as Kafka's batch iterator does."""
    end = len(buf)
    pos = 0
    headers = []
    while end - pos >= HEADER_SIZE:
        h = parse_header(buf, pos)
        if h.batch_length >= _MIN_BATCH_LENGTH and pos + h.size > end:
            break
        check_batch(buf, pos, h, end)
        headers.append(h)
        pos += h.size
    return headers


def check_offsets(headers: list[BatchHeader], log_end_offset: int, name: str) -> None:
    """Refuse batches starting below the log end offset, or overlapping or going back."""
    first, last = headers[0].base_offset, headers[-1].last_offset
    if first < log_end_offset:
        raise UnexpectedAppendOffsetError(
            f"Unexpected offset in append to {name}. First offset {first} is less than the next offset "
            f"{log_end_offset}. Last offset in append: {last}", first, last)
    expected = first
    for h in headers:
        if h.base_offset < expected:
            raise UnexpectedAppendOffsetError(
                f"Out of order offsets found in append to {name}: a batch at offset {h.base_offset} follows "
                f"offset {expected - 1}", first, last)
        expected = h.next_offset


def new_epochs(headers: list[BatchHeader], latest_epoch: int) -> list[tuple[int, int]]:
    """(epoch, base offset) of each batch whose partitionLeaderEpoch is above every one
    before it: the epoch cache entries the batches start (-1, no epoch, starts none)."""
    out = []
    for h in headers:
        e = h.partition_leader_epoch
        if e > latest_epoch:
            out.append((e, h.base_offset))
            latest_epoch = e
    return out


def run_end(seg: LogSegment, cfg: LogConfig, headers: list[BatchHeader], start: int, now_ms: int) -> tuple[int, int]:
    """(index after the last batch, bytes) of the run from ``headers[start]`` that goes
    into ``seg`` in one write; ``seg`` is the segment the log chose (rolling if needed)
    for ``headers[start]``. The checks are ``PartitionLog._maybe_roll``'s for a one-batch
    append, made for each next batch with the run counted as already in the segment."""
    h = headers[start]
    size = seg.size + h.size
    run_bytes = h.size
    first_ts = seg.rolling_based_timestamp() if seg.size else h.max_timestamp
    timed = first_ts is not None and first_ts >= 0
    waited_idle = now_ms - seg.created_ms
    limit_ms = cfg.segment_ms - cfg.segment_jitter_ms
    offset_room = seg.offset_index.max_entries - seg.offset_index.entries
    time_room = seg.time_index.max_entries - 1 - seg.time_index.entries
    seg_base = seg.base_offset
    segment_bytes = cfg.segment_bytes
    next_offset = h.next_offset
    n = 1
    i = start + 1
    while i < len(headers):
        h = headers[i]
        if h.base_offset != next_offset or size > segment_bytes - h.size:
            break
        if (h.max_timestamp - first_ts if timed else waited_idle) > limit_ms:
            break
        if n + 1 > offset_room or n + 1 > time_room or h.last_offset - seg_base > INT32_MAX:
            break
        n += 1
        size += h.size
        run_bytes += h.size
        next_offset = h.next_offset
        i += 1
    return i, run_bytes
