"""The group coordinator's side of the share-group offset admin APIs (KIP-932):
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, as Kafka's
GroupMetadataManager decides them (initializedShareGroupPartitions, alterShareGroupOffsets,
sharePartitionsEligibleForOffsetDeletion / completeDeleteShareGroupOffsets).

Pure: each step checks the group, writes the ShareGroup* records of ``__consumer_offsets``
it must and returns what the broker shell then asks the share coordinator (the persister:
ReadShareGroupStateSummary, InitializeShareGroupState, DeleteShareGroupState); the shell
calls back with the outcome (broker/share/offsets_admin.py).

Alter: the new start offsets are initialised at state epoch group epoch + 1, higher than any
state epoch the group's share-partitions were initialised at (a heartbeat initialises at the
group epoch), so that the share coordinator fences the writes of a leader still holding the
old state (FENCED_STATE_EPOCH) and the leader reads the new state back. Once initialised,
the partitions are recorded in ShareGroupStatePartitionMetadata and the group epoch becomes
that state epoch (the next alter goes higher again). Kafka 4.2 records them first as
InitializingTopics; the record layout Krait follows has no such field, so a failed
initialisation leaves the metadata as it was.

Delete: the topics' share-partitions move from initialised to DeletingTopics (one record),
the shell deletes their state, then a second record drops them from DeletingTopics.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.share.group import ShareGroup
from coordinator.share.heartbeat import share_group_of
from coordinator.share.membership import ShareMembership, SharePartitions
from coordinator.share.records import state_partition_metadata_record
from protocol.errors import KafkaError

__all__ = ["AlterPlan", "DeletePlan", "ShareGroupOffsets", "UNKNOWN_TOPIC_OR_PARTITION_MESSAGE"]

E = ErrorCode

#: Errors.UNKNOWN_TOPIC_OR_PARTITION.message(), which Kafka puts in these responses
UNKNOWN_TOPIC_OR_PARTITION_MESSAGE = "This server does not host this topic-partition."
#: Errors.NON_EMPTY_GROUP.message() (ShareGroup.validateEmptyGroup throws the bare exception)
NON_EMPTY_GROUP_MESSAGE = "The group is not empty."


@dataclass
class AlterPlan:
    """What AlterShareGroupOffsets must initialise: ``offsets`` (topic id, partition) -> new
    start offset at ``state_epoch``; ``topics`` the response's topics in request order, each
    (name, topic id or None, [(partition, error code)])."""

    group_id: str
    error: ErrorCode = E.none
    message: str | None = None
    state_epoch: int = 0
    offsets: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    topics: list[tuple[str, uuid.UUID | None, list[tuple[int, ErrorCode]]]] = field(default_factory=list)


@dataclass
class DeletePlan:
    """What DeleteShareGroupOffsets must delete: ``delete`` topic id -> (name, partitions);
    ``refused`` the topics answered with an error at once: (name, error code)."""

    group_id: str
    error: ErrorCode = E.none
    message: str | None = None
    delete: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    refused: list[tuple[str, ErrorCode]] = field(default_factory=list)


class ShareGroupOffsets:
    """The offset admin APIs of the share groups of ``membership.state``."""

    def __init__(self, membership: ShareMembership) -> None:
        self._m = membership
        self._state = membership.state

    def _empty_share_group(self, group_id: str) -> ShareGroup:
        """Kafka's shareGroup(groupId) then validateEmptyGroup (KafkaError otherwise)."""
        err = self._state.group_error(group_id, allow_empty=False)
        if err is not None:
            raise KafkaError(err)
        group = share_group_of(self._state.groups, group_id)
        if not group.is_empty():
            raise KafkaError(E.non_empty_group, NON_EMPTY_GROUP_MESSAGE)
        return group

    # ------------------------------------------------------------------ describe
    def initialized_partitions(self, group_id: str) -> tuple[ErrorCode | None, SharePartitions]:
        """Kafka's initializedShareGroupPartitions (DescribeShareGroupOffsets without topics):
        the share-partitions whose state the group initialised; none for an unknown group or
        one of another type (Kafka answers those with no topics, not an error). The error is
        the coordinator's own (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID)."""
        err = self._state.group_error(group_id, allow_empty=False)
        if err is not None:
            return err, {}
        group = self._state.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return None, {}
        return None, group.assignable()

    # ------------------------------------------------------------------ alter
    def alter(self, group_id: str, topics: Any) -> AlterPlan:
        """Kafka's alterShareGroupOffsets: the group must be an empty share group; a topic
        that does not exist, or a partition past its count, is UNKNOWN_TOPIC_OR_PARTITION.
        Writes nothing: the records follow the persister's answer (:meth:`altered`)."""
        plan = AlterPlan(group_id)
        try:
            group = self._empty_share_group(group_id)
        except KafkaError as exc:
            plan.error, plan.message = exc.error_code, exc.message
            return plan
        plan.state_epoch = group.group_epoch + 1
        known = self._m.topics()
        for t in topics:
            name = str(t.topic_name)
            entry = known.get(name)
            results = []
            for p in t.partitions:
                index = int(p.partition_index)
                if entry is None or not 0 <= index < entry[1]:
                    results.append((index, E.unknown_topic_or_partition))
                    continue
                results.append((index, E.none))
                plan.offsets[(entry[0], index)] = int(p.start_offset)
            plan.topics.append((name, entry[0] if entry is not None else None, results))
        return plan

    def altered(self, group_id: str, partitions: SharePartitions) -> None:
        """The share coordinator initialised these share-partitions at the plan's state
        epoch: record them as initialised and move the group epoch up to that state epoch
        (raises KafkaError if the group is gone or the write fails)."""
        if not partitions:
            return
        err = self._state.group_error(group_id, allow_empty=False)
        if err is not None:
            raise KafkaError(err)
        # ShareMembership.partitions_initialized writes exactly these two records:
        # ShareGroupStatePartitionMetadata with the partitions added, group epoch + 1
        self._m.partitions_initialized(share_group_of(self._state.groups, group_id), partitions)

    # ------------------------------------------------------------------ delete
    def delete_begin(self, group_id: str, topic_names: list[str]) -> DeletePlan:
        """Kafka's sharePartitionsEligibleForOffsetDeletion: the group must be an empty share
        group; each named topic whose share-partitions the group initialised moves to
        DeletingTopics (one ShareGroupStatePartitionMetadata record); any other topic is
        UNKNOWN_TOPIC_OR_PARTITION."""
        plan = DeletePlan(group_id)
        try:
            group = self._empty_share_group(group_id)
        except KafkaError as exc:
            plan.error, plan.message = exc.error_code, exc.message
            return plan
        known = self._m.topics()
        initialized = dict(group.initialized)
        deleting = dict(group.deleting)
        for name in dict.fromkeys(topic_names):
            entry = known.get(name)
            held = initialized.get(entry[0]) if entry is not None else None
            if entry is None or held is None:
                plan.refused.append((name, E.unknown_topic_or_partition))
                continue
            topic_id = entry[0]
            plan.delete[topic_id] = (name, held[1])
            del initialized[topic_id]
            deleting[topic_id] = name
        if plan.delete:
            self._m.write(group, [state_partition_metadata_record(group_id, initialized, deleting)])
        return plan

    def delete_complete(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        """Kafka's completeDeleteShareGroupOffsets: the share coordinator deleted these
        topics' state; they leave DeletingTopics."""
        if not topic_ids:
            return
        group = self._state.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return  # the group was deleted meanwhile: nothing of it is left to record
        deleting = {t: n for t, n in group.deleting.items() if t not in set(topic_ids)}
        if deleting != group.deleting:
            self._m.write(group, [state_partition_metadata_record(group_id, group.initialized, deleting)])

