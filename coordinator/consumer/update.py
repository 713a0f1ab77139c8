"""Updating one member of a consumer group and reconciling it: the three steps Kafka's
GroupMetadataManager repeats in consumerGroupHeartbeat (members using ConsumerGroupHeartbeat)
and classicGroupJoinToConsumerGroup (members using JoinGroup):

1. the member record is written when the member changed; a changed subscription, a change of
   the subscribed topics' metadata (topics created or deleted, partitions added, a new topic
   matching a regex) or a new group bump the group epoch;
2. a group epoch above the target assignment epoch computes a new target assignment with the
   group's server assignor (Kafka's updateTargetAssignment);
3. the member reconciles towards its target (coordinator/consumer/reconcile.py).

The records are only built here; the caller writes them (with its own) and replays them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, TopicMetadata, regex_error
from coordinator.consumer.membership import Membership
from coordinator.consumer.reconcile import Owned, reconcile
from coordinator.consumer.records import (
    CGRecord,
    current_assignment_record,
    group_epoch_record,
    member_subscription_record,
    subscription_metadata_record,
)
from coordinator.consumer.target import compute_target_assignment, subscription_metadata
from protocol.errors import KafkaError

__all__ = ["update_and_reconcile"]

log = logging.getLogger(__name__)

E = ErrorCode


def update_and_reconcile(
    m: Membership,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    updated: ConsumerGroupMember,
    owned: Owned,
    records: list[CGRecord],
) -> tuple[ConsumerGroupMember, bool]:
    """Steps 1-3 for ``member`` becoming ``updated``; appends their records to ``records``.
    Returns the member as reconciled and whether reconciliation changed it. Raises
    INVALID_REGULAR_EXPRESSION for a new regex that does not compile, UNKNOWN_SERVER_ERROR
    when the assignor fails."""
    gid = group.group_id

    # 1. The member, its subscription, the subscription metadata and the group epoch.
    bump = group.group_epoch == 0  # a new group moves off epoch 0 at once
    if updated != member:
        records.append(member_subscription_record(gid, updated))
        if updated.subscribed_topic_regex != member.subscribed_topic_regex:
            new_regex = updated.subscribed_topic_regex
            problem = regex_error(new_regex) if new_regex else None
            if problem is not None:
                raise KafkaError(
                    E.invalid_regular_expression,
                    f"SubscribedTopicRegex `{new_regex}` is not a valid regular expression: {problem}.",
                )
            bump = True
        if updated.subscribed_topic_names != member.subscribed_topic_names:
            bump = True
    names_count, regexes = group.computed_subscriptions(member, updated)
    metadata = subscription_metadata(names_count, regexes, m.topics())
    group_epoch = group.group_epoch
    if metadata != group.subscription_metadata:
        bump = True
        records.append(subscription_metadata_record(gid, metadata))
    if bump:
        group_epoch += 1
        records.append(group_epoch_record(gid, group_epoch))
        log.info("group %s: epoch bumped to %d", gid, group_epoch)

    # 2. The target assignment, when the group epoch moved past it.
    if group_epoch > group.assignment_epoch:
        target = _assign(m, group, group_epoch, member, updated, metadata, records)
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        target = group.target_for(updated.member_id, updated.instance_id)

    # 3. Reconciliation.
    if updated.is_reconciled_to(target_epoch):
        return updated, False
    nxt = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
    if nxt == updated:
        return updated, False
    records.append(current_assignment_record(gid, nxt))
    return nxt, True


def _assign(
    m: Membership, group: ConsumerGroup, epoch: int, member: ConsumerGroupMember, updated: ConsumerGroupMember,
    metadata: Mapping[str, TopicMetadata], records: list[CGRecord],
) -> Assignment:
    """Kafka's updateTargetAssignment: the member's new target."""
    name = group.computed_assignor(member, updated) or m.default_assignor
    assignor = m.assignors.get(name) or m.assignors[m.default_assignor]
    previous = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
    removed = previous if previous is not None and previous != updated.member_id else None
    try:
        new_records, target = compute_target_assignment(group, epoch, assignor, metadata, updated, removed)
    except Exception as exc:  # PartitionAssignorError, or a bug in the assignor
        log.error("group %s: computing the target assignment for epoch %d failed: %s", group.group_id, epoch, exc)
        raise KafkaError(
            E.unknown_server_error, f"Failed to compute a new target assignment for epoch {epoch}: {exc}"
        ) from exc
    log.info("group %s: new target assignment for epoch %d with the %s assignor", group.group_id, epoch, name)
    records += new_records
    return target.get(updated.member_id, {})
