"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

One pass over a partition (:func:`clean_log`):

1. The cleanable range ends at the first *uncleanable* offset: the active segment's
   base, the last stable offset (so no open transaction is cleaned), or the first
   segment younger than ``min.compaction.lag.ms``.
2. An offset map key -> latest offset is built from the *dirty* part (from the cleaner
   checkpoint to the end of the cleanable range). Keys are raw bytes, so binary keys
   (``__consumer_offsets``) work. Records of aborted transactions are left out.
3. Closed segments from the log start to the end of the range are rewritten in groups
   (each group fits in ``segment.bytes`` and in int32 relative offsets), keeping a record
   if it is the latest for its key. Batches whose records all survive are copied byte for
   byte; others are rebuilt with the same base offset, offsets, timestamps, producer
   fields and codec. Keyless records are dropped (Kafka does the same). Tombstones (null
   value) are kept until their segment is older than ``delete.retention.ms``.
   Transactions as Kafka (storage.cleaner_txn): batches of aborted transactions are
   dropped whole, and COMMIT/ABORT markers are kept until their transaction's data is
   gone, then for ``delete.retention.ms`` more (a delete horizon written into the
   marker). Unlike Kafka, an emptied batch is never kept as an empty header to carry
   its producer's last sequence: the producer-state snapshots carry it.
4. Crash safety, as in Kafka: the group is written to ``<base>.log.cleaned`` (+ indexes),
   fsynced, renamed to ``.swap``; the old segments are renamed ``.deleted``; the ``.swap``
   files are renamed into place. On load, ``.cleaned`` files are discarded (old segments
   are intact) and ``.swap`` files are completed, so a crash at any point loses nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    EndTxnMarker,
    iter_records,
    parse_control_batch,
    parse_header,
    rebuild_batch,
)

from .checkpoints import fsync_dir
from .cleaner_txn import CleanedTxnState, control_batch_fate
from .log import PartitionLog
from .segment import CLEANED_SUFFIX, INT32_MAX, SWAP_SUFFIX, LogSegment, iter_batches

__all__ = ["CleanerStats", "clean_log", "cleanable_ratio", "first_uncleanable_offset"]

log = logging.getLogger(__name__)

_TXN_BITS = ATTR_TRANSACTIONAL | ATTR_CONTROL

# Tests set this to raise at a named step ("cleaned", "swap", "deleted") to simulate a crash.
FAULT_HOOK: Callable[[str], None] | None = None


def _fault(step: str) -> None:
    if FAULT_HOOK is not None:
        FAULT_HOOK(step)


@dataclass
class CleanerStats:
    segments_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    end_offset: int = 0


def first_uncleanable_offset(plog: PartitionLog, now_ms: int) -> int:
    """Offsets below this may be compacted (whole segments only)."""
    limit = min(plog.active_segment.base_offset, plog.last_stable_offset)
    lag = plog.config.min_compaction_lag_ms
    if lag > 0:
        for seg in plog.segments[:-1]:
            if seg.largest_timestamp() > now_ms - lag:
                limit = min(limit, seg.base_offset)
                break
    return limit


def _cleanable_segments(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    limit = first_uncleanable_offset(plog, now_ms)
    segs = plog.segments
    return [s for i, s in enumerate(segs[:-1]) if segs[i + 1].base_offset <= limit]


def cleanable_ratio(plog: PartitionLog, first_dirty: int, now_ms: int) -> float:
    """Dirty bytes / cleanable bytes (Kafka's min.cleanable.dirty.ratio input)."""
    segs = _cleanable_segments(plog, now_ms)
    total = sum(s.size for s in segs)
    if not total:
        return 0.0
    dirty = sum(s.size for i, s in enumerate(segs)
                if (segs[i + 1].base_offset if i + 1 < len(segs) else plog.active_segment.base_offset) > first_dirty)
    return dirty / total


def clean_log(plog: PartitionLog, now_ms: int, first_dirty: int = 0, *, max_map_entries: int = 2_000_000
              ) -> CleanerStats | None:
    """Compact ``plog`` once; returns stats (``end_offset`` = new cleaner checkpoint) or
    None when there is nothing to clean."""
    segs = _cleanable_segments(plog, now_ms)
    if not segs:
        return None
    first_dirty = max(first_dirty, plog.log_start_offset)
    ends = [s.base_offset for s in plog.segments[1 : len(segs) + 1]]
    if ends[-1] <= first_dirty:
        return None
    stats = CleanerStats()
    offset_map: dict[bytes, int] = {}
    end = first_dirty
    txn = CleanedTxnState()
    try:
        txn.add_aborted(plog.aborted_txns(first_dirty, ends[-1]))
        for seg, seg_end in zip(segs, ends, strict=True):
            if seg_end <= first_dirty:
                continue
            for _, h, view in iter_batches(seg.fd, 0, seg.size):
                if h.attributes & _TXN_BITS:
                    if h.attributes & ATTR_CONTROL:
                        txn.on_control_batch(h, _marker(h, view))
                        continue
                    if txn.on_data_batch(h):
                        continue  # aborted: its keys must not hide committed records
                if h.last_offset < first_dirty:
                    continue
                for rec in iter_records(view):
                    if rec.key is not None and rec.offset >= first_dirty:
                        offset_map[rec.key] = rec.offset
            end = seg_end
            if len(offset_map) >= max_map_entries:
                break  # the map is full: clean what it covers, the rest next time
    except (CorruptRecordError, InvalidRecordError) as e:
        log.error("cleaner: skipping %s-%d, corrupt batch: %s", plog.topic, plog.partition, e)
        return None
    stats.end_offset = end
    to_clean = [s for s, e in zip(segs, ends, strict=True) if e <= end]
    upper = dict(zip((s.base_offset for s in segs), ends, strict=True))
    txn = CleanedTxnState()  # the cleaning pass proper meets the transactions afresh
    for group in _group_segments(to_clean, plog.config.segment_bytes):
        _clean_group(plog, group, offset_map, now_ms, stats, txn, upper)
    return stats


def _marker(h: BatchHeader, view: memoryview) -> EndTxnMarker | None:
    return parse_control_batch(view) if h.producer_id >= 0 and h.record_count else None


def _group_segments(segs: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    cur: list[LogSegment] = []
    size = 0
    for s in segs:
        if cur and (size + s.size > max_bytes or s.base_offset - cur[0].base_offset > INT32_MAX // 2):
            groups.append(cur)
            cur, size = [], 0
        cur.append(s)
        size += s.size
    if cur:
        groups.append(cur)
    return groups


def _clean_group(plog: PartitionLog, group: list[LogSegment], offset_map: dict[bytes, int], now_ms: int,
                 stats: CleanerStats, txn: CleanedTxnState, upper: dict[int, int]) -> None:
    base = group[0].base_offset
    cleaned = LogSegment(plog.dir, base, index_interval_bytes=plog.config.index_interval_bytes, suffix=CLEANED_SUFFIX)
    for p in cleaned.paths():
        _unlink(p)
    cleaned.make_active(plog.config.segment_index_bytes)
    retention_ms = plog.config.delete_retention_ms
    horizon = now_ms - retention_ms
    # kept ABORT markers' transactions: into the new segment's index (the old ones go)
    txn.cleaned_index = cleaned.txn_index
    for seg in group:
        stats.segments_read += 1
        stats.bytes_read += seg.size
        drop_tombstones = seg.largest_timestamp() < horizon
        # every aborted transaction with data in this segment, wherever its marker is
        txn.add_aborted(plog.aborted_txns(seg.base_offset, upper[seg.base_offset]))
        for _, h, view in iter_batches(seg.fd, 0, seg.size):
            if h.attributes & _TXN_BITS:
                if h.attributes & ATTR_CONTROL:
                    fate = control_batch_fate(h, txn.on_control_batch(h, _marker(h, view)), now_ms, retention_ms)
                    if fate is None:
                        cleaned.append(bytes(view), [h], h.base_offset)
                    elif fate >= 0:
                        out = rebuild_batch(h, list(iter_records(view)), delete_horizon_ms=fate)
                        cleaned.append(out, [parse_header(out)], h.base_offset)
                    continue
                if txn.on_data_batch(h):
                    stats.records_read += h.record_count
                    continue  # an aborted transaction's batch: dropped whole
            kept = []
            total = 0
            for rec in iter_records(view):
                total += 1
                if rec.key is None or rec.offset < offset_map.get(rec.key, -1):
                    continue
                if rec.value is None and drop_tombstones:
                    continue
                kept.append(rec)
            stats.records_read += total
            stats.records_kept += len(kept)
            if not kept:
                continue
            if len(kept) == total:
                out = bytes(view)
            else:
                out = rebuild_batch(h, kept)
            cleaned.append(out, [parse_header(out)], h.base_offset)
            stats.bytes_written += len(out)
    cleaned.on_become_inactive()
    cleaned.flush()
    _fault("cleaned")
    cleaned.change_suffix(SWAP_SUFFIX)
    fsync_dir(plog.dir)
    _fault("swap")
    # Old segments out of the way (open fds keep serving readers until removal).
    ids = {id(s) for s in group}
    idx = next(i for i, s in enumerate(plog.segments) if id(s) in ids)
    plog._remove_segments(group)
    _fault("deleted")
    cleaned.change_suffix("")
    fsync_dir(plog.dir)
    plog.segments.insert(idx, cleaned)
    plog._bases = [s.base_offset for s in plog.segments]
    log.info("cleaned %d segments of %s-%d from offset %d", len(group), plog.topic, plog.partition, base)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

