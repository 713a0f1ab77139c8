"""The group coordinator (a pure state machine) and the __consumer_offsets record codecs.

Import :class:`GroupCoordinator` and :class:`CoordinatorConfig` from here; see
coordinator/coordinator.py for how the broker drives it.
"""

from coordinator.config import CoordinatorConfig
from coordinator.coordinator import GroupCoordinator, OffsetsLog, java_string_hash, partition_for_group
from coordinator.group import Group, GroupState, Member

__all__ = [
    "CoordinatorConfig",
    "GroupCoordinator",
    "OffsetsLog",
    "Group",
    "GroupState",
    "Member",
    "java_string_hash",
    "partition_for_group",
]
