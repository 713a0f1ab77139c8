"""ShareGroupDescribe v1 (Kafka's GroupMetadataManager.shareGroupDescribe and
ShareGroup.asDescribedGroup): a share group's state, epochs, assignor and members with their
current assignments, topic names resolved from the broker's topics (partitions of topics that
no longer exist are left out).

Unknown groups, and groups of another type, answer GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.describe import GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED, described_topic_partitions
from coordinator.responses import response_for
from coordinator.share.group import ShareGroup, ShareGroupMember
from coordinator.share.membership import ShareMembership
from coordinator.state import Respond, reply

__all__ = ["ShareGroupDescribe", "GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED"]

E = ErrorCode


class ShareGroupDescribe:
    """ShareGroupDescribe against the groups of ``membership.state``."""

    def __init__(self, membership: ShareMembership, all_operations: int) -> None:
        self._m = membership
        self._state = membership.state
        self._all_operations = all_operations

    def __call__(self, req: Any, respond: Respond, authorized_operations: Callable[[str], int] | None = None) -> None:
        include_ops = bool(req.include_authorized_operations)
        ops_of = authorized_operations or (lambda _gid: self._all_operations)
        names = {topic_id: name for name, (topic_id, _) in self._m.topics().items()}
        groups = []
        for gid in req.group_ids:
            described = self._describe(gid, names)
            if include_ops and described["error_code"] is E.none:
                described["authorized_operations"] = ops_of(gid)
            groups.append(described)
        reply(respond, response_for(req, groups=groups))

    def _describe(self, gid: str, names: dict[Any, str]) -> dict[str, Any]:
        base: dict[str, Any] = {
            "group_id": gid,
            "error_code": E.none,
            "error_message": None,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
            "authorized_operations": GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED,
        }
        if not gid:
            base["error_code"] = E.invalid_group_id
            return base
        err = self._state.group_error(gid, allow_empty=False)
        if err is not None:
            base["error_code"] = err
            return base
        group = self._state.groups.get(gid)
        if group is None:
            base.update(error_code=E.group_id_not_found, error_message=f"Group {gid} not found.")
            return base
        if not isinstance(group, ShareGroup):
            base.update(error_code=E.group_id_not_found, error_message=f"Group {gid} is not a share group.")
            return base
        base.update(
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self._m.assignor.name,
            members=[self._member(m, names) for m in group.members.values()],
        )
        return base

    @staticmethod
    def _member(member: ShareGroupMember, names: dict[Any, str]) -> dict[str, Any]:
        return {
            "member_id": member.member_id,
            "rack_id": member.rack_id,
            "member_epoch": member.member_epoch,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": sorted(member.subscribed_topic_names),
            "assignment": described_topic_partitions(member.assigned, names),
        }

