"""The group coordinator (a pure state machine) and the __consumer_offsets record codecs:
classic groups and KIP-848 consumer groups (coordinator/consumer/).

Import :class:`GroupCoordinator` and :class:`CoordinatorConfig` from here; see
coordinator/coordinator.py for how the broker drives it.
"""

from coordinator.config import CoordinatorConfig
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState
from coordinator.coordinator import GroupCoordinator, OffsetsLog, Topics, java_string_hash, partition_for_group
from coordinator.group import Group, GroupState, Member

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "CoordinatorConfig",
    "GroupCoordinator",
    "OffsetsLog",
    "Group",
    "GroupState",
    "Member",
    "Topics",
    "java_string_hash",
    "partition_for_group",
]
