"""LeaveGroup v0-5: members leaving on purpose (v3+ batches members, each with its own error)."""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer
from coordinator.consumer.group import ConsumerGroup
from coordinator.group import Group, GroupState
from coordinator.responses import response_for, version_of
from coordinator.state import CoordinatorState, Respond, reply

__all__ = ["LeaveGroup"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState


class LeaveGroup:
    """LeaveGroup against the groups of ``state``."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer) -> None:
        self._state = state
        self._rebalance = rebalancer

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
        if top is None:
            for member_id, instance_id in leaving:
                if isinstance(group, ConsumerGroup):
                    results.append(group.classic_member_error(member_id, instance_id, any_member_id=True))
                else:
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
