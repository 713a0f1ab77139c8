"""Writes of the coordinator that are not committed yet, and what to do once they are.

A record appended to a ``__consumer_offsets`` partition led by a broker of a cluster is in
the leader's log only: until the partition's high watermark passes it, a failover can lose
it. Kafka never lets such a write show: its classic GroupMetadataManager acts on a write in
the append's callback, once the records are replicated (acks=all), so that a committed
offset is staged (``prepareOffsetCommit``) and becomes the group's committed offset only on
success (``onOffsetCommitAppend``), dropped on failure (``failPendingOffsetWrite``), and a
SyncGroup's assignment reaches the members only once stored; Kafka 4's coordinator reads at
the partition's last committed offset. Here the parts of the coordinator register, after an
append, what to do when its records are committed and what to do if the write fails; the
broker reports both (:meth:`UncommittedWrites.committed`, :meth:`UncommittedWrites.failed`)
once it knows, after waiting for the ISR as it does for the write's answer.

A log that cannot tell its high watermark (a single broker, tests' in-memory logs) commits
at once: the callbacks run during the append's operation, as if nothing was deferred.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = ["UncommittedWrites"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Write:
    end: int  # the log offset after the write's last record
    on_commit: Callable[[], None]
    on_fail: Callable[[ErrorCode], None]


def _end(write: _Write) -> int:
    return write.end


class UncommittedWrites:
    """Per ``__consumer_offsets`` partition, the registered writes not yet committed, in log
    order (by end: a busy partition may hold many while a follower lags).
    ``high_watermark(partition)`` is the log's (None: every appended record is committed at
    once)."""

    def __init__(self, high_watermark: Callable[[int], int | None]) -> None:
        self._high_watermark = high_watermark
        self._pending: dict[int, list[_Write]] = {}

    def after(self, partition: int, end: int, on_commit: Callable[[], None],
              on_fail: Callable[[ErrorCode], None]) -> None:
        """Run ``on_commit`` once the records of ``partition`` below ``end`` are committed (at
        once if they are), or ``on_fail(error)`` if the write is reported failed first."""
        hw = self._high_watermark(partition)
        if hw is None or hw >= end:
            _run(on_commit)
            return
        bisect.insort_right(self._pending.setdefault(partition, []), _Write(end, on_commit, on_fail), key=_end)

    def committed(self, partition: int, offset: int) -> None:
        """The high watermark of ``partition`` reached ``offset``: every write ending at or
        before it is committed."""
        writes = self._pending.get(partition)
        if not writes:
            return
        cut = bisect.bisect_right(writes, offset, key=_end)
        done = writes[:cut]
        self._keep(partition, writes[cut:])
        for w in done:
            _run(w.on_commit)

    def failed(self, partition: int, end: int, error: ErrorCode) -> None:
        """The append ending at ``end`` did not reach the ISR in time, or leadership moved:
        its writes fail with ``error`` (the append's error, which each part maps as Kafka
        does). Only that append's: the others of the partition have their own outcome. Its
        records may still become committed later; they are not shown then either, as
        Kafka drops a pending commit whose append reported an error."""
        writes = self._pending.get(partition)
        if not writes:
            return
        lo, hi = bisect.bisect_left(writes, end, key=_end), bisect.bisect_right(writes, end, key=_end)
        gone = writes[lo:hi]
        self._keep(partition, writes[:lo] + writes[hi:])
        for w in gone:
            _run(w.on_fail, error)

    def fail_all(self, partition: int, error: ErrorCode) -> None:
        """The partition is no longer served (its leadership moved): none of its waiting
        writes will be reported, they all fail."""
        for w in self._pending.pop(partition, []):
            _run(w.on_fail, error)

    def waiting(self, partition: int) -> int:
        """How many writes of ``partition`` wait for the high watermark."""
        return len(self._pending.get(partition, ()))

    def _keep(self, partition: int, writes: list[_Write]) -> None:
        if writes:
            self._pending[partition] = writes
        else:
            self._pending.pop(partition, None)


def _run(callback: Callable[..., None], *args: object) -> None:
    try:
        callback(*args)
    except Exception:  # one part's bug must not keep the others' writes pending for ever
        log.exception("callback of a __consumer_offsets write failed")
