"""What the server-side assignors share: Kafka's topic id order, the subscription type,
input validation, and the cleaning of the current assignment they start from.

Kafka's assignors (group-coordinator/.../coordinator/group/assignor/) iterate Java hash maps
in several places; Krait replaces every such iteration with a sorted one (members by member
id, topics by :func:`kafka_uuid_key`) so the same spec always gives the same assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from .api import Assignment, AssignmentSpec, PartitionAssignorError

__all__ = [
    "check_topics_exist",
    "current_assignment",
    "freeze",
    "is_homogeneous",
    "kafka_uuid_key",
    "sorted_topics",
]

_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63


def _signed64(v: int) -> int:
    return v - (1 << 64) if v & _SIGN64 else v


def kafka_uuid_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """Kafka's ``Uuid.compareTo``: the most significant 64 bits, then the least significant,
    each compared as a *signed* Java long (Python's UUID order compares them unsigned)."""
    v = topic_id.int
    return _signed64(v >> 64), _signed64(v & _MASK64)


def sorted_topics(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    return sorted(topic_ids, key=kafka_uuid_key)


def is_homogeneous(spec: AssignmentSpec) -> bool:
    """Kafka's SubscriptionType.HOMOGENEOUS: every member subscribes to the same topics.

    ``spec.homogeneous`` (computed by the coordinator on topic names, as Kafka does) wins
    when given, unless the members' topic ids contradict it: a spec claiming homogeneity
    with different subscriptions is treated as heterogeneous rather than mis-assigned.
    """
    members = iter(spec.members.values())
    first = next(members, None)
    if first is None:
        return True
    same = all(m.subscribed_topic_ids == first.subscribed_topic_ids for m in members)
    return same if spec.homogeneous is None else (spec.homogeneous and same)


def check_topics_exist(spec: AssignmentSpec, topic_ids: Iterable[uuid.UUID]) -> None:
    """Kafka throws PartitionAssignorException when ``numPartitions(topicId) == -1``."""
    for topic_id in topic_ids:
        if topic_id not in spec.topics:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )


def current_assignment(
    spec: AssignmentSpec, member_ids: list[str], topic_order: list[uuid.UUID]
) -> dict[str, dict[uuid.UUID, list[int]]]:
    """Each member's current partitions that it may keep: topics it still subscribes to,
    partitions that exist, each partition once (the first member in ``member_ids`` order
    that claims it). Topics follow ``topic_order``, partitions ascending.

    Kafka trusts its input here (a partition beyond the topic's size or claimed twice would
    stay assigned, or fail); the coordinator's target assignment is consistent by
    construction, so cleaning it changes nothing for valid input.
    """
    position = {t: i for i, t in enumerate(topic_order)}
    claimed: dict[uuid.UUID, set[int]] = {}
    out: dict[str, dict[uuid.UUID, list[int]]] = {}
    for member_id in member_ids:
        member = spec.members[member_id]
        kept: dict[uuid.UUID, list[int]] = {}
        subscribed = member.subscribed_topic_ids
        for topic_id in sorted(
            (t for t in member.assigned if t in subscribed and t in spec.topics),
            key=lambda t: position.get(t, len(position)),
        ):
            num_partitions = spec.topics[topic_id].num_partitions
            taken = claimed.setdefault(topic_id, set())
            parts = []
            for p in sorted(member.assigned[topic_id]):
                if 0 <= p < num_partitions and p not in taken:
                    taken.add(p)
                    parts.append(p)
            if parts:
                kept[topic_id] = parts
        out[member_id] = kept
    return out


def freeze(
    member_ids: Iterable[str], assignment: dict[str, dict[uuid.UUID, set[int]]]
) -> dict[str, Assignment]:
    """The assignor's result: every member (sorted), its non-empty topics (in Kafka's topic
    id order) as frozensets."""
    out: dict[str, Assignment] = {}
    for member_id in sorted(member_ids):
        topics = assignment.get(member_id, {})
        out[member_id] = {t: frozenset(topics[t]) for t in sorted_topics(topics) if topics[t]}
    return out
