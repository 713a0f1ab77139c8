"""Server-side partition assignors for KIP-848 consumer groups, by the name members give in
``ServerAssignor`` (Kafka's group.consumer.assignors, whose first entry is the default):

- ``uniform`` (:class:`UniformAssignor`, Kafka's UniformAssignor, the default);
- ``range`` (:class:`RangeAssignor`, Kafka's RangeAssignor).

The interface the coordinator calls is in :mod:`.api`.
"""

from __future__ import annotations

from .api import (
    Assignment,
    AssignmentSpec,
    MemberSpec,
    PartitionAssignor,
    PartitionAssignorError,
    TopicSpec,
)
from .range import RangeAssignor
from .uniform import UniformAssignor

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "Assignment",
    "AssignmentSpec",
    "MemberSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "TopicSpec",
    "UniformAssignor",
]

ASSIGNORS: dict[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}

#: Kafka's group.consumer.assignors defaults to [uniform, range]: the first is the default.
DEFAULT_ASSIGNOR = UniformAssignor.name
