"""Write log dirs in Kafka's on-disk layout, for tests and benchmarks of the Spark reader.

An independent, minimal writer (not ``storage/``): it follows Kafka's LogSegment.append
rules so the reader is tested against Kafka's conventions, not against our own broker's
choices: an offset index entry (last offset of the batch, batch start position) once more
than ``index_interval`` bytes were appended since the previous entry; a time index entry
(max timestamp so far, its batch's last offset) at the same moment when the max timestamp
grew, and one more at roll. Indexes can be preallocated with zeros like Kafka's active
segment. Batches are built with ``protocol.records.build_batch``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

from protocol.records import build_batch, parse_header

__all__ = ["PartitionWriter", "write_checkpoint", "partition_dir"]


def partition_dir(log_dir: str, topic: str, partition: int) -> str:
    return os.path.join(log_dir, f"{topic}-{partition}")


def write_checkpoint(path: str, entries: dict[tuple[str, int], int]) -> None:
    """Kafka's text checkpoint format, replaced atomically like the broker does."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


class PartitionWriter:
    """Append batches to one partition directory, rolling segments like Kafka."""

    def __init__(self, log_dir: str, topic: str, partition: int, *, segment_bytes: int = 1 << 20,
                 index_interval: int = 4096, preallocate_index: int = 0, start_offset: int = 0) -> None:
        self.dir = partition_dir(log_dir, topic, partition)
        os.makedirs(self.dir, exist_ok=True)
        self.topic, self.partition = topic, partition
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        self.preallocate_index = preallocate_index
        self.next_offset = start_offset
        self._log = self._index = self._tindex = None
        self._open(start_offset)

    # --- segment lifecycle ----------------------------------------------------------
    def _open(self, base: int) -> None:
        self.base = base
        name = os.path.join(self.dir, f"{base:020d}")
        self._log = open(name + ".log", "ab")
        self._index = open(name + ".index", "wb+")
        self._tindex = open(name + ".timeindex", "wb+")
        if self.preallocate_index:
            # Kafka preallocates the active segment's indexes (zero-filled) and trims at roll
            self._index.truncate(self.preallocate_index * 8)
            self._tindex.truncate(self.preallocate_index * 12)
        self._n_index = self._n_tindex = 0
        self._size = 0
        self._since_entry = 0
        self._max_ts = -1
        self._max_ts_offset = base
        self._last_tindex_ts = -1

    def _append_time_entry(self, ts: int, offset: int) -> None:
        if ts > self._last_tindex_ts:
            self._tindex.seek(self._n_tindex * 12)
            self._tindex.write(struct.pack(">qi", ts, offset - self.base))
            self._tindex.flush()
            self._n_tindex += 1
            self._last_tindex_ts = ts

    def roll(self) -> None:
        """Close the active segment (final time index entry, trim indexes) and open the next."""
        self._close_segment()
        self._open(self.next_offset)

    def _close_segment(self) -> None:
        if self._max_ts >= 0:
            self._append_time_entry(self._max_ts, self._max_ts_offset)
        self._index.truncate(self._n_index * 8)
        self._tindex.truncate(self._n_tindex * 12)
        for f in (self._log, self._index, self._tindex):
            f.close()

    def close(self) -> None:
        self._close_segment()

    # --- appends --------------------------------------------------------------------
    def append_raw(self, batch: bytes) -> int:
        """Append an already-built batch whose base offset is already right."""
        h = parse_header(batch)
        if self._size > 0 and self._size + len(batch) > self.segment_bytes:
            self.roll()
        position = self._size
        self._log.write(batch)
        self._log.flush()
        self._size += len(batch)
        if h.max_timestamp > self._max_ts:
            self._max_ts = h.max_timestamp
            self._max_ts_offset = h.last_offset
        if self._since_entry > self.index_interval:
            # index entries are written after the batch, like Kafka: a reader that sees an
            # entry can always see its batch
            self._index.seek(self._n_index * 8)
            self._index.write(struct.pack(">ii", h.last_offset - self.base, position))
            self._index.flush()
            self._n_index += 1
            self._append_time_entry(self._max_ts, self._max_ts_offset)
            self._since_entry = 0
        self._since_entry += len(batch)
        self.next_offset = h.next_offset
        return h.base_offset

    def append(self, records: Iterable, **kwargs: object) -> int:
        """Build a batch at the next offset with ``build_batch(records, **kwargs)``; returns
        its base offset."""
        batch = build_batch(records, base_offset=self.next_offset, **kwargs)
        return self.append_raw(batch)
