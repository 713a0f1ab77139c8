"""LogSegment: one ``.log`` file of record batches with its ``.index`` and ``.timeindex``,
and the ``.txnindex`` of the transactions aborted in it (storage.txn_index; created only
when there is one).

Files are named by the segment's base offset, 20 digits zero-padded. The ``.log`` holds
batches exactly as the wire carries them. Index entries are added the way Kafka's
LogSegment does it: for each appended batch, if more than ``index.interval.bytes`` were
written since the last entry, an offset entry (batch last offset, batch position) and a
time entry (max timestamp so far, its offset) are added before counting the batch.

Everything here reads headers only (61 bytes per batch); records are decoded solely to
resolve a timestamp lookup to the exact record, as Kafka does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, check_batch, iter_records, parse_header

from .errors import CorruptIndexError
from .index import OffsetIndex, TimeIndex
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

__all__ = [
    "LogSegment",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "DELETED_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "filename_prefix",
    "scan_headers",
    "iter_batches",
    "write_all",
]

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 0x7FFFFFFF
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def write_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """pwrite until everything is written; raises OSError (ENOSPC, EIO, ...)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        if n <= 0:
            raise OSError(28, "short write")  # ENOSPC-like: the device took nothing
        view = view[n:]
        position += n


def scan_headers(fd: int, start: int, end: int, chunk: int = 16384) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of whole batches in [start, end); stop at a torn tail.

    Reads ``chunk``-sized windows so that runs of small batches cost one pread, while a
    header beyond the window (large batches) costs a pread of just that header.
    """
    buf = b""
    buf_pos = start
    pos = start
    while end - pos >= HEADER_SIZE:
        off = pos - buf_pos
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - pos), pos)
            buf_pos = pos
            off = 0
            if len(buf) < HEADER_SIZE:
                return
        h = parse_header(buf, off)
        if h.batch_length < _MIN_BATCH_LENGTH or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def iter_batches(fd: int, start: int, end: int, chunk: int = 8 << 20) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (position, header, batch bytes) with structure and CRC checked.

    Raises CorruptRecordError at the first torn or corrupt batch; the caller truncates there.
    """
    buf = b""
    buf_pos = start
    pos = start
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(f"batch at {pos}: truncated header ({end - pos} bytes)")
        off = pos - buf_pos
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - pos), pos)
            buf_pos, off = pos, 0
        h = parse_header(buf, off)
        if h.batch_length < _MIN_BATCH_LENGTH or pos + h.size > end:
            raise CorruptRecordError(f"batch at {pos}: batchLength {h.batch_length} runs past the end of the file")
        if off + h.size > len(buf):
            buf = os.pread(fd, max(h.size, min(chunk, end - pos)), pos)
            buf_pos, off = pos, 0
            if len(buf) < h.size:
                raise CorruptRecordError(f"batch at {pos}: short read")
        view = memoryview(buf)[off : off + h.size]
        check_batch(view, 0, h, h.size)
        yield pos, h, view
        pos += h.size


class LogSegment:
    """One segment. Not thread-safe: the owning PartitionLog serialises access."""

    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int = 4096, suffix: str = "") -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.suffix = suffix
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX + suffix, base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self._fd = -1
        self._size = -1
        self._max_ts: int | None = None
        self._offset_of_max_ts = -1
        self._rolling_ts: int | None = None
        self._indexes_checked = False
        self.created_ms = 0

    # --- files ---------------------------------------------------------------------

    @property
    def fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    @property
    def size(self) -> int:
        if self._size < 0:
            self._size = os.fstat(self.fd).st_size
        return self._size

    def has_index_files(self) -> bool:
        return os.path.exists(self.offset_index.path) and os.path.exists(self.time_index.path)

    def make_active(self, max_index_size: int) -> None:
        """Map both indexes for appending (preallocated to ``segment.index.bytes``)."""
        self.offset_index.open_writable(max_index_size)
        self.time_index.open_writable(max_index_size)
        self._indexes_checked = True

    @property
    def active(self) -> bool:
        return self.offset_index.writable

    def on_become_inactive(self) -> None:
        """Kafka's onBecomeInactiveSegment: final time entry, trim indexes to size."""
        if self.offset_index.writable:
            if self.max_timestamp_so_far >= 0:
                self.time_index.maybe_append(self.max_timestamp_so_far, self._offset_of_max_ts, skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all its files (e.g. to ``.deleted``); an open fd keeps working."""
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        prefix = os.path.join(self.dir, filename_prefix(self.base_offset))
        if os.path.exists(self.log_path):
            os.replace(self.log_path, prefix + LOG_SUFFIX + new_suffix)
        self.log_path = prefix + LOG_SUFFIX + new_suffix
        self.offset_index.rename(prefix + INDEX_SUFFIX + new_suffix)
        self.time_index.rename(prefix + TIME_INDEX_SUFFIX + new_suffix)
        self.txn_index.rename(prefix + TXN_INDEX_SUFFIX + new_suffix)
        self.suffix = new_suffix

    def delete(self) -> None:
        self.close()
        for p in self.paths():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    # --- timestamps ------------------------------------------------------------------

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            try:
                self._check_indexes()
                self._max_ts, self._offset_of_max_ts = self.time_index.last_entry
            except (OSError, ValueError):
                self._max_ts, self._offset_of_max_ts = -1, self.base_offset
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        _ = self.max_timestamp_so_far
        return self._offset_of_max_ts

    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file mtime (ms) if no timestamps (Kafka)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch: segment.ms counts from it (Kafka)."""
        if self._rolling_ts is None and self.size >= HEADER_SIZE:
            h = parse_header(os.pread(self.fd, HEADER_SIZE, 0))
            self._rolling_ts = h.max_timestamp
        return self._rolling_ts

    # --- append --------------------------------------------------------------------

    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], base_offset: int,
               log_append_time: int | None = None) -> None:
        """Write ``buf`` (batches already carrying their offsets) with one pwrite, then index.
        On an OSError nothing is counted: the file is cut back to where it ended (a full
        disk takes part of a write, which would otherwise sit after the last whole batch
        until recovery), and the index pages the entries need are allocated first, so the
        index writes that follow cannot fail."""
        pos = self.size
        # a page of a mapped index first touched on a full disk is a SIGBUS, not an error
        self.offset_index.reserve(len(headers))
        self.time_index.reserve(len(headers))
        try:
            write_all(self.fd, buf, pos)
        except OSError:
            try:
                os.ftruncate(self.fd, pos)
            except OSError:
                pass  # the recovery at the next start cuts the torn tail
            raise
        self._size = pos + len(buf)
        max_ts = self.max_timestamp_so_far
        interval = self.index_interval_bytes
        offset = base_offset
        for h in headers:
            last = offset + h.last_offset_delta
            ts = h.max_timestamp if log_append_time is None else log_append_time
            if ts > max_ts:
                max_ts = self._max_ts = ts
                self._offset_of_max_ts = last
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(last, pos)
                self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
                self.bytes_since_last_index_entry = 0
            size = h.batch_length + LOG_OVERHEAD
            self.bytes_since_last_index_entry += size
            pos += size
            offset = last + 1
        if self._rolling_ts is None and headers:
            self._rolling_ts = headers[0].max_timestamp if log_append_time is None else log_append_time

    # --- lookups -------------------------------------------------------------------

    def _check_indexes(self) -> None:
        """Kafka-style sanity check on first use of a closed segment's indexes."""
        if self._indexes_checked:
            return
        self._indexes_checked = True
        try:
            self.offset_index.sanity_check()
            self.time_index.sanity_check()
            n = self.offset_index.entries
            if n and self.offset_index.entry(n - 1)[1] >= self.size:
                raise CorruptIndexError(f"{self.offset_index.path}: last entry points past the end of the log")
        except (CorruptIndexError, ValueError, OSError) as e:
            log.warning("rebuilding indexes of %s: %s", self.log_path, e)
            self.rebuild_indexes()

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        self._check_indexes()
        for attempt in range(2):
            idx_off, idx_pos = self.offset_index.lookup(offset)
            start = max(idx_pos, start_position)
            first = True
            bad = idx_pos > self.size
            if not bad:
                for pos, h in scan_headers(self.fd, start, self.size):
                    if first and pos == idx_pos and idx_pos > 0 and not (
                        h.magic == 2 and self.base_offset <= h.base_offset <= idx_off
                    ):
                        bad = True
                        break
                    first = False
                    if h.last_offset >= offset:
                        return pos, h
                else:
                    # The index pointed into the middle of a file that parses as nothing.
                    bad = first and idx_pos > 0 and start == idx_pos
            if not bad or attempt:
                return None
            log.warning("offset index of %s points at a non-batch (offset %d -> position %d); rebuilding",
                        self.log_path, idx_off, idx_pos)
            self.rebuild_indexes()
        return None

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, end_offset_hint: int | None = None,
             min_one_batch: bool = True) -> tuple[int, int, BatchHeader] | None:
        """Whole batches from the one holding ``offset``: (position, length, first header).

        ``max_offset`` (exclusive) excludes batches starting at or after it; at least one
        whole batch is returned when ``min_one_batch`` even if it exceeds ``max_bytes``.
        ``None`` when the segment holds nothing at or after ``offset``.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, h = found
        if max_offset is not None and h.base_offset >= max_offset:
            return pos, 0, h
        size = self.size
        hard_end = size
        if max_offset is not None and (end_offset_hint is None or max_offset < end_offset_hint):
            cut = self.translate_offset(max_offset, pos)
            if cut is not None:
                hard_end = cut[0] if cut[1].base_offset >= max_offset or cut[0] > pos else cut[0] + cut[1].size
        budget_end = pos + max(max_bytes, 0)
        if hard_end <= budget_end:
            end = hard_end
        else:
            walk_from = pos
            entry = self.offset_index.lookup_by_position(budget_end)
            if entry is not None and entry[1] > pos:
                walk_from = entry[1]
            end = walk_from
            limit = min(budget_end, hard_end)
            for p, bh in scan_headers(self.fd, walk_from, size):
                if p + bh.size > limit:
                    break
                end = p + bh.size
            if end == pos and min_one_batch:
                end = pos + h.size
        return pos, end - pos, h

    def read_next_offset(self) -> tuple[int, int]:
        """(next offset, end position of the last whole batch), scanning from the last
        index entry only; updates the max timestamp with what it sees."""
        self._check_indexes()
        n = self.offset_index.entries
        start = self.offset_index.entry(n - 1)[1] if n else 0
        next_offset, end = self.base_offset, start
        if n:
            next_offset = self.offset_index.entry(n - 1)[0] + 1
        since = 0
        for pos, h in scan_headers(self.fd, start, self.size):
            next_offset = h.next_offset
            end = pos + h.size
            since += h.size
            if h.max_timestamp > self.max_timestamp_so_far:
                self._max_ts, self._offset_of_max_ts = h.max_timestamp, h.last_offset
        self.bytes_since_last_index_entry = since
        return next_offset, end

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        self._check_indexes()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, starting_offset))
        if pos > self.size:
            pos = 0
        for p, h in scan_headers(self.fd, pos, self.size):
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                batch = os.pread(self.fd, h.size, p)
                for rec in iter_records(batch):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp
        return None

    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        return scan_headers(self.fd, start_position, self.size)

    # --- recovery / truncation ------------------------------------------------------

    def recover(self, max_index_size: int = 10 << 20, on_batch: Callable[[BatchHeader], None] | None = None,
                start_offset: int | None = None,
                on_producer_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        """Re-read every batch with CRC checks, rebuild both indexes, truncate at the first
        invalid batch. Returns the number of bytes truncated.

        ``on_producer_batch`` gets each batch that has a producer id, with its bytes: it
        replays producer state and rebuilds the ``.txnindex``, which is emptied first
        (Kafka's LogSegment.recover). Without it the ``.txnindex`` only loses the entries
        of truncated batches."""
        if on_producer_batch is not None:
            self.txn_index.reset()
        return self._rebuild(max_index_size, check=True, on_batch=on_batch, start_offset=start_offset,
                             on_producer_batch=on_producer_batch)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from batch headers (no CRC, no truncation)."""
        was_active = self.active
        self._rebuild(10 << 20, check=False)
        if was_active:
            self.make_active(10 << 20)

    def _rebuild(self, max_index_size: int, *, check: bool, on_batch: Callable[[BatchHeader], None] | None = None,
                 start_offset: int | None = None,
                 on_producer_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        needed = max(max_index_size, (self.size // max(self.index_interval_bytes, 1) + 2) * 12)
        self.offset_index.open_writable(needed)
        self.time_index.open_writable(needed)
        self.offset_index.reset()
        self.time_index.reset()
        self._indexes_checked = True
        valid = 0
        last_entry = 0
        max_ts, off_max = -1, self.base_offset
        expected = self.base_offset if start_offset is None else start_offset
        size = self.size
        interval = self.index_interval_bytes
        batches: Iterator = iter_batches(self.fd, 0, size) if check else (
            (p, h, None) for p, h in scan_headers(self.fd, 0, size))
        try:
            for _pos, h, view in batches:
                if h.base_offset < expected or h.last_offset - self.base_offset > INT32_MAX:
                    raise CorruptRecordError(f"batch at {valid}: offset {h.base_offset} is out of order (expected >= {expected})")
                if h.magic != 2:
                    raise CorruptRecordError(f"batch at {valid}: magic {h.magic}")
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, h.last_offset
                if valid - last_entry > interval:
                    self.offset_index.append(h.last_offset, valid)
                    self.time_index.maybe_append(max_ts, off_max)
                    last_entry = valid
                valid += h.size
                expected = h.next_offset
                if on_batch is not None:
                    on_batch(h)
                if on_producer_batch is not None and h.producer_id >= 0:
                    on_producer_batch(h, view)
        except (CorruptRecordError, InvalidRecordError) as e:  # (a marker that does not parse: Kafka's too)
            log.warning("found invalid data in %s at byte %d: %s", self.log_path, valid, e)
        truncated = 0
        if check and size > valid:
            truncated = size - valid
            os.ftruncate(self.fd, valid)
            self._size = valid
            log.warning("truncated %d invalid bytes at the end of %s", truncated, self.log_path)
            self.txn_index.truncate_to(expected)
        self._max_ts, self._offset_of_max_ts = max_ts, off_max
        if max_ts >= 0:
            self.time_index.maybe_append(max_ts, off_max, skip_full_check=True)
        self.bytes_since_last_index_entry = valid - last_entry
        self._rolling_ts = None
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos = found[0]
        was_active = self.active
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - pos
        self.txn_index.truncate_to(offset)
        os.ftruncate(self.fd, pos)
        self._size = pos
        self._max_ts = None
        self._rolling_ts = None
        if was_active:
            n = self.offset_index.entries
            self.bytes_since_last_index_entry = pos - (self.offset_index.entry(n - 1)[1] if n else 0)
        return removed
