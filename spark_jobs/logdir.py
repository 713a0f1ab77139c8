"""Read-only view of a Krait/Kafka log dir: partitions, segments, indexes, checkpoints.

This module knows Kafka's on-disk layout and nothing about Spark, so planning, reading and
the tests/benchmarks share it. It deliberately does not import ``storage/``: the broker
may be writing these files while we read them, so every access here is read-only and
defensive. Index files are read with pread into numpy arrays (vectorised lookups, and
no mmap: see _read_index for why), index entries are treated as hints and checked against
the batch header they point at, and the active segment is read only up to the last whole
batch seen when the read was planned.

Layout::

    <log.dir>/<topic>-<partition>/<20-digit base offset>.log|.index|.timeindex
    <log.dir>/replication-offset-checkpoint   high watermarks
    <log.dir>/log-start-offset-checkpoint     log start offsets (after DeleteRecords)

Given several brokers' log dirs, a partition found in several of them is one partition
with several replicas: :func:`list_partitions` returns one replica of it, chosen as
:mod:`spark_jobs.replicas` explains (the highest high watermark, read up to it).
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from .aborted import aborted_mask
from .decode import (
    _HEADER,
    H_BASE_OFFSET,
    H_LAST_DELTA,
    H_MAX_TS,
    H_POS,
    H_SIZE,
    HEADER_SIZE,
    decode_batches,
    needs_records,
    preload_kernels,
    select_rows,
    walk_all_headers,
)
from .replicas import choose_replicas

__all__ = [
    "Segment",
    "PartitionLog",
    "Slice",
    "list_partitions",
    "read_checkpoint",
    "read_offset_index",
    "read_time_index",
    "read_slice",
    "read_records_python",
]

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]+$")
READ_CHUNK = 16 << 20  # bytes of .log read per step: large enough to amortise the Python work
# (protocol.records and protocol.errors are imported where used: they pull in the
# compression libraries, a second of imports that header-only reads and planning skip)
LATEST = 2**63 - 1


@dataclass(frozen=True)
class Segment:
    base_offset: int
    path: str  # the .log file

    @property
    def index_path(self) -> str:
        return self.path[:-4] + ".index"

    @property
    def timeindex_path(self) -> str:
        return self.path[:-4] + ".timeindex"


@dataclass
class PartitionLog:
    """One partition directory as found at planning time."""

    topic: str
    partition: int
    path: str
    segments: list[Segment]
    log_start_offset: int | None = None  # from log-start-offset-checkpoint
    high_watermark: int | None = None  # from replication-offset-checkpoint
    _end: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def earliest(self) -> int:
        """First readable offset (the log start offset can lie inside the first segment)."""
        first = self.segments[0].base_offset if self.segments else 0
        return max(first, self.log_start_offset or 0)

    def log_end(self) -> tuple[int, int]:
        """(log end offset, byte size of the last segment up to its last whole batch).

        Walks only the tail of the active segment, from its last index entry.
        """
        if self._end is None:
            if not self.segments:
                self._end = (self.log_start_offset or 0, 0)
            else:
                seg = self.segments[-1]
                pos, _ = lookup_position(seg, LATEST)
                headers, end = _walk_file(seg.path, pos)[0], None
                if not len(headers) and pos > 0:
                    pos = 0  # the entry pointed at a batch we cannot see whole: walk it all
                    headers = _walk_file(seg.path, 0)[0]
                next_offset = seg.base_offset
                end = pos
                if len(headers):
                    next_offset = int(headers[-1, H_BASE_OFFSET] + headers[-1, H_LAST_DELTA] + 1)
                    end = int(headers[-1, H_POS] + headers[-1, H_SIZE]) + pos
                self._end = (next_offset, end)
        return self._end

    def end_offset(self, ignore_high_watermark: bool = False) -> int:
        """The offset reads stop at: the high watermark when the checkpoint has one (never
        past the log end), else the log end offset (the last whole batch)."""
        leo = self.log_end()[0]
        if self.high_watermark is None or ignore_high_watermark:
            return leo
        return min(self.high_watermark, leo)


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Kafka's text checkpoint: "0", a count N, then N lines "topic partition offset".

    A missing or half-written file (the broker replaces it atomically, but be safe) gives
    what could be parsed.
    """
    out: dict[tuple[str, int], int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    if len(lines) < 2 or lines[0].strip() != "0":
        return out
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            continue
    return out


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``topic-3`` -> ("topic", 3); None for anything else (e.g. ``x-0.abc-delete``)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not topic or not _TOPIC_RE.match(topic):
        return None
    return topic, int(part)


def list_segments(path: str) -> list[Segment]:
    segs = []
    for name in os.listdir(path):
        m = _SEGMENT_RE.match(name)
        if m:
            segs.append(Segment(int(m.group(1)), os.path.join(path, name)))
    segs.sort(key=lambda s: s.base_offset)
    return segs


def list_partitions(log_dirs: list[str], *, all_replicas: bool = False) -> list[PartitionLog]:
    """The partitions under the given log dirs, sorted by (topic, partition): one replica
    of each (:func:`spark_jobs.replicas.choose_replicas`), or with ``all_replicas`` every
    partition directory (replicas of one partition in ``log_dirs`` order)."""
    found = []
    for d in log_dirs:
        if not os.path.isdir(d):
            raise FileNotFoundError(f"log dir {d!r} does not exist")
        hws = read_checkpoint(os.path.join(d, "replication-offset-checkpoint"))
        starts = read_checkpoint(os.path.join(d, "log-start-offset-checkpoint"))
        for name in sorted(os.listdir(d)):
            tp = parse_partition_dir(name)
            path = os.path.join(d, name)
            if tp is None or not os.path.isdir(path):
                continue
            found.append(PartitionLog(tp[0], tp[1], path, list_segments(path), starts.get(tp), hws.get(tp)))
    found.sort(key=lambda p: (p.topic, p.partition))  # stable: replicas stay in log_dirs order
    return found if all_replicas else choose_replicas(found)


# --- indexes ----------------------------------------------------------------------------


_OFFSET_ENTRY = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">i4")])
_INDEX_CACHE: dict[tuple[str, int, int], np.ndarray] = {}


def _read_index(path: str, dtype: np.dtype) -> np.ndarray:
    """The real entries of an index file as a numpy structured array (big-endian fields).

    Why pread and not mmap: the broker preallocates the active segment's indexes (10 MB of
    zeros) and truncates them to their real size when the segment rolls. Touching a mapped
    page past the new end would kill the Spark worker with SIGBUS; a pread past the end just
    comes back short. The end of the real entries is found by binary search over single
    entries (real entries have strictly increasing first fields, then zeros follow; the
    first entry may legitimately be all zero), so a mostly-empty 10 MB index costs ~20
    small reads plus one read of its real part. The result is cached per (size, mtime); a
    stale entry (mmap writes may not bump mtime at once) only means fewer hints, never a
    wrong one, since every entry is checked against the batch it points at.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return np.empty(0, dtype=dtype)
    try:
        st = os.fstat(fd)
        key = (path, st.st_size, st.st_mtime_ns)
        cached = _INDEX_CACHE.get(key)
        if cached is not None:
            return cached
        width = dtype.itemsize
        n = st.st_size // width

        def is_zero(i: int) -> bool:
            raw = os.pread(fd, width, i * width)
            return len(raw) < width or not any(raw)

        lo, hi = 1, n
        while lo < hi:  # first i >= 1 whose entry is all zero (or missing)
            mid = (lo + hi) // 2
            if is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        count = min(lo, n)
        data = os.pread(fd, count * width, 0) if count else b""
        entries = np.frombuffer(data[: len(data) // width * width], dtype=dtype)
        if len(_INDEX_CACHE) > 4096:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = entries
        return entries
    finally:
        os.close(fd)


def read_offset_index(seg: Segment) -> tuple[np.ndarray, np.ndarray]:
    """(absolute offsets, positions) of the .index entries, int64, trailing zeros dropped."""
    raw = _read_index(seg.index_path, _OFFSET_ENTRY)
    n = len(raw)
    rel = raw["rel"].astype(np.int64)
    pos = raw["pos"].astype(np.int64)
    # keep the strictly increasing prefix: a half-written entry must not mislead a lookup
    ok = np.ones(n, dtype=bool)
    if n > 1:
        ok[1:] = (np.diff(rel) > 0) & (np.diff(pos) > 0)
    k = int(np.argmin(ok)) if not ok.all() else n
    return rel[:k] + seg.base_offset, pos[:k]


def read_time_index(seg: Segment) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps ms, absolute offsets) of the .timeindex entries, trailing zeros dropped."""
    raw = _read_index(seg.timeindex_path, _TIME_ENTRY)
    return raw["ts"].astype(np.int64), raw["rel"].astype(np.int64) + seg.base_offset


def _entry_checks(seg: Segment, offset: int, pos: int) -> bool:
    """Does the batch at ``pos`` exist and contain or start after... ``offset``'s batch?

    Index entries are hints written by another process: accept one only if a magic-2
    batch header sits at that position and it ends at or after the entry's offset."""
    try:
        with open(seg.path, "rb") as f:
            f.seek(pos)
            raw = f.read(HEADER_SIZE)
    except OSError:
        return False
    if len(raw) < HEADER_SIZE:
        return False
    base, _blen, _epoch, magic, _crc, _attrs, last_delta, *_ = _HEADER.unpack_from(raw)
    return magic == 2 and base <= offset <= base + last_delta and base >= seg.base_offset


def lookup_position(seg: Segment, offset: int) -> tuple[int, int]:
    """(file position, index entry number) to start scanning from to find ``offset``.

    Kafka's lookup: the last index entry with offset <= target. The batch at that
    position contains the entry's offset (whether the storage indexes a batch by its base
    or its last offset), so every later offset lies at or after it.
    """
    offsets, positions = read_offset_index(seg)
    i = bisect.bisect_right(offsets.tolist(), offset) - 1 if len(offsets) else -1
    while i >= 0 and not _entry_checks(seg, int(offsets[i]), int(positions[i])):
        i -= 1
    return (int(positions[i]) if i >= 0 else 0), i


def end_position(seg: Segment, offset: int, limit: int) -> int:
    """A file position at or after which every batch starts at an offset >= ``offset``.

    Take the first index entry with offset >= target: its batch may still contain earlier
    offsets (last-offset indexing), so use the entry after it."""
    offsets, positions = read_offset_index(seg)
    k = bisect.bisect_left(offsets.tolist(), offset)
    if k + 1 < len(offsets) and int(positions[k + 1]) < limit and _entry_checks(seg, int(offsets[k + 1]), int(positions[k + 1])):
        return int(positions[k + 1])
    return limit


def split_points(seg: Segment, start: int, end: int, pieces: int) -> list[int]:
    """Up to ``pieces`` - 1 batch-boundary positions (from the .index) splitting
    [start, end) into roughly equal byte ranges."""
    if pieces <= 1:
        return []
    offsets, positions = read_offset_index(seg)
    inside = [(int(o), int(p)) for o, p in zip(offsets.tolist(), positions.tolist(), strict=True) if start < p < end]
    if not inside:
        return []
    cuts = []
    step = (end - start) / pieces
    j = 0
    for k in range(1, pieces):
        target = start + k * step
        while j < len(inside) and inside[j][1] < target:
            j += 1
        if j < len(inside) and (not cuts or inside[j][1] > cuts[-1]) and _entry_checks(seg, *inside[j]):
            cuts.append(inside[j][1])
    return cuts


# --- time -> offset -------------------------------------------------------------------


def _walk_file(path: str, start: int, end: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(max(0, end - start))
    buf = np.frombuffer(data, dtype=np.uint8)
    headers, _ = walk_all_headers(buf)
    return headers, buf


def offset_for_timestamp(plog: PartitionLog, ts: int, lo: int, hi: int, *, exact: bool = True) -> int:
    """Kafka's ListOffsets by time, within [lo, hi): the earliest offset whose record
    timestamp is >= ts, or ``hi`` if none.

    Uses .timeindex to skip: an entry (t, o) with t < ts means every record up to o has a
    timestamp <= t < ts (entries record the max timestamp so far), so the scan starts at
    the last such entry. With ``exact=False`` the answer is the base offset of the first
    batch whose maxTimestamp >= ts (enough to skip work for a pushed-down filter).
    """
    segs = plog.segments
    for i, seg in enumerate(segs):
        seg_end = segs[i + 1].base_offset if i + 1 < len(segs) else None
        if seg_end is not None and seg_end <= lo:
            continue
        if seg.base_offset >= hi:
            break
        tss, offs = read_time_index(seg)
        k = int(np.searchsorted(tss, ts, side="left")) - 1  # last entry with t < ts
        start_off = max(lo, int(offs[k])) if k >= 0 else lo
        pos, _ = lookup_position(seg, start_off)
        limit = plog.log_end()[1] if i == len(segs) - 1 else None
        headers, buf = _walk_file(seg.path, pos, limit)
        if not len(headers):
            continue
        last = headers[:, H_BASE_OFFSET] + headers[:, H_LAST_DELTA]
        cand = np.nonzero((headers[:, H_MAX_TS] >= ts) & (last >= lo) & (headers[:, H_BASE_OFFSET] < hi))[0]
        for j in cand.tolist():
            if not exact:
                return max(lo, int(headers[j, H_BASE_OFFSET]))
            p = int(headers[j, H_POS])
            from protocol.records import iter_records

            for rec in iter_records(buf[p : p + int(headers[j, H_SIZE])].tobytes()):
                if lo <= rec.offset < hi and rec.timestamp >= ts:
                    return rec.offset
    return hi


# --- slices ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """A byte range of one segment to read, with the offset range to keep."""

    topic: str
    partition: int
    path: str
    start: int  # file position of the first batch
    end: int  # read no batch that starts at or after this position (nor runs past it)
    offset_lo: int
    offset_hi: int
    ts_lo: int | None = None  # batches with maxTimestamp below this can be skipped
    size_hint: int = 0
    #: read_committed: (producer id, first offset, ABORT marker offset) of the aborted
    #: transactions overlapping the offset range, whose batches are skipped
    aborted: tuple[tuple[int, int, int], ...] = ()


def plan_partition(plog: PartitionLog, lo: int, hi: int, *, ts_lo: int | None = None) -> list[Slice]:
    """One slice per segment overlapping [lo, hi), positions resolved through .index."""
    out = []
    segs = plog.segments
    leo, last_size = plog.log_end()
    hi = min(hi, leo)
    if lo >= hi:
        return out
    for i, seg in enumerate(segs):
        seg_end_off = segs[i + 1].base_offset if i + 1 < len(segs) else leo
        if seg_end_off <= lo or seg.base_offset >= hi:
            continue  # never opened
        try:
            size = last_size if i == len(segs) - 1 else os.path.getsize(seg.path)
        except OSError:
            continue  # deleted by retention since listing
        start = lookup_position(seg, lo)[0] if lo > seg.base_offset else 0
        end = end_position(seg, hi, size) if hi < seg_end_off else size
        if start < end:
            out.append(Slice(plog.topic, plog.partition, seg.path, start, end, lo, hi, ts_lo, end - start))
    return out


def split_slices(slices: list[Slice], min_partitions: int) -> list[Slice]:
    """Split the biggest slices at .index entries until there are >= min_partitions."""
    if len(slices) >= min_partitions:
        return slices
    total = sum(s.size_hint for s in slices) or 1
    out = []
    for s in slices:
        want = max(1, round(min_partitions * s.size_hint / total + 0.4999))
        cuts = split_points(Segment(0, s.path), s.start, s.end, want)
        bounds = [s.start, *cuts, s.end]
        for a, b in zip(bounds, bounds[1:], strict=False):
            out.append(replace(s, start=a, end=b, size_hint=b - a))
    return out


def read_slice(s: Slice, schema: pa.Schema, *, chunk: int = READ_CHUNK) -> Iterator[pa.RecordBatch]:
    """Decode the slice into Arrow batches of the given schema (one per ~chunk bytes).

    Control batches are skipped, and so are the batches of the slice's aborted
    transactions (read_committed); a torn tail ends the read quietly. A missing file (a
    segment deleted by retention after planning) yields nothing.

    Only the schema's columns are decoded (any subset of the source's, in any order): see
    ``decode.decode_batches(lazy=True)``; without key, value, headers and timestamp the
    records are not walked at all, and numba is not even loaded.
    """
    if needs_records(schema):
        preload_kernels()
    try:
        f = open(s.path, "rb")
    except FileNotFoundError:
        return
    try:
        pos = s.start
        while pos < s.end:
            want = min(chunk, s.end - pos)
            data = os.pread(f.fileno(), want, pos)
            if not data:
                return
            buf = np.frombuffer(data, dtype=np.uint8)
            headers, used = walk_all_headers(buf)
            if not len(headers):
                if len(data) < want:
                    return  # torn tail
                # one batch larger than the chunk: read exactly it
                if len(data) >= 12:
                    size = int.from_bytes(data[8:12], "big", signed=True) + 12
                    if size > s.end - pos:
                        return  # runs past the planned end: torn when planned
                    if size > len(data):
                        chunk = size
                        continue
                from protocol.errors import CorruptRecordError

                raise CorruptRecordError(f"{s.path}: no valid batch at position {pos}")
            keep = select_rows(headers, s.offset_lo, s.offset_hi, s.ts_lo)
            if s.aborted:
                keep &= ~aborted_mask(headers, s.aborted)
            sel = headers[keep]
            if len(sel):
                yield decode_batches(buf, sel, topic=s.topic, partition=s.partition, schema=schema,
                                     offset_lo=s.offset_lo, offset_hi=s.offset_hi, base_position=pos, lazy=True)
            if int(headers[-1, H_BASE_OFFSET]) >= s.offset_hi:
                return
            pos += used
            if len(data) < want and used == len(data):
                return
    finally:
        f.close()


def read_records_python(log_dirs: list[str], topics: list[str] | None = None, *,
                        ignore_high_watermark: bool = True) -> list[dict]:
    """Reference reader: every record as a dict with the data source's columns, decoded
    record by record with protocol.records (slow, independent of decode.py).

    Meant for tests: compare ``df.collect()`` rows (as dicts) with this list.
    """
    from protocol.records import iter_headers, iter_records

    rows = []
    for plog in list_partitions(log_dirs):
        if topics is not None and plog.topic not in topics:
            continue
        lo, hi = plog.earliest, plog.end_offset(ignore_high_watermark)
        leo, last_size = plog.log_end()
        for i, seg in enumerate(plog.segments):
            with open(seg.path, "rb") as f:
                data = f.read() if i < len(plog.segments) - 1 else f.read(last_size)
            for pos, h in iter_headers(data):
                if h.is_control:
                    continue
                for rec in iter_records(data, pos):
                    if lo <= rec.offset < hi:
                        rows.append({
                            "key": rec.key, "value": rec.value, "topic": plog.topic, "partition": plog.partition,
                            "offset": rec.offset, "timestamp_ms": rec.timestamp,
                            "timestampType": 1 if h.is_log_append_time else 0,
                            "headers": [(k, v) for k, v in rec.headers],
                        })
    return rows


def whole_partition_slices(log_dirs: list[str], topics: list[str] | None = None, *,
                           include_internal: bool = False) -> list[Slice]:
    """One slice per segment covering everything readable (for batch-level jobs)."""
    out = []
    for plog in list_partitions(log_dirs):
        if topics is not None and plog.topic not in topics:
            continue
        if topics is None and not include_internal and plog.topic.startswith("__"):
            continue
        out.extend(plan_partition(plog, plog.earliest, plog.end_offset(True)))
    return out


def batch_stats(s: Slice) -> list[dict]:
    """Batch-level totals of one slice per compression codec: batches, records, bytes on
    disk, control batches, offset and timestamp ranges (headers only, no decoding)."""
    from protocol.compression import codec_name
    from protocol.records import ATTR_COMPRESSION_MASK, ATTR_CONTROL

    stats: dict[str, dict] = {}
    try:
        with open(s.path, "rb") as f:
            f.seek(s.start)
            buf = np.frombuffer(f.read(s.end - s.start), dtype=np.uint8)
    except FileNotFoundError:
        return []
    headers, _ = walk_all_headers(buf)
    for codec in np.unique(headers[:, 4] & ATTR_COMPRESSION_MASK).tolist() if len(headers) else []:
        h = headers[(headers[:, 4] & ATTR_COMPRESSION_MASK) == codec]
        control = (h[:, 4] & ATTR_CONTROL) != 0
        data = h[~control]
        stats[codec_name(codec)] = {
            "topic": s.topic, "partition": s.partition, "codec": codec_name(codec),
            "batches": int(len(h)), "control_batches": int(control.sum()),
            "records": int(data[:, 9].sum()) if len(data) else 0,
            "bytes": int(h[:, H_SIZE].sum()),
            "min_offset": int(h[:, H_BASE_OFFSET].min()),
            "max_offset": int((h[:, H_BASE_OFFSET] + h[:, H_LAST_DELTA]).max()),
            "min_timestamp": int(data[:, 6].min()) if len(data) else None,
            "max_timestamp": int(data[:, H_MAX_TS].max()) if len(data) else None,
        }
    return list(stats.values())
