"""Idempotent-producer bookkeeping for one partition, and its ``.snapshot`` files.

For every producer id we keep the epoch and the metadata of its last 5 batches (Kafka's
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``). An append is checked before it is written
(:meth:`ProducerStateManager.prepare`): a retry of one of those 5 batches is a duplicate
(the broker answers with the original offsets), an older epoch is fenced, a sequence gap
is OUT_OF_ORDER_SEQUENCE_NUMBER. The checked updates are applied only after the write
succeeded (:meth:`apply`).

Transactions (Kafka's ProducerAppendInfo and the ongoing/unreplicated transactions of its
ProducerStateManager): a producer's first transactional batch opens its transaction
(``current_txn_first_offset``, and an entry in :attr:`ProducerStateManager.ongoing`); the
COMMIT/ABORT control batch the coordinator writes closes it, returning a
:class:`storage.transactions.CompletedTxn`. A completed transaction stays *unreplicated*
until the high watermark passes its marker; the first offset of the oldest ongoing or
unreplicated transaction is the first unstable offset, which bounds the LSO. Only batches
with the transactional or control attribute bit take this path: an ordinary append costs
one bit test per idempotent batch more than before.

Snapshots use Kafka's layout exactly (ProducerStateManager.writeSnapshot, version 1, the
only one Kafka has: the ProducerSnapshot schema, with CurrentTxnFirstOffset)::

    version int16 | crc uint32 (CRC32C of everything after it) | count int32 |
    count x (producer_id int64, epoch int16, last_sequence int32, last_offset int64,
             offset_delta int32, timestamp int64, coordinator_epoch int32,
             current_txn_first_offset int64)

named ``<offset, 20 digits>.snapshot`` where offset is the log end offset they cover.
Like Kafka, a snapshot stores only the last batch per producer, so after a restart a
retry of the 2nd..5th most recent batch is not recognised as a duplicate unless the log
tail after the snapshot is replayed (it is, from the snapshot offset to the log end).
Loading a snapshot reopens the transactions its entries have open.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from crc32c import crc32c

from protocol.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, EndTxnMarker, parse_control_batch

from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .transactions import SENTINEL_GUARD, CompletedTxn, TxnAppend, VerificationGuard, VerificationStateEntry
from .txn_index import AbortedTxn, TransactionIndex

__all__ = ["BatchMetadata", "ProducerStateEntry", "ProducerStateManager", "SNAPSHOT_SUFFIX",
           "read_snapshot", "write_snapshot", "read_marker"]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
_VERSION = 1
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
NO_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
_TXN_BITS = ATTR_TRANSACTIONAL | ATTR_CONTROL
INT64_MAX = (1 << 63) - 1


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
        # Timestamp is the entry's lastTimestamp, as Kafka writes it: after a marker that
        # is the marker's, newer than the last batch's
        body += _ENTRY.pack(e.producer_id, e.epoch, b.last_seq if b else -1, b.last_offset if b else -1,
                            b.offset_delta if b else 0, e.last_timestamp, e.coordinator_epoch,
                            e.current_txn_first_offset)
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
    """Producer entries of one partition, its transactions, plus its snapshot files."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the log offset up to which state is known
        #: open transactions: first offset -> producer id (Kafka's ongoingTxns)
        self.ongoing: dict[int, int] = {}
        #: completed transactions whose marker is not below the high watermark yet:
        #: first offset -> (producer id, marker offset) (Kafka's unreplicatedTxns)
        self.unreplicated: dict[int, tuple[int, int]] = {}
        #: producers whose next transaction is being verified (KIP-890)
        self.verifications: dict[int, VerificationStateEntry] = {}

    # --- append path ---------------------------------------------------------------

    def prepare(self, headers: list[BatchHeader], base_offset: int, buf: bytes | bytearray | memoryview | None = None,
                verification_guard: VerificationGuard | None = None, coordinator: bool = False
                ) -> tuple[BatchMetadata | None, dict[int, ProducerStateEntry], TxnAppend | None]:
        """Check a leader append (Kafka's origin CLIENT, or COORDINATOR with
        ``coordinator``: the group coordinator's transactional offset commits and the
        markers, whose sequences are not the producer's, so only epochs are checked).
        Returns (duplicate, pending updates, transactions started and completed, or None).

        ``duplicate`` is the metadata of the original batch when the append retries one of
        the last 5 batches; raises OutOfOrderSequenceError / InvalidProducerEpochError /
        InvalidTxnStateError / TransactionCoordinatorFencedError. Control batches (markers)
        are read from ``buf``. ``verification_guard`` is given when the broker verifies
        transactions (KIP-890): a transactional batch that opens a transaction must carry
        the guard stored by :meth:`maybe_create_verification_state_entry`.
        """
        pending: dict[int, ProducerStateEntry] = {}
        txn: TxnAppend | None = None
        offset = base_offset
        for h in headers:
            last = offset + h.last_offset_delta
            if h.producer_id >= 0:
                cur = pending.get(h.producer_id) or self.producers.get(h.producer_id)
                if cur is not None and h.base_sequence >= 0 and not coordinator:
                    dup = cur.find_duplicate(h)
                    if dup is not None:
                        return dup, {}, None
                entry = cur.copy() if cur is not None else ProducerStateEntry(h.producer_id)
                if h.attributes & _TXN_BITS:
                    txn = txn or TxnAppend()
                    self._prepare_txn(entry, h, offset, last, _marker_in(buf, headers, h), verification_guard, txn,
                                      coordinator)
                else:
                    self._check(entry, h, coordinator)
                    if entry.current_txn_first_offset >= 0:
                        raise InvalidTxnStateError(f"Expected transactional write from producer {h.producer_id} at "
                                                   f"offset {offset}")
                    if self.verifications and not coordinator:
                        self._check_verifying(h)
                    self._update(entry, h, last)
                pending[h.producer_id] = entry
            offset = last + 1
        return None, pending, txn

    def _prepare_txn(self, entry: ProducerStateEntry, h: BatchHeader, offset: int, last: int,
                     marker: EndTxnMarker | None, guard: VerificationGuard | None, txn: TxnAppend,
                     coordinator: bool) -> None:
        if h.attributes & ATTR_CONTROL:
            completed = self._end_txn(entry, h, offset, marker, strict=True)
            if completed is not None:
                txn.completed.append(completed)
            return
        self._check(entry, h, coordinator)
        if self.verifications and not coordinator:
            self._check_verifying(h)
        if entry.current_txn_first_offset < 0:
            if guard is not None:
                v = self.verifications.get(h.producer_id)
                if v is None or not v.guard.verify(guard):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            txn.started.append((h.producer_id, offset))
        self._update(entry, h, last)

    @staticmethod
    def _check(entry: ProducerStateEntry, h: BatchHeader, epoch_only: bool = False) -> None:
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch {h.producer_epoch} of producer {h.producer_id} is older than the current epoch {entry.epoch}")
        if h.base_sequence < 0 or epoch_only:
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

    def _check_verifying(self, h: BatchHeader) -> None:
        """While a transaction is being verified, nothing above the lowest sequence seen
        in the meantime goes in (Kafka's checkSequence with a VerificationStateEntry)."""
        v = self.verifications.get(h.producer_id)
        if v is not None and h.base_sequence > v.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {h.producer_id}: {h.base_sequence} (incoming seq. "
                f"number), {v.lowest_sequence} (earliest seen sequence)")

    @staticmethod
    def _update(entry: ProducerStateEntry, h: BatchHeader, last_offset: int) -> None:
        """A data batch (never a control one) into the entry."""
        if h.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = h.producer_epoch
        if h.base_sequence >= 0:
            entry.batches.append(BatchMetadata(h.last_sequence, last_offset, h.last_offset_delta, h.max_timestamp))
        entry.last_timestamp = h.max_timestamp
        if h.attributes & ATTR_TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = last_offset - h.last_offset_delta

    @staticmethod
    def _end_txn(entry: ProducerStateEntry, h: BatchHeader, offset: int, marker: EndTxnMarker | None,
                 *, strict: bool) -> CompletedTxn | None:
        """Kafka's appendEndTxnMarker. ``strict`` (leader appends) raises on an older
        producer epoch or coordinator epoch; a replica or a replay only logs them, since
        the leader already accepted the marker. A control batch without a marker (cleaned
        empty, or not a transaction marker) changes nothing."""
        if marker is None:
            return None
        pid = h.producer_id
        if h.producer_epoch < entry.epoch:
            msg = (f"Epoch of producer {pid} at offset {offset} is {h.producer_epoch}, which is smaller than the "
                   f"last seen epoch {entry.epoch}")
            if strict:
                raise InvalidProducerEpochError(msg)
            log.warning(msg)
        if entry.coordinator_epoch > marker.coordinator_epoch:
            msg = (f"Invalid coordinator epoch for producerId {pid} at offset {offset}: {marker.coordinator_epoch} "
                   f"(zombie), {entry.coordinator_epoch} (current)")
            if strict:
                raise TransactionCoordinatorFencedError(msg)
            log.info(msg)
        # Only a transaction with data completes: an empty one never held the LSO back.
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, offset, not marker.commit)
        if h.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = h.producer_epoch
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = h.max_timestamp
        return completed

    def apply(self, pending: dict[int, ProducerStateEntry], end_offset: int, txn: TxnAppend | None = None) -> None:
        """Apply what :meth:`prepare` checked, once written. The transactions it completed
        are then ended with :meth:`complete` (the log knows the segment they go in)."""
        self.producers.update(pending)
        self.map_end_offset = end_offset
        if txn is not None:
            for pid, first in txn.started:
                self.ongoing[first] = pid
                self.verifications.pop(pid, None)

    def replay(self, h: BatchHeader, marker: EndTxnMarker | None = None) -> CompletedTxn | None:
        """Update from a batch read back from the log or replicated from the leader, no
        validation (Kafka's REPLICATION origin). A control batch needs its ``marker``
        (:func:`read_marker`). Returns the transaction it completed, which the caller
        ends with :meth:`complete`."""
        completed = None
        if h.producer_id >= 0:
            entry = self.producers.get(h.producer_id) or ProducerStateEntry(h.producer_id)
            if h.attributes & ATTR_CONTROL:
                completed = self._end_txn(entry, h, h.base_offset, marker, strict=False)
            else:
                started = h.attributes & ATTR_TRANSACTIONAL and entry.current_txn_first_offset < 0
                self._update(entry, h, h.last_offset)
                if started:
                    self.ongoing[h.base_offset] = h.producer_id
                    self.verifications.pop(h.producer_id, None)
            self.producers[h.producer_id] = entry
        self.map_end_offset = h.next_offset
        return completed

    # --- transactions --------------------------------------------------------------

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is: the first offset of the oldest other open
        transaction, else the offset after its marker (what its AbortedTxn records)."""
        others = [first for first, pid in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete(self, completed: CompletedTxn, txn_index: TransactionIndex | None = None) -> None:
        """End a transaction: an abort goes into ``txn_index`` (the segment of its marker)
        with the LSO of that moment, then the transaction waits for the high watermark."""
        if txn_index is not None and completed.is_aborted:
            txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                        self.last_stable_offset(completed)))
        if self.ongoing.pop(completed.first_offset, None) is None:
            log.warning("completing transaction %s, which was not started", completed)
        self.unreplicated[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below ``high_watermark``."""
        if self.unreplicated:
            done = [first for first, (_, last) in self.unreplicated.items() if last < high_watermark]
            for first in done:
                del self.unreplicated[first]

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction open or not yet replicated; None if none."""
        if not self.ongoing and not self.unreplicated:
            return None
        return min(min(self.ongoing, default=INT64_MAX), min(self.unreplicated, default=INT64_MAX))

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction (replication left out)."""
        return min(self.ongoing) if self.ongoing else None

    def has_ongoing_txn(self, producer_id: int) -> bool:
        e = self.producers.get(producer_id)
        return e is not None and e.current_txn_first_offset >= 0

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        v = self.verifications.get(producer_id)
        if v is None:
            v = self.verifications[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        v.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return v

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        v = self.verifications.get(producer_id)
        return v.guard if v is not None else SENTINEL_GUARD

    def reset(self, offset: int) -> None:
        """Forget everything: the log starts over, empty, at ``offset``."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        self.verifications = {}
        self.map_end_offset = offset

    def last_sequence(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.last_seq if e else -1

    def producer_epoch(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.epoch if e else NO_EPOCH

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` and not in a transaction,
        and verifications that old."""
        dead = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and e.last_timestamp >= 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in dead:
            del self.producers[pid]
        if self.verifications:
            self.verifications = {pid: v for pid, v in self.verifications.items()
                                  if now_ms - v.timestamp < expiration_ms}
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

    def load(self, max_offset: int, *, delete_above: bool = True) -> int:
        """Load the newest readable snapshot at or below ``max_offset`` and return its
        offset (the log is replayed from there); snapshots above it are deleted unless
        not ``delete_above``. Returns -1 when there is none. The transactions the entries
        have open are open again; nothing is unreplicated (the log end is at or below the
        high watermark after a load, Kafka assumes the same)."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        for off, path in reversed(self.snapshot_files()):
            if off > max_offset:
                if delete_above:
                    _unlink(path)
                continue
            try:
                entries = read_snapshot(path)
            except (ValueError, OSError, struct.error) as e:
                log.warning("ignoring producer snapshot %s: %s", path, e)
                _unlink(path)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.ongoing = {e.current_txn_first_offset: e.producer_id for e in entries
                            if e.current_txn_first_offset >= 0}
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


def _marker_in(buf: bytes | bytearray | memoryview | None, headers: list[BatchHeader],
               h: BatchHeader) -> EndTxnMarker | None:
    """The marker of control batch ``h`` of ``headers`` (whose bytes are ``buf``)."""
    if not h.attributes & ATTR_CONTROL:
        return None
    if buf is None:
        raise ValueError("a control batch needs its bytes to be appended")
    pos = 0
    for other in headers:
        if other is h:
            return parse_control_batch(buf, pos)
        pos += other.size
    raise ValueError("header not among the batches")


def read_marker(fd: int, position: int, h: BatchHeader) -> EndTxnMarker | None:
    """The marker of control batch ``h`` at ``position`` of a segment file."""
    return parse_control_batch(os.pread(fd, h.size, position))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
