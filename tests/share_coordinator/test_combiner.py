"""Combining state batches (Kafka's PersisterStateBatchCombiner): pruning at the start
offset, overlaps resolved by delivery priority, adjacent equal batches joined."""

from __future__ import annotations

import random

from share_coordinator.combiner import combine_state_batches
from share_coordinator.records import StateBatch as B

AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


def test_nothing_or_one_batch():
    assert combine_state_batches((), (), -1) == ()
    assert combine_state_batches((B(0, 9, AVAILABLE, 1),), (), -1) == (B(0, 9, AVAILABLE, 1),)


def test_prune_at_start_offset():
    so_far = (B(0, 9, ACKED, 1), B(10, 19, AVAILABLE, 1), B(20, 29, AVAILABLE, 2))
    assert combine_state_batches(so_far, (), 15) == (B(15, 19, AVAILABLE, 1), B(20, 29, AVAILABLE, 2))


def test_later_acknowledgement_overrides_the_middle_of_a_range():
    so_far = (B(0, 99, AVAILABLE, 1),)
    new = (B(40, 49, ACKED, 1),)
    assert combine_state_batches(so_far, new, -1) == (
        B(0, 39, AVAILABLE, 1), B(40, 49, ACKED, 1), B(50, 99, AVAILABLE, 1))


def test_redelivery_overrides_across_two_ranges():
    so_far = (B(0, 9, AVAILABLE, 1), B(10, 19, ACKED, 1))
    new = (B(5, 14, AVAILABLE, 2),)
    assert combine_state_batches(so_far, new, -1) == (
        B(0, 4, AVAILABLE, 1), B(5, 14, AVAILABLE, 2), B(15, 19, ACKED, 1))


def test_priority_not_arrival_decides():
    # An older batch with the higher delivery count keeps its offsets (Kafka's rule).
    so_far = (B(0, 9, AVAILABLE, 3),)
    new = (B(0, 9, ACKED, 1),)
    assert combine_state_batches(so_far, new, -1) == (B(0, 9, AVAILABLE, 3),)
    assert combine_state_batches(new, so_far, -1) == (B(0, 9, AVAILABLE, 3),)


def test_same_state_overlapping_and_adjacent_join():
    batches = (B(0, 9, ACKED, 1), B(5, 14, ACKED, 1), B(15, 20, ACKED, 1), B(22, 30, ACKED, 1))
    assert combine_state_batches(batches, (), -1) == (B(0, 20, ACKED, 1), B(22, 30, ACKED, 1))


def test_equal_ranges_keep_the_higher_state():
    assert combine_state_batches((B(0, 9, ACKED, 1),), (B(0, 9, ARCHIVED, 1),), -1) == (B(0, 9, ARCHIVED, 1),)


def test_non_sequential_updates_keep_untouched_batches():
    # Kafka's testNonSequentialBatchUpdates: b2 must survive b1's ack and the start offset move.
    so_far = (B(100, 109, ACKED, 1), B(110, 119, 1, 2), B(120, 129, 1, 0))
    new = (B(120, 129, ACKED, 1),)
    assert combine_state_batches(so_far, new, 110) == (B(110, 119, 1, 2), B(120, 129, ACKED, 1))


def test_lower_priority_batch_inside_a_higher_one_is_swallowed():
    assert combine_state_batches((B(0, 20, ARCHIVED, 5),), (B(5, 6, AVAILABLE, 1), B(25, 26, AVAILABLE, 1)), -1) == (
        B(0, 20, ARCHIVED, 5), B(25, 26, AVAILABLE, 1))


def _by_definition(batches, start):
    """Per offset, the covering batch of highest (count, state); then runs of equal batches."""
    best = {}
    for b in batches:
        for off in range(max(b.first_offset, start if start != -1 else b.first_offset), b.last_offset + 1):
            cur = best.get(off)
            if cur is None or (b.delivery_count, b.delivery_state) > cur:
                best[off] = (b.delivery_count, b.delivery_state)
    out = []
    for off in sorted(best):
        count, state = best[off]
        if out and out[-1].last_offset + 1 == off and (out[-1].delivery_count, out[-1].delivery_state) == (count, state):
            out[-1] = B(out[-1].first_offset, off, state, count)
        else:
            out.append(B(off, off, state, count))
    return tuple(out)


def test_random_inputs_match_the_definition():

    rng = random.Random(932)
    for _ in range(500):
        batches = []
        for _ in range(rng.randint(0, 6)):
            first = rng.randint(0, 40)
            batches.append(B(first, first + rng.randint(0, 12), rng.choice((0, 2, 4)), rng.randint(0, 3)))
        cut = rng.randint(0, len(batches))
        start = rng.choice((-1, rng.randint(0, 30)))
        expected = _by_definition(batches, start)
        got = combine_state_batches(batches[:cut], batches[cut:], start)
        if len(batches) >= 2 or start != -1:
            assert got == expected, (batches, start)
