"""LogManager: every partition of every log dir, loading, and the scheduled storage tasks.

Each log dir holds ``<topic>-<partition>/`` directories plus Kafka's checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) and, after a clean
shutdown, the ``.kafka_cleanshutdown`` marker. :meth:`load` removes the marker once
everything is open, so a crash afterwards is detected on the next start.

Moving a partition to another log dir (AlterReplicaLogDirs) is driven from here
(:meth:`LogManager.start_move`, :meth:`~LogManager.plan_move`,
:meth:`~LogManager.complete_move`); the copy itself and the start-up settlement of
interrupted moves are :mod:`storage.log_dir_move`'s.

The broker drives the timers (all synchronous, bounded work):

* :meth:`run_retention` every ``log.retention.check.interval.ms`` (Kafka: 5 min)
* :meth:`run_flush` every ``log.flush.scheduler.interval.ms`` (Kafka: 1 s is fine)
* :meth:`checkpoint` every ``log.flush.offset.checkpoint.interval.ms`` (Kafka: 60 s)
* :meth:`run_cleaner` every few seconds when ``log.cleaner.enable`` (one partition per call)
* :meth:`shutdown` once, at exit.

An I/O error in a log dir (a partition's files, or the dir's checkpoints) takes the whole
dir offline through :attr:`LogManager.failure_channel` (Kafka's LogDirFailureChannel,
KIP-112): every log in it goes offline at once, nothing is written there any more (no
checkpoint, no clean-shutdown marker, so the next start recovers its logs), new
partitions go to the other dirs. A dir that cannot be opened at start-up is offline from
the start; with every dir offline, :meth:`LogManager.load` raises LogDirsOfflineError.

A ``replicated`` manager (cluster mode) opens every log with its high watermark kept
apart from its log end offset, starting from ``replication-offset-checkpoint`` (Kafka's
highWatermarkCheckpoints; a partition missing from it starts at its log start, as in
Kafka, so nothing uncommitted becomes readable after a restart).
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode

from . import checkpoints as ck
from .cleaner import clean_log, cleanable_ratio
from .config import LogConfig
from .errors import KafkaStorageError, StorageError
from .log import PartitionLog, parse_dir_name
from .log_dir_failure import LogDirFailureChannel, LogDirsOfflineError, check_can_create
from .log_dir_move import (
    DELETE_DIR_SUFFIX,
    ReplicaMove,
    delete_dir_name,
    future_dir_name,
    resolve_future_dirs,
)

__all__ = ["LogManager", "LogDirNotFoundError", "LogDirsOfflineError", "PARTITION_METADATA",
           "write_partition_metadata", "read_partition_metadata"]

log = logging.getLogger(__name__)

PARTITION_METADATA = "partition.metadata"
_PROGRESS_EVERY_S = 2.0
TopicPartition = tuple[str, int]


def write_partition_metadata(directory: str, topic_id: uuid.UUID) -> None:
    """Kafka's partition.metadata: version 0 and the topic id in base64url without padding."""
    tid = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    path = os.path.join(directory, PARTITION_METADATA)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"version: 0\ntopic_id: {tid}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_partition_metadata(directory: str) -> uuid.UUID | None:
    try:
        with open(os.path.join(directory, PARTITION_METADATA), encoding="utf-8") as f:
            fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        tid = fields["topic_id"].strip()
        return uuid.UUID(bytes=base64.urlsafe_b64decode(tid + "=" * (-len(tid) % 4)))
    except (OSError, KeyError, ValueError) as e:
        if not isinstance(e, FileNotFoundError):
            log.warning("unreadable %s in %s: %s", PARTITION_METADATA, directory, e)
        return None


class LogDirLockedError(RuntimeError):
    """Another process holds the log dir's .lock."""


class LogDirNotFoundError(StorageError):
    """A path that is not one of the configured log dirs."""

    error_code = ErrorCode.log_dir_not_found


class LogManager:
    """Owns all PartitionLogs. Not thread-safe; call from one thread (the event loop)."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, clock: Callable[[], float] = time.time,
                 *, producer_id_expiration_ms: int = 86400000, replicated: bool = False) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        #: whether logs keep their high watermark apart from the log end (cluster mode)
        self.replicated = replicated
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self.had_clean_shutdown: dict[str, bool] = {}
        self._locks: list[int] = []
        self._moves: dict[TopicPartition, ReplicaMove] = {}
        #: where I/O errors are reported; its first report of a dir takes the dir offline
        self.failure_channel = LogDirFailureChannel()
        #: told of a partition's new PartitionLog after a move between log dirs (the
        #: broker's Partition objects hold the log they lead or follow)
        self.on_replaced: Callable[[TopicPartition, PartitionLog], None] | None = None
        self.failure_channel.listeners.append(self._log_dir_failed)

    # --- log dir failures ----------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def is_log_dir_online(self, log_dir: str) -> bool:
        return not self.failure_channel.is_offline(log_dir)

    def partitions_in(self, log_dir: str) -> list[TopicPartition]:
        return [tp for tp, d in self._dir_of.items() if d == log_dir]

    def _log_dir_failed(self, log_dir: str) -> None:
        """Kafka's LogManager.handleLogDirFailure: every log in the dir goes offline, and
        moves from or to it stop."""
        log.warning("Stopping serving logs in dir %s", log_dir)
        tps = self.partitions_in(log_dir)
        for tp in tps:
            self._logs[tp].offline = True
        for move in list(self._moves.values()):
            if log_dir in (move.log_dir, move.source_log_dir):
                self.cancel_move(move)
        if tps:
            log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                        ",".join(f"{t}-{p}" for t, p in sorted(tps)), log_dir)

    def _dir_failed(self, log_dir: str, message: str, exc: BaseException) -> None:
        self.failure_channel.maybe_add_offline_log_dir(log_dir, message, exc)

    # --- loading -------------------------------------------------------------------

    def _read_ck(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return ck.read_checkpoint(os.path.join(log_dir, name))
        except (ck.CheckpointError, OSError) as e:
            log.warning("ignoring checkpoint: %s", e)
            return {}

    def load(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        """Open every partition in every log dir (recovering after a crash)."""
        if topic_configs:
            self._topic_configs.update(topic_configs)
        for log_dir in self.log_dirs:
            try:
                os.makedirs(log_dir, exist_ok=True)
                self._lock(log_dir)
            except OSError as e:
                self._dir_failed(log_dir, f"Failed to create or validate data directory {log_dir}", e)
        if not self.live_log_dirs:
            raise LogDirsOfflineError(f"Shutdown broker because none of the specified log dirs from "
                                      f"{', '.join(self.log_dirs)} can be created or validated")
        if len(self.live_log_dirs) == len(self.log_dirs):
            # with a dir offline, a -future dir cannot be told from a committed copy
            resolve_future_dirs(self.log_dirs)
        for log_dir in self.live_log_dirs:
            try:
                self._load_dir(log_dir)
            except (OSError, StorageError) as e:
                self._dir_failed(log_dir, f"Error while loading log dir {log_dir}", e)
        if not self.live_log_dirs:
            raise LogDirsOfflineError(f"Shutdown broker because all log dirs in {', '.join(self.log_dirs)} have failed")

    def _load_dir(self, log_dir: str) -> None:
        marker = os.path.join(log_dir, ck.CLEAN_SHUTDOWN)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        recovery = self._read_ck(log_dir, ck.RECOVERY_POINT)
        starts = self._read_ck(log_dir, ck.LOG_START_OFFSET)
        hws = self._read_ck(log_dir, ck.REPLICATION_OFFSET) if self.replicated else {}
        self._cleaner_offsets.update(self._read_ck(log_dir, ck.CLEANER_OFFSET))
        names = sorted(os.listdir(log_dir))
        dirs = []
        for name in names:
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # a topic deletion interrupted by a crash
                continue
            tp = parse_dir_name(name)
            if tp is None:
                continue
            dirs.append((tp, path))
        started = last = time.monotonic()
        log.info("loading %d partitions from %s (%s shutdown)", len(dirs), log_dir, "clean" if clean else "unclean")
        for n, (tp, path) in enumerate(dirs, 1):
            if tp in self._logs:
                log.error("partition %s-%d found in two log dirs; keeping %s", tp[0], tp[1], self._dir_of[tp])
                continue
            cfg = self._topic_configs.get(tp[0], self.default_config)
            self._logs[tp] = PartitionLog(
                path, tp[0], tp[1], cfg, recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                clean_shutdown=clean, clock=self.clock, topic_id=read_partition_metadata(path),
                replicated=self.replicated, high_watermark=hws.get(tp, 0), failure_channel=self.failure_channel)
            self._dir_of[tp] = log_dir
            now = time.monotonic()
            if now - last >= _PROGRESS_EVERY_S:
                log.info("loaded %d/%d partitions of %s (%.0f%%)", n, len(dirs), log_dir, 100.0 * n / len(dirs))
                last = now
        log.info("loaded %d partitions from %s in %.3f s", len(dirs), log_dir, time.monotonic() - started)
        # Remove the marker only now: a crash from here on must trigger recovery.
        try:
            os.unlink(marker)
            ck.fsync_dir(log_dir)
        except FileNotFoundError:
            pass

    def _lock(self, log_dir: str) -> None:
        """Kafka's `.lock`: two brokers writing one log dir would corrupt it, so the
        second one must refuse to start."""
        fd = os.open(os.path.join(log_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLockedError(
                f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in another process or "
                f"thread is using this directory.") from None
        self._locks.append(fd)

    def _unlock(self) -> None:
        for fd in self._locks:
            os.close(fd)  # closing releases the flock
        self._locks.clear()

    # --- partitions ----------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding the partition's current replica."""
        return self._dir_of.get((topic, partition))

    def moves(self) -> dict[TopicPartition, ReplicaMove]:
        """Partitions being moved to another log dir (their future replicas)."""
        return dict(self._moves)

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: uuid.UUID | None = None) -> PartitionLog:
        """Create (or return the existing) log; placed in the dir with fewest partitions."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        cfg = config or self._topic_configs.get(topic, self.default_config)
        self._topic_configs[topic] = cfg
        check_can_create(self.failure_channel, self.log_dirs, topic, partition)
        counts = {d: 0 for d in self.live_log_dirs}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        log_dir = min(counts, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            os.makedirs(path, exist_ok=True)
            if topic_id is not None:
                write_partition_metadata(path, topic_id)
            plog = PartitionLog(path, topic, partition, cfg, clock=self.clock, topic_id=topic_id,
                                replicated=self.replicated, failure_channel=self.failure_channel)
            ck.fsync_dir(log_dir)
        except OSError as e:
            message = f"Error while creating log for {topic}-{partition} in dir {log_dir}"
            self._dir_failed(log_dir, message, e)
            raise KafkaStorageError(f"{message}: {e}") from e
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        return plog

    def delete_topic(self, topic: str) -> int:
        """Close and remove every partition of ``topic``; returns how many."""
        victims = [tp for tp in self._logs if tp[0] == topic]
        self._delete_partitions(victims)
        self._topic_configs.pop(topic, None)
        return len(victims)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and remove one partition's replica (it was reassigned away)."""
        if (topic, partition) not in self._logs:
            return False
        self._delete_partitions([(topic, partition)])
        return True

    def _delete_partitions(self, victims: list[TopicPartition]) -> None:
        for tp in victims:
            move = self._moves.get(tp)
            if move is not None:
                self.cancel_move(move)
            plog = self._logs.pop(tp)
            log_dir = self._dir_of.pop(tp)
            self._cleaner_offsets.pop(tp, None)
            for seg in plog.segments:
                try:
                    seg.close()
                except OSError:
                    pass
            plog.delete_pending(force=True)
            # Rename first (atomic) so a crash mid-delete leaves a "-delete" dir that load() removes.
            tomb = os.path.join(log_dir, delete_dir_name(*tp))
            try:
                os.replace(plog.dir, tomb)
                shutil.rmtree(tomb, ignore_errors=True)
            except OSError as e:
                log.error("cannot delete %s: %s", plog.dir, e)

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.config = config

    # --- moving a partition to another log dir ---------------------------------------

    def start_move(self, topic: str, partition: int, log_dir: str) -> ReplicaMove | None:
        """Kafka's alterReplicaLogDirs for one partition: create its future replica in
        ``log_dir``. Returns the new move, whose copy the caller drives (:meth:`plan_move`,
        :meth:`ReplicaMove.copy`, :meth:`complete_move`), or None when there is nothing new
        to do: the partition is already there (a move elsewhere is cancelled) or already
        moving there. Raises LogDirNotFoundError, KeyError (no such partition) or
        KafkaStorageError (partition offline)."""
        if log_dir not in self.log_dirs:
            raise LogDirNotFoundError(f"Log dir {log_dir} is not found in the config.")
        tp = (topic, partition)
        plog = self._logs[tp]
        if plog.offline:
            raise KafkaStorageError(f"Partition {topic}-{partition} is offline")
        current = self._moves.get(tp)
        if current is not None:
            if current.log_dir == log_dir:
                return None
            self.cancel_move(current)  # Kafka: futureReplicaDirChanged -> removeFutureLocalReplica
        if self._dir_of[tp] == log_dir:
            return None
        path = os.path.join(log_dir, future_dir_name(topic, partition))
        os.makedirs(path)
        ck.fsync_dir(log_dir)
        move = ReplicaMove(topic, partition, self._dir_of[tp], log_dir, path, plog.dir, plog.log_start_offset)
        self._moves[tp] = move
        log.info("moving %s-%d from %s to %s", topic, partition, move.source_log_dir, log_dir)
        return move

    def plan_move(self, move: ReplicaMove) -> int:
        """Plan the next copy pass of a move that is still current; returns its bytes, or
        -1 when the move is over (cancelled, or its partition is gone or offline)."""
        plog = self._logs.get(move.topic_partition)
        if move.cancelled or self._moves.get(move.topic_partition) is not move or plog is None or plog.offline:
            if not move.cancelled:
                self.cancel_move(move)
            return -1
        return move.plan(plog)

    def cancel_move(self, move: ReplicaMove) -> None:
        """Drop a future replica (a copy thread still running stops at its next chunk)."""
        move.cancelled = True
        if self._moves.get(move.topic_partition) is move:
            del self._moves[move.topic_partition]
        shutil.rmtree(move.dir, ignore_errors=True)

    def complete_move(self, move: ReplicaMove) -> bool:
        """Swap the future replica in: flush and close the partition, copy what is left,
        record the partition in the destination's checkpoints, rename the source to
        ``-delete``, rename the copy to the partition's name, reopen it there. Until the
        source rename nothing has changed for a restart; after it the copy is complete
        and fsynced, which is what :meth:`load` relies on."""
        tp = move.topic_partition
        if self.plan_move(move) < 0:
            return False
        plog = self._logs[tp]
        source_log_dir = self._dir_of[tp]
        try:
            plog.flush()
        except StorageError as e:
            log.error("cannot move %s-%d: %s", tp[0], tp[1], e)
            self.cancel_move(move)
            return False
        plog.close()
        tomb = os.path.join(source_log_dir, delete_dir_name(*tp))
        try:
            move.plan(plog, final=True)
            move.copy()
            move.sync_dir()
            self._checkpoint_dir(move.log_dir, {tp: plog})
            os.replace(plog.dir, tomb)
        except OSError as e:
            log.error("cannot move %s-%d to %s, it stays in %s: %s", tp[0], tp[1], move.log_dir, source_log_dir, e)
            self.cancel_move(move)
            self._logs[tp] = self._reopen(plog, plog.dir)
            return False
        # Committed: the copy is the partition now and must never be removed.
        del self._moves[tp]
        move.cancelled = True
        target = os.path.join(move.log_dir, f"{tp[0]}-{tp[1]}")
        try:
            ck.fsync_dir(source_log_dir)
            os.replace(move.dir, target)
            ck.fsync_dir(move.log_dir)
        except OSError as e:
            # Which renames reached the disk is unknown; the next start settles it either
            # way (:func:`storage.log_dir_move.resolve_future_dirs`) as long as nothing is written meanwhile.
            log.critical("cannot finish moving %s-%d to %s: %s; it is offline until a restart", tp[0], tp[1],
                         move.log_dir, e)
            plog.offline = True
            return False
        self._dir_of[tp] = move.log_dir
        self._logs[tp] = self._reopen(plog, target)
        if self.on_replaced is not None:
            self.on_replaced(tp, self._logs[tp])
        self.checkpoint()
        shutil.rmtree(tomb, ignore_errors=True)
        log.info("moved %s-%d from %s to %s (log end offset %d)", tp[0], tp[1], source_log_dir, move.log_dir,
                 self._logs[tp].log_end_offset)
        return True

    def _reopen(self, old: PartitionLog, directory: str) -> PartitionLog:
        """Open the partition again after a move (or a failed one); the closed ``old``,
        taken offline, if that fails: its files are intact for the next start."""
        try:
            # flushed and closed just before, like a clean shutdown
            return PartitionLog(directory, old.topic, old.partition, old.config, recovery_point=old.log_end_offset,
                                log_start_offset=old.log_start_offset, clean_shutdown=True, clock=self.clock,
                                topic_id=old.topic_id, replicated=self.replicated,
                                high_watermark=old.high_watermark, failure_channel=self.failure_channel)
        except (OSError, StorageError) as e:
            log.critical("cannot reopen %s: %s; %s-%d is offline until a restart", directory, e, old.topic,
                         old.partition)
            old.offline = True
            return old

    # --- scheduled tasks -----------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def run_retention(self) -> int:
        """Delete segments past retention, remove files whose delete delay passed,
        expire idle producer ids. Returns segments deleted."""
        now = self._now_ms()
        total = 0
        for plog in self._logs.values():
            if plog.offline:
                continue
            try:
                total += plog.delete_old_segments(now)
                plog.delete_pending(now)
                plog.producer_state.remove_expired(now, self.producer_id_expiration_ms)
            except Exception as e:  # one bad partition must not stop retention for the rest
                log.error("retention failed for %s-%d: %s", plog.topic, plog.partition, e)
        return total

    def run_flush(self) -> int:
        """fsync logs whose flush.ms elapsed and segments that rolled. Returns logs flushed."""
        now = self._now_ms()
        n = 0
        for plog in self._logs.values():
            try:
                n += plog.maybe_flush(now)
            except Exception as e:
                log.error("flush failed for %s-%d: %s", plog.topic, plog.partition, e)
        return n

    def checkpoint(self) -> None:
        """Write the four checkpoint files of every online log dir."""
        for log_dir in self.live_log_dirs:
            try:
                self._checkpoint_dir(log_dir)
            except OSError as e:
                self._dir_failed(log_dir, f"Disk error while writing checkpoints in directory {log_dir}", e)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` of every online log dir (Kafka does this
        every ``replica.high.watermark.checkpoint.interval.ms``, apart from the other three)."""
        for log_dir in self.live_log_dirs:
            try:
                self._write_high_watermarks(log_dir, self._logs_in(log_dir))
            except OSError as e:
                self._dir_failed(log_dir, f"Error while writing to high watermark file in directory {log_dir}", e)

    def _logs_in(self, log_dir: str) -> dict[TopicPartition, PartitionLog]:
        return {tp: self._logs[tp] for tp, d in self._dir_of.items() if d == log_dir}

    @staticmethod
    def _write_high_watermarks(log_dir: str, logs: dict[TopicPartition, PartitionLog]) -> None:
        ck.write_checkpoint(os.path.join(log_dir, ck.REPLICATION_OFFSET), {tp: p.high_watermark for tp, p in logs.items()})

    def _checkpoint_dir(self, log_dir: str, extra: dict[TopicPartition, PartitionLog] | None = None) -> None:
        logs = self._logs_in(log_dir)
        logs.update(extra or {})
        ck.write_checkpoint(os.path.join(log_dir, ck.RECOVERY_POINT), {tp: p.recovery_point for tp, p in logs.items()})
        ck.write_checkpoint(os.path.join(log_dir, ck.LOG_START_OFFSET),
                            {tp: p.log_start_offset for tp, p in logs.items() if p.log_start_offset > 0})
        self._write_high_watermarks(log_dir, logs)
        ck.write_checkpoint(os.path.join(log_dir, ck.CLEANER_OFFSET),
                            {tp: o for tp, o in self._cleaner_offsets.items() if tp in logs})

    def run_cleaner(self, max_partitions: int = 1) -> int:
        """Compact up to ``max_partitions`` of the dirtiest compacted logs; returns bytes read."""
        now = self._now_ms()
        candidates = []
        for tp, plog in self._logs.items():
            cfg = plog.config
            if not cfg.compact or plog.offline or tp in self._moves:
                continue  # a partition being moved is not compacted (Kafka pauses its cleaning too)
            first_dirty = max(self._cleaner_offsets.get(tp, 0), plog.log_start_offset)
            ratio = cleanable_ratio(plog, first_dirty, now)
            overdue = cfg.max_compaction_lag_ms < (1 << 62) and ratio > 0 and any(
                now - s.largest_timestamp() > cfg.max_compaction_lag_ms for s in plog.segments[:-1])
            if ratio >= cfg.min_cleanable_dirty_ratio and ratio > 0 or overdue:
                candidates.append((ratio, tp, plog, first_dirty))
        candidates.sort(key=lambda c: c[0], reverse=True)
        done = 0
        for _, tp, plog, first_dirty in candidates[:max_partitions]:
            try:
                stats = clean_log(plog, now, first_dirty)
            except OSError as e:
                log_dir = self._dir_of[tp]
                self._dir_failed(log_dir, f"Failed to clean up log for {tp[0]}-{tp[1]} in dir {log_dir} due to "
                                 "IOException", e)
                continue
            if stats is not None:
                self._cleaner_offsets[tp] = stats.end_offset
                done += stats.bytes_read
        return done

    def cleaner_offset(self, topic: str, partition: int) -> int:
        return self._cleaner_offsets.get((topic, partition), 0)

    def shutdown(self) -> None:
        """Flush and close everything, write checkpoints and the clean-shutdown marker."""
        for move in list(self._moves.values()):
            self.cancel_move(move)  # an unfinished copy is worth nothing after a restart
        clean = True
        for plog in self._logs.values():
            try:
                if not plog.offline:
                    plog.flush()
            except StorageError as e:
                log.error("flush at shutdown failed for %s-%d: %s", plog.topic, plog.partition, e)
            except Exception as e:
                clean = False
                log.error("flush at shutdown failed for %s-%d: %s", plog.topic, plog.partition, e)
            plog.close()
        self.checkpoint()
        for log_dir in self.live_log_dirs:
            # a dir with an offline log gets no marker: its next start recovers it
            dir_clean = clean and not any(p.offline for tp, p in self._logs.items() if self._dir_of[tp] == log_dir)
            if dir_clean:
                try:
                    with open(os.path.join(log_dir, ck.CLEAN_SHUTDOWN), "w"):
                        pass
                    ck.fsync_dir(log_dir)
                except OSError as e:
                    log.error("cannot mark a clean shutdown in %s: %s", log_dir, e)
        self._logs.clear()
        self._dir_of.clear()
        self._unlock()
