"""Heartbeat v0-4: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer
from coordinator.consumer.group import ConsumerGroup
from coordinator.group import GroupState
from coordinator.responses import response_for
from coordinator.share.group import ShareGroup
from coordinator.state import CoordinatorState, Respond, reply

if TYPE_CHECKING:
    from coordinator.consumer.classic_members import ClassicMembers

__all__ = ["Heartbeat"]

E = ErrorCode
_S = GroupState


class Heartbeat:
    """Heartbeat against the groups of ``state`` (consumer groups' members using the classic
    protocol through ``consumer_groups``)."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer, consumer_groups: ClassicMembers) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._consumer_groups = consumer_groups

    def __call__(self, req: Any, respond: Respond) -> None:
        reply(respond, response_for(req, error_code=self._heartbeat(req)))

    def _heartbeat(self, req: Any) -> ErrorCode:
        err = self._state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            return err
        group = self._state.groups.get(req.group_id)
        member_id: str = req.member_id
        if group is None or isinstance(group, ShareGroup):  # a share group has no classic member
            return E.unknown_member_id
        if isinstance(group, ConsumerGroup):
            return self._consumer_groups.heartbeat(group, req)
        if group.is_(_S.DEAD):
            return E.coordinator_not_available
        if group.is_static_member_fenced(member_id, getattr(req, "group_instance_id", None)):
            return E.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if req.generation_id != group.generation:
            return E.illegal_generation
        if group.is_(_S.EMPTY):
            return E.unknown_member_id
        self._rebalance.touch(group, member)
        if group.is_(_S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        # Stable, or CompletingRebalance (a member may heartbeat between its JoinGroup
        # answer and its SyncGroup): all good.
        return E.none
