"""The uniform assignor when every member subscribes to the same topics: a port of Kafka's
UniformHomogeneousAssignmentBuilder (group-coordinator/src/main/java/org/apache/kafka/
coordinator/group/assignor/UniformHomogeneousAssignmentBuilder.java).

Balance first (member sizes differ by at most one), then stickiness:

1. every partition nobody holds is *unassigned* (topics in order, partitions ascending);
2. each member gets a quota, ``total // members``, plus one for the first
   ``total % members`` members; it keeps its current partitions up to its quota (topics in
   order, lowest partitions first) and the rest are appended to the unassigned list;
3. the members below their quota take the unassigned partitions in list order.

Where Kafka iterates hash maps, Krait uses a fixed order: topics by Kafka's topic id order,
members by their current partition count, most first, then member id. Kafka's member order is
its HashMap's (arbitrary); giving the quota's extra partition to the members that already
hold the most is one of the orders Kafka can produce and the one that moves the fewest
partitions: a member joining only takes what balance requires, a member leaving only gives
its partitions away.
"""

from __future__ import annotations

import uuid

from ._helpers import check_topics_exist, current_assignment, sorted_topics
from .api import AssignmentSpec, PartitionAssignorError

__all__ = ["assign_homogeneous"]


def assign_homogeneous(
    spec: AssignmentSpec, topic_order: list[uuid.UUID] | None = None
) -> dict[str, dict[uuid.UUID, set[int]]]:
    """The new target assignment of a homogeneous group (members absent from the result have
    nothing). ``topic_order`` overrides the order topics are walked in (tests use it to
    replay the Java hash order a Kafka test ran with); it must list every subscribed topic."""
    member_ids = sorted(spec.members)
    if not member_ids:
        return {}
    topic_ids = spec.members[member_ids[0]].subscribed_topic_ids
    if not topic_ids:
        return {}
    check_topics_exist(spec, topic_ids)
    order = sorted_topics(topic_ids) if topic_order is None else list(topic_order)

    current = current_assignment(spec, member_ids, order)

    # The partitions nobody holds (Kafka: !groupSpec.isPartitionAssigned(topicId, i)).
    held: dict[uuid.UUID, set[int]] = {t: set() for t in order}
    for topics in current.values():
        for topic_id, parts in topics.items():
            held[topic_id].update(parts)
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in order:
        num_partitions = spec.topics[topic_id].num_partitions
        total += num_partitions
        taken = held[topic_id]
        unassigned.extend((topic_id, p) for p in range(num_partitions) if p not in taken)

    min_quota, extra = divmod(total, len(member_ids))

    # maybeRevokePartitions: members holding the most go first (member_ids is sorted, and
    # the sort is stable, so ties stay in member id order).
    sizes = {m: sum(len(parts) for parts in current[m].values()) for m in member_ids}
    target: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for member_id in sorted(member_ids, key=lambda m: -sizes[m]):
        quota = min_quota
        if extra > 0:
            quota += 1
            extra -= 1
        new: dict[uuid.UUID, set[int]] = {}
        for topic_id, parts in current[member_id].items():
            if len(parts) <= quota:
                quota -= len(parts)
                new[topic_id] = set(parts)
            else:
                if quota > 0:
                    new[topic_id] = set(parts[:quota])
                unassigned.extend((topic_id, p) for p in parts[quota:])
                quota = 0
        if quota > 0:
            unfilled.append((member_id, quota))
        target[member_id] = new

    # assignRemainingPartitions
    index = 0
    for member_id, quota in unfilled:
        new = target[member_id]
        for topic_id, partition in unassigned[index:index + quota]:
            parts = new.get(topic_id)
            if parts is None:
                new[topic_id] = {partition}
            else:
                parts.add(partition)
        index += quota
    if index < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return target
