"""Opening a partition's directory: Kafka's LogLoader (and UnifiedLog.rebuildProducerState).

:func:`load_log` turns what is on disk into the segments and offsets a
:class:`storage.log.PartitionLog` starts from. Leftover ``.cleaned``/``.tmp``/``.deleted``
files are removed, ``.swap`` files (a compaction that finished writing) are swapped in,
index files without their ``.log`` are removed and segments lacking index files get
them rebuilt. After a clean shutdown only the active segment is looked at (from its last
index entry to its end), so a clean start costs O(segments) stats, not O(bytes). After a
crash every segment from the recovery point on is re-read with CRC checks, truncated at
the first invalid batch, and later segments are dropped. Producer state comes from the
newest snapshot plus a replay of the batches after it (:func:`rebuild_producer_state`).
Recovery replays the recovered segments into it as it checks them, starting from the
state at the first one's base offset, and so rebuilds their ``.txnindex`` files: each
ABORT marker met appends its transaction with the LSO of that moment, as Kafka's
LogSegment.recover does. A log without transactions gets no new file from this.
The leader epoch cache keeps only entries inside [log start, log end), and is rebuilt
from the batches' partitionLeaderEpoch when its file is missing or unreadable
(:func:`load_leader_epochs`).
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import InvalidRecordError
from protocol.records import ATTR_CONTROL, BatchHeader, EndTxnMarker, parse_control_batch

from .config import LogConfig
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager, read_marker
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    scan_headers,
)
from .txn_index import TXN_INDEX_SUFFIX

__all__ = ["LoadedLog", "load_log", "rebuild_producer_state", "load_leader_epochs"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedLog:
    """Kafka's LoadedLogOffsets plus the segments: the last one is active (indexes mapped)."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    log_end_offset: int


def load_log(directory: str, config: LogConfig, producer_state: ProducerStateManager, *,
             recovery_point: int, log_start_offset: int, clean_shutdown: bool,
             epoch_cache: LeaderEpochCache | None = None) -> LoadedLog:
    """Open (creating it if needed) the partition directory ``directory``: settle leftover
    files, recover what a crash may have torn when not ``clean_shutdown``, and load
    ``producer_state`` and ``epoch_cache``. ``recovery_point`` and ``log_start_offset``
    are the checkpointed values."""
    os.makedirs(directory, exist_ok=True)
    _remove_temp_files_and_complete_swaps(directory, config)
    segments = _load_segment_files(directory, config, log_start_offset)
    max_index = config.segment_index_bytes
    # Like Kafka's segment recovery, batches re-read after a crash teach the epoch cache
    # their epochs, in case its file lagged (a single broker's is fsynced with the data).
    on_batch = _epoch_learner(epoch_cache) if epoch_cache is not None and epoch_cache.loaded else None
    first_start = max(log_start_offset, segments[0].base_offset)
    recovered = False
    if not clean_shutdown:
        i = max(bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1, 0)
        _recover_log(directory, segments, i, max_index, on_batch, producer_state, first_start)
        recovered = True
    active = segments[-1]
    next_offset, end = active.read_next_offset()
    if end != active.size:
        log.warning("%s: %d bytes after the last whole batch, recovering the segment", active.log_path, active.size - end)
        _recover_log(directory, segments, len(segments) - 1, max_index, on_batch, producer_state, first_start)
        recovered = True
        next_offset, _ = active.read_next_offset()
    active.make_active(max_index)
    leo = max(next_offset, active.base_offset)
    log_start = min(max(log_start_offset, segments[0].base_offset), leo)
    # After a crash everything left has just been checked; after a clean shutdown
    # everything was fsynced: either way the whole log is recovered.
    if recovered:
        # the recovery replayed every batch up to the log end into producer_state
        producer_state.delete_snapshots_above(leo)
        producer_state.map_end_offset = leo
    else:
        rebuild_producer_state(producer_state, segments, log_start, leo)
    if epoch_cache is not None:
        load_leader_epochs(epoch_cache, segments, log_start, leo)
    return LoadedLog(segments, log_start, leo, leo)


def _epoch_learner(cache: LeaderEpochCache) -> Callable[[BatchHeader], None]:
    def learn(h: BatchHeader) -> None:
        if h.partition_leader_epoch > cache.latest_epoch:
            cache.assign(h.partition_leader_epoch, h.base_offset)
    return learn


def load_leader_epochs(cache: LeaderEpochCache, segments: list[LogSegment], log_start_offset: int,
                       log_end_offset: int) -> None:
    """Settle the epoch cache of a freshly opened log. Its file is written before the
    batches of a new epoch, so after a crash (or a truncation whose file write was lost)
    it may name epochs starting at or past the log end: those go, as do entries before
    the log start (Kafka's LogLoader). A missing or unreadable file is rebuilt from the
    batch headers (Kafka's recovery does the same per recovered batch): each batch whose
    partitionLeaderEpoch is above every earlier one starts an entry."""
    if not cache.loaded:
        entries: list[tuple[int, int]] = []
        latest = -1
        for seg in segments:
            for _, h in seg.iter_headers():
                if h.partition_leader_epoch > latest and h.base_offset < log_end_offset:
                    latest = h.partition_leader_epoch
                    entries.append((latest, h.base_offset))
        if entries:
            log.info("%s: rebuilt the leader epoch cache from the log: %s", cache.path, entries)
        cache.rebuild(entries)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)


def rebuild_producer_state(ps: ProducerStateManager, segments: list[LogSegment], log_start_offset: int,
                           log_end_offset: int, *, full_scan: bool = False, delete_above: bool = True) -> None:
    """Load the newest snapshot at or below ``log_end_offset`` and replay the batches after
    it, up to ``log_end_offset`` (also used after a truncation, which invalidates newer
    snapshots, and before a recovery, which keeps them: not ``delete_above``). The
    ``.txnindex`` files are not touched: they already hold what the replay meets."""
    snap = ps.load(log_end_offset, delete_above=delete_above)
    below = [s for s in segments if s.base_offset <= log_end_offset] or segments[:1]
    if snap >= 0:
        start = snap
    elif full_scan:
        # No snapshot before a crash recovery: like Kafka, replay from the log start, or
        # transactions opened earlier would be missed and their aborts left unindexed.
        start = log_start_offset
    else:
        # No snapshot after a clean shutdown: like Kafka, avoid a scan of the whole log;
        # replay the last two segments (snapshots come with every roll: the usual window).
        start = below[-2].base_offset if len(below) > 1 else below[0].base_offset
    start = max(start, log_start_offset)
    if start < log_end_offset:
        i = max(bisect.bisect_right([s.base_offset for s in segments], start) - 1, 0)
        for seg in segments[i:]:
            if seg.base_offset >= log_end_offset:
                break
            found = seg.translate_offset(start)
            if found is None:
                continue
            for pos, h in seg.iter_headers(found[0]):
                if h.base_offset >= log_end_offset:
                    break
                if h.last_offset >= start:
                    completed = ps.replay(h, _marker(seg, pos, h))
                    if completed is not None:
                        ps.complete(completed)
    ps.map_end_offset = log_end_offset


def _marker(seg: LogSegment, pos: int, h: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch with a producer id (None for any other batch)."""
    if h.producer_id < 0 or not h.attributes & ATTR_CONTROL:
        return None
    try:
        return read_marker(seg.fd, pos, h)
    except InvalidRecordError as e:
        log.warning("%s: control batch at offset %d does not parse, skipped: %s", seg.log_path, h.base_offset, e)
        return None


def _remove_temp_files_and_complete_swaps(directory: str, config: LogConfig) -> None:
    for name in os.listdir(directory):
        if name.endswith((".tmp", CLEANED_SUFFIX, DELETED_SUFFIX)):
            # .cleaned: a compaction that had not finished (its sources are intact);
            # .deleted: a delete that was scheduled; .tmp: a half-written snapshot.
            Path(directory, name).unlink(missing_ok=True)
    for name in sorted(os.listdir(directory)):
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            _complete_swap(directory, config, int(name.split(".")[0]))


def _complete_swap(directory: str, config: LogConfig, base: int) -> None:
    """Finish a compaction swap interrupted by a crash: the ``.swap`` segment replaces
    every segment whose base offset it covers."""
    swap = LogSegment(directory, base, suffix=SWAP_SUFFIX)
    next_offset = base
    for _, h in scan_headers(swap.fd, 0, swap.size):
        next_offset = h.next_offset
    swap.close()
    for name in os.listdir(directory):
        if name.endswith(LOG_SUFFIX) and name[:-4].isdigit():
            b = int(name[:-4])
            if base <= b < max(next_offset, base + 1):
                _segment(directory, config, b).delete()
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        src = os.path.join(directory, f"{base:020d}{suffix}{SWAP_SUFFIX}")
        if os.path.exists(src):
            os.replace(src, src[: -len(SWAP_SUFFIX)])
    seg = _segment(directory, config, base)
    if not seg.has_index_files():
        seg.recover(config.segment_index_bytes)
    seg.close()
    log.info("completed interrupted compaction swap of segment %d in %s", base, directory)


def _load_segment_files(directory: str, config: LogConfig, log_start_offset: int) -> list[LogSegment]:
    """Every ``.log`` as a segment, in offset order (a fresh empty one for an empty dir)."""
    bases = sorted(int(n[: -len(LOG_SUFFIX)]) for n in os.listdir(directory)
                   if n.endswith(LOG_SUFFIX) and n[: -len(LOG_SUFFIX)].isdigit())
    base_set = set(bases)
    for name in os.listdir(directory):
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stem = name[: -len(suffix)]
            if name.endswith(suffix) and stem.isdigit() and int(stem) not in base_set:
                Path(directory, name).unlink(missing_ok=True)  # orphan index without its .log
    max_index = config.segment_index_bytes
    segments = []
    for b in bases:
        seg = _segment(directory, config, b)
        if not seg.has_index_files():
            log.info("%s: index files missing, rebuilding", seg.log_path)
            seg.recover(max_index)
        segments.append(seg)
    if not segments:
        fresh = _segment(directory, config, max(log_start_offset, 0))
        fresh.make_active(max_index)  # creates the .log and both index files
        _ = fresh.fd
        segments.append(fresh)
    return segments


def _recover_log(directory: str, segments: list[LogSegment], first: int, max_index: int,
                 on_batch: Callable[[BatchHeader], None] | None, ps: ProducerStateManager,
                 log_start_offset: int) -> None:
    """Re-check every segment from ``segments[first]`` on; the first one truncated ends
    the log (the segments after it are deleted, in place). ``ps`` is brought to the first
    one's base offset (snapshots above are kept: they may still be right), then each
    recovered batch is replayed into it and rebuilds its segment's ``.txnindex``."""
    rebuild_producer_state(ps, segments, log_start_offset, max(segments[first].base_offset, log_start_offset),
                           full_scan=True, delete_above=False)
    i = first
    while i < len(segments):
        seg = segments[i]
        truncated = seg.recover(max_index, on_batch, start_offset=seg.base_offset,
                                on_producer_batch=_txn_rebuilder(ps, seg))
        if truncated > 0 and i + 1 < len(segments):
            log.warning("%s: dropping %d segments after the corrupt one", directory, len(segments) - i - 1)
            for later in segments[i + 1 :]:
                later.delete()
            del segments[i + 1 :]
            break
        i += 1


def _txn_rebuilder(ps: ProducerStateManager, seg: LogSegment) -> Callable[[BatchHeader, memoryview], None]:
    def replay(h: BatchHeader, view: memoryview) -> None:
        completed = ps.replay(h, parse_control_batch(view) if h.attributes & ATTR_CONTROL else None)
        if completed is not None:
            ps.complete(completed, seg.txn_index)
    return replay


def _segment(directory: str, config: LogConfig, base: int) -> LogSegment:
    return LogSegment(directory, base, index_interval_bytes=config.index_interval_bytes)
