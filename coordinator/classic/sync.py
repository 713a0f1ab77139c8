"""SyncGroup v0-5: members collect their assignment; the leader's SyncGroup stores it.

A member that syncs while the group is CompletingRebalance is parked until the leader's
assignment is persisted in ``__consumer_offsets`` (its record committed: replicated to the
ISR in a cluster); then every parked member is answered and the group becomes Stable.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer, group_metadata_record
from coordinator.classic.responses import sync_response
from coordinator.consumer.group import ConsumerGroup
from coordinator.group import Group, GroupState, Pending
from coordinator.responses import response_for
from coordinator.share.group import ShareGroup
from coordinator.state import CoordinatorState, Respond, reply, storage_error

if TYPE_CHECKING:
    from coordinator.consumer.classic_members import ClassicMembers

__all__ = ["SyncGroup"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState


class SyncGroup:
    """SyncGroup against the groups of ``state`` (consumer groups' members using the classic
    protocol through ``consumer_groups``)."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer, consumer_groups: ClassicMembers) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._consumer_groups = consumer_groups

    def _error(self, req: Any, group: Group | None) -> ErrorCode | None:
        member_id: str = req.member_id
        protocol_type = getattr(req, "protocol_type", None)
        protocol_name = getattr(req, "protocol_name", None)
        if group is None:
            return E.unknown_member_id
        if group.is_(_S.DEAD):
            return E.coordinator_not_available
        if group.is_static_member_fenced(member_id, getattr(req, "group_instance_id", None)):
            return E.fenced_instance_id
        if not group.has(member_id):
            return E.unknown_member_id
        if req.generation_id != group.generation:
            return E.illegal_generation
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return E.inconsistent_group_protocol
        if group.is_(_S.EMPTY):
            return E.unknown_member_id
        if group.is_(_S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return None

    def __call__(self, req: Any, respond: Respond) -> None:
        state = self._state
        err = state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            return reply(respond, sync_response(req, err))
        group = state.groups.get(req.group_id)
        if isinstance(group, ShareGroup):
            # Kafka's classicGroupSync: a share group has no classic member
            return reply(respond, sync_response(req, E.unknown_member_id))
        if isinstance(group, ConsumerGroup):
            # Kafka: UNKNOWN_MEMBER_ID for an empty group, else classicGroupSyncToConsumerGroup
            if group.is_empty():
                return reply(respond, sync_response(req, E.unknown_member_id))
            err, assignment = self._consumer_groups.sync(group, req)
            return reply(respond, response_for(
                req, error_code=err, assignment=assignment,
                protocol_type=getattr(req, "protocol_type", None) if err is E.none else None,
                protocol_name=getattr(req, "protocol_name", None) if err is E.none else None,
            ))
        err = self._error(req, group)
        if err is not None:
            return reply(respond, sync_response(req, err))
        assert group is not None
        member_id: str = req.member_id
        member = group.members[member_id]
        if group.is_(_S.STABLE):
            group.pending_sync.discard(member_id)
            self._rebalance.touch(group, member)
            return reply(respond, sync_response(req, E.none, group, member.assignment))
        # CompletingRebalance: park until the leader's assignment is stored.
        if member.awaiting_sync is not None:
            old = member.awaiting_sync
            reply(old.respond, sync_response(old.req, E.rebalance_in_progress))
        member.awaiting_sync = Pending(req, respond)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None
        if group.is_leader(member_id):
            self._store_assignment(group, req)

    def _store_assignment(self, group: Group, req: Any) -> None:
        # Members the leader left out get an empty assignment (Kafka does the same).
        assignment = {m: b"" for m in group.members}
        for a in req.assignments:
            if a.member_id in assignment:
                assignment[a.member_id] = bytes(a.assignment)
        try:
            self._state.append(group, [group_metadata_record(group, assignment)])
        except Exception as exc:
            log.warning("group %s: storing the assignment failed: %s", group.group_id, exc)
            self._rebalance.reset_and_propagate_assignment_error(group, storage_error(exc, commit=False))
            return self._rebalance.maybe_prepare_rebalance(group)
        generation = group.generation

        def current() -> bool:
            # A member may have joined (or left) while the record waited: this assignment is
            # then for a rebalance that is over, as Kafka's storeGroup callback checks.
            return (self._state.groups.get(group.group_id) is group and group.is_(_S.COMPLETING_REBALANCE)
                    and group.generation == generation)

        def stored() -> None:
            if current():
                self._propagate(group, assignment)

        def failed(error: ErrorCode) -> None:
            if current():
                log.warning("group %s: the assignment's record was not replicated (%s)", group.group_id, error.name)
                self._rebalance.reset_and_propagate_assignment_error(group, storage_error(error, commit=False))
                self._rebalance.maybe_prepare_rebalance(group)

        # Members get the assignment once its record is committed, as Kafka's members do
        # once its append is replicated: never one a failover could take back.
        self._state.when_committed(group.partition, stored, failed)

    def _propagate(self, group: Group, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
            if m.awaiting_sync is not None:
                p, m.awaiting_sync = m.awaiting_sync, None
                reply(p.respond, sync_response(p.req, E.none, group, m.assignment))
            # Sessions restart now: an expiry while we waited for the leader was ignored.
            self._rebalance.touch(group, m)
        group.transition(_S.STABLE, self._state.clock())
