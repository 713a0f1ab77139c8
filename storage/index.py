"""OffsetIndex and TimeIndex: Kafka's fixed-width, big-endian, memory-mapped sparse indexes.

``.index``: 8-byte entries (int32 offset relative to the segment base, int32 byte position
in the .log), strictly increasing offsets. ``.timeindex``: 12-byte entries (int64
timestamp, int32 relative offset), timestamps and offsets both increasing.

While a segment is active its index files are preallocated to ``segment.index.bytes``
(rounded down to whole entries) and mapped once; on roll/close they are trimmed to the
valid entries, which is what lets a clean start read entry counts from file sizes. A
crashed preallocated file ends in zero entries; :meth:`open_writable` finds the real end
by binary search for the first all-zero entry after slot 0 (valid entries after slot 0
can never be all zeros because relative offsets strictly increase).

Mapping is lazy: nothing is opened until the first lookup, so reopening a log with many
segments costs one ``stat`` per file, not one mmap.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct

from .errors import CorruptIndexError

__all__ = ["OffsetIndex", "TimeIndex"]

#: disk space is allocated for a writable index a page at a time (see _Index.reserve): a
#: bigger chunk would cost real disk per partition, where the sparse file costs none
_RESERVE_CHUNK = mmap.PAGESIZE


class _Index:
    ENTRY: struct.Struct
    entry_size: int

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._file_size = 0  # size of the file when it was mapped
        self._dirty = False  # entries written since the last msync
        self._mm: mmap.mmap | None = None
        self._entries = -1  # -1: not opened yet
        self._capacity = 0  # entries the current mapping can hold
        self._reserved = 0  # bytes of the writable file known to have disk space allocated
        self.writable = False

    # --- lifecycle ------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._entries < 0:
            self._open_readonly()

    def _open_readonly(self) -> None:
        # No O_CREAT: a missing index must surface (the segment rebuilds it), and tools
        # such as dump-log must not create files. The descriptor is closed once mapped
        # (mmap keeps its own): thousands of partitions must not cost 2 fds per index.
        fd = os.open(self.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self._mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
        finally:
            os.close(fd)
        self._file_size = size
        self._entries = size // self.entry_size
        self._capacity = self._entries
        self.writable = False

    def open_writable(self, max_index_size: int) -> None:
        """Map for appending: preallocate to ``max_index_size`` (whole entries) and find
        the true entry count of a possibly zero-padded file."""
        self.close()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            n = size // self.entry_size
            if n:
                mm = mmap.mmap(fd, n * self.entry_size, access=mmap.ACCESS_READ)
                n = _valid_prefix(mm, n, self.entry_size)
                mm.close()
            cap = max(max_index_size // self.entry_size, n, 1)
            os.ftruncate(fd, cap * self.entry_size)
            self._mm = mmap.mmap(fd, cap * self.entry_size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self._file_size = cap * self.entry_size
        self._entries = n
        self._capacity = cap
        # the pages holding valid entries were written, so they have their disk space
        self._reserved = -(-n * self.entry_size // mmap.PAGESIZE) * mmap.PAGESIZE
        self.writable = True

    def reserve(self, entries: int) -> None:
        """Make sure the next ``entries`` appends have disk space. The preallocated file is
        sparse: the first write into one of its pages allocates it, and through the mapping
        a full disk answers that with SIGBUS, which kills the process. Allocating ahead
        turns it into an OSError (ENOSPC) here, which takes the log dir offline cleanly."""
        if not self.writable:
            return
        end = min((self._entries + entries) * self.entry_size, self._file_size)
        if end <= self._reserved:
            return
        upto = min(-(-end // _RESERVE_CHUNK) * _RESERVE_CHUNK, self._file_size)
        fd = os.open(self.path, os.O_RDWR)
        try:
            try:
                os.posix_fallocate(fd, self._reserved, upto - self._reserved)
            except OSError as e:
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                # no fallocate here: zeros written past the valid entries allocate as well
                os.pwrite(fd, bytes(upto - self._reserved), self._reserved)
        finally:
            os.close(fd)
        self._reserved = upto

    def trim_to_valid_size(self) -> None:
        """Drop the preallocated tail and switch back to a read-only mapping."""
        if self._entries < 0:
            return
        self.flush()
        n = self._entries
        self._close_map()
        os.truncate(self.path, n * self.entry_size)
        self._entries = -1
        self.writable = False

    def _close_map(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def flush(self) -> None:
        # msync of a 10 MiB map costs milliseconds even when clean: only when written
        if self.writable and self._mm is not None and self._dirty:
            self._mm.flush()
            self._dirty = False

    def close(self) -> None:
        if self.writable:
            self.trim_to_valid_size()
            return
        self._close_map()
        self._entries = -1

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds from scratch)."""
        self._ensure()
        self._entries = 0

    # --- queries --------------------------------------------------------------------

    @property
    def entries(self) -> int:
        self._ensure()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._ensure()
        return self._capacity

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def size_bytes(self) -> int:
        return self.entries * self.entry_size

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure()
        if not 0 <= n < self._entries:
            raise IndexError(n)
        return self._parse(n)

    def _parse(self, n: int) -> tuple[int, int]:
        raise NotImplementedError

    def _key(self, n: int) -> int:
        raise NotImplementedError

    def _largest_lower_bound(self, target: int) -> int:
        """Slot of the largest entry whose key is <= target, or -1."""
        self._ensure()
        n = self._entries
        if n == 0 or self._key(0) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _append_raw(self, *fields: int) -> None:
        if not self.writable:
            raise CorruptIndexError(f"{self.path}: append to an index that is not open for writing")
        if self._entries >= self._capacity:
            raise CorruptIndexError(f"{self.path}: index is full ({self._entries} entries)")
        assert self._mm is not None
        if (self._entries + 1) * self.entry_size > self._reserved:
            self.reserve(1)
        self.ENTRY.pack_into(self._mm, self._entries * self.entry_size, *fields)
        self._entries += 1
        self._dirty = True

    def _truncate_entries(self, n: int) -> None:
        self._ensure()
        self._entries = max(0, min(n, self._entries))
        if not self.writable:
            # A closed segment truncated (follower truncation): shrink the file too.
            self._close_map()
            os.truncate(self.path, self._entries * self.entry_size)
            self._entries = -1

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise CorruptIndexError(f"{self.path}: offset {offset} does not fit relative to base {self.base_offset}")
        return rel


def _valid_prefix(mm: mmap.mmap, n: int, size: int) -> int:
    """Count entries before the first all-zero entry (the zero-filled tail of a crash).

    An all-zero slot 0 is padding too: the first offset-index entry is never at position
    0 (entries are added only after index.interval.bytes of data), and losing a
    (timestamp 0, base offset) time entry only makes a lookup scan from the segment start.
    """
    zero = bytes(size)
    if n == 0 or mm[0:size] == zero:
        return 0
    lo, hi = 1, n  # first zero slot lies in [lo, hi]; hi == n means there is none
    while lo < hi:
        mid = (lo + hi) >> 1
        if mm[mid * size : (mid + 1) * size] == zero:
            hi = mid
        else:
            lo = mid + 1
    return lo


class OffsetIndex(_Index):
    """Sparse map offset -> position; each entry is (last offset of a batch, batch position)."""

    ENTRY = struct.Struct(">ii")
    entry_size = 8

    def _parse(self, n: int) -> tuple[int, int]:
        assert self._mm is not None
        rel, pos = self.ENTRY.unpack_from(self._mm, n * 8)
        return self.base_offset + rel, pos

    def _key(self, n: int) -> int:
        assert self._mm is not None
        return self.base_offset + struct.unpack_from(">i", self._mm, n * 8)[0]

    def lookup(self, target: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base, 0)."""
        slot = self._largest_lower_bound(target)
        if slot < 0:
            return self.base_offset, 0
        return self._parse(slot)

    def lookup_by_position(self, position: int) -> tuple[int, int] | None:
        """The last entry whose position is <= ``position`` (positions increase too)."""
        self._ensure()
        n = self._entries
        if n == 0 or self._parse(0)[1] > position:
            return None
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._parse(mid)[1] <= position:
                lo = mid
            else:
                hi = mid - 1
        return self._parse(lo)

    @property
    def last_offset(self) -> int:
        n = self.entries
        return self._parse(n - 1)[0] if n else self.base_offset

    def append(self, offset: int, position: int) -> None:
        n = self.entries
        if n and offset <= self._parse(n - 1)[0]:
            raise CorruptIndexError(f"{self.path}: offset {offset} is not above the last indexed offset")
        self._append_raw(self._relative(offset), position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._largest_lower_bound(offset)
        if slot < 0:
            self._truncate_entries(0)
        else:
            off, _ = self._parse(slot)
            self._truncate_entries(slot if off == offset else slot + 1)

    def sanity_check(self) -> None:
        """Kafka's OffsetIndex.sanityCheck, plus monotonic first/last entries."""
        self._ensure()
        if not self.writable and self._file_size % 8:
            raise CorruptIndexError(f"{self.path}: size is not a multiple of 8")
        n = self._entries
        if n:
            first_off, first_pos = self._parse(0)
            last_off, last_pos = self._parse(n - 1)
            if first_off < self.base_offset or last_off < first_off or last_pos < first_pos:
                raise CorruptIndexError(f"{self.path}: entries out of order (first {first_off}@{first_pos}, last {last_off}@{last_pos})")


class TimeIndex(_Index):
    """Sparse map timestamp -> offset; entries are (max timestamp so far, its offset)."""

    ENTRY = struct.Struct(">qi")
    entry_size = 12

    def _parse(self, n: int) -> tuple[int, int]:
        assert self._mm is not None
        ts, rel = self.ENTRY.unpack_from(self._mm, n * 12)
        return ts, self.base_offset + rel

    def _key(self, n: int) -> int:
        assert self._mm is not None
        return struct.unpack_from(">q", self._mm, n * 12)[0]

    @property
    def is_full(self) -> bool:
        # Kafka reserves the last slot for the entry written when the segment rolls.
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        n = self.entries
        return self._parse(n - 1) if n else (-1, self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base)."""
        slot = self._largest_lower_bound(timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self._parse(slot)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        n = self.entries
        if n:
            last_ts, last_off = self._parse(n - 1)
            if timestamp <= last_ts:
                return
            if offset < last_off:
                return  # never index an older offset for a newer timestamp
        elif timestamp < 0:
            return
        if not skip_full_check and self.is_full:
            return
        self._append_raw(timestamp, self._relative(offset))

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset`` (offsets are monotonic: scan back)."""
        n = self.entries
        while n and self._parse(n - 1)[1] >= offset:
            n -= 1
        self._truncate_entries(n)

    def sanity_check(self) -> None:
        self._ensure()
        if not self.writable and self._file_size % 12:
            raise CorruptIndexError(f"{self.path}: size is not a multiple of 12")
        n = self._entries
        if n:
            first_ts, first_off = self._parse(0)
            last_ts, last_off = self._parse(n - 1)
            if first_off < self.base_offset or last_off < first_off or last_ts < first_ts:
                raise CorruptIndexError(f"{self.path}: entries out of order")
