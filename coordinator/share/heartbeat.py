"""ShareGroupHeartbeat v1 (KIP-932): joining, heartbeating and leaving a share group,
following Kafka's GroupMetadataManager.shareGroupHeartbeat.

One heartbeat, in Kafka's order:

1. the request is validated (GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid:
   INVALID_REQUEST), then the coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS);
2. epoch -1: the member leaves (UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND);
3. otherwise the group is found, or created by a join (epoch 0); an id used by a group of
   another type is GROUP_ID_NOT_FOUND; the member is found or created
   (GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH);
4. the member's fields are updated (null means unchanged); a changed subscription or a change
   of the subscribed topics' metadata bumps the group epoch; new share-partitions are
   initialised (coordinator/share/membership.py); a group epoch past the target assignment
   epoch computes a new target assignment with the simple assignor;
5. the member takes its target assignment at once (Kafka's ShareGroupAssignmentBuilder:
   share groups revoke nothing, a partition may have several members);
6. the records are written, then replayed; the session timeout restarts; the response
   carries the assignment when the member (re)joined or its assignment changed.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import MemberState
from coordinator.consumer.heartbeat import blank, invalid
from coordinator.responses import response_for
from coordinator.share.group import LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareGroupMember
from coordinator.share.membership import ShareMembership
from coordinator.share.records import (
    SGRecord,
    current_assignment_record,
    group_epoch_record,
    member_subscription_record,
)
from coordinator.state import Respond, reply
from protocol.errors import KafkaError

__all__ = ["ShareGroupHeartbeat", "share_group_of"]

log = logging.getLogger(__name__)

E = ErrorCode


def share_group_of(groups: dict[str, Any], group_id: str) -> ShareGroup:
    """Kafka's shareGroup(groupId): GROUP_ID_NOT_FOUND unless it is a share group."""
    group = groups.get(group_id)
    if group is None:
        raise KafkaError(E.group_id_not_found, f"Group {group_id} not found.")
    if not isinstance(group, ShareGroup):
        raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a share group.")
    return group


def assignment_field(assigned: Assignment) -> dict[str, Any]:
    """A member's partitions as the response's Assignment."""
    return {
        "topic_partitions": [
            {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assigned.items(), key=lambda kv: str(kv[0]))
        ]
    }


class ShareGroupHeartbeat:
    """ShareGroupHeartbeat against the groups of ``membership.state``."""

    def __init__(self, membership: ShareMembership) -> None:
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
        self._validate(req)
        err = self._state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            raise KafkaError(err)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(req)
        return self._heartbeat(req, client_id, client_host)

    @staticmethod
    def _validate(req: Any) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        if blank(req.member_id) or req.member_id is None:
            raise invalid("MemberId can't be empty.")
        if blank(req.group_id):
            raise invalid("GroupId can't be empty.")
        if blank(req.rack_id):
            raise invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                raise invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")

    # ------------------------------------------------------------------ leaving
    def _leave(self, req: Any) -> Any:
        """Kafka's shareGroupLeave."""
        gid, mid = req.group_id, req.member_id
        group = share_group_of(self._state.groups, gid)
        member = group.members.get(mid)
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Member {mid} is not a member of group {gid}.")
        log.info("share group %s: member %s left", gid, mid)
        self._m.fence(group, member)
        return response_for(req, error_code=E.none, member_id=mid, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            heartbeat_interval=0)

    # ------------------------------------------------------------------ joining / heartbeating
    def _group(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreatePersistedShareGroup: a new group is not in the groups
        until its records are replayed."""
        group = self._state.groups.get(group_id)
        if group is None and create:
            return ShareGroup(group_id, self._state.partition_for(group_id))
        return share_group_of(self._state.groups, group_id)

    @staticmethod
    def _check_epoch(member: ShareGroupMember, epoch: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted (the
        response that bumped it may have been lost). Epoch 0 is a rejoin."""
        current = member.member_epoch
        if epoch == 0 or epoch == current:
            return
        if epoch > current:
            raise KafkaError(
                E.fenced_member_epoch,
                f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )
        if epoch != member.previous_member_epoch:
            raise KafkaError(
                E.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )

    def _heartbeat(self, req: Any, client_id: str, client_host: str) -> Any:
        m, config = self._m, self._state.config
        gid, mid, epoch = req.group_id, req.member_id, req.member_epoch
        names = req.subscribed_topic_names
        group = self._group(gid, epoch == 0)
        limit = config.group_share_max_size
        if mid not in group.members and len(group.members) >= limit:
            raise KafkaError(
                E.group_max_size_reached, f"The share group has reached its maximum capacity of {limit} members."
            )
        member = group.members.get(mid)
        if member is None:
            if epoch != 0:
                raise KafkaError(E.unknown_member_id, f"Member {mid} is not a member of group {gid}.")
            member = ShareGroupMember(mid)
        else:
            self._check_epoch(member, epoch)
        updated = replace(
            member,
            rack_id=member.rack_id if req.rack_id is None else req.rack_id,
            subscribed_topic_names=member.subscribed_topic_names if names is None else frozenset(names),
            client_id=client_id,
            client_host=client_host,
        )
        records: list[SGRecord] = []

        # 1. The member, the subscription metadata, new share-partitions, the group epoch.
        bump = group.group_epoch == 0  # a new group moves off epoch 0 at once
        if updated != member:
            records.append(member_subscription_record(gid, updated))
            if updated.subscribed_topic_names != member.subscribed_topic_names:
                bump = True
        metadata = m.metadata(group.computed_subscriptions(member, updated))
        if metadata != group.subscription_metadata:
            bump = True  # Kafka 4.2: the metadata hash changed (no record of its own)
        new_partitions = m.uninitialized(group, metadata)
        assignable = group.assignable()
        to_initialize = {}
        if new_partitions and not m.hooks.initializes_state:
            record, assignable = m.initialized_record(group, new_partitions, {t.topic_id: t.name for t in metadata.values()})
            records.append(record)
            bump = True
        else:
            to_initialize = new_partitions
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(gid, group_epoch))
            log.info("share group %s: epoch bumped to %d", gid, group_epoch)

        # 2. The target assignment, when the group epoch moved past it.
        if group_epoch > group.assignment_epoch:
            new_records, targets = m.target_assignment(group, group_epoch, metadata, assignable, updated)
            records += new_records
            target, target_epoch = targets.get(mid, {}), group_epoch
        else:
            target, target_epoch = group.target_of(mid), group.assignment_epoch

        # 3. The member takes its target (ShareGroupAssignmentBuilder: nothing to revoke).
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = replace(updated, state=MemberState.STABLE, previous_member_epoch=updated.member_epoch,
                                 member_epoch=target_epoch, assigned=target)
        if reconciled != updated:
            records.append(current_assignment_record(gid, reconciled))

        m.write(group, records)
        live = m.live.get(gid) or group
        live.set_subscription_metadata(metadata)
        m.schedule_session(live, mid)
        m.request_initialization(live, to_initialize)
        changed = reconciled.assigned != member.assigned
        if changed:
            m.assignment_changed(gid, reconciled)
        return response_for(
            req,
            error_code=E.none,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval=self._state.group_int(gid, "share.heartbeat.interval.ms",
                                                     config.group_share_heartbeat_interval_ms),
            assignment=assignment_field(reconciled.assigned) if epoch == 0 or changed else None,
        )
