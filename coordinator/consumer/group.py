"""One KIP-848 consumer group and its members: Kafka's ConsumerGroup (with ModernGroup) and
ConsumerGroupMember.

A member is immutable: every change builds a new :class:`ConsumerGroupMember` (Kafka's
ConsumerGroupMember.Builder), so the heartbeat can compare the member before and after a
request to decide which records to write. The group holds the members, the target
assignment and its epoch, the group epoch, the subscription metadata (the subscribed topics
that exist, with their ids and partition counts) and the index Kafka calls
``currentPartitionEpoch``: which member epoch owns each partition right now (assigned or
still pending revocation). Reconciliation gives a partition to its new owner only once this
index says nobody owns it. Members may use the consumer protocol (ConsumerGroupHeartbeat) or
the classic one (JoinGroup/SyncGroup/Heartbeat, after an online upgrade or joining a consumer
group: coordinator/consumer/classic_members.py); the group counts the latter and the classic
protocols they support, as Kafka does, for their JoinGroups and for the downgrade.

The group changes only through the methods the replay of records calls
(coordinator/consumer/replay.py), live and at load alike, so the state after a restart is
the state before it. Timer deadlines (soft state, never persisted) are kept here too.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import Assignment
from coordinator.group import GroupBase

__all__ = [
    "ClassicMemberMetadata",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "TopicMetadata",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "compiled_regex",
    "normalized",
    "regex_error",
]

#: ConsumerGroupHeartbeat's member epochs for leaving: a member leaving for good, and a
#: static member leaving for a restart (its assignment is kept for its session timeout)
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

E = ErrorCode


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with the byte it has in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0  # the member has its whole target assignment (or waits for nothing)
    UNREVOKED_PARTITIONS = 1  # it must revoke partitions before it gets more
    UNRELEASED_PARTITIONS = 2  # partitions of its target are still owned by other members
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    # Values are what ListGroups / ConsumerGroupDescribe show.
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class TopicMetadata(NamedTuple):
    """A subscribed topic that exists: Kafka's TopicMetadata (racks are not tracked)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


def normalized(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    """An assignment without empty topics, as frozensets (two equal assignments compare equal)."""
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


@lru_cache(maxsize=1024)
def compiled_regex(regex: str) -> re.Pattern[str] | None:
    """A subscription regex compiled (Python's ``re`` standing for Kafka's RE2/J), or None
    when it does not compile: such a regex matches nothing."""
    try:
        return re.compile(regex)
    except (re.error, RecursionError, OverflowError):
        return None


def regex_error(regex: str) -> str | None:
    """Why ``regex`` does not compile, or None when it does."""
    try:
        re.compile(regex)
    except (re.error, RecursionError, OverflowError) as exc:
        return str(exc) or type(exc).__name__
    return None


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer
    group keeps of its JoinGroup: ConsumerGroupMemberMetadataValue's ClassicMemberMetadata."""

    session_timeout_ms: int
    #: the JoinGroup protocols, (name, metadata), in the member's order of preference
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """Kafka's ConsumerGroupMember. ``classic`` is set for a member using the classic protocol
    (an old consumer in a group converted online, KIP-848's migration), None for one using
    ConsumerGroupHeartbeat. Defaults are those of a member just created by its first
    heartbeat."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    #: None (or "") when the member subscribes by names only
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def classic_protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.classic.protocols) if self.classic is not None else ()

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def has_regex(self) -> bool:
        return bool(self.subscribed_topic_regex)

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        pattern = compiled_regex(self.subscribed_topic_regex) if self.subscribed_topic_regex else None
        return pattern is not None and pattern.fullmatch(topic) is not None


def _count(counter: Counter[str], keys: Iterable[str], delta: int) -> None:
    for k in keys:
        n = counter[k] + delta
        if n > 0:
            counter[k] = n
        else:
            del counter[k]


def _regexes(member: ConsumerGroupMember | None) -> tuple[str, ...]:
    return (member.subscribed_topic_regex,) if member is not None and member.subscribed_topic_regex else ()


def _assignors(member: ConsumerGroupMember | None) -> tuple[str, ...]:
    return (member.server_assignor,) if member is not None and member.server_assignor is not None else ()


@dataclass(slots=True, eq=False)
class ConsumerGroup(GroupBase):
    """A consumer group: hard state (replayed from records) and timer deadlines."""

    group_epoch: int = 0
    #: the epoch of the target assignment (Kafka's targetAssignmentEpoch); -1 once deleted
    assignment_epoch: int = 0
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    #: topic id -> partition -> epoch of the member owning it (Kafka's currentPartitionEpoch)
    partition_epochs: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    #: topic name -> number of members subscribing to it by name
    subscribed_topic_names: Counter[str] = field(default_factory=Counter)
    #: regex -> number of members subscribing with it
    subscribed_regexes: Counter[str] = field(default_factory=Counter)
    server_assignors: Counter[str] = field(default_factory=Counter)
    #: the subscribed topics that exist, by name (ConsumerGroupPartitionMetadata)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    #: how many members use the classic protocol, and how many of them support each
    #: classic protocol name (Kafka's numClassicProtocolMembers and
    #: classicProtocolMembersSupportedProtocols)
    classic_members: int = 0
    classic_protocols: Counter[str] = field(default_factory=Counter)
    # --- soft state: timers (coordinator/consumer/membership.py) ---------------------------
    #: member id -> when its session expires; and the deadline of its queued timer entry
    session_deadlines: dict[str, int] = field(default_factory=dict)
    session_timer_at: dict[str, int] = field(default_factory=dict)
    #: member id -> (deadline, member epoch) of its revocation (Kafka's rebalance timeout)
    rebalance_timeouts: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: members using the classic protocol: member id -> the deadline of the JoinGroup it was
    #: asked for (REBALANCE_IN_PROGRESS), and of the SyncGroup after its JoinGroup
    join_timeouts: dict[str, int] = field(default_factory=dict)
    sync_timeouts: dict[str, int] = field(default_factory=dict)

    # --- reads -----------------------------------------------------------------------
    @property
    def protocol_type(self) -> str:
        return "consumer"

    def is_empty(self) -> bool:
        return self.state is ConsumerGroupState.EMPTY

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        mid = None if instance_id is None else self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    def target_of(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, {})

    def target_for(self, member_id: str, instance_id: str | None) -> Assignment:
        """Kafka's targetAssignment(memberId, instanceId): a static member's target is found
        by its instance id (the member id changes when the instance restarts)."""
        if instance_id is None:
            return self.target_of(member_id)
        previous = self.static_members.get(instance_id)
        return self.target_of(previous) if previous is not None else {}

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, -1 when it is free."""
        return self.partition_epochs.get(topic_id, {}).get(partition, -1)

    def preferred_assignor(self) -> str | None:
        """The server assignor most members name (Kafka's preferredServerAssignor)."""
        return _most_common(self.server_assignors)

    def computed_assignor(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> str | None:
        """preferred_assignor as it would be with ``old`` replaced by ``new``."""
        counts = Counter(self.server_assignors)
        _count(counts, _assignors(old), -1)
        _count(counts, _assignors(new), +1)
        return _most_common(counts)

    def computed_subscriptions(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
    ) -> tuple[Counter[str], Counter[str]]:
        """The subscribed names and regexes as they would be with ``old`` replaced by ``new``."""
        names, regexes = Counter(self.subscribed_topic_names), Counter(self.subscribed_regexes)
        if old is not None:
            _count(names, old.subscribed_topic_names, -1)
            _count(regexes, _regexes(old), -1)
        if new is not None:
            _count(names, new.subscribed_topic_names, +1)
            _count(regexes, _regexes(new), +1)
        return names, regexes

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: by name, or an existing topic one of the members'
        regexes matched (as of the last subscription metadata)."""
        return topic in self.subscribed_topic_names or topic in self.subscription_metadata

    def subscribed_topics(self) -> set[str]:
        """The topics this group consumes: by name, and the existing ones its regexes match."""
        return set(self.subscribed_topic_names) | set(self.subscription_metadata)

    # --- members using the classic protocol -------------------------------------------
    def supports_classic_protocols(self, protocol_type: str | None, names: Iterable[str]) -> bool:
        """Kafka's supportsClassicProtocols: the consumer protocol type, and (unless the group
        is empty) one of ``names`` supported by every member using the classic protocol."""
        names = list(names)
        if protocol_type != "consumer":
            return False
        if self.is_empty():
            return bool(names)
        return any(self.classic_protocols.get(name, 0) == self.classic_members for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept: ``member_id`` is the last member using
        the consumer protocol."""
        member = self.members.get(member_id)
        return (
            member is not None and not member.uses_classic_protocol
            and self.classic_members == len(self.members) - 1
        )

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: partitions of the member's target are still
        owned by other members."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_of(member.member_id).items():
            have = member.assigned.get(topic_id, frozenset())
            if any(p not in have and self.current_partition_epoch(topic_id, p) != -1 for p in partitions):
                return True
        return False

    # --- offsets validation (Kafka's ConsumerGroup.validateOffsetCommit/Fetch) -----------
    def offset_commit_error(self, member_id: str, member_epoch: int, *, transactional: bool, version: int) -> ErrorCode | None:
        # Epoch -1: the admin client or a consumer without group management; fine while
        # the group has no members.
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if not transactional and version < 9 and not member.uses_classic_protocol:
            return E.unsupported_version  # consumer-protocol members commit with v9+
        return _epoch_error(member, member_epoch)

    def offset_fetch_error(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_id is None and member_epoch < 0:
            return None  # the admin client, or a request without member (OffsetFetch < v9)
        member = self.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        return _epoch_error(member, member_epoch)

    # --- changes (called by the replay of records only) ---------------------------------
    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self._update_state()

    def set_assignment_epoch(self, epoch: int) -> None:
        self.assignment_epoch = epoch
        self._update_state()

    def set_subscription_metadata(self, metadata: Mapping[str, TopicMetadata]) -> None:
        self.subscription_metadata = dict(metadata)

    def update_target(self, member_id: str, assignment: Assignment) -> None:
        self.target_assignment[member_id] = normalized(assignment)

    def remove_target(self, member_id: str) -> None:
        self.target_assignment.pop(member_id, None)

    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        self._update_subscriptions(old, new)
        if old is not None:
            self._remove_epochs(old)
        self._add_epochs(new.assigned, new.member_epoch)
        self._add_epochs(new.pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self._update_state()

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._update_subscriptions(old, None)
        self._remove_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._update_state()

    def _update_subscriptions(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> None:
        self.subscribed_topic_names, self.subscribed_regexes = self.computed_subscriptions(old, new)
        _count(self.server_assignors, _assignors(old), -1)
        _count(self.server_assignors, _assignors(new), +1)
        for member, delta in ((old, -1), (new, +1)):
            if member is not None and member.classic is not None:
                self.classic_members += delta
                _count(self.classic_protocols, member.classic_protocol_names(), delta)

    def _remove_epochs(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                owned = self.partition_epochs.get(topic_id)
                if owned is None:
                    raise ValueError(f"cannot remove the epoch {member.member_epoch} of {topic_id}: it has none")
                for p in partitions:
                    prev = owned.pop(p, None)
                    if prev != member.member_epoch:
                        raise ValueError(
                            f"cannot remove the epoch {member.member_epoch} from {topic_id}-{p}: owned at epoch {prev}"
                        )
                if not owned:
                    del self.partition_epochs[topic_id]

    def _add_epochs(self, assignment: Assignment, epoch: int) -> None:
        for topic_id, partitions in assignment.items():
            owned = self.partition_epochs.setdefault(topic_id, {})
            for p in partitions:
                prev = owned.get(p)
                if prev is not None:
                    raise ValueError(f"cannot give {topic_id}-{p} epoch {epoch}: still owned at epoch {prev}")
                owned[p] = epoch

    def _update_state(self) -> None:
        """Kafka's maybeUpdateGroupState."""
        if self.state is ConsumerGroupState.DEAD:
            return
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            self.state = ConsumerGroupState.RECONCILING
        else:
            self.state = ConsumerGroupState.STABLE


def _epoch_error(member: ConsumerGroupMember, epoch: int) -> ErrorCode | None:
    """Kafka's validateMemberEpoch: a member using the classic protocol sends its generation."""
    if epoch == member.member_epoch:
        return None
    return E.illegal_generation if member.uses_classic_protocol else E.stale_member_epoch


def _most_common(counts: Counter[str]) -> str | None:
    # Kafka takes the max by count over a hash map (ties broken arbitrarily); we break ties
    # by name so that a reloaded group picks the same assignor.
    if not counts:
        return None
    return max(sorted(counts), key=lambda name: counts[name])
