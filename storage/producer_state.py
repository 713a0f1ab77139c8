"""Idempotent-producer bookkeeping for one partition, and its ``.snapshot`` files.

For every producer id we keep the epoch and the metadata of its last 5 batches (Kafka's
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``). An append is checked before it is written
(:meth:`ProducerStateManager.prepare`): a retry of one of those 5 batches is a duplicate
(the broker answers with the original offsets), an older epoch is fenced, a sequence gap
is OUT_OF_ORDER_SEQUENCE_NUMBER. The checked updates are applied only after the write
succeeded (:meth:`apply`).

Snapshots use Kafka's layout exactly (ProducerStateManager.writeSnapshot, version 1)::

    version int16 | crc uint32 (CRC32C of everything after it) | count int32 |
    count x (producer_id int64, epoch int16, last_sequence int32, last_offset int64,
             offset_delta int32, timestamp int64, coordinator_epoch int32,
             current_txn_first_offset int64)

named ``<offset, 20 digits>.snapshot`` where offset is the log end offset they cover.
Like Kafka, a snapshot stores only the last batch per producer, so after a restart a
retry of the 2nd..5th most recent batch is not recognised as a duplicate unless the log
tail after the snapshot is replayed (it is, from the snapshot offset to the log end).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from crc32c import crc32c

from protocol.records import BatchHeader

from .errors import InvalidProducerEpochError, OutOfOrderSequenceError

__all__ = ["BatchMetadata", "ProducerStateEntry", "ProducerStateManager", "SNAPSHOT_SUFFIX",
           "read_snapshot", "write_snapshot"]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
_VERSION = 1
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
NO_EPOCH = -1
INT32_MAX = 0x7FFFFFFF


@dataclass(slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        s = self.last_seq - self.offset_delta
        return s if s >= 0 else s + INT32_MAX + 1

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.coordinator_epoch, self.current_txn_first_offset, self.last_timestamp)

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        last_seq = h.last_sequence
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def write_snapshot(path: str, entries: list[ProducerStateEntry]) -> None:
    """Write Kafka's snapshot layout atomically (tmp + fsync + rename)."""
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        b = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(e.producer_id, e.epoch, b.last_seq if b else -1, b.last_offset if b else -1,
                            b.offset_delta if b else 0, b.timestamp if b else e.last_timestamp,
                            e.coordinator_epoch, e.current_txn_first_offset)
    data = struct.pack(">hI", _VERSION, crc32c(body)) + body
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    """Parse a snapshot; raises ValueError on a bad version, CRC or length."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEAD.size:
        raise ValueError(f"{path}: snapshot is truncated")
    version, crc, count = _HEAD.unpack_from(data)
    if version != _VERSION:
        raise ValueError(f"{path}: snapshot has unknown version {version}")
    if crc32c(data[6:]) != crc:
        raise ValueError(f"{path}: snapshot CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise ValueError(f"{path}: snapshot length does not match its {count} entries")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
        e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn_first, last_timestamp=ts)
        if last_off >= 0:
            e.batches.append(BatchMetadata(last_seq, last_off, delta, ts))
        out.append(e)
    return out


def snapshot_offset(name: str) -> int | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if stem.isdigit() else None


class ProducerStateManager:
    """Producer entries of one partition plus its snapshot files."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the log offset up to which state is known

    # --- append path ---------------------------------------------------------------

    def prepare(self, headers: list[BatchHeader], base_offset: int
                ) -> tuple[BatchMetadata | None, dict[int, ProducerStateEntry]]:
        """Check a client append. Returns (duplicate, pending updates).

        ``duplicate`` is the metadata of the original batch when the append retries one of
        the last 5 batches; raises OutOfOrderSequenceError / InvalidProducerEpochError.
        """
        pending: dict[int, ProducerStateEntry] = {}
        offset = base_offset
        for h in headers:
            last = offset + h.last_offset_delta
            if h.producer_id >= 0:
                cur = pending.get(h.producer_id) or self.producers.get(h.producer_id)
                if cur is not None and h.base_sequence >= 0:
                    dup = cur.find_duplicate(h)
                    if dup is not None:
                        return dup, {}
                entry = cur.copy() if cur is not None else ProducerStateEntry(h.producer_id)
                self._check(entry, h)
                self._update(entry, h, last)
                pending[h.producer_id] = entry
            offset = last + 1
        return None, pending

    @staticmethod
    def _check(entry: ProducerStateEntry, h: BatchHeader) -> None:
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch {h.producer_epoch} of producer {h.producer_id} is older than the current epoch {entry.epoch}")
        if h.base_sequence < 0:
            return
        if h.producer_epoch != entry.epoch:
            # A new (or bumped) epoch must start at sequence 0, except for a producer we
            # know nothing about (its state expired or was removed with old segments).
            if h.base_sequence != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {h.producer_id}: new epoch {h.producer_epoch} must start at sequence 0, got {h.base_sequence}")
        elif entry.batches and not _in_sequence(entry.last_seq, h.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {h.producer_id}: out of order sequence {h.base_sequence} (last {entry.last_seq})")

    @staticmethod
    def _update(entry: ProducerStateEntry, h: BatchHeader, last_offset: int) -> None:
        if h.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = h.producer_epoch
        if h.base_sequence >= 0 and not h.is_control:
            entry.batches.append(BatchMetadata(h.last_sequence, last_offset, h.last_offset_delta, h.max_timestamp))
        entry.last_timestamp = h.max_timestamp
        if h.is_transactional:
            if h.is_control:
                entry.current_txn_first_offset = -1
            elif entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = last_offset - h.last_offset_delta

    def apply(self, pending: dict[int, ProducerStateEntry], end_offset: int) -> None:
        self.producers.update(pending)
        self.map_end_offset = end_offset

    def replay(self, h: BatchHeader) -> None:
        """Update from a batch read back from the log (no validation, like Kafka replicas)."""
        if h.producer_id >= 0:
            entry = self.producers.get(h.producer_id) or ProducerStateEntry(h.producer_id)
            self._update(entry, h, h.last_offset)
            self.producers[h.producer_id] = entry
        self.map_end_offset = h.next_offset

    def last_sequence(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.last_seq if e else -1

    def producer_epoch(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.epoch if e else NO_EPOCH

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` and not in a transaction."""
        dead = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and e.last_timestamp >= 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in dead:
            del self.producers[pid]
        return len(dead)

    # --- snapshots -----------------------------------------------------------------

    def snapshot_files(self) -> list[tuple[int, str]]:
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            off = snapshot_offset(name)
            if off is not None:
                out.append((off, os.path.join(self.dir, name)))
        return sorted(out)

    def take_snapshot(self, offset: int | None = None) -> str:
        off = self.map_end_offset if offset is None else offset
        path = os.path.join(self.dir, f"{off:020d}{SNAPSHOT_SUFFIX}")
        write_snapshot(path, list(self.producers.values()))
        return path

    def load(self, max_offset: int) -> int:
        """Load the newest readable snapshot at or below ``max_offset`` and return its
        offset (the log is replayed from there); snapshots above it are deleted. Returns
        -1 when there is none."""
        self.producers = {}
        for off, path in reversed(self.snapshot_files()):
            if off > max_offset:
                _unlink(path)
                continue
            try:
                entries = read_snapshot(path)
            except (ValueError, OSError, struct.error) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
                _unlink(path)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.map_end_offset = off
            return off
        self.map_end_offset = 0
        return -1

    def delete_snapshots_below(self, offset: int, keep_latest: int = 2) -> None:
        files = self.snapshot_files()
        for off, path in files[:-keep_latest] if keep_latest else files:
            if off < offset:
                _unlink(path)

    def delete_snapshots_above(self, offset: int) -> None:
        for off, path in self.snapshot_files():
            if off > offset:
                _unlink(path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
