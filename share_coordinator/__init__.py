"""The share coordinator (KIP-932, a pure state machine) and the ``__share_group_state``
record codecs.

Import :class:`ShareCoordinator` and :class:`ShareCoordinatorConfig` from here; see
share_coordinator/coordinator.py for how the broker drives it (requests in, responses and
records out; loading and unloading partitions; write outcomes; timers).
"""

from share_coordinator.config import SHARE_GROUP_STATE_TOPIC, ShareCoordinatorConfig
from share_coordinator.coordinator import Result, ShareCoordinator, Write
from share_coordinator.records import SharePartitionKey, StateBatch
from share_coordinator.state import KeyState, ShareGroupOffset, partition_for

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "KeyState",
    "Result",
    "ShareCoordinator",
    "ShareCoordinatorConfig",
    "ShareGroupOffset",
    "SharePartitionKey",
    "StateBatch",
    "Write",
    "partition_for",
]
