"""Online migration between a classic group and a consumer group (KIP-848), following Kafka's
GroupMetadataManager (validateOnlineUpgrade, convertToConsumerGroup,
validateOnlineDowngrade*, convertToClassicGroup), ConsumerGroup.fromClassicGroup and
ClassicGroup.fromConsumerGroup, under group.consumer.migration.policy.

Upgrade: a Stable (or rebalancing) classic group of protocol type ``consumer`` that a
ConsumerGroupHeartbeat joins becomes a consumer group. Its members stay, as members "using
the classic protocol": epoch = the classic generation, subscription from their JoinGroup
metadata, current and target assignment from their SyncGroup assignment. The records are the
classic group's tombstone, then the consumer group's records (members, group epoch, target
assignment, its epoch, current assignments), written in one batch with the heartbeat's own.

Downgrade: when the last member using the consumer protocol leaves (or is fenced) and the
others all use the classic protocol, the consumer group becomes a classic group again:
Stable, generation = group epoch, every member with its target assignment encoded in the
consumer protocol version of its metadata; the records are the consumer group's tombstones,
then the classic group's GroupMetadata. A rebalance follows (the caller starts it).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import group_metadata_record
from coordinator.config import CoordinatorConfig
from coordinator.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    normalized,
)
from coordinator.consumer.records import (
    CGRecord,
    assignment_epoch_record,
    current_assignment_record,
    encode_record,
    group_epoch_record,
    group_tombstones,
    member_subscription_record,
    target_assignment_record,
)
from coordinator.consumer.replay import replay
from coordinator.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from coordinator.state import Record
from protocol.errors import KafkaError

__all__ = [
    "can_downgrade_after_fence",
    "can_downgrade_after_replace",
    "can_upgrade",
    "classic_to_consumer",
    "consumer_to_classic",
]

log = logging.getLogger(__name__)

E = ErrorCode

#: the broker's topics: name -> (topic id, number of partitions)
Topics = Mapping[str, tuple[uuid.UUID, int]]


# --- upgrade --------------------------------------------------------------------------------


def can_upgrade(config: CoordinatorConfig, classic: Group) -> bool:
    """Kafka's validateOnlineUpgrade."""
    gid = classic.group_id
    if not config.online_upgrade_enabled:
        log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.", gid)
        return False
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        log.info("Cannot upgrade classic group %s to consumer group because the group does not use the consumer "
                 "embedded protocol.", gid)
        return False
    if len(classic.members) > config.group_consumer_max_size:
        log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer "
                 "group maximum size.", gid)
        return False
    return True


class _One:
    """A GroupSource holding one group being built (replay of its creation records)."""

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.group

    def create(self, group_id: str) -> ConsumerGroup:
        return self.group

    def remove(self, group_id: str) -> None:  # pragma: no cover - creation records delete nothing
        raise AssertionError("a group being created is not removed")


def classic_to_consumer(classic: Group, topics: Topics) -> tuple[ConsumerGroup, list[CGRecord]]:
    """Kafka's ConsumerGroup.fromClassicGroup and createConsumerGroupRecords: the consumer
    group replacing ``classic`` (not yet registered anywhere) and its records, in Kafka's
    order. GROUP_ID_NOT_FOUND when a member's metadata or assignment is not the consumer
    protocol's (Kafka's SchemaException); partitions of topics that no longer exist are
    dropped."""
    gid, generation = classic.group_id, classic.generation
    members: list[ConsumerGroupMember] = []
    try:
        for m in classic.members.values():
            assigned: dict[uuid.UUID, frozenset[int]] = {}
            for topic, partitions in decode_assignment(m.assignment):
                known = topics.get(topic)
                if known is not None:
                    assigned[known[0]] = frozenset(partitions)
            subscription = decode_subscription(m.metadata(classic.protocol_name))
            members.append(ConsumerGroupMember(
                member_id=m.member_id,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id or None,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=frozenset(subscription.topics),
                assigned=normalized(assigned),
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            ))
    except ConsumerProtocolError as exc:
        log.warning("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol "
                    "is malformed: %s.", gid, exc)
        raise KafkaError(
            E.group_id_not_found,
            f"Cannot upgrade the classic group {gid} to consumer group because the embedded consumer protocol "
            "is malformed.",
        ) from None
    records: list[CGRecord] = [member_subscription_record(gid, m) for m in members]
    records.append(group_epoch_record(gid, generation))
    records += [target_assignment_record(gid, m.member_id, m.assigned) for m in members]
    records.append(assignment_epoch_record(gid, generation))
    records += [current_assignment_record(gid, m) for m in members]
    group = ConsumerGroup(gid, classic.partition)
    source = _One(group)
    try:
        for record in records:
            replay(source, record)
    except ValueError as exc:  # two members own a partition (Kafka's IllegalStateException)
        raise KafkaError(E.unknown_server_error, f"Cannot upgrade the classic group {gid}: {exc}") from None
    return group, records


# --- downgrade ------------------------------------------------------------------------------


def can_downgrade_after_fence(config: CoordinatorConfig, group: ConsumerGroup, fenced_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember."""
    gid = group.group_id
    if not group.all_members_use_classic_protocol_except(fenced_member_id):
        return False
    if len(group.members) <= 1:
        log.debug("Skip downgrading the consumer group %s to classic group because it's empty.", gid)
        return False
    if not config.online_downgrade_enabled:
        log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.", gid)
        return False
    if len(group.members) - 1 > config.group_max_size:
        log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                 "classic group max size.", gid)
        return False
    return True


def can_downgrade_after_replace(config: CoordinatorConfig, group: ConsumerGroup, replaced_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: a static member using the consumer
    protocol, the last one, is replaced by its instance joining with the classic protocol."""
    gid = group.group_id
    if not group.all_members_use_classic_protocol_except(replaced_member_id):
        return False
    if not config.online_downgrade_enabled:
        log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.", gid)
        return False
    if len(group.members) > config.group_max_size:
        log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                 "classic group max size.", gid)
        return False
    return True


def _classic_member(member: ConsumerGroupMember) -> Member:
    classic = member.classic
    assert classic is not None
    return Member(
        member_id=member.member_id,
        group_instance_id=member.instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        session_timeout_ms=classic.session_timeout_ms,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocols=list(classic.protocols),
    )


def consumer_to_classic(
    group: ConsumerGroup, leaving: str, joining: ConsumerGroupMember | None, topics: Topics, now: int
) -> tuple[Group, list[Record]]:
    """Kafka's ClassicGroup.fromConsumerGroup and the records of convertToClassicGroup: the
    classic group replacing ``group`` without ``leaving`` (and with ``joining``, which
    takes its place and its target assignment), and the encoded records (the consumer
    group's tombstones, then the classic group's metadata). Raises ConsumerProtocolError
    when a member's metadata has no consumer protocol version."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    classic = Group(
        group.group_id, group.partition, state=GroupState.STABLE, state_timestamp=now,
        generation=group.group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for mid, member in group.members.items():
        if mid != leaving:
            classic.add(_classic_member(member), None)
    if joining is not None:
        classic.add(_classic_member(joining), None)
    try:
        classic.protocol_name = classic.select_protocol()
    except ValueError as exc:
        raise ConsumerProtocolError(f"no protocol common to all members: {exc}") from None
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for m in classic.members.values():
        mid = leaving if joining is not None and m.member_id == joining.member_id else m.member_id
        target = group.target_of(mid)
        version = protocol_version(m.metadata(classic.protocol_name))
        m.assignment = encode_assignment(
            [(names[t], ps) for t, ps in target.items() if t in names], version
        )
    cg_records = group_tombstones(group, leaving, joining.member_id if joining is not None else None)
    return classic, [encode_record(r) for r in cg_records] + [group_metadata_record(classic)]
