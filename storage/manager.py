"""LogManager: every partition of every log dir, loading, and the scheduled storage tasks.

Each log dir holds ``<topic>-<partition>/`` directories plus Kafka's checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) and, after a clean
shutdown, the ``.kafka_cleanshutdown`` marker. :meth:`load` removes the marker once
everything is open, so a crash afterwards is detected on the next start.

The broker drives the timers (all synchronous, bounded work):

* :meth:`run_retention` every ``log.retention.check.interval.ms`` (Kafka: 5 min)
* :meth:`run_flush` every ``log.flush.scheduler.interval.ms`` (Kafka: 1 s is fine)
* :meth:`checkpoint` every ``log.flush.offset.checkpoint.interval.ms`` (Kafka: 60 s)
* :meth:`run_cleaner` every few seconds when ``log.cleaner.enable`` (one partition per call)
* :meth:`shutdown` once, at exit.
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

from . import checkpoints as ck
from .cleaner import clean_log, cleanable_ratio
from .config import LogConfig
from .log import PartitionLog, parse_dir_name

__all__ = ["LogManager", "PARTITION_METADATA", "write_partition_metadata", "read_partition_metadata"]

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


class LogManager:
    """Owns all PartitionLogs. Not thread-safe; call from one thread (the event loop)."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, clock: Callable[[], float] = time.time,
                 *, producer_id_expiration_ms: int = 86400000) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self.had_clean_shutdown: dict[str, bool] = {}
        self._locks: list[int] = []

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
            os.makedirs(log_dir, exist_ok=True)
            self._lock(log_dir)
            marker = os.path.join(log_dir, ck.CLEAN_SHUTDOWN)
            clean = os.path.exists(marker)
            self.had_clean_shutdown[log_dir] = clean
            recovery = self._read_ck(log_dir, ck.RECOVERY_POINT)
            starts = self._read_ck(log_dir, ck.LOG_START_OFFSET)
            self._cleaner_offsets.update(self._read_ck(log_dir, ck.CLEANER_OFFSET))
            names = sorted(os.listdir(log_dir))
            dirs = []
            for name in names:
                path = os.path.join(log_dir, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith("-delete"):
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
                    clean_shutdown=clean, clock=self.clock, topic_id=read_partition_metadata(path))
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

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: uuid.UUID | None = None) -> PartitionLog:
        """Create (or return the existing) log; placed in the dir with fewest partitions."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        cfg = config or self._topic_configs.get(topic, self.default_config)
        self._topic_configs[topic] = cfg
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        os.makedirs(path, exist_ok=True)
        if topic_id is not None:
            write_partition_metadata(path, topic_id)
        plog = PartitionLog(path, topic, partition, cfg, clock=self.clock, topic_id=topic_id)
        ck.fsync_dir(log_dir)
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        return plog

    def delete_topic(self, topic: str) -> int:
        """Close and remove every partition of ``topic``; returns how many."""
        victims = [tp for tp in self._logs if tp[0] == topic]
        for tp in victims:
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
            tomb = os.path.join(log_dir, f"{topic}-{tp[1]}.{uuid.uuid4().hex}-delete")
            try:
                os.replace(plog.dir, tomb)
                shutil.rmtree(tomb, ignore_errors=True)
            except OSError as e:
                log.error("cannot delete %s: %s", plog.dir, e)
        self._topic_configs.pop(topic, None)
        return len(victims)

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.config = config

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
        """Write the four checkpoint files of every log dir."""
        for log_dir in self.log_dirs:
            tps = [tp for tp, d in self._dir_of.items() if d == log_dir]
            logs = {tp: self._logs[tp] for tp in tps}
            try:
                ck.write_checkpoint(os.path.join(log_dir, ck.RECOVERY_POINT), {tp: p.recovery_point for tp, p in logs.items()})
                ck.write_checkpoint(os.path.join(log_dir, ck.LOG_START_OFFSET),
                                    {tp: p.log_start_offset for tp, p in logs.items() if p.log_start_offset > 0})
                ck.write_checkpoint(os.path.join(log_dir, ck.REPLICATION_OFFSET), {tp: p.high_watermark for tp, p in logs.items()})
                ck.write_checkpoint(os.path.join(log_dir, ck.CLEANER_OFFSET),
                                    {tp: o for tp, o in self._cleaner_offsets.items() if tp in logs})
            except OSError as e:
                log.error("cannot write checkpoints in %s: %s", log_dir, e)

    def run_cleaner(self, max_partitions: int = 1) -> int:
        """Compact up to ``max_partitions`` of the dirtiest compacted logs; returns bytes read."""
        now = self._now_ms()
        candidates = []
        for tp, plog in self._logs.items():
            cfg = plog.config
            if not cfg.compact or plog.offline:
                continue
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
                log.error("cleaner failed for %s-%d: %s", tp[0], tp[1], e)
                continue
            if stats is not None:
                self._cleaner_offsets[tp] = stats.end_offset
                done += stats.bytes_read
        return done

    def cleaner_offset(self, topic: str, partition: int) -> int:
        return self._cleaner_offsets.get((topic, partition), 0)

    def shutdown(self) -> None:
        """Flush and close everything, write checkpoints and the clean-shutdown marker."""
        clean = True
        for plog in self._logs.values():
            try:
                if not plog.offline:
                    plog.flush()
            except Exception as e:
                clean = False
                log.error("flush at shutdown failed for %s-%d: %s", plog.topic, plog.partition, e)
            plog.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            dir_clean = clean and not any(p.offline for tp, p in self._logs.items() if self._dir_of[tp] == log_dir)
            if dir_clean:
                marker = os.path.join(log_dir, ck.CLEAN_SHUTDOWN)
                with open(marker, "w"):
                    pass
                ck.fsync_dir(log_dir)
        self._logs.clear()
        self._dir_of.clear()
        self._unlock()
