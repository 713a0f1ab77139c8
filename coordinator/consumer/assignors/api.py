"""The server-side assignor interface (Kafka's ConsumerGroupPartitionAssignor, simplified
to what the coordinator hands over): the members with their subscriptions and current
target assignments in, the new target assignment out.

An assignor is a pure function of its input: the same input gives the same output, so a
coordinator that reloads a group from ``__consumer_offsets`` computes the same assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Assignment",
    "AssignmentSpec",
    "MemberSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "TopicSpec",
]

#: topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    #: the topics (by id) the member subscribes to that exist
    subscribed_topic_ids: frozenset[uuid.UUID]
    #: the member's partitions in the group's current target assignment (stickiness)
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A subscribed topic: its id, name and number of partitions (and, optionally, the
    racks of each partition's replicas for rack-aware assignment)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    members: Mapping[str, MemberSpec]
    topics: Mapping[uuid.UUID, TopicSpec]
    #: Kafka's SubscriptionType: True (HOMOGENEOUS) when every member subscribes to exactly
    #: the same topic *names* (ModernGroup.subscriptionType, which counts names, existing or
    #: not); None lets the assignor derive it from the members' ``subscribed_topic_ids``.
    #: The two differ only when members differ solely in topics that do not exist.
    homogeneous: bool | None = None


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the spec cannot be assigned (a member subscribes
    to a topic id missing from ``AssignmentSpec.topics``)."""


class PartitionAssignor(Protocol):
    """``name`` is what members name in ``ServerAssignor`` and what
    ``group.consumer.assignors`` lists."""

    name: str

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        """The new target assignment: member id -> its partitions per topic id. Every
        member of the spec has an entry (possibly empty); every partition of a topic some
        member subscribes to is assigned to exactly one member subscribing to it.
        Raises PartitionAssignorError when a subscribed topic id is not in ``spec.topics``."""
        ...
