"""PartitionLog: one partition's live log (Kafka's UnifiedLog/LocalLog): append, read,
roll, flush, retention, truncation.

The log lives in ``<log.dir>/<topic>-<partition>/``. The last segment is the active one
(its indexes mapped for appending). Offsets are located by a binary search over segment
base offsets, then the segment's sparse index, then a short walk over batch headers.
Opening the directory (recovery after a crash included) is storage.loader's; checking
what a producer sent before it is appended is storage.validator's.

The log owns the partition's leader epoch cache (storage.leader_epoch), fed by leader
appends, follower appends (the leader's batches as they are: storage.follower_append) and
truncations. The high watermark follows the log end offset, except on a ``replicated``
log (cluster mode): there it starts at the checkpointed value, only replication moves it
up (:meth:`PartitionLog.maybe_increment_high_watermark`), truncation lowers it to the LEO.

Transactions (the LSO, COMMIT/ABORT markers, the ``.txnindex`` of aborted transactions)
are ``plog.txns``, a storage.log_txn.LogTransactions; the append paths here hand it the
batches with the transactional or control attribute bit, and only those.

Every OSError (the write path's, and a read's) takes this partition offline, and reports
its log dir to the ``failure_channel`` (storage.log_dir_failure), which takes the whole dir
offline: later calls raise KafkaStorageError until the process restarts.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from protocol.records import BatchHeader, assign_offsets, iter_records

from .config import LogConfig
from .errors import KafkaStorageError, OffsetOutOfRangeError
from .follower_append import check_offsets, new_epochs, run_end, whole_batches
from .leader_epoch import LeaderEpochCache
from .loader import load_log, rebuild_producer_state
from .log_dir_failure import LogDirFailureChannel
from .log_txn import LogTransactions
from .log_types import AppendResult, FileRegion, parse_dir_name
from .producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from .segment import DELETED_SUFFIX, INT32_MAX, LogSegment
from .transactions import VerificationGuard
from .txn_index import AbortedTxn

# FileRegion, AppendResult and parse_dir_name live in storage.log_types (log_txn needs
# them too); importers keep finding them here.
__all__ = ["PartitionLog", "FileRegion", "AppendResult", "parse_dir_name"]

log = logging.getLogger(__name__)


class PartitionLog:
    """One partition. Synchronous and single-threaded: the broker calls it from its loop."""

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, *,
                 recovery_point: int = 0, log_start_offset: int = 0, clean_shutdown: bool = True,
                 clock: Callable[[], float] = time.time, topic_id: object = None, replicated: bool = False,
                 high_watermark: int | None = None, failure_channel: LogDirFailureChannel | None = None) -> None:
        self.dir = directory
        self._failure_channel = failure_channel
        self.topic = topic
        self.partition = partition
        self._config = config
        self.clock = clock
        self.topic_id = topic_id
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self.producer_state = ProducerStateManager(directory)
        #: the LSO, markers and aborted transactions (storage.log_txn)
        self.txns = LogTransactions(self)
        self.offline = False
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        #: "topic-partition", as Kafka names a partition in messages (built once, not per append)
        self.name = f"{topic}-{partition}"
        # a single broker's epoch file is fsynced with its data (flush), not on each change
        self.epoch_cache = LeaderEpochCache(directory, self.name, sync=replicated)
        loaded = load_log(directory, config, self.producer_state, recovery_point=recovery_point,
                          log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
                          epoch_cache=self.epoch_cache)
        self.segments = loaded.segments
        # segment.ms counts from now while the active segment holds no timestamp
        self.segments[-1].created_ms = self._now_ms()
        self._bases: list[int] = [s.base_offset for s in self.segments]
        self.recovery_point = loaded.recovery_point
        self._log_start = loaded.log_start_offset
        self._leo = loaded.log_end_offset
        self._replicated = replicated
        if replicated and high_watermark is not None:
            self._hw = max(self._log_start, min(high_watermark, self._leo))
        else:
            self._hw = self._leo  # single replica: everything in the log is committed

    # --- properties ----------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, cfg: LogConfig) -> None:
        self._config = cfg
        for seg in self.segments:
            seg.index_interval_bytes = cfg.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def replicated(self) -> bool:
        """Whether the high watermark is kept apart from the log end offset."""
        return self._replicated

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log start, LEO] (Kafka's updateHighWatermark: a
        follower takes the leader's this way, and it may go down)."""
        self._hw = max(self._log_start, min(offset, self._leo))
        return self._hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the HW up to ``offset`` if higher (the leader, from its followers' LEOs);
        returns whether it moved. Beyond the LEO is a caller's bug (Kafka): ValueError."""
        if offset > self._leo:
            raise ValueError(f"high watermark {offset} of {self.name} would exceed the log end offset {self._leo}")
        if offset > self._hw:
            self._hw = offset
            return True
        return False

    @property
    def latest_epoch(self) -> int:
        """The latest leader epoch in the epoch cache, -1 when there is none."""
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (Kafka's endOffsetFor with the
        LEO); (-1, -1) when undefined."""
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def last_sequence(self, producer_id: int) -> int:
        return self.producer_state.last_sequence(producer_id)

    # --- transactions: delegates to self.txns for the broker's, the cleaner's and the tests' calls

    @property
    def first_unstable_offset(self) -> int | None:
        return self.txns.first_unstable_offset

    @property
    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        return self.txns.has_ongoing_transaction(producer_id)

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationGuard:
        return self.txns.maybe_start_transaction_verification(producer_id, sequence, epoch)

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        return self.txns.verification_guard(producer_id)

    def append_control_batch(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, *,
                             leader_epoch: int = 0, timestamp: int | None = None) -> AppendResult:
        return self.txns.append_control_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                              leader_epoch=leader_epoch, timestamp=timestamp)

    def aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.txns.aborted_txns(start_offset, upper_bound_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        return self.txns.collect_aborted_transactions(start_offset, upper_bound_offset)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _new_segment(self, base: int) -> LogSegment:
        return LogSegment(self.dir, base, index_interval_bytes=self._config.index_interval_bytes)

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(f"partition {self.topic}-{self.partition} is offline after a storage error")

    def _fail(self, exc: BaseException) -> KafkaStorageError:
        self.offline = True
        parent = os.path.dirname(self.dir)
        message = f"Error while accessing {self.name} in dir {parent}"
        if self._failure_channel is not None:
            self._failure_channel.maybe_add_offline_log_dir(parent, message, exc)
        else:
            log.error("%s, taking it offline: %s", message, exc)
        return KafkaStorageError(f"{message}: {exc}")

    # --- append --------------------------------------------------------------------

    def append(self, buf: bytearray | memoryview, headers: list[BatchHeader], *, leader_epoch: int = 0,
               log_append_time_ms: int | None = None, verification_guard: VerificationGuard | None = None,
               coordinator: bool = False) -> AppendResult:
        """Assign offsets to batches in ``buf``, stamp ``leader_epoch`` into them and write
        them with one pwrite. The batches must have passed
        :func:`storage.validator.validate_for_append` (sizes included), or come from a
        ``coordinator`` (markers: :meth:`LogTransactions.append_control_batch`). ``verification_guard``
        and ``coordinator``: see :meth:`storage.producer_state.ProducerStateManager.prepare`."""
        self._check_online()
        if not headers:
            raise ValueError("append needs at least one batch")
        cfg = self._config
        base = self._leo
        dup, pending, txn = self.producer_state.prepare(headers, base, buf, verification_guard, coordinator)
        if dup is not None:
            return AppendResult(dup.first_offset, dup.last_offset, -1, self._log_start, duplicate=True)
        lat = None
        if cfg.log_append_time:
            lat = log_append_time_ms if log_append_time_ms is not None else self._now_ms()
        try:
            if leader_epoch > self.epoch_cache.latest_epoch:
                # a new epoch goes on disk before its first batch (else: one comparison)
                self.epoch_cache.assign(leader_epoch, base)
            next_offset = assign_offsets(buf, headers, base, leader_epoch=leader_epoch, log_append_time=lat)
            max_ts = lat if lat is not None else max(h.max_timestamp for h in headers)
            seg = self._maybe_roll(len(buf), max_ts, next_offset - 1, len(headers))
            seg.append(buf, headers, base, lat)
        except OSError as e:
            raise self._fail(e) from e
        self._leo = next_offset
        if not self._replicated:
            self._hw = next_offset
        self.producer_state.apply(pending, next_offset, txn)
        if txn is not None:
            self.txns.end_txns(seg, txn)
        self._unflushed_messages += sum(h.record_count for h in headers)
        if self._unflushed_messages >= cfg.flush_messages:
            self.flush()
        return AppendResult(base, next_offset - 1, lat if lat is not None else -1, self._log_start)

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> AppendResult | None:
        """Store the leader's whole batches byte for byte (None if there is none): raises
        CorruptRecordError, or UnexpectedAppendOffsetError for offsets below the LEO or
        going back. Producer state is updated unvalidated (Kafka's REPLICATION origin)."""
        self._check_online()
        headers = whole_batches(buf)
        if not headers:
            return None
        check_offsets(headers, self._leo, self.name)
        view = memoryview(buf)
        now = self._now_ms()
        i = pos = 0
        try:
            epochs = new_epochs(headers, self.epoch_cache.latest_epoch)
            if epochs:
                self.epoch_cache.assign_many(epochs)
            while i < len(headers):
                h = headers[i]
                seg = self._maybe_roll(h.size, h.max_timestamp, h.last_offset, 1, h.base_offset)
                j, n_bytes = run_end(seg, self._config, headers, i, now)
                run = headers[i:j]
                seg.append(view[pos : pos + n_bytes], run, h.base_offset)
                self._leo = run[-1].next_offset
                self.txns.replay_run(seg, view, pos, run)
                i, pos = j, pos + n_bytes
        except OSError as e:
            raise self._fail(e) from e
        if not self._replicated:
            self._hw = self._leo
        self._unflushed_messages += sum(h.record_count for h in headers)
        if self._unflushed_messages >= self._config.flush_messages:
            self.flush()
        return AppendResult(headers[0].base_offset, headers[-1].last_offset, -1, self._log_start)

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, n_batches: int,
                    first_offset: int | None = None) -> LogSegment:
        seg = self.segments[-1]
        cfg = self._config
        if seg.size == 0:
            # (a follower's first batch may lie beyond an empty segment's offset range)
            return seg if last_offset - seg.base_offset <= INT32_MAX else self.roll(first_offset)
        roll = seg.size > cfg.segment_bytes - size
        if not roll:
            first_ts = seg.rolling_based_timestamp()
            waited = max_ts - first_ts if first_ts is not None and first_ts >= 0 else self._now_ms() - seg.created_ms
            roll = waited > cfg.segment_ms - cfg.segment_jitter_ms
        roll = roll or seg.offset_index.entries + n_batches > seg.offset_index.max_entries \
            or seg.time_index.entries + n_batches > seg.time_index.max_entries - 1 \
            or last_offset - seg.base_offset > INT32_MAX
        if roll:
            return self.roll(first_offset)
        return seg

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at the log end offset, or at
        ``base_offset`` if higher (a follower's next batch after an offset gap)."""
        old = self.segments[-1]
        new_base = self._leo if base_offset is None else max(base_offset, self._leo)
        if old.size == 0 and old.base_offset == new_base:
            return old
        old.on_become_inactive()
        self.producer_state.take_snapshot(new_base)
        seg = self._new_segment(new_base)
        for p in seg.paths():
            Path(p).unlink(missing_ok=True)  # a stale empty file from an earlier life of this offset
        seg.make_active(self._config.segment_index_bytes)
        seg.created_ms = self._now_ms()
        self.segments.append(seg)
        self._bases.append(new_base)
        return seg

    # --- read ----------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.topic}-{self.partition} [{self._log_start}, {self._leo}]")

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FileRegion | None:
        """Whole batches starting with the one holding ``offset``; None at the end."""
        self._check_online()
        self._check_range(offset)
        if offset == self._leo or (max_offset is not None and offset >= max_offset):
            return None
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        try:
            while i < len(self.segments):
                seg = self.segments[i]
                hint = self._bases[i + 1] if i + 1 < len(self._bases) else self._leo
                r = seg.read(offset, max_bytes, max_offset=max_offset, end_offset_hint=hint, min_one_batch=min_one_batch)
                if r is not None:
                    pos, length, h = r
                    if length == 0:
                        return None
                    return FileRegion(seg.fd, pos, length, seg.log_path, h.base_offset, seg.base_offset)
                i += 1
        except OSError as e:
            raise self._fail(e) from e
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``."""
        self._check_online()
        try:
            for seg in self.segments:
                if seg.size and seg.largest_timestamp() >= timestamp_ms:
                    r = seg.find_offset_by_timestamp(timestamp_ms, self._log_start)
                    if r is not None:
                        return r
        except OSError as e:
            raise self._fail(e) from e
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the (first) record with the largest timestamp."""
        self._check_online()
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.size and (best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        ts = best.max_timestamp_so_far
        found = best.translate_offset(best.offset_of_max_timestamp)
        if found is not None:
            pos, h = found
            for rec in iter_records(os.pread(best.fd, h.size, pos)):
                if rec.timestamp == ts:
                    return rec.offset, ts
        return best.offset_of_max_timestamp, ts

    # --- flush ---------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment from the recovery point on; the recovery point becomes LEO."""
        self._check_online()
        try:
            i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
            for seg in self.segments[i:]:
                seg.flush()
            self.epoch_cache.flush()
        except OSError as e:
            raise self._fail(e) from e
        self.recovery_point = self._leo
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()

    def flush_rolled(self) -> None:
        """fsync segments that rolled since the last flush (Kafka does this right after a
        roll) so the recovery point moves up to the active segment without flush.ms."""
        active_base = self.segments[-1].base_offset
        if self.offline or self.recovery_point >= active_base:
            return
        try:
            i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
            for seg in self.segments[i:-1]:
                seg.flush()
            self.epoch_cache.flush()
        except OSError as e:
            raise self._fail(e) from e
        self.recovery_point = active_base

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if ``flush.ms`` elapsed with unflushed messages (the manager's timer)."""
        if self.offline:
            return False
        self.flush_rolled()
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            return True
        return False

    # --- retention -----------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns segments deleted."""
        self._check_online()
        now = self._now_ms() if now_ms is None else now_ms
        cfg = self._config
        deleted = self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start)
        if cfg.delete:
            if cfg.retention_ms >= 0:
                deleted += self._delete_segments_while(lambda seg, nxt: now - seg.largest_timestamp() > cfg.retention_ms)
            if cfg.retention_bytes >= 0:
                diff = self.size_bytes - cfg.retention_bytes

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                deleted += self._delete_segments_while(over_size)
        return deleted

    def _delete_segments_while(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        victims: list[LogSegment] = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if upper > self._hw or not predicate(seg, nxt):
                break
            victims.append(seg)
        if not victims:
            return 0
        try:
            if victims[-1] is self.segments[-1]:
                self.roll()
            self._remove_segments(victims)
        except OSError as e:
            raise self._fail(e) from e
        self._log_start = max(self._log_start, self.segments[0].base_offset)
        self.producer_state.delete_snapshots_below(self._log_start)
        self._trim_epochs(self.epoch_cache.truncate_from_start, self._log_start)
        return len(victims)

    def _trim_epochs(self, trim: Callable[[int], bool], offset: int) -> None:
        try:
            trim(offset)
        except OSError as e:
            raise self._fail(e) from e

    def _remove_segments(self, victims: list[LogSegment]) -> None:
        """Rename to .deleted now, remove after file.delete.delay.ms (open fds stay valid)."""
        ids = {id(s) for s in victims}
        self.segments = [s for s in self.segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self.segments]
        due = self._now_ms() + self._config.file_delete_delay_ms
        for seg in victims:
            seg.change_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((due, seg))

    def delete_pending(self, now_ms: int | None = None, *, force: bool = False) -> int:
        now = self._now_ms() if now_ms is None else now_ms
        keep, n = [], 0
        for due, seg in self._pending_deletes:
            if force or due <= now:
                seg.delete()
                n += 1
            else:
                keep.append((due, seg))
        self._pending_deletes = keep
        return n

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset (-1 means the high watermark)."""
        self._check_online()
        if offset == -1:
            offset = self._hw
        if offset < 0 or offset > self._hw:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.topic}-{self.partition} to {offset}: high watermark is {self._hw}")
        if offset > self._log_start:
            self._log_start = offset
            self._trim_epochs(self.epoch_cache.truncate_from_start, self._log_start)
            self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start)
        return self._log_start

    # --- truncation ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove all records at and above ``offset`` (follower truncation), and the
        epochs starting there."""
        self._check_online()
        if offset >= self._leo:
            # Kafka trims the cache anyway: an epoch this broker started as leader
            # without writing anything in it may sit at the log end.
            self._trim_epochs(self.epoch_cache.truncate_from_end, self._leo)
            return
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        try:
            if offset < self.segments[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return
            victims = [s for s in self.segments if s.base_offset > offset]
            for s in victims:
                s.delete()
            self.segments = [s for s in self.segments if s.base_offset <= offset]
            self._bases = [s.base_offset for s in self.segments]
            seg = self.segments[-1]
            seg.truncate_to(offset)
            if not seg.active:
                seg.make_active(self._config.segment_index_bytes)
            next_offset, _ = seg.read_next_offset()
            self._leo = max(next_offset, seg.base_offset)
            self.epoch_cache.truncate_from_end(self._leo)
        except OSError as e:
            raise self._fail(e) from e
        self._hw = min(self._hw, self._leo)
        self._log_start = min(self._log_start, self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)
        self.producer_state.delete_snapshots_above(self._leo)
        rebuild_producer_state(self.producer_state, self.segments, self._log_start, self._leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and start the log empty at ``offset`` (the epoch cache too)."""
        self._check_online()
        try:
            for s in self.segments:
                s.delete()
            for _, s in self._pending_deletes:
                s.delete()
            self._pending_deletes = []
            for name in os.listdir(self.dir):
                if name.endswith(SNAPSHOT_SUFFIX):
                    Path(self.dir, name).unlink(missing_ok=True)
            seg = self._new_segment(offset)
            seg.make_active(self._config.segment_index_bytes)
            seg.created_ms = self._now_ms()
            self.segments = [seg]
            self._bases = [offset]
            self._leo = self._hw = self._log_start = self.recovery_point = offset
            self.producer_state.reset(offset)
            self.epoch_cache.clear()  # after the segments, as Kafka does
        except OSError as e:
            raise self._fail(e) from e

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Snapshot producer state at the LEO, trim the active indexes, close files."""
        if not self.offline:
            try:
                self.producer_state.take_snapshot(self._leo)
            except OSError as e:
                log.error("cannot snapshot producer state of %s: %s", self.dir, e)
        for seg in self.segments:
            try:
                seg.close()
            except OSError as e:
                log.error("error closing %s: %s", seg.log_path, e)
        self.delete_pending(force=True)

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        for seg in self.segments:
            try:
                seg.close()
            except OSError:
                pass
        self.delete_pending(force=True)
        self.segments = []
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self._log_start}, end={self._leo}, "
                f"hw={self._hw}, segments={len(self.segments)})")

