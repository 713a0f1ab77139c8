"""The subscription metadata and the target assignment of a consumer group: Kafka's
ModernGroup.computeSubscriptionMetadata and TargetAssignmentBuilder.

The subscription metadata is the set of subscribed topics that exist, with their ids and
partition counts, resolved against the broker's topics (names, and the regexes of the
members, matched in full as Kafka's ``Pattern.matcher(topic).matches()``). When it changes
(a subscription changed, a subscribed topic was created, deleted or got partitions, a new
topic matches a regex) the group epoch is bumped and the target assignment is computed again
by the group's server assignor. Only the members whose target changed get a record.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping

from coordinator.consumer.assignors.api import (
    Assignment,
    AssignmentSpec,
    MemberSpec,
    PartitionAssignor,
    TopicSpec,
)
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, TopicMetadata, compiled_regex, normalized
from coordinator.consumer.records import CGRecord, assignment_epoch_record, target_assignment_record

__all__ = ["Topics", "subscription_metadata", "is_homogeneous", "member_topic_ids", "compute_target_assignment"]

#: the broker's topics: name -> (topic id, number of partitions)
Topics = Mapping[str, tuple[uuid.UUID, int]]


def subscription_metadata(names: Iterable[str], regexes: Iterable[str], topics: Topics) -> dict[str, TopicMetadata]:
    """The existing topics among ``names`` and those matching one of ``regexes``."""
    out: dict[str, TopicMetadata] = {}
    for name in names:
        t = topics.get(name)
        if t is not None:
            out[name] = TopicMetadata(t[0], name, t[1])
    patterns = [p for r in regexes if r and (p := compiled_regex(r)) is not None]
    if patterns:
        for name, (topic_id, n) in topics.items():
            if name not in out and any(p.fullmatch(name) is not None for p in patterns):
                out[name] = TopicMetadata(topic_id, name, n)
    return out


def is_homogeneous(members: Mapping[str, ConsumerGroupMember]) -> bool:
    """Kafka's subscription type (ConsumerGroup.subscriptionType): homogeneous when every
    member subscribes to the same topic names, or all to the same one regex and no names."""
    n = len(members)
    names = Counter(name for m in members.values() for name in m.subscribed_topic_names)
    regexes = Counter(m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex)
    if not regexes:
        return all(count == n for count in names.values())
    return len(regexes) == 1 and next(iter(regexes.values())) == n and not names


def member_topic_ids(member: ConsumerGroupMember, metadata: Mapping[str, TopicMetadata]) -> frozenset[uuid.UUID]:
    """The ids of the topics of ``metadata`` the member subscribes to."""
    return frozenset(t.topic_id for name, t in metadata.items() if member.subscribes_to(name))


def compute_target_assignment(
    group: ConsumerGroup,
    epoch: int,
    assignor: PartitionAssignor,
    metadata: Mapping[str, TopicMetadata],
    updated: ConsumerGroupMember | None = None,
    removed: str | None = None,
) -> tuple[list[CGRecord], dict[str, Assignment]]:
    """Kafka's TargetAssignmentBuilder.build: the group's members, with ``updated`` added or
    replacing its older self and ``removed`` (a static member's previous incarnation) gone,
    assigned by ``assignor``. Returns the records (a TargetAssignmentMember record for each
    member whose target changed, then the new target assignment epoch) and the new target
    assignment of every member."""
    members: dict[str, ConsumerGroupMember] = dict(group.members)
    current: dict[str, Assignment] = {mid: group.target_of(mid) for mid in members}
    if updated is not None:
        base = group.target_of(updated.member_id)
        if updated.instance_id is not None:
            # a static member taking over from its previous incarnation keeps its target
            previous = group.static_members.get(updated.instance_id)
            if previous is not None and previous != updated.member_id:
                base = group.target_of(previous)
        members[updated.member_id] = updated
        current[updated.member_id] = base
    if removed is not None and removed != (updated.member_id if updated is not None else None):
        members.pop(removed, None)
        current.pop(removed, None)
    topics = {t.topic_id: TopicSpec(t.topic_id, t.name, t.num_partitions) for t in metadata.values()}
    specs = {
        mid: MemberSpec(
            member_id=mid,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            subscribed_topic_ids=member_topic_ids(m, metadata),
            assigned=current[mid],
        )
        for mid, m in members.items()
    }
    result = assignor.assign(AssignmentSpec(members=specs, topics=topics, homogeneous=is_homogeneous(members)))
    new = {mid: normalized(result.get(mid, {})) for mid in specs}
    records: list[CGRecord] = [
        target_assignment_record(group.group_id, mid, assignment)
        for mid, assignment in sorted(new.items())
        if group.target_assignment.get(mid) != assignment
    ]
    records.append(assignment_epoch_record(group.group_id, epoch))
    return records, new
