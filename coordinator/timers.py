"""The coordinator's timer queue: deadlines of sessions, pending member ids and rebalance phases.

Entries are never cancelled. Whoever fires an entry re-checks the deadline stored on the
group or member, so a stale entry is a no-op; this keeps heartbeats (which only move a
member's deadline) from touching the queue at all.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.group import Group

__all__ = ["TimerQueue", "Timer"]

#: (deadline ms, kind, group, key): what a due entry tells its handler.
Timer = tuple[int, str, "Group", Any]


class TimerQueue:
    """A min-heap of (deadline, kind, group, key); ``kind`` names the handler that fires it."""

    def __init__(self) -> None:
        # The sequence number keeps entries with equal deadlines in scheduling order and
        # stops heapq from ever comparing groups.
        self._heap: list[tuple[int, int, str, Group, Any]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, deadline: int, kind: str, group: Group, key: Any = "") -> None:
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, kind, group, key))

    def next_deadline(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Timer | None:
        """The earliest entry whose deadline is ``now`` or earlier, removed from the queue."""
        if not self._heap or self._heap[0][0] > now:
            return None
        at, _, kind, group, key = heapq.heappop(self._heap)
        return at, kind, group, key
