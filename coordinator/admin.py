"""Group administration: DescribeGroups v0-5, ListGroups v0-5, DeleteGroups v0-2.

What ``kafka-consumer-groups.sh`` (and ``krait groups``) ask of the coordinator: describe
groups (unknown ones as Dead, as Kafka does), list them, and delete Empty groups together
with their offsets (pending transactional ones included).

KIP-848 consumer groups are listed with type "consumer" and KIP-932 share groups with type
"share" (protocol type "share", states Empty and Stable); both are deleted like classic ones
(their own tombstones instead of GroupMetadata's; a share group's state in
``__share_group_state`` is deleted by the broker shell, told through ``on_share_group_deleted``).
DescribeGroups describes them as Dead, as Kafka's GroupMetadataManager.describeGroups does
for any group that is not classic (clients describe them with ConsumerGroupDescribe and
ShareGroupDescribe: coordinator/consumer/describe.py, coordinator/share/describe.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import encode_record, group_tombstones
from coordinator.group import GroupState
from coordinator.records import encode_group_metadata_key, encode_offset_commit_key
from coordinator.responses import response_for
from coordinator.share import records as share_records
from coordinator.share.group import ShareGroup
from coordinator.state import CoordinatorState, Record, Respond, reply, storage_error

__all__ = ["GroupAdmin", "GROUP_AUTHORIZED_OPERATIONS"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState

#: DescribeGroups authorized_operations when the caller injects none: every operation Kafka
#: supports on a group (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), what Kafka
#: reports without an authorizer. The broker injects the authorizer's answer.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
_OPS_NOT_REQUESTED = -(2**31)


class GroupAdmin:
    """Describe, list and delete the groups of ``state``."""

    def __init__(self, state: CoordinatorState, on_share_group_deleted: Callable[[ShareGroup], None] | None = None) -> None:
        """``on_share_group_deleted(group)``: after a share group's tombstones are written."""
        self._state = state
        self._on_share_group_deleted = on_share_group_deleted

    # ------------------------------------------------------------------ DescribeGroups
    def describe_groups(self, req: Any, respond: Respond, authorized_operations: Callable[[str], int] | None = None) -> None:
        include_ops = bool(getattr(req, "include_authorized_operations", False))
        ops_of = authorized_operations or (lambda _gid: GROUP_AUTHORIZED_OPERATIONS)
        out = [self._describe(gid, ops_of(gid) if include_ops else _OPS_NOT_REQUESTED) for gid in req.groups]
        reply(respond, response_for(req, groups=out))

    def _describe(self, gid: str, ops: int) -> dict[str, Any]:
        err = self._state.group_error(gid, allow_empty=True)
        base: dict[str, Any] = {
            "group_id": gid,
            "error_code": E.none,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": ops,
        }
        if err is not None:
            base["error_code"] = err
            return base
        group = self._state.groups.get(gid)
        if group is None or isinstance(group, (ConsumerGroup, ShareGroup)):
            base["group_state"] = _S.DEAD.value
            return base
        stable = group.is_(_S.STABLE)
        base["group_state"] = group.state.value
        base["protocol_type"] = group.protocol_type or ""
        # Kafka only reveals the protocol, metadata and assignments of a Stable group.
        base["protocol_data"] = (group.protocol_name or "") if stable else ""
        base["members"] = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        return base

    # ------------------------------------------------------------------ ListGroups
    def list_groups(self, req: Any, respond: Respond) -> None:
        states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
        types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
        out = []
        for g in self._state.groups.values():
            group_type = "consumer" if isinstance(g, ConsumerGroup) else "share" if isinstance(g, ShareGroup) else "classic"
            if types and group_type not in types:
                continue
            if g.state.value == _S.DEAD.value or (states and g.state.value.lower() not in states):
                continue
            out.append(
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type or "",
                    "group_state": g.state.value,
                    "group_type": group_type,
                }
            )
        err = E.coordinator_load_in_progress if self._state.loading else E.none
        reply(respond, response_for(req, error_code=err, groups=out))

    # ------------------------------------------------------------------ DeleteGroups
    def delete_groups(self, req: Any, respond: Respond) -> None:
        results = [{"group_id": gid, "error_code": self._delete_group(gid)} for gid in req.groups_names]
        reply(respond, response_for(req, results=results))

    def _delete_group(self, gid: str) -> ErrorCode:
        state = self._state
        err = state.group_error(gid, allow_empty=True)
        if err is not None:
            return err
        group = state.groups.get(gid)
        if group is None or group.state.value == _S.DEAD.value:
            return E.group_id_not_found
        if isinstance(group, (ConsumerGroup, ShareGroup)):
            if not group.is_empty():
                return E.non_empty_group
        elif not group.is_(_S.EMPTY):
            return E.non_empty_group
        # Pending offsets (transactional, or waiting for their write) are deleted with the
        # group: Kafka's deleteAllOffsets writes a tombstone for each partition only they hold.
        keys = set(group.offsets).union(group.unreplicated_offsets, *group.pending_txn_offsets.values())
        records: list[Record] = [(encode_offset_commit_key(gid, topic, p), None) for topic, p in sorted(keys)]
        if isinstance(group, ConsumerGroup):
            records += [encode_record(r) for r in group_tombstones(group)]
        elif isinstance(group, ShareGroup):
            records += [share_records.encode_record(r) for r in share_records.group_tombstones(group)]
        else:
            records.append((encode_group_metadata_key(gid), None))
        try:
            state.append(group, records)
        except Exception as exc:
            log.warning("group %s: deletion failed: %s", gid, exc)
            return storage_error(exc, commit=False)
        state.kill(group)
        if isinstance(group, ShareGroup) and self._on_share_group_deleted is not None:
            self._on_share_group_deleted(group)
        return E.none
