"""The aborted-transaction index of a segment (``.txnindex``): Kafka's TransactionIndex.

One 34-byte big-endian entry per transaction aborted by a marker in the segment
(Kafka's AbortedTxn)::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64

``lastOffset`` is the ABORT marker's offset; entries are appended in marker order, so last
offsets strictly increase. ``lastStableOffset`` is the partition's LSO once the abort was
written: a search for the aborted transactions of a fetch range can stop at the first
entry whose LSO reaches the end of the range, since no transaction aborted later can
have started inside it.

Like Kafka, the file is created only when the first entry is written: a log without
aborted transactions has no ``.txnindex`` files. The entries are read into memory on
first use (they are few: one per aborted transaction whose marker is in the segment),
so a read_committed fetch costs no I/O after the first.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from .errors import CorruptIndexError

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "TXN_INDEX_SUFFIX", "ENTRY_SIZE"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    """Kafka's TxnIndexSearchResult: the overlapping entries, and whether the search is
    complete (no later segment can hold more)."""

    aborted: list[AbortedTxn]
    complete: bool


def parse_entries(data: bytes, path: str = "") -> list[AbortedTxn]:
    """Entries of a ``.txnindex`` file's bytes; a partial trailing entry (a torn write) is
    ignored, as Kafka's iterator does; an unknown version is CorruptIndexError."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version > _VERSION:
            raise CorruptIndexError(f"{path}: unexpected aborted transaction version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """One segment's ``.txnindex``. Not thread-safe: its segment's log serialises access."""

    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._fd = -1
        self._dirty = False

    # --- reading -------------------------------------------------------------------

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            self._entries = parse_entries(data, self.path)
        return self._entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset) (Kafka's
        collectAbortedTxns, entry by entry in file order)."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    def sanity_check(self) -> None:
        """Kafka's sanityCheck: no entry may end before the segment starts."""
        for txn in self._load():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(f"Last offset of aborted transaction {txn} in index {self.path} is less "
                                        f"than start offset {self.start_offset}")

    # --- writing -------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Write one entry at the end (creating the file); last offsets must increase."""
        entries = self._load()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"The last offset of appended transactions must increase sequentially, but "
                             f"{txn.last_offset} is not greater than current last offset "
                             f"{entries[-1].last_offset} of index {self.path}")
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        pos = len(entries) * ENTRY_SIZE  # over a torn partial entry, if any
        data = txn.pack()
        if os.pwrite(self._fd, data, pos) != len(data):
            raise OSError(28, f"short write to {self.path}")
        entries.append(txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (Kafka's truncateTo)."""
        entries = self._load()
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), None)
        if keep is None:
            return
        self._truncate_file(keep * ENTRY_SIZE)
        del entries[keep:]

    def reset(self) -> None:
        """Remove every entry (segment recovery rebuilds them); an absent file stays absent."""
        if self._entries == [] and self._fd < 0 and not os.path.exists(self.path):
            return
        self._truncate_file(0)
        self._entries = []

    def _truncate_file(self, size: int) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, size)
            self._dirty = True
        else:
            try:
                os.truncate(self.path, size)
            except FileNotFoundError:
                pass

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._dirty = False

    def rename(self, new_path: str) -> None:
        """Rename the file if it exists (an open descriptor keeps working)."""
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._entries = []
