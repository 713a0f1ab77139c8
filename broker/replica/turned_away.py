"""Idempotent producers this broker turned away, as a follower, just before it became a
partition's leader: a guard against duplicates made by the client at a leadership change.

Each broker learns a new leadership from its own ZooKeeper watch, so a client may learn from
another broker that this one leads before this one does (Kafka's ZooKeeper controller told
the new leader first, and everybody else after). The client's first batches then get
NOT_LEADER_OR_FOLLOWER here, and a later batch, already in flight, lands just after this
broker took over: a sequence gap, OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka reads that gap as
"the earlier request failed, these are not persisted", bumps its producer epoch and sends
every unacknowledged record again under new sequences, including records the old leader
had written and this broker had replicated, which then appear twice (found by the fault
harness at a disk-full leader: tests/chaos). Answering NOT_LEADER_OR_FOLLOWER to that gap
instead, while the producer's earlier batches were turned away moments ago, makes the client
retry them in order: the replicated ones are then found as duplicates and the rest appended.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: how long after turning a producer away a sequence gap from it is answered as "retry"
WINDOW_S = 10.0


class TurnedAway:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: (topic, partition) -> producer id -> when its batch was last turned away
        self._seen: dict[tuple[str, int], dict[int, float]] = {}

    def note(self, tp: tuple[str, int], producer_id: int) -> None:
        """A batch of ``producer_id`` for ``tp`` was refused as NOT_LEADER_OR_FOLLOWER."""
        if producer_id < 0:
            return
        now = self._clock()
        seen = self._seen.setdefault(tp, {})
        if len(seen) > 10_000:  # many producers: forget the old ones
            for pid in [p for p, t in seen.items() if now - t > WINDOW_S]:
                del seen[pid]
        seen[producer_id] = now

    def recent(self, tp: tuple[str, int], producer_id: int) -> bool:
        """Was a batch of ``producer_id`` for ``tp`` turned away within the window?"""
        t = self._seen.get(tp, {}).get(producer_id)
        return t is not None and self._clock() - t <= WINDOW_S
