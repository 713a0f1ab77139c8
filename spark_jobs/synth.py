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
import random
import struct
import sys
from collections.abc import Iterable

from protocol.compression import Codec
from protocol.records import build_batch, parse_header

__all__ = ["PartitionWriter", "write_checkpoint", "partition_dir", "write_demo_log_dir"]

T0 = 1_700_000_000_000  # ms: 2023-11-14T22:13:20Z


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


DEMO_PARTITIONS = 3
DEMO_BATCHES = 120  # per partition, 10 records each, one batch every 3 s: 6 minutes
DEMO_HOT_KEY = b"customer-42"


def write_demo_log_dir(log_dir: str) -> dict:
    """A demo log dir for the jobs (and their tests): ``orders`` (3 partitions, one hot key,
    every codec, 6 minutes of data) and ``__consumer_offsets`` with group ``billing``'s
    commits, a deleted group and an undecodable record; returns what the jobs should find."""
    from coordinator.records import (
        OffsetCommitValue,
        encode_group_metadata_key,
        encode_offset_commit_key,
        encode_offset_commit_value,
    )

    rng = random.Random(5)
    records = {}
    for p in range(DEMO_PARTITIONS):
        w = PartitionWriter(log_dir, "orders", p, segment_bytes=16000)
        n = 0
        for i in range(DEMO_BATCHES):
            recs = [(DEMO_HOT_KEY if rng.random() < 0.3 else f"customer-{rng.randint(0, 99)}".encode(), b"x" * 50)
                    for _ in range(10)]
            w.append(recs, timestamp=T0 + 3000 * i, compression=Codec(i % 5))
            n += len(recs)
        w.close()
        records[p] = n
    w = PartitionWriter(log_dir, "__consumer_offsets", 12)
    commits = {}
    for i in range(0, DEMO_BATCHES, 5):
        t = T0 + 3000 * i + 1500
        recs = []
        for p in range(DEMO_PARTITIONS):
            committed = max(0, 10 * i - 40)
            commits[p] = committed
            recs.append((encode_offset_commit_key("billing", "orders", p),
                         encode_offset_commit_value(OffsetCommitValue(committed, "", t))))
        recs.append((encode_group_metadata_key("billing"), b"\x00\x03not-a-real-group-metadata"))
        w.append(recs, timestamp=t)
    # a group whose offsets were deleted (tombstone) and a record no codec knows
    w.append([(encode_offset_commit_key("gone", "orders", 0), encode_offset_commit_value(OffsetCommitValue(3, "", T0)))],
             timestamp=T0)
    w.append([(encode_offset_commit_key("gone", "orders", 0), None)], timestamp=T0 + 1)
    w.append([(b"\x7f\x7f garbage", b"garbage")], timestamp=T0 + 2)
    w.close()
    return {"records": records, "commits": commits}


if __name__ == "__main__":
    # python -m spark_jobs.synth DIR: a demo log dir to try the jobs on
    if len(sys.argv) != 2:
        sys.exit("usage: python -m spark_jobs.synth LOG_DIR")
    print(write_demo_log_dir(sys.argv[1]))
