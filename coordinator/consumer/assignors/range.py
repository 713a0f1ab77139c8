"""The ``range`` server-side assignor: a port of Kafka's RangeAssignor for consumer groups
(group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor/
RangeAssignor.java, as rewritten by KAFKA-16944).

For each topic, its subscribers in order, static members first by instance id, then dynamic
members by member id (Kafka's ``sortMemberIds``), take contiguous ranges of
``partitions // subscribers`` partitions, the first ``partitions % subscribers`` one more.
When all members subscribe to the same topics and the topics have the same partition
count, the assignment is co-partitioned (a member gets the same partition numbers of every
topic).

There is no stickiness beyond that order: the server-side RangeAssignor ignores the
current assignment. A static member that rejoins under a new member id keeps its
partitions because it sorts by its instance id. Racks are ignored, as in Kafka.
"""

from __future__ import annotations

import uuid

from ._helpers import check_topics_exist, freeze
from .api import Assignment, AssignmentSpec, MemberSpec

__all__ = ["RangeAssignor", "range_sort_key"]


def range_sort_key(member: MemberSpec) -> tuple[int, str, str]:
    """Kafka's sortMemberIds order: static members (by instance id) before dynamic ones (by
    member id). Kafka leaves two equal instance ids in input order; Krait then sorts by
    member id."""
    if member.instance_id is not None:
        return 0, member.instance_id, member.member_id
    return 1, member.member_id, ""


class RangeAssignor:
    """Kafka's RangeAssignor (``range``)."""

    name = "range"

    def assign(self, spec: AssignmentSpec) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        ordered = sorted(spec.members.values(), key=range_sort_key)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for member in ordered:
            check_topics_exist(spec, member.subscribed_topic_ids)
            for topic_id in member.subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(member.member_id)

        target: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.members}
        for topic_id, members in subscribers.items():
            num_partitions = spec.topics[topic_id].num_partitions
            quota, extra = divmod(num_partitions, len(members))
            start = 0
            for i, member_id in enumerate(members):
                end = min(start + quota + (1 if i < extra else 0), num_partitions)
                if start < end:
                    target[member_id][topic_id] = set(range(start, end))
                start = end
        return freeze(spec.members, target)
