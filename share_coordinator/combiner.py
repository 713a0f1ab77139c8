"""Combining state batches into one non-overlapping list: Kafka's PersisterStateBatchCombiner.

A share-partition's state is a list of offset ranges, each with a delivery state and a
delivery count. A ShareUpdate (or a WriteShareGroupState request) carries only the ranges
that changed; the coordinator combines them with what it has:

1. Prune: with a start offset (not -1), ranges wholly below it go, a range across it keeps
   ``[start, last]``.
2. Merge: where ranges overlap, each offset keeps the batch of higher *delivery priority*:
   the larger delivery count, then the larger delivery state (Available 0 < Acknowledged 2 <
   Archived 4). Overlapping or adjacent ranges of the same state and count become one.

Kafka does not let the later batch win blindly: priority decides. In practice the two agree,
because an offset's delivery count only grows and, within one delivery, its state only
moves from Available to a terminal state; priority also makes the result independent of the
order in which overlapping inputs arrive.

Kafka's algorithm walks a TreeSet pair by pair; this one sweeps the offsets once (sorted
boundaries, the highest-priority batch covering each span), which gives the same ranges.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from share_coordinator.records import StateBatch

__all__ = ["combine_state_batches"]


def _priority(b: StateBatch) -> tuple[int, int]:
    # PersisterStateBatchCombiner.compareBatchDeliveryInfo: count first, then state.
    return b.delivery_count, b.delivery_state


def _prune(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset == -1:
        return list(batches)
    out = []
    for b in batches:
        if b.last_offset < start_offset:
            continue  # wholly before the start offset: acknowledged history
        if b.first_offset < start_offset:
            b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(b)
    return out


def combine_state_batches(so_far: Iterable[StateBatch], new: Iterable[StateBatch],
                          start_offset: int) -> tuple[StateBatch, ...]:
    """The non-overlapping, sorted combination of ``so_far`` and ``new`` from ``start_offset``
    (-1: no pruning)."""
    batches = _prune([*so_far, *new], start_offset)
    if len(batches) < 2:
        return tuple(batches)
    batches.sort(key=lambda b: (b.first_offset, b.last_offset))

    out: list[StateBatch] = []

    def emit(first: int, last: int, b: StateBatch) -> None:
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == first
                and _priority(prev) == _priority(b)):
            out[-1] = StateBatch(prev.first_offset, last, b.delivery_state, b.delivery_count)
        else:
            out.append(StateBatch(first, last, b.delivery_state, b.delivery_count))

    # Sweep: ``active`` is a max-heap (by priority) of the batches covering the current
    # offset; a span ends where a batch starts or ends.
    active: list[tuple[int, int, int, int, StateBatch]] = []  # (-count, -state, -last, seq, batch)
    i = 0
    pos = batches[0].first_offset
    n = len(batches)
    while i < n or active:
        while i < n and batches[i].first_offset <= pos:
            b = batches[i]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, -b.last_offset, i, b))
            i += 1
        while active and active[0][4].last_offset < pos:
            heapq.heappop(active)
        if not active:
            if i >= n:
                break
            pos = batches[i].first_offset  # a gap: nothing is stored for it
            continue
        top = active[0][4]
        # The span runs until the top batch ends or another batch starts (which may outrank it).
        end = top.last_offset
        if i < n:
            end = min(end, batches[i].first_offset - 1)
        emit(pos, end, top)
        pos = end + 1
    return tuple(out)
