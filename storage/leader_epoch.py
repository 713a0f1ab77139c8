"""The leader epoch cache of one partition: Kafka's LeaderEpochFileCache and its
``leader-epoch-checkpoint`` file (LeaderEpochCheckpointFile).

The cache maps each leader epoch to the first offset written in it. A follower asks the
leader where an epoch ends (OffsetForLeaderEpoch, KIP-101/KIP-320) and truncates what
it holds beyond that, so an epoch's entry must be on disk before any batch of that epoch
is: :meth:`LeaderEpochCache.assign` writes the file (tmp + fsync + rename) before it
returns, and the log calls it before writing the batches. Truncations write it too; a
stale entry left by a crash is removed when the log is opened (entries at or beyond the
log end, before the log start).

A single broker's logs (``sync=False``) write the file the same way but without the
fsyncs: it becomes durable with the log data (:meth:`LeaderEpochCache.flush`, called by
the log's flush), so that the append path keeps to ``flush.messages`` / ``flush.ms``.

The file is byte for byte Kafka's (CheckpointFile, version 0)::

    0
    <number of entries>
    <epoch> <start offset>
    ...

Entries are kept in increasing epoch and start offset order; :meth:`assign` enforces it
the way Kafka does (a new entry removes the ones it conflicts with).
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from collections.abc import Iterable
from typing import NamedTuple

from . import checkpoints as ck

__all__ = ["LeaderEpochCache", "EpochEntry", "LEADER_EPOCH_CHECKPOINT", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET",
           "read_epoch_file", "format_epoch_file"]

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0
_INT32_MAX = 0x7FFFFFFF
_INT64_MAX = 0x7FFFFFFFFFFFFFFF
_INT = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt / Long.parseLong accept
_WHITESPACE = re.compile(r"\s+")


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def format_epoch_file(entries: Iterable[EpochEntry]) -> bytes:
    """Kafka's LeaderEpochCheckpointFile text for ``entries``."""
    entries = list(entries)
    lines = [str(_VERSION), str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()


def read_epoch_file(path: str) -> list[EpochEntry] | None:
    """The entries of a ``leader-epoch-checkpoint``; None when the file does not exist.
    An empty file has none (Kafka creates it empty). Raises CheckpointError when
    malformed and OSError when unreadable."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ck.CheckpointError(f"{path}: not UTF-8 text") from None
    if not text:
        return []
    out = []
    for line in ck.entry_lines(path, text, _VERSION):
        # Kafka splits on \s+ and drops trailing empty strings: "2 6 " parses, " 2 6" does not
        parts = _WHITESPACE.split(line)
        while parts and not parts[-1]:
            parts.pop()
        if len(parts) != 2 or not all(_INT.fullmatch(p) for p in parts):
            raise ck.CheckpointError(f"{path}: malformed line {line!r}")
        epoch, offset = int(parts[0]), int(parts[1])
        if not (0 <= epoch <= _INT32_MAX and 0 <= offset <= _INT64_MAX):
            raise ck.CheckpointError(f"{path}: invalid epoch entry {line!r}")
        out.append(EpochEntry(epoch, offset))
    return out


class LeaderEpochCache:
    """Epoch -> start offset of one partition, backed by ``<dir>/leader-epoch-checkpoint``.

    Reading the file never raises: a malformed or unreadable one is logged and leaves
    :attr:`loaded` False (as does a missing one), and the owner rebuilds the entries
    from its batches (:meth:`rebuild`). Every change is written before the call returns
    (OSError escapes: the owner takes the partition offline).
    """

    def __init__(self, directory: str, name: str = "", *, sync: bool = True) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.name = name or os.path.basename(directory)
        self.sync = sync
        self._unsynced = False
        self._entries: list[EpochEntry] = []
        #: the latest epoch, -1 when there is none; a plain attribute because the append
        #: path compares against it on every call (read it, never set it)
        self.latest_epoch = UNDEFINED_EPOCH
        #: whether the entries came from the file (False: missing or unreadable)
        self.loaded = False
        try:
            found = read_epoch_file(self.path)
        except (ck.CheckpointError, OSError) as e:
            log.warning("[LeaderEpochCache %s] ignoring %s, it will be rebuilt from the log: %s", self.name,
                        self.path, e)
            return
        if found is None:
            return
        for entry in found:
            self._assign(entry)
        self.loaded = True

    # --- reads -------------------------------------------------------------------------

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def __len__(self) -> int:
        return len(self._entries)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's endOffsetFor: (the largest epoch <= ``requested_epoch``, the start offset
        of the first epoch after it), the log end offset for the latest epoch,
        (``requested_epoch``, first known start offset) below the first known epoch, and
        (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for -1, an empty cache or an epoch above
        the latest."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1].epoch == requested_epoch:
            # the leader's current epoch is still being written: it ends at the log end
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(entries, requested_epoch, key=_epoch)  # first epoch > requested
        if i == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = entries[i]
        if i == 0:
            # Older than anything known: the data was removed from the log; the follower
            # replicates from the first epoch's start (may skip epochs in between, harmless).
            return requested_epoch, higher.start_offset
        return entries[i - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the batch at ``offset`` was written in; None before the first entry."""
        i = bisect.bisect_right(self._entries, offset, key=_start)
        return self._entries[i - 1].epoch if i else None

    # --- changes -----------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's assign): nothing
        happens for the latest epoch again unless at a lower offset; otherwise entries with
        an epoch >= ``epoch`` or a start offset >= ``start_offset`` are removed first.
        Returns whether the cache changed (then the file was rewritten)."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()
            return True
        return False

    def assign_many(self, entries: Iterable[tuple[int, int]]) -> bool:
        """:meth:`assign` each (epoch, start offset) in order, writing the file once."""
        changed = False
        for epoch, start in entries:
            changed = self._assign(EpochEntry(epoch, start)) or changed
        if changed:
            self._write()
        return changed

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove entries starting at or after ``end_offset`` (a negative one removes
        nothing). Returns whether any were removed."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        removed = []
        while entries and entries[-1].start_offset >= end_offset:
            removed.append(entries.pop())
        self._latest_changed()
        log.debug("[LeaderEpochCache %s] removed %s after truncating to end offset %d", self.name, removed,
                  end_offset)
        self._write()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Kafka's truncateFromStart: entries starting at or before ``start_offset`` go,
        except the last of them, which now starts at ``start_offset`` (the epoch of the
        log's first remaining batch). Returns whether the entries changed."""
        entries = self._entries
        i = bisect.bisect_right(entries, start_offset, key=_start)
        if i == 0:
            return False
        first = EpochEntry(entries[i - 1].epoch, start_offset)
        if i == 1 and entries[0] == first:
            return False
        self._entries = [first, *entries[i:]]
        self._write()
        return True

    def clear(self) -> None:
        """Remove every entry (and write the empty file)."""
        self._entries = []
        self.latest_epoch = UNDEFINED_EPOCH
        self._write()

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace the entries with ``entries`` (from the log's batches, when the file was
        missing or unreadable). An empty result with no file on disk creates the file
        empty, without an fsync, as Kafka's CheckpointFile does: losing it in a crash only
        means another rebuild."""
        self._entries = []
        self.latest_epoch = UNDEFINED_EPOCH
        for epoch, start in entries:
            self._assign(EpochEntry(epoch, start))
        if self._entries or os.path.exists(self.path):
            self._write()
        else:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644))
        self.loaded = True

    # --- internals ----------------------------------------------------------------------

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry {entry}")
        entries = self._entries
        if entries:
            last = entries[-1]
            if entry.epoch == last.epoch and entry.start_offset >= last.start_offset:
                return False
        removed = []
        while entries and (entries[-1].epoch >= entry.epoch or entries[-1].start_offset >= entry.start_offset):
            removed.append(entries.pop())
        entries.append(entry)
        self.latest_epoch = entry.epoch
        # Replacing the latest entry at the same offset is a leader that wrote nothing in
        # its epoch; anything else means this replica held data the new epoch overrides.
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("[LeaderEpochCache %s] new epoch entry %s caused truncation of conflicting entries %s",
                        self.name, tuple(entry), [tuple(e) for e in removed])
        return True

    def _latest_changed(self) -> None:
        self.latest_epoch = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def _write(self) -> None:
        ck.atomic_write(self.path, format_epoch_file(self._entries), sync=self.sync)
        self._unsynced = not self.sync

    def flush(self) -> None:
        """fsync the file if a write since the last flush was not (``sync=False``)."""
        if self._unsynced:
            ck.fsync_file(self.path)
            self._unsynced = False

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.name}, {[tuple(e) for e in self._entries]})"


def _epoch(e: EpochEntry) -> int:
    return e.epoch


def _start(e: EpochEntry) -> int:
    return e.start_offset
