"""ShareGroupDescribe v1 (Kafka's GroupMetadataManager.shareGroupDescribe and
ShareGroup.asDescribedGroup): a share group's state, epochs, assignor and members with their
current assignments, topic names resolved from the broker's topics (partitions of topics that
no longer exist are left out).

Unknown groups, and groups of another type, answer GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.describe import (
    GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED,
    ModernGroupDescribe,
    described_topic_partitions,
)
from coordinator.share.group import ShareGroup, ShareGroupMember

__all__ = ["ShareGroupDescribe", "GROUP_AUTHORIZED_OPERATIONS_NOT_REQUESTED"]

E = ErrorCode


class ShareGroupDescribe(ModernGroupDescribe):
    """ShareGroupDescribe against the groups of ``membership.state``."""

    group_class = ShareGroup
    other_type = "Group {gid} is not a share group."

    def _details(self, group: Any, names: dict[Any, str]) -> dict[str, Any]:
        return dict(assignor_name=self._m.assignor.name,
                    members=[self._member(m, names) for m in group.members.values()])

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

