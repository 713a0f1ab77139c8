"""JoinGroup and SyncGroup responses built from a group's state.

Both are answered from several places (the request itself, a rebalance completing, a member
being fenced or dropped while parked), so their shape is decided here once.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.group import Group, Member
from coordinator.responses import response_for, version_of

__all__ = ["join_response", "current_join_result", "sync_response"]

E = ErrorCode


def join_response(
    req: Any,
    error: ErrorCode,
    member_id: str,
    group: Group | None = None,
    *,
    leader: str | None = None,
    members: list[Member] | None = None,
    skip_assignment: bool = False,
) -> Any:
    """The JoinGroup response for ``req``'s version; group fields only when ``error`` is none."""
    ok = error is E.none and group is not None
    protocol_name = group.protocol_name if ok and group is not None else None
    if protocol_name is None and version_of(req) < 7:
        protocol_name = ""  # non-nullable before v7
    return response_for(
        req,
        error_code=error,
        generation_id=group.generation if ok and group is not None else -1,
        protocol_type=group.protocol_type if ok and group is not None else None,
        protocol_name=protocol_name,
        leader=(leader or "") if ok else "",
        skip_assignment=skip_assignment,
        member_id=member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata(group.protocol_name if group else None),
            }
            for m in (members or ())
        ],
    )


def current_join_result(req: Any, group: Group, member: Member) -> Any:
    """The member's current generation, as the rebalance that formed it answered (the leader
    gets the member list)."""
    is_leader = group.is_leader(member.member_id)
    return join_response(
        req,
        E.none,
        member.member_id,
        group,
        leader=group.leader_id,
        members=list(group.members.values()) if is_leader else None,
    )


def sync_response(req: Any, error: ErrorCode, group: Group | None = None, assignment: bytes = b"") -> Any:
    """The SyncGroup response for ``req``'s version; protocol fields only when ``error`` is none."""
    ok = error is E.none and group is not None
    return response_for(
        req,
        error_code=error,
        protocol_type=group.protocol_type if ok and group is not None else None,
        protocol_name=group.protocol_name if ok and group is not None else None,
        assignment=assignment,
    )
