"""The ``uniform`` server-side assignor, Kafka's default for consumer groups (KIP-848): a port
of Kafka's UniformAssignor (group-coordinator/src/main/java/org/apache/kafka/coordinator/
group/assignor/UniformAssignor.java), which picks one of two builders:

- all members subscribe to the same topics: :mod:`.uniform_homogeneous`
  (UniformHomogeneousAssignmentBuilder), balanced to within one partition, sticky;
- otherwise: :mod:`.uniform_heterogeneous` (UniformHeterogeneousAssignmentBuilder),
  balanced as far as the subscriptions allow, sticky.

Racks: Kafka's UniformAssignor (as of the mirrored source, October 2024) does not use racks
despite its javadoc ("potentially rack aware"); neither does this port, so
``MemberSpec.rack_id`` and ``TopicSpec.partition_racks`` are ignored.
"""

from __future__ import annotations

from ._helpers import freeze, is_homogeneous
from .api import Assignment, AssignmentSpec
from .uniform_heterogeneous import assign_heterogeneous
from .uniform_homogeneous import assign_homogeneous

__all__ = ["UniformAssignor"]


class UniformAssignor:
    """Kafka's UniformAssignor (``uniform``)."""

    name = "uniform"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        if is_homogeneous(spec):
            target = assign_homogeneous(spec)
        else:
            target = assign_heterogeneous(spec)
        return freeze(spec.members, target)
