"""Moving a partition between log dirs (AlterReplicaLogDirs): Kafka's "future" replica
(``Partition.futureLog`` with ReplicaAlterLogDirsThread's copy, and the future-dir
handling of LogManager).

The copy is built in ``<dest>/<topic>-<partition>.<uuid>-future`` (a :class:`ReplicaMove`),
then the source is renamed to ``...-delete`` and the future dir to ``<topic>-<partition>``
(:meth:`storage.manager.LogManager.complete_move`). The copy is fsynced before the source
is renamed away, so at start-up a ``-future`` dir is complete exactly when no current dir
of its partition exists: :func:`resolve_future_dirs` then finishes the rename, and
otherwise discards the future dir.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import checkpoints as ck
from .log import PartitionLog, parse_dir_name
from .segment import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX

__all__ = ["ReplicaMove", "FUTURE_DIR_SUFFIX", "DELETE_DIR_SUFFIX", "future_dir_name", "delete_dir_name",
           "resolve_future_dirs"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
#: Kafka's FutureDirPattern: topic-partition.uniqueId-future
_FUTURE_DIR = re.compile(r"^(\S+)-(\d+)\.([0-9a-f]+)" + FUTURE_DIR_SUFFIX + "$")


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's logFutureDirName: ``<topic>-<partition>.<uuid without dashes>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    """A partition dir on its way out (a deleted topic, the source of a finished move):
    Kafka's logDeleteDirName, removed at the next start if a crash interrupts."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def resolve_future_dirs(log_dirs: list[str]) -> None:
    """Settle moves interrupted by a crash before anything is opened: a ``-future``
    dir whose partition still has a current dir anywhere was never committed and is
    removed; one without is the committed copy (the source was renamed away only after
    the copy was fsynced) and becomes the partition's dir."""
    current: set[TopicPartition] = set()
    futures: dict[TopicPartition, list[tuple[float, str, str]]] = {}
    for log_dir in log_dirs:
        for name in os.listdir(log_dir):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            m = _FUTURE_DIR.match(name)
            if m:
                futures.setdefault((m.group(1), int(m.group(2))), []).append((os.stat(path).st_mtime, log_dir, path))
            elif not name.endswith(DELETE_DIR_SUFFIX):
                tp = parse_dir_name(name)
                if tp is not None:
                    current.add(tp)
    for tp, found in futures.items():
        found.sort(reverse=True)
        if tp in current:
            keep = None
        else:
            # Only one move per partition reaches the commit; an older -future dir
            # left next to it is a cancelled move whose removal did not finish.
            keep = found[0]
        for entry in found:
            _, log_dir, path = entry
            if entry is keep:
                target = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
                os.replace(path, target)
                ck.fsync_dir(log_dir)
                log.warning("completed the interrupted move of %s-%d into %s", tp[0], tp[1], log_dir)
            else:
                shutil.rmtree(path, ignore_errors=True)
                log.warning("discarded %s: the move of %s-%d into %s had not completed", path, tp[0], tp[1],
                            log_dir)


#: files a partition dir may hold that are never part of a copy: half-written or on their way out
_TRANSIENT_SUFFIXES = (".tmp", DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_COPY_CHUNK = 8 << 20


@dataclass(slots=True)
class _Copied:
    ino: int
    size: int
    mtime_ns: int
    #: bytes of the source now in the copy (for a .log, a prefix that never changes)
    length: int


@dataclass(slots=True)
class _Chunk:
    name: str
    start: int
    end: int
    ino: int
    size: int
    mtime_ns: int
    #: for a .log: the offset after its last batch, i.e. the copy's log end offset once done
    end_offset: int


class ReplicaMove:
    """A partition on its way to another log dir: Kafka's "future" replica.

    The copy proceeds in passes. Each pass is planned on the thread that owns the log
    (:meth:`plan`) and may then run on any thread (:meth:`copy`): closed segments are
    immutable and the active segment's ``.log`` only grows, so a pass reads bytes that no
    append will touch. A ``.log`` already copied gets only its new tail in later passes;
    any other file is copied again when its inode, size or mtime changed (compaction and
    snapshots replace files by rename). The last pass runs with the partition closed and
    copies everything that is left, indexes of the active segment included.
    """

    def __init__(self, topic: str, partition: int, source_log_dir: str, log_dir: str, directory: str,
                 source_dir: str, log_end_offset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.source_log_dir = source_log_dir
        #: the destination log dir
        self.log_dir = log_dir
        #: the future dir being filled
        self.dir = directory
        self.source_dir = source_dir
        self.cancelled = False
        #: bytes of .log copied so far: DescribeLogDirs' size of the future replica
        self.size_bytes = 0
        #: offsets copied so far: the future replica's log end offset
        self.log_end_offset = log_end_offset
        self._copied: dict[str, _Copied] = {}
        self._log_lengths: dict[str, int] = {}
        self._pending: list[_Chunk] = []

    @property
    def topic_partition(self) -> TopicPartition:
        return self.topic, self.partition

    def plan(self, plog: PartitionLog, *, final: bool = False) -> int:
        """Decide what the next pass copies; returns its size in bytes. Call it from the
        log's owning thread, with no pass running; ``final`` once the log is closed."""
        active = plog.segments[-1] if plog.segments and not final else None
        skip = {os.path.basename(active.offset_index.path), os.path.basename(active.time_index.path)} if active else set()
        ends = {}
        for i, seg in enumerate(plog.segments):
            nxt = plog.segments[i + 1].base_offset if i + 1 < len(plog.segments) else plog.log_end_offset
            ends[os.path.basename(seg.log_path)] = nxt
        pending = []
        names = set()
        for name in sorted(os.listdir(self.source_dir)):
            if name.endswith(_TRANSIENT_SUFFIXES) or name in skip:
                continue
            try:
                st = os.stat(os.path.join(self.source_dir, name))
            except FileNotFoundError:
                continue
            names.add(name)
            length = active.size if active is not None and name == os.path.basename(active.log_path) else st.st_size
            prev = self._copied.get(name)
            start = 0
            if prev is not None and prev.ino == st.st_ino:
                if name.endswith(LOG_SUFFIX) and length >= prev.length:
                    start = prev.length  # .log files only grow: copy the tail
                    if start == length:
                        continue
                elif prev.size == st.st_size and prev.mtime_ns == st.st_mtime_ns:
                    continue
            pending.append(_Chunk(name, start, length, st.st_ino, st.st_size, st.st_mtime_ns, ends.get(name, -1)))
        if final:
            for name in list(self._copied):
                if name not in names:  # gone from the source (retention): gone from the copy
                    Path(self.dir, name).unlink(missing_ok=True)
                    self._copied.pop(name)
                    self._log_lengths.pop(name, None)
        self._pending = pending
        return sum(c.end - c.start for c in pending)

    def copy(self) -> None:
        """Run the planned pass: copy, fsync each file. Safe on a worker thread; stops
        early once cancelled. Raises OSError on a failed write."""
        for c in self._pending:
            if self.cancelled:
                return
            src_path = os.path.join(self.source_dir, c.name)
            try:
                src = os.open(src_path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # deleted since planned (retention): the next plan sees it gone
            try:
                if os.fstat(src).st_ino != c.ino:
                    # replaced since planned: copied whole by the next pass
                    self._copied.pop(c.name, None)
                    self._log_lengths.pop(c.name, None)
                    continue
                flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if c.start == 0 else 0)
                try:
                    dst = os.open(os.path.join(self.dir, c.name), flags, 0o644)
                except OSError:
                    if self.cancelled:
                        return  # the future dir was removed under us
                    raise
                try:
                    if not _copy_range(src, dst, c.start, c.end, self):
                        return
                    os.fsync(dst)
                finally:
                    os.close(dst)
            finally:
                os.close(src)
            self._copied[c.name] = _Copied(c.ino, c.size, c.mtime_ns, c.end)
            if c.name.endswith(LOG_SUFFIX):
                self._log_lengths[c.name] = c.end
                self.size_bytes = sum(self._log_lengths.values())
                if c.end_offset >= 0:
                    self.log_end_offset = c.end_offset
        self._pending = []

    def sync_dir(self) -> None:
        ck.fsync_dir(self.dir)
        ck.fsync_dir(self.log_dir)


def _copy_range(src: int, dst: int, start: int, end: int, move: ReplicaMove) -> bool:
    """Copy bytes [start, end) of ``src`` to the same place in ``dst``; False if cancelled."""
    pos = start
    while pos < end:
        if move.cancelled:
            return False
        n = min(_COPY_CHUNK, end - pos)
        try:
            done = os.copy_file_range(src, dst, n, pos, pos)
        except (AttributeError, OSError):
            data = os.pread(src, n, pos)
            done = len(data)
            if done:
                view = memoryview(data)
                off = pos
                while view:
                    w = os.pwrite(dst, view, off)
                    view, off = view[w:], off + w
        if done <= 0:
            raise OSError(f"{move.source_dir}: file shorter than planned ({pos} of {end} bytes)")
        pos += done
    return True
