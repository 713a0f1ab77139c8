"""One KIP-932 share group and its members: Kafka's ShareGroup and ShareGroupMember.

A member is immutable (Kafka's ShareGroupMember.Builder): every change builds a new
:class:`ShareGroupMember`, so the heartbeat compares a member before and after a request to
decide which records to write. The group holds the members, the target assignment and its
epoch, the group epoch, the subscription metadata (the subscribed topics that exist) and
the share-partitions whose state ``__share_group_state`` holds (ShareGroupStatePartitionMetadata:
initialised, being deleted) plus, in memory only, those being initialised.

Unlike a consumer group, a partition may be assigned to several members at once (KIP-932's
sharing), so there is no ownership index and no revocation: a share group is Empty (no
members) or Stable, never Assigning or Reconciling (Kafka's ShareGroup.maybeUpdateGroupState).

The group changes only through the methods the replay of records calls
(coordinator/share/replay.py), live and at load alike. Timer deadlines (soft state, never
persisted) are kept here too.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coordinator.consumer.assignors.api import Assignment
from coordinator.consumer.group import LEAVE_GROUP_MEMBER_EPOCH, MemberState, TopicMetadata, normalized
from coordinator.group import GroupBase

__all__ = [
    "SHARE_PROTOCOL_TYPE",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "ShareGroup",
    "ShareGroupMember",
    "ShareGroupState",
]

#: what ListGroups shows as a share group's protocol type (Kafka's ShareGroup.PROTOCOL_TYPE)
SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(enum.Enum):
    # Values are what ListGroups / ShareGroupDescribe show (Kafka's ShareGroup.ShareGroupState).
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    """Kafka's ShareGroupMember. Defaults are those of a member just created by its first
    heartbeat."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


def _count(counter: Counter[str], keys: Iterable[str], delta: int) -> None:
    for k in keys:
        n = counter[k] + delta
        if n > 0:
            counter[k] = n
        else:
            del counter[k]


@dataclass(slots=True, eq=False)
class ShareGroup(GroupBase):
    """A share group: hard state (replayed from records) and timer deadlines. It never has
    committed offsets (share groups keep their progress in ``__share_group_state``); the
    offsets fields of GroupBase stay empty."""

    group_epoch: int = 0
    #: the epoch of the target assignment; -1 once deleted
    assignment_epoch: int = 0
    state: ShareGroupState = ShareGroupState.EMPTY
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    #: topic name -> number of members subscribing to it
    subscribed_topic_names: Counter[str] = field(default_factory=Counter)
    #: the subscribed topics that exist, by name: memory only since Kafka 4.2's layouts (which
    #: keep a hash of it in ShareGroupMetadata), read from ShareGroupPartitionMetadata in
    #: older logs
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    #: share-partitions whose state ``__share_group_state`` holds, by topic id, with the
    #: topic's name (ShareGroupStatePartitionMetadata's InitializedTopics)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    #: topics whose share-group state is being deleted (its DeletingTopics)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    # --- soft state ----------------------------------------------------------------------
    #: share-partitions asked to be initialised and not confirmed yet (written as
    #: InitializingTopics with the next ShareGroupStatePartitionMetadata record, never read
    #: back: a new coordinator asks again)
    initializing: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    #: member id -> when its session expires; and the deadline of its queued timer entry
    session_deadlines: dict[str, int] = field(default_factory=dict)
    session_timer_at: dict[str, int] = field(default_factory=dict)

    # --- reads -----------------------------------------------------------------------
    @property
    def protocol_type(self) -> str:
        return SHARE_PROTOCOL_TYPE

    def is_empty(self) -> bool:
        return self.state is ShareGroupState.EMPTY

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    def computed_subscriptions(self, old: ShareGroupMember | None, new: ShareGroupMember | None) -> Counter[str]:
        """The subscribed topic names as they would be with ``old`` replaced by ``new``."""
        names = Counter(self.subscribed_topic_names)
        if old is not None:
            _count(names, old.subscribed_topic_names, -1)
        if new is not None:
            _count(names, new.subscribed_topic_names, +1)
        return names

    def is_initialized(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initialized.get(topic_id)
        return entry is not None and partition in entry[1]

    def assignable(self) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions the assignor may hand out: those initialised (Kafka's
        GroupSpec.isPartitionAssignable for share groups)."""
        return {t: ps for t, (_, ps) in self.initialized.items()}

    def share_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every share-partition of the subscribed topics (initialised or not)."""
        return {t.topic_id: frozenset(range(t.num_partitions)) for t in self.subscription_metadata.values()}

    # --- changes (called by the replay of records only) ---------------------------------
    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self._update_state()

    def set_assignment_epoch(self, epoch: int) -> None:
        self.assignment_epoch = epoch
        self._update_state()

    def set_subscription_metadata(self, metadata: Mapping[str, TopicMetadata]) -> None:
        self.subscription_metadata = dict(metadata)

    def set_state_partitions(
        self, initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]], deleting: Mapping[uuid.UUID, str]
    ) -> None:
        self.initialized = {t: (name, frozenset(ps)) for t, (name, ps) in initialized.items() if ps}
        self.deleting = dict(deleting)
        # what is initialised now is no longer waited for
        for topic_id, (_, ps) in self.initialized.items():
            waiting = self.initializing.get(topic_id)
            if waiting is not None:
                rest = waiting - ps
                if rest:
                    self.initializing[topic_id] = rest
                else:
                    del self.initializing[topic_id]

    def update_target(self, member_id: str, assignment: Assignment) -> None:
        self.target_assignment[member_id] = normalized(assignment)

    def remove_target(self, member_id: str) -> None:
        self.target_assignment.pop(member_id, None)

    def update_member(self, new: ShareGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self.subscribed_topic_names = self.computed_subscriptions(old, new)
        self._update_state()

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self.subscribed_topic_names = self.computed_subscriptions(old, None)
        self._update_state()

    def _update_state(self) -> None:
        """Kafka's ShareGroup.maybeUpdateGroupState: Empty without members, else Stable."""
        if self.state is ShareGroupState.DEAD:
            return
        self.state = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
