"""LeaveGroup v0-5: members leaving on purpose (v3+ batches members, each with its own error)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer
from coordinator.consumer.group import ConsumerGroup
from coordinator.group import Group, GroupState
from coordinator.responses import response_for, version_of
from coordinator.share.group import ShareGroup
from coordinator.state import CoordinatorState, Respond, reply

if TYPE_CHECKING:
    from coordinator.consumer.classic_members import ClassicMembers

__all__ = ["LeaveGroup"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState


class LeaveGroup:
    """LeaveGroup against the groups of ``state`` (consumer groups' members using the classic
    protocol through ``consumer_groups``)."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer, consumer_groups: ClassicMembers) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._consumer_groups = consumer_groups

    def __call__(self, req: Any, respond: Respond) -> None:
        v = version_of(req)
        leaving: list[tuple[str, str | None]]
        if v >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            leaving = [(req.member_id, None)]
        top = self._state.group_error(req.group_id, allow_empty=False)
        results: list[ErrorCode] = []
        group = self._state.groups.get(req.group_id) if top is None else None
        if top is None and isinstance(group, Group) and group.is_(_S.DEAD):
            top = E.coordinator_not_available
        if top is None and isinstance(group, ShareGroup):
            top = E.unknown_member_id  # Kafka's classicGroupLeave: not a classic or consumer group
        if top is None and isinstance(group, ConsumerGroup):
            # Kafka's classicGroupLeaveToConsumerGroup (static members answer with their id)
            top, answered = self._consumer_groups.leave(group, leaving)
            leaving = [(mid, iid) for mid, iid, _ in answered]
            results = [e for _, _, e in answered]
        elif top is None:
            for member_id, instance_id in leaving:
                results.append(self._leave_one(group, member_id, instance_id))
        if v >= 3:
            resp = response_for(
                req,
                error_code=top or E.none,
                members=[
                    {"member_id": mid, "group_instance_id": iid, "error_code": e}
                    for (mid, iid), e in zip(leaving, results, strict=False)
                ],
            )
        else:
            # Before v3 the single member's error is the response's error.
            resp = response_for(req, error_code=top or (results[0] if results else E.none))
        reply(respond, resp)

    def _leave_one(self, group: Group | None, member_id: str, instance_id: str | None) -> ErrorCode:
        if group is None:
            return E.unknown_member_id
        if member_id == "" and instance_id is not None:
            member_id = group.static_member_id(instance_id) or ""
        if group.is_static_member_fenced(member_id, instance_id):
            return E.fenced_instance_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            if group.is_(_S.PREPARING_REBALANCE):
                self._rebalance.try_complete_join(group)
            self._state.maybe_drop_unused(group)
            return E.none
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        log.info("group %s: member %s left", group.group_id, member_id)
        self._rebalance.remove_member_and_update(group, member)
        return E.none
