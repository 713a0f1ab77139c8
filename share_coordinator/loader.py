"""Loading ``__share_group_state`` partitions when this broker becomes their leader (Kafka's
CoordinatorRuntime loading a ShareCoordinatorShard: every record replayed in offset order).

A partition is loading from :meth:`ShareStateLoader.start` until
:meth:`ShareStateLoader.finish`; meanwhile its share-partitions answer
COORDINATOR_LOAD_IN_PROGRESS. Replay goes through :func:`share_coordinator.state.apply_record`,
the code that applies records at run time, so a restarted coordinator answers exactly what
the old one did. Records that cannot be read are logged and skipped (unknown record types of
a newer broker quietly), as the other coordinators' loaders do: a poisoned log must not stop
the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from coordinator.records import replay_each
from share_coordinator.config import SHARE_GROUP_STATE_TOPIC
from share_coordinator.state import PartitionState, apply_record

__all__ = ["ShareStateLoader"]


class ShareStateLoader:
    """Partitions being loaded, each with the state replayed so far."""

    def __init__(self) -> None:
        self._loading: dict[int, PartitionState] = {}

    def start(self, partition: int) -> None:
        self._loading[partition] = PartitionState(partition)

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def replay(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> int:
        """Apply records ``(offset, key, value)``; returns how many were skipped."""
        state = self._loading.get(partition)
        if state is None:
            raise ValueError(f"{SHARE_GROUP_STATE_TOPIC}-{partition} is not loading: call start_loading first")
        return replay_each(SHARE_GROUP_STATE_TOPIC, partition, records,
                           lambda item: apply_record(state, item[1], item[2], item[0]),
                           unknown_level=logging.DEBUG)

    def finish(self, partition: int) -> PartitionState:
        state = self._loading.pop(partition, None)
        if state is None:
            raise ValueError(f"{SHARE_GROUP_STATE_TOPIC}-{partition} is not loading: call start_loading first")
        return state

    def abort(self, partition: int) -> None:
        self._loading.pop(partition, None)
