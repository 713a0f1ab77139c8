"""KIP-932's simple assignor: Kafka 4.2's SimpleAssignor (``simple``, the only share-group
assignor, group.share.assignors), written from its rules.

Every member subscribed to a topic may be given any partition of it, and a partition may go
to several members (they share its records). The assignor:

* with at least as many partitions as members, gives each partition to one member and
  balances the counts (they differ by at most one);
* with fewer partitions than members, gives each member one partition and shares each
  partition between ``ceil(members / partitions)`` members at most;
* keeps as much of the current target assignment as balance allows (stickiness), balance
  first (Kafka's SimpleHomogeneousAssignmentBuilder: revoke what is no longer subscribed,
  what is shared more than desired and what overfills a member, then hand the partitions
  with too few members to the members with too few partitions, round-robin).

Only assignable partitions are handed out: those whose share-group state is initialised
(Kafka's GroupSpec.isPartitionAssignable). When the members subscribe to different topics
(heterogeneous), each topic is balanced on its own among the members subscribed to it.

Members and partitions are taken in sorted order, so the result is a pure function of the
input (a reloaded group computes the same assignment).
"""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator.consumer.assignors.api import Assignment

__all__ = ["ShareAssignmentSpec", "ShareMemberSpec", "SimpleAssignor", "SHARE_ASSIGNORS"]

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class ShareMemberSpec:
    """One member as the assignor sees it: the subscribed topics that exist, and its
    partitions in the current target assignment (stickiness)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareAssignmentSpec:
    members: Mapping[str, ShareMemberSpec]
    #: topic id -> the partitions that may be assigned (initialised share-partitions)
    assignable: Mapping[uuid.UUID, frozenset[int]]


def _sorted_topics(ids: object) -> list[uuid.UUID]:
    return sorted(ids, key=str)  # type: ignore[call-overload]


def _balance(
    members: list[str], partitions: list[TopicPartition], current: Mapping[str, set[TopicPartition]]
) -> dict[str, set[TopicPartition]]:
    """Kafka's homogeneous simple assignment of ``partitions`` among ``members`` (sorted),
    starting from ``current`` (each member's partitions, any of which may no longer be in
    ``partitions``)."""
    n_members, n_partitions = len(members), len(partitions)
    if not n_members or not n_partitions:
        return {m: set() for m in members}
    sharing = -(-n_members // n_partitions)  # ceil: how many members each partition should have
    precise = sharing * n_partitions / n_members
    desired = {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(members)}
    targets = set(partitions)

    # 1. keep only what can still be assigned
    by_member: dict[str, list[TopicPartition]] = {}
    by_partition: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    for m in members:
        kept = sorted(tp for tp in current.get(m, ()) if tp in targets)
        by_member[m] = kept
        for tp in kept:
            by_partition[tp].append(m)
    overfilled = {m for m in members if len(by_member[m]) > desired[m]}

    def revoke(m: str, tp: TopicPartition) -> None:
        by_member[m].remove(tp)
        by_partition[tp].remove(m)

    # 2. partitions shared more than desired: taken from overfilled members first
    for tp in partitions:
        holders = by_partition[tp]
        for pick_overfilled in (True, False):
            for m in [h for h in holders if (h in overfilled) == pick_overfilled]:
                if len(holders) <= sharing:
                    break
                revoke(m, tp)
    # 3. members still over their count give up their last partitions
    for m in members:
        while len(by_member[m]) > desired[m]:
            revoke(m, by_member[m][-1])
    # 4. partitions with too few members go round-robin to the members with too few partitions
    unfilled = deque(m for m in members if len(by_member[m]) < desired[m])
    for tp in partitions:
        holders = by_partition[tp]
        tried = 0
        while len(holders) < sharing and unfilled and tried < len(unfilled):
            m = unfilled[0]
            unfilled.rotate(-1)
            if m in holders:
                tried += 1
                continue
            tried = 0
            by_member[m].append(tp)
            holders.append(m)
            if len(by_member[m]) >= desired[m]:
                unfilled.remove(m)
        if not unfilled:
            break
    return {m: set(tps) for m, tps in by_member.items()}


class SimpleAssignor:
    """Kafka's SimpleAssignor (see the module's docstring)."""

    name = "simple"

    def assign(self, spec: ShareAssignmentSpec) -> dict[str, Assignment]:
        """The new target assignment: member id -> its partitions per topic id (every member
        has an entry, possibly empty)."""
        members = sorted(spec.members)
        if not members:
            return {}
        current = {
            m: {(t, p) for t, ps in spec.members[m].assigned.items() for p in ps} for m in members
        }
        subscriptions = {m: spec.members[m].subscribed_topic_ids for m in members}
        result: dict[str, set[TopicPartition]] = {m: set() for m in members}
        if len(set(subscriptions.values())) == 1:
            topics = _sorted_topics(subscriptions[members[0]])
            partitions = [(t, p) for t in topics for p in sorted(spec.assignable.get(t, ()))]
            result = _balance(members, partitions, current)
        else:
            for t in _sorted_topics({t for ids in subscriptions.values() for t in ids}):
                subscribed = [m for m in members if t in subscriptions[m]]
                partitions = [(t, p) for p in sorted(spec.assignable.get(t, ()))]
                topic_current = {m: {tp for tp in current[m] if tp[0] == t} for m in subscribed}
                for m, tps in _balance(subscribed, partitions, topic_current).items():
                    result[m] |= tps
        out: dict[str, Assignment] = {}
        for m, tps in result.items():
            by_topic: dict[uuid.UUID, set[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, set()).add(p)
            out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
        return out


#: the share-group assignors by name (group.share.assignors picks among them)
SHARE_ASSIGNORS: dict[str, SimpleAssignor] = {SimpleAssignor.name: SimpleAssignor()}
