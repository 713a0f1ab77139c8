"""ConsumerGroupDescribe v0-1 (Kafka's GroupMetadataManager.consumerGroupDescribe and
ConsumerGroup.asDescribedGroup): a consumer group's state, epochs, assignor and members
with their current and target assignments, topic names resolved from the broker's topics
(partitions of topics that no longer exist are left out, as Kafka does).

Unknown groups, and groups of another type, answer GROUP_ID_NOT_FOUND (the Admin client
then falls back to DescribeGroups for classic groups).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember
from coordinator.responses import response_for
from coordinator.state import Respond, reply

__all__ = [
    "ConsumerGroupDescribe", "ModernGroupDescribe", "GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED", "MEMBER_TYPE_CLASSIC", "MEMBER_TYPE_CONSUMER",
    "described_topic_partitions",
]

E = ErrorCode

GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED = -(2**31)
#: ConsumerGroupDescribe v1's MemberType: 0 for members using the classic protocol (KIP-848's
#: online migration), 1 for those using the consumer protocol
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


class ModernGroupDescribe:
    """ConsumerGroupDescribe and ShareGroupDescribe (Kafka's GroupMetadataManager
    consumerGroupDescribe / shareGroupDescribe): one answer per group id, with the same
    error rules; a subclass names its group class, the error for a group of another type,
    and the group's own fields (:meth:`_details`)."""

    group_class: type
    #: the GROUP_ID_NOT_FOUND message for a group of another type ({gid} filled in)
    other_type: str

    def __init__(self, membership: Any, all_operations: int) -> None:
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
        if not isinstance(group, self.group_class):
            base.update(error_code=E.group_id_not_found, error_message=self.other_type.format(gid=gid))
            return base
        base.update(group_state=group.state.value, group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch, **self._details(group, names))
        return base

    def _details(self, group: Any, names: dict[Any, str]) -> dict[str, Any]:
        """The assignor name and the members of a group of this type."""
        raise NotImplementedError


class ConsumerGroupDescribe(ModernGroupDescribe):
    """ConsumerGroupDescribe against the groups of ``membership.state``."""

    group_class = ConsumerGroup
    other_type = "Group {gid} is not a consumer group"

    def _details(self, group: Any, names: dict[Any, str]) -> dict[str, Any]:
        return dict(assignor_name=group.preferred_assignor() or self._m.default_assignor,
                    members=[self._member(m, group.target_of(mid), names) for mid, m in group.members.items()])

    @staticmethod
    def _member(member: ConsumerGroupMember, target: Assignment, names: dict[Any, str]) -> dict[str, Any]:
        return {
            "member_id": member.member_id,
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "member_epoch": member.member_epoch,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": sorted(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "assignment": described_topic_partitions(member.assigned, names),
            "target_assignment": described_topic_partitions(target, names),
            "member_type": MEMBER_TYPE_CLASSIC if member.uses_classic_protocol else MEMBER_TYPE_CONSUMER,
        }


def described_topic_partitions(assignment: Assignment, names: dict[Any, str]) -> dict[str, Any]:
    """An assignment as the describe APIs carry it: topic id, name and partitions (topics no
    longer known left out)."""
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": names[topic_id], "partitions": sorted(ps)}
            for topic_id, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
            if topic_id in names
        ]
    }
