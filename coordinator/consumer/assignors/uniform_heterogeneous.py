"""The uniform assignor when members subscribe to different topics: a port of Kafka's
UniformHeterogeneousAssignmentBuilder (group-coordinator/src/main/java/org/apache/kafka/
coordinator/group/assignor/UniformHeterogeneousAssignmentBuilder.java, as rewritten for
performance by KAFKA-17710).

1. Members keep their current partitions of topics they still subscribe to.
2. The unassigned partitions go, topic by topic, to the topic's least loaded subscribers
   (topics sorted by partitions per subscriber descending, then subscriber count ascending,
   then topic id).
3. Balancing: for each topic with two or more subscribers, partitions move from its most
   loaded subscribers to its least loaded until their totals differ by at most one or the
   most loaded have none of the topic left; the topics are swept again until a full sweep
   moves nothing, at most 16 times (MAX_ITERATION_COUNT).

Members are numbered in member id order (Kafka numbers them in ``GroupSpec.memberIds()``
order, a HashMap's; its own tests sort them, as Krait does), and every other choice is
Kafka's: ties on member load go to the lower member number, a most loaded member gives up
its highest partition of the topic.
"""

from __future__ import annotations

import uuid

from ._helpers import check_topics_exist, current_assignment, kafka_uuid_key, sorted_topics
from .api import AssignmentSpec

__all__ = ["MAX_ITERATION_COUNT", "assign_heterogeneous"]

MAX_ITERATION_COUNT = 16


class _MemberAssignmentBalancer:
    """Kafka's MemberAssignmentBalancer: two ranges over the topic's subscribers sorted by
    load, the least loaded range growing rightwards as its members receive partitions and
    the most loaded range growing leftwards as its members give them up."""

    __slots__ = (
        "least_count",
        "least_end",
        "members",
        "most_count",
        "most_end",
        "most_start",
        "next_least",
        "next_most",
        "sizes",
    )

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.members: list[int] = []
        self.least_end = 0  # [0, least_end): the least loaded range
        self.least_count = 0
        self.next_least = 0
        self.most_start = 0  # [most_start, most_end): the most loaded range
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        """Resets for a topic's subscribers; returns their load difference."""
        sizes = self.sizes
        self.members = ordered = sorted(members, key=lambda i: (sizes[i], i))
        self.least_end = 0
        self.least_count = sizes[ordered[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(ordered)
        self.most_count = sizes[ordered[-1]] + 1
        self.next_most = len(ordered) - 1
        return sizes[ordered[-1]] - sizes[ordered[0]]

    def next_least_loaded(self) -> int:
        """The member to give the next partition to (assumed given)."""
        ordered, sizes = self.members, self.sizes
        if self.next_least >= self.least_end:
            # Range full: bump its level and try to expand it.
            self.least_count += 1
            while self.least_end < len(ordered) and sizes[ordered[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member = ordered[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to take the next partition from (assumed taken), or -1 for none."""
        ordered, sizes = self.members, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # The range was emptied by exclude(): make sure it expands below.
                self.most_count = sizes[ordered[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[ordered[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = ordered[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member last returned by next_most_loaded from the most loaded range."""
        ordered = self.members
        i = self.next_most + 1
        ordered[i], ordered[self.most_end - 1] = ordered[self.most_end - 1], ordered[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Builder:
    def __init__(self, spec: AssignmentSpec) -> None:
        self.member_ids = sorted(spec.members)
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            topic_ids = spec.members[member_id].subscribed_topic_ids
            check_topics_exist(spec, topic_ids)
            for topic_id in topic_ids:
                self.subscribers.setdefault(topic_id, []).append(index)
        self.num_partitions = {t: spec.topics[t].num_partitions for t in self.subscribers}
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * n for t, n in self.num_partitions.items()}
        self.target: list[dict[uuid.UUID, set[int]]] = [{} for _ in self.member_ids]
        self.spec = spec

    def _topic_key(self, topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        subscribers = len(self.subscribers[topic_id])
        # Java compares the doubles partitions / subscribers; Python floats are the same doubles.
        return -(self.num_partitions[topic_id] / subscribers), subscribers, kafka_uuid_key(topic_id)

    def build(self) -> dict[str, dict[uuid.UUID, set[int]]]:
        if not self.subscribers:
            return {}
        self._keep_subscribed()
        self._assign_remaining()
        self._balance()
        return dict(zip(self.member_ids, self.target, strict=True))

    def _keep_subscribed(self) -> None:
        """maybeRevokePartitions: drop topics a member no longer subscribes to."""
        current = current_assignment(self.spec, self.member_ids, sorted_topics(self.subscribers))
        for index, member_id in enumerate(self.member_ids):
            for topic_id, parts in current[member_id].items():
                self.target[index][topic_id] = set(parts)
                self.sizes[index] += len(parts)
                owners = self.owners[topic_id]
                for p in parts:
                    owners[p] = index

    def _assign_remaining(self) -> None:
        unassigned = {}
        for topic_id, owners in self.owners.items():
            parts = [p for p, owner in enumerate(owners) if owner == -1]
            if parts:
                unassigned[topic_id] = parts
        balancer = _MemberAssignmentBalancer(self.sizes)
        for topic_id in sorted(unassigned, key=self._topic_key):
            balancer.initialize(self.subscribers[topic_id])
            for p in unassigned[topic_id]:
                self._assign(topic_id, p, balancer.next_least_loaded())

    def _balance(self) -> None:
        topic_ids = sorted((t for t, s in self.subscribers.items() if len(s) >= 2), key=self._topic_key)
        if not topic_ids:
            return
        balancer = _MemberAssignmentBalancer(self.sizes)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic_id in enumerate(topic_ids):
                if index == last_rebalanced:
                    # A full sweep since the last move moved nothing.
                    return
                if self._balance_topic(topic_id, balancer) > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic_id: uuid.UUID, balancer: _MemberAssignmentBalancer) -> int:
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        # The topic's partitions grouped by owner, so a member's are a range of the list.
        partitions = sorted(range(self.num_partitions[topic_id]), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}  # exclusive
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1

        moved = 0
        while not balancer.is_balanced():
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break  # no member has partitions of this topic left to give up
            end[most] -= 1
            partition = partitions[end[most]]
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic_id, partition, least)
            moved += 1
        return moved

    def _assign(self, topic_id: uuid.UUID, partition: int, member: int) -> None:
        owners = self.owners[topic_id]
        old = owners[partition]
        if old != -1:
            parts = self.target[old][topic_id]
            parts.discard(partition)
            if not parts:
                del self.target[old][topic_id]
            self.sizes[old] -= 1
        self.target[member].setdefault(topic_id, set()).add(partition)
        owners[partition] = member
        self.sizes[member] += 1


def assign_heterogeneous(spec: AssignmentSpec) -> dict[str, dict[uuid.UUID, set[int]]]:
    """The new target assignment of a heterogeneous group (members absent from the result
    have nothing)."""
    return _Builder(spec).build()
