"""ConsumerGroupHeartbeat v0-1 (KIP-848): joining, heartbeating and leaving a consumer group,
following Kafka's GroupMetadataManager.consumerGroupHeartbeat.

One heartbeat, in Kafka's order:

1. the request is validated (throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST,
   UNSUPPORTED_ASSIGNOR), then the coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS);
2. epoch -1 / -2: the member leaves (a static member with -2 keeps its assignment until its
   session times out or its instance rejoins);
3. otherwise the group is found, or created by a join (epoch 0), replacing an empty classic
   group or converting a classic group with members (the online upgrade of
   coordinator/consumer/migration.py, when group.consumer.migration.policy allows it;
   GROUP_ID_NOT_FOUND when not); the member is found or created (GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
   FENCED_MEMBER_EPOCH, a static member replacing its earlier incarnation or
   UNRELEASED_INSTANCE_ID / FENCED_INSTANCE_ID);
4. the member's fields are updated (null means unchanged; a member that used the classic
   protocol now uses the consumer protocol), the group epoch, target assignment and the
   member's reconciliation follow (coordinator/consumer/update.py);
5. the records are written, then replayed; the session timeout restarts, the rebalance
   timeout starts or stops with the revocation; the response carries the assignment when the
   request was a full one or the assignment changed.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from coordinator.consumer.membership import Membership, kafka_uuid, remove_member_records
from coordinator.consumer.migration import can_upgrade, classic_to_consumer
from coordinator.consumer.reconcile import Owned
from coordinator.consumer.records import (
    CGRecord,
    current_assignment_record,
    member_subscription_record,
    target_assignment_record,
)
from coordinator.consumer.update import update_and_reconcile
from coordinator.group import Group, GroupState
from coordinator.records import encode_group_metadata_key
from coordinator.responses import ms, response_for, version_of
from coordinator.share.group import ShareGroup
from coordinator.state import Record, Respond, reply
from protocol.errors import KafkaError

__all__ = ["ConsumerGroupHeartbeat", "blank", "consumer_group_of", "invalid"]

log = logging.getLogger(__name__)

E = ErrorCode


def blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: non-null and empty once trimmed (Java's trim())."""
    return value is not None and not value.strip("".join(map(chr, range(33))))


def invalid(message: str) -> KafkaError:
    return KafkaError(E.invalid_request, message)


def consumer_group_of(groups: dict[str, Any], group_id: str) -> ConsumerGroup:
    """Kafka's consumerGroup(groupId): GROUP_ID_NOT_FOUND unless it is a consumer group."""
    group = groups.get(group_id)
    if group is None:
        raise KafkaError(E.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ConsumerGroup):
        raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group")
    return group


def _owned(req: Any) -> Owned:
    if req.topic_partitions is None:
        return None
    return [(tp.topic_id, tuple(tp.partitions)) for tp in req.topic_partitions]


def _is_subset(owned: Owned, target: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        have = target.get(topic_id)
        if have is None or any(p not in have for p in partitions):
            return False
    return True


def _assignment(assigned: Assignment) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assigned.items(), key=lambda kv: str(kv[0]))
        ]
    }


class ConsumerGroupHeartbeat:
    """ConsumerGroupHeartbeat against the groups of ``membership.state``."""

    def __init__(self, membership: Membership) -> None:
        self._m = membership
        self._state = membership.state

    def __call__(self, req: Any, respond: Respond, client_id: str, client_host: str) -> None:
        try:
            resp = self._handle(req, client_id, client_host)
        except KafkaError as exc:
            resp = response_for(req, error_code=exc.error_code, error_message=exc.message, member_id=None,
                                member_epoch=0, heartbeat_interval=0)
        reply(respond, resp)

    def _handle(self, req: Any, client_id: str, client_host: str) -> Any:
        state = self._state
        if not state.config.consumer_protocol_enabled:
            raise KafkaError(E.unsupported_version, "The consumer group protocol is not enabled on this broker.")
        self._validate(req, version_of(req))
        err = state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            raise KafkaError(err)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        return self._heartbeat(req, client_id, client_host)

    def _validate(self, req: Any, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (4.0: member ids are the
        client's from v1)."""
        epoch: int = req.member_epoch
        if version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if blank(req.member_id):
                raise invalid("MemberId can't be empty.")
        if blank(req.group_id):
            raise invalid("GroupId can't be empty.")
        if blank(req.instance_id):
            raise invalid("InstanceId can't be empty.")
        if blank(req.rack_id):
            raise invalid("RackId can't be empty.")
        if epoch == 0:
            if ms(req.rebalance_timeout) == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and getattr(req, "subscribed_topic_regex", None) is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        assignor = req.server_assignor
        if assignor is not None and assignor not in self._m.assignors:
            raise KafkaError(
                E.unsupported_assignor,
                f"ServerAssignor {assignor} is not supported. Supported assignors: {', '.join(self._m.assignors)}.",
            )

    # ------------------------------------------------------------------ leaving
    def _leave(self, req: Any) -> Any:
        """Kafka's consumerGroupLeave."""
        gid, mid, epoch, instance_id = req.group_id, req.member_id, req.member_epoch, req.instance_id
        group = consumer_group_of(self._state.groups, gid)
        if instance_id is None:
            member = group.members.get(mid)
            if member is None:
                raise KafkaError(E.unknown_member_id, f"Member {mid} is not a member of group {gid}.")
            log.info("group %s: member %s left", gid, mid)
        else:
            member = self._static_member(group, mid, instance_id)
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # The member keeps its partitions (not its pending revocations) until its
                # session expires or its instance comes back.
                log.info("group %s: static member %s (%s) left temporarily", gid, mid, instance_id)
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                self._m.write(group, [current_assignment_record(gid, leaving)])
                return response_for(req, error_code=E.none, member_id=member.member_id,
                                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, heartbeat_interval=0)
            log.info("group %s: static member %s (%s) left", gid, mid, instance_id)
        self._m.fence(group, member)
        return response_for(req, error_code=E.none, member_id=mid, member_epoch=epoch, heartbeat_interval=0)

    @staticmethod
    def _static_member(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerGroupMember:
        member = group.static_member(instance_id)
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise KafkaError(
                E.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {member.member_id}.",
            )
        return member

    # ------------------------------------------------------------------ joining / heartbeating
    def _group(
        self, group_id: str, create: bool, extra: list[Record], records: list[CGRecord]
    ) -> tuple[ConsumerGroup, Group | None]:
        """Kafka's getOrMaybeCreateConsumerGroup: a new group (or one replacing a classic
        group, whose tombstone goes to ``extra``) is not in the groups until its records are
        replayed. A classic group with members is converted when the migration policy and
        Kafka's validateOnlineUpgrade allow it (its consumer-group records go to
        ``records``, and it is returned second); GROUP_ID_NOT_FOUND otherwise."""
        state = self._state
        group = state.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group, None
        if group is None and not create:
            raise KafkaError(E.group_id_not_found, f"Consumer group {group_id} not found.")
        if group is None:
            return ConsumerGroup(group_id, state.partition_for(group_id)), None
        if isinstance(group, ShareGroup):
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group")
        if create and group.is_(GroupState.EMPTY) and not group.members:
            extra.append((encode_group_metadata_key(group_id), None))
            return ConsumerGroup(group_id, state.partition_for(group_id)), None
        if create and can_upgrade(state.config, group):
            converted, creation = classic_to_consumer(group, self._m.topics())
            extra.append((encode_group_metadata_key(group_id), None))
            records += creation
            return converted, group
        raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group")

    def _member(
        self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None, owned: Owned,
        records: list[CGRecord],
    ) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember."""
        create = epoch == 0
        gid = group.group_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise KafkaError(E.unknown_member_id, f"Member {member_id} is not a member of group {gid}.")
                return ConsumerGroupMember(member_id)
            self._check_epoch(member, epoch, owned)
            return member
        existing = group.static_member(instance_id)
        if not create:
            member = self._static_member(group, member_id, instance_id)
            self._check_epoch(member, epoch, owned)
            return member
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        if not existing.uses_classic_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # (a member using the classic protocol is replaced without having left)
            raise KafkaError(
                E.unreleased_instance_id,
                f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                f"instance id is owned by {existing.member_id} member.",
            )
        # The instance comes back under a new member id: it takes over the old member's
        # subscription and assignments (Kafka's replaceMember).
        member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += remove_member_records(gid, existing.member_id)
        records.append(member_subscription_record(gid, member))
        records.append(target_assignment_record(gid, member_id, group.target_of(existing.member_id)))
        records.append(current_assignment_record(gid, member))
        log.info("group %s: static member %s replaces %s", gid, member_id, existing.member_id)
        return member

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Owned) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the previous epoch is accepted
        (its response may have been lost) if the member owns no more than its assignment.
        Epoch 0 is a member rejoining under its own id after FENCED_MEMBER_EPOCH, as KIP-848
        says it should (Kafka fixed its check for it in KAFKA-19233; before, such a member
        was fenced again until its session expired)."""
        if epoch == 0:
            return
        current = member.member_epoch
        if epoch > current:
            raise KafkaError(
                E.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < current and (epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned)):
            raise KafkaError(
                E.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )

    def _heartbeat(self, req: Any, client_id: str, client_host: str) -> Any:
        m, config = self._m, self._state.config
        gid, epoch, instance_id = req.group_id, req.member_epoch, req.instance_id
        rebalance_timeout = ms(req.rebalance_timeout)
        names = req.subscribed_topic_names
        regex = getattr(req, "subscribed_topic_regex", None)
        owned = _owned(req)
        extra: list[Record] = []
        records: list[CGRecord] = []
        group, converted = self._group(gid, epoch == 0, extra, records)
        member_id = req.member_id
        limit = config.group_consumer_max_size
        if len(group.members) >= limit and (not member_id or member_id not in group.members):
            raise KafkaError(
                E.group_max_size_reached, f"The consumer group has reached its maximum capacity of {limit} members."
            )
        if not member_id:
            member_id = kafka_uuid()  # v0: the coordinator names the member
        member = self._member(group, member_id, epoch, instance_id, owned, records)
        updated = replace(
            member,
            instance_id=member.instance_id if instance_id is None else instance_id,
            rack_id=member.rack_id if req.rack_id is None else req.rack_id,
            rebalance_timeout_ms=member.rebalance_timeout_ms if rebalance_timeout == -1 else rebalance_timeout,
            server_assignor=member.server_assignor if req.server_assignor is None else req.server_assignor,
            subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
            subscribed_topic_regex=member.subscribed_topic_regex if regex is None else regex,
            client_id=client_id,
            client_host=client_host,
            classic=None,
        )
        updated, reconciled = update_and_reconcile(m, group, member, updated, owned, records)
        m.write(group, records, extra, replacing=converted)
        live = m.live.get(gid) or group
        if converted is not None:
            m.upgraded(converted, live)
        m.schedule_session(live, member_id)
        if reconciled:
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                m.schedule_rebalance(live, member_id, updated.member_epoch, updated.rebalance_timeout_ms)
            else:
                m.cancel_rebalance(live, member_id)
        full = epoch == 0 or (rebalance_timeout != -1 and names is not None and owned is not None)
        changed = updated.assigned != member.assigned
        return response_for(
            req,
            error_code=E.none,
            member_id=updated.member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval=self._state.group_int(gid, "consumer.heartbeat.interval.ms",
                                                     config.group_consumer_heartbeat_interval_ms),
            assignment=_assignment(updated.assigned) if full or changed else None,
        )
