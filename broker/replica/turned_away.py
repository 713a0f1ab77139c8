"""Idempotent producers whose batch this broker refused, unwritten, with a retriable error
moments ago: a guard against duplicates made by the client when a later batch of the same
producer arrives with a sequence gap.

A producer pipelines up to five batches per partition. When this broker refuses one of them
before writing it (NOT_LEADER_OR_FOLLOWER while it is still taking over, NOT_ENOUGH_REPLICAS
while the ISR is short) and the cause is gone by the time the next batch arrives (the
leadership applied, the ISR grown back),
the next batch leaves a gap in the producer's sequence. Kafka answers a gap
OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka reads that as "the earlier request failed, these
are not persisted": it bumps its producer epoch and sends every unacknowledged record again
under new sequences, on every partition. Records written but not yet acknowledged (an acks=all
wait cut by a leadership change, a lost answer) then appear twice. The fault harness found
this twice (tests/chaos): at a new leader that had refused the producer as a follower, and
after refusals for a short ISR that grew back (the second, inferred: see the tests).

Answering the gap with the refusal's own (retriable) error instead, while the refusal is
recent, makes the client retry its batches in order with the same sequences: the refused
batch is written first, a batch already written is found as a duplicate, and no epoch is
bumped.

The refusal may also come from the previous leader, which this broker never hears of: a
leader cut off from the others (a one-way partition) answers NOT_LEADER_OR_FOLLOWER only
once it learns it was replaced, and librdkafka had the next batch at the new leader a few
milliseconds later (a third chaos run: seed 20261126 in CI, p1's record written twice on
another partition after the epoch bump this gap caused). So for WINDOW_S after
this broker becomes a partition's leader a gap is answered NOT_LEADER_OR_FOLLOWER too
(:meth:`TurnedAway.answer_gap`). A gap with neither behind it is OUT_OF_ORDER_SEQUENCE_NUMBER,
and so is one that persists past the window (its client then bumps its epoch, as before).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from protocol.errors import ErrorCode

#: how long after refusing a producer's batch, or after becoming a partition's leader, a
#: sequence gap is answered as "retry"
WINDOW_S = 10.0
#: refusals that leave the batch unwritten and that the client retries with the same sequence
RETRIABLE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas,
                       ErrorCode.kafka_storage_error})


class TurnedAway:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: (topic, partition) -> producer id -> (when its batch was last refused, the error)
        self._seen: dict[tuple[str, int], dict[int, tuple[float, ErrorCode]]] = {}

    def note(self, tp: tuple[str, int], producer_id: int, error: ErrorCode = ErrorCode.not_leader_or_follower) -> None:
        """A batch of ``producer_id`` for ``tp`` was refused unwritten with ``error`` (other
        errors than the retriable ones are not remembered: the client does not retry them)."""
        if producer_id < 0 or error not in RETRIABLE:
            return
        now = self._clock()
        seen = self._seen.setdefault(tp, {})
        if len(seen) > 10_000:  # many producers: forget the old ones
            for pid in [p for p, (t, _) in seen.items() if now - t > WINDOW_S]:
                del seen[pid]
        seen[producer_id] = (now, error)

    def recent(self, tp: tuple[str, int], producer_id: int) -> ErrorCode | None:
        """The error a batch of ``producer_id`` for ``tp`` was refused with within the
        window, or None."""
        got = self._seen.get(tp, {}).get(producer_id)
        if got is None or self._clock() - got[0] > WINDOW_S:
            return None
        return got[1]

    def answer_gap(self, tp: tuple[str, int], producer_id: int, led_for_ms: int) -> tuple[ErrorCode, str] | None:
        """The retriable answer (error, why) to a sequence gap from ``producer_id`` on
        ``tp``, whose leader this broker has been for ``led_for_ms``; None: the gap stays
        OUT_OF_ORDER_SEQUENCE_NUMBER (see the module doc)."""
        refused = self.recent(tp, producer_id)
        if refused is not None:
            return refused, (f"an earlier batch of producer {producer_id} was refused moments ago "
                             f"({refused.name}): retry it first")
        if 0 <= led_for_ms <= WINDOW_S * 1000:
            return ErrorCode.not_leader_or_follower, ("this broker took over as leader moments ago: the previous "
                                                      "leader may have refused the earlier batches, retry them first")
        return None
