"""Members using the classic protocol in a consumer group: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup sent to a consumer group (KIP-848's online migration), following Kafka's
GroupMetadataManager.classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup.

A classic consumer is a member like any other: its JoinGroup metadata gives its subscription
(and, from ConsumerProtocolSubscription v1, the partitions it still owns), the group's server
assignor computes its target, and it reconciles as a member of the consumer protocol would,
only through the classic rounds:

* JoinGroup updates the member, bumps the group epoch if its subscription changed, computes
  the target assignment and reconciles the member (revocation first: the partitions it still
  reports owning and must give up stay its own until it rejoins without them). The response
  makes it a follower of generation = its member epoch; it must send SyncGroup within its
  rebalance timeout.
* SyncGroup answers its current assignment as a ConsumerProtocolAssignment (the version of its
  metadata), or REBALANCE_IN_PROGRESS when the group moved to a newer epoch meanwhile.
* Heartbeat keeps its session (its own classic session timeout) and answers
  REBALANCE_IN_PROGRESS when it must rejoin: the group epoch moved past its epoch, it has
  partitions to revoke, or partitions it waits for were released. It must rejoin within its
  rebalance timeout.
* LeaveGroup removes it (no downgrade: Kafka converts only when a consumer-protocol member
  leaves).

A member using the classic protocol never sees the consumer protocol; its generation is its
member epoch, so offset commits are checked against that (ILLEGAL_GENERATION when stale).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.group import ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from coordinator.consumer.membership import Membership, kafka_uuid, remove_member_records
from coordinator.consumer.migration import can_downgrade_after_replace
from coordinator.consumer.records import (
    CGRecord,
    current_assignment_record,
    group_epoch_record,
    member_subscription_record,
    subscription_metadata_record,
    target_assignment_record,
)
from coordinator.consumer.target import subscription_metadata
from coordinator.consumer.update import update_and_reconcile
from coordinator.consumer_protocol import (
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from coordinator.group import CONSUMER_PROTOCOL_TYPE
from coordinator.responses import response_for
from protocol.errors import KafkaError

if TYPE_CHECKING:
    from coordinator.classic.join import JoinContext

__all__ = ["ClassicMembers"]

log = logging.getLogger(__name__)

E = ErrorCode


def _first_protocol(member: ConsumerGroupMember) -> tuple[str, bytes]:
    assert member.classic is not None and member.classic.protocols
    return member.classic.protocols[0]


class ClassicMembers:
    """The classic APIs against the consumer groups of ``membership.state``."""

    def __init__(self, membership: Membership) -> None:
        self._m = membership
        self._state = membership.state

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        gid = group.group_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise KafkaError(E.unknown_member_id, f"Member {member_id} is not a member of group {gid}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise KafkaError(E.unknown_member_id,
                                 f"Member with instance id {instance_id} is not a member of group {gid}.")
            if member.member_id != member_id:
                raise KafkaError(E.fenced_instance_id, f"Static member {member_id} with instance id {instance_id} "
                                 f"was fenced by member {member.member_id}.")
        if not member.uses_classic_protocol:
            raise KafkaError(E.unknown_member_id, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def _rebalance_in_progress(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's throwIfRebalanceInProgress: a newer group epoch means the member must rejoin
        (unless it is still revoking: it rejoins once done)."""
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._m.schedule_join_if_absent(group, member.member_id, member.rebalance_timeout_ms)
            raise KafkaError(E.rebalance_in_progress, f"A new rebalance is triggered in group {group.group_id} and "
                             f"member {member.member_id} should rejoin to catch up.")

    # ------------------------------------------------------------------ JoinGroup
    def join(self, group: ConsumerGroup, join: JoinContext) -> None:
        """JoinGroup to a non-empty consumer group; answers through ``join``."""
        try:
            join.answer(self._join(group, join))
        except KafkaError as exc:
            join.answer(response_for(join.req, error_code=exc.error_code, member_id="", generation_id=-1,
                                     protocol_name=None if join.version >= 7 else "", leader="", members=[]))

    def _join(self, group: ConsumerGroup, join: JoinContext) -> Any:
        m, config, req = self._m, self._state.config, join.req
        gid, instance_id = group.group_id, join.instance_id
        member_id: str = req.member_id
        unknown = member_id == ""
        if unknown:
            member_id = kafka_uuid()
        limit = config.group_consumer_max_size
        if len(group.members) >= limit and member_id not in group.members:
            raise KafkaError(
                E.group_max_size_reached, f"The consumer group has reached its maximum capacity of {limit} members."
            )
        if not group.supports_classic_protocols(req.protocol_type, (name for name, _ in join.protocols)):
            raise KafkaError(E.inconsistent_group_protocol, f"Member {member_id}'s protocols are not supported.")
        if unknown and instance_id is None and join.version >= 4:
            # KIP-394: the member comes back with this id (not remembered: any id may join)
            return response_for(req, error_code=E.member_id_required, member_id=member_id, generation_id=-1,
                                protocol_name=None if join.version >= 7 else "", leader="", members=[])
        records: list[CGRecord] = []
        member = self._join_member(group, member_id, instance_id, unknown, records)
        try:
            subscription = decode_subscription(join.protocols[0][1])
        except ConsumerProtocolError as exc:
            raise KafkaError(E.unknown_server_error,
                             "Malformed embedded consumer protocol in subscription deserialization.") from exc
        topics = m.topics()
        owned = [(topics[t][0], ps) for t, ps in subscription.owned_partitions if t in topics]
        updated = replace(
            member,
            instance_id=member.instance_id if instance_id is None else instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=member.rebalance_timeout_ms if join.rebalance_ms == -1 else join.rebalance_ms,
            subscribed_topic_names=frozenset(subscription.topics),
            client_id=join.client_id,
            client_host=join.client_host,
            classic=ClassicMemberMetadata(join.session_ms, tuple(join.protocols)),
        )
        updated, _ = update_and_reconcile(m, group, member, updated, owned, records)
        # A static member replacing the last member using the consumer protocol: the group
        # becomes a classic group (Kafka's validateOnlineDowngradeWithReplacedMemberId).
        replaced = group.static_members.get(instance_id) if instance_id is not None else None
        downgraded = (
            replaced is not None and m.rebalancer is not None
            and can_downgrade_after_replace(config, group, replaced)
            and m.downgrade(group, replaced, updated, records) is not None
        )
        if not downgraded:
            m.write(group, records)
        live = m.live.get(gid)
        if live is not None and not downgraded:
            live.join_timeouts.pop(updated.member_id, None)
            m.schedule_session(live, updated.member_id, join.session_ms)
            m.schedule_sync(live, updated.member_id, join.rebalance_ms)
        log.info("group %s: member %s (classic protocol) joined at epoch %d", gid, updated.member_id,
                 updated.member_epoch)
        return response_for(
            req, error_code=E.none, member_id=updated.member_id, generation_id=updated.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=_first_protocol(updated)[0], leader="", members=[],
            skip_assignment=False,
        )

    def _join_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool, records: list[CGRecord]
    ) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for the classic
        protocol: no epoch to check; a static instance coming back with no member id takes
        over its previous member (whichever protocol it used, released or not)."""
        gid = group.group_id
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        existing = group.static_member(instance_id)
        if not unknown:
            if existing is None:
                raise KafkaError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise KafkaError(E.fenced_instance_id, f"Static member {member_id} with instance id {instance_id} "
                                 f"was fenced by member {existing.member_id}.")
            return existing
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += remove_member_records(gid, existing.member_id)
        records.append(member_subscription_record(gid, member))
        records.append(target_assignment_record(gid, member_id, group.target_of(existing.member_id)))
        records.append(current_assignment_record(gid, member))
        log.info("group %s: static member %s replaces %s (classic protocol)", gid, member_id, existing.member_id)
        return member

    # ------------------------------------------------------------------ SyncGroup
    def sync(self, group: ConsumerGroup, req: Any) -> tuple[ErrorCode, bytes]:
        """SyncGroup to a non-empty consumer group: (error, assignment)."""
        try:
            member = self._member(group, req.member_id, getattr(req, "group_instance_id", None))
            if req.generation_id != member.member_epoch:
                raise KafkaError(E.illegal_generation)
            name = _first_protocol(member)[0]
            protocol_type = getattr(req, "protocol_type", None)
            protocol_name = getattr(req, "protocol_name", None)
            if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name
            ):
                raise KafkaError(E.inconsistent_group_protocol)
            self._rebalance_in_progress(group, member)
            assignment = self.assignment_bytes(member)
        except KafkaError as exc:
            return exc.error_code, b""
        group.sync_timeouts.pop(member.member_id, None)
        assert member.classic is not None
        self._m.schedule_session(group, member.member_id, member.classic.session_timeout_ms)
        return E.none, assignment

    def assignment_bytes(self, member: ConsumerGroupMember) -> bytes:
        """Kafka's prepareAssignment: the member's partitions as a ConsumerProtocolAssignment
        of the version of its (first protocol's) metadata."""
        names = {topic_id: name for name, (topic_id, _) in self._m.topics().items()}
        try:
            version = protocol_version(_first_protocol(member)[1])
        except ConsumerProtocolError as exc:
            raise KafkaError(E.unknown_server_error,
                             "Malformed embedded consumer protocol in version deserialization.") from exc
        return encode_assignment([(names[t], ps) for t, ps in member.assigned.items() if t in names], version)

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group: ConsumerGroup, req: Any) -> ErrorCode:
        try:
            member = self._member(group, req.member_id, getattr(req, "group_instance_id", None))
        except KafkaError as exc:
            return exc.error_code
        if req.generation_id != member.member_epoch:
            return E.illegal_generation
        assert member.classic is not None
        self._m.schedule_session(group, member.member_id, member.classic.session_timeout_ms)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))
        ):
            self._m.schedule_join_if_absent(group, member.member_id, member.rebalance_timeout_ms)
            return E.rebalance_in_progress
        return E.none

    # ------------------------------------------------------------------ LeaveGroup
    def leave(
        self, group: ConsumerGroup, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode | None, list[tuple[str, str | None, ErrorCode]]]:
        """LeaveGroup of ``(member id, instance id)`` pairs: (the error of the whole request
        when its records could not be written, each member's (member id, instance id, error))."""
        gid = group.group_id
        results: list[tuple[str, str | None, ErrorCode]] = []
        records: list[CGRecord] = []
        left: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id in leaving:
            try:
                if instance_id is None:
                    member = self._member(group, member_id, None)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise KafkaError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
                    # an admin removes a static member by its instance id alone
                    self._member(group, member_id or member.member_id, instance_id)
                    member_id = member.member_id
            except KafkaError as exc:
                results.append((member_id, instance_id, exc.error_code))
                continue
            log.info("group %s: member %s (classic protocol) left", gid, member_id)
            records += remove_member_records(gid, member_id)
            left[member_id] = member
            results.append((member_id, instance_id, E.none))
        if records:
            names, regexes = Counter(group.subscribed_topic_names), Counter(group.subscribed_regexes)
            for member in left.values():
                names.subtract(member.subscribed_topic_names)
                if member.subscribed_topic_regex:
                    regexes.subtract([member.subscribed_topic_regex])
            metadata = subscription_metadata(+names, +regexes, self._m.topics())
            if metadata != group.subscription_metadata:
                records.append(subscription_metadata_record(gid, metadata))
            records.append(group_epoch_record(gid, group.group_epoch + 1))
            try:
                self._m.write(group, records)
            except KafkaError as exc:
                return exc.error_code, []
            for member_id in left:
                self._m.cancel_timers(group, member_id)
        return None, results

