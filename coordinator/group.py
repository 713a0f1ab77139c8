"""One classic consumer group: its members, generation, elected protocol, committed offsets,
pending transactional offsets and state machine (Kafka's ClassicGroup / GroupMetadata).

:class:`GroupBase` holds what every group type has: its id, its ``__consumer_offsets``
partition and its committed and pending transactional offsets (Kafka keeps those in
OffsetMetadataManager, by group id, whatever the group's type). The classic :class:`Group`
and KIP-848's :class:`~coordinator.consumer.group.ConsumerGroup` extend it, so that
coordinator/offsets.py and coordinator/txn_offsets.py serve both.

Nothing here does I/O or knows about timers' mechanics; it holds the deadlines the
coordinator's timer wheel reads, and the pending request callbacks of members waiting in
JoinGroup or SyncGroup.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.consumer_protocol import decode_subscription_topics
from coordinator.records import OffsetCommitValue

__all__ = ["GroupBase", "GroupState", "Member", "Group", "Pending", "TxnOffset", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    # Values are the strings Kafka puts in DescribeGroups / ListGroups.
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupState.validPreviousStates: a transition from anything else is a bug.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(slots=True)
class Pending:
    """A request parked until the rebalance moves on: the request (its version decides the
    response type) and the broker's callback."""

    req: Any
    respond: Callable[[Any], None]


@dataclass(slots=True, frozen=True)
class TxnOffset:
    """An offset a transactional producer committed (TxnOffsetCommit), pending until its
    transaction ends, or an OffsetCommit's, pending until its record is committed, with
    the log offset of its record: Kafka's CommitRecordMetadataAndOffset. The position
    decides, when it becomes committed, whether it replaces the group's committed offset:
    the record later in the log wins, as compaction of ``__consumer_offsets`` would decide
    on replay."""

    value: OffsetCommitValue
    position: int


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Pending | None = None
    awaiting_sync: Pending | None = None
    # A member added by a JoinGroup has no heartbeats yet; Kafka expires it after
    # NewMemberJoinTimeoutMs if the join never completes (its client may have gone away).
    is_new: bool = False
    heartbeat_deadline: int = 0
    # Deadline of this member's entry in the coordinator's timer heap (None: none queued).
    # Heartbeats only move heartbeat_deadline; the queued entry re-arms itself when it fires,
    # so the heap holds about one entry per member however often clients heartbeat.
    session_timer_at: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        # A member votes for its most preferred protocol that every member supports.
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(slots=True, eq=False)
class GroupBase:
    """The id, partition and offsets of a group of any type."""

    group_id: str
    partition: int
    offsets: dict[tuple[str, int], OffsetCommitValue] = field(default_factory=dict)
    #: log offset of the record behind each committed offset (see TxnOffset.position); only
    #: read for keys present in ``offsets``, so an entry left behind by a removal is harmless
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    #: producer id -> its pending transactional offsets (Kafka's pendingTransactionalOffsetCommits)
    pending_txn_offsets: dict[int, dict[tuple[str, int], TxnOffset]] = field(default_factory=dict)
    #: offsets of OffsetCommits whose records are not committed yet (below the partition's
    #: high watermark), in log order per partition: Kafka's pendingOffsetCommits. They show
    #: nowhere until committed (coordinator/writes.py); a failed write leaves ``offsets`` as
    #: it was
    unreplicated_offsets: dict[tuple[str, int], list[TxnOffset]] = field(default_factory=dict)

    # --- offsets -------------------------------------------------------------------
    def commit_offset(self, key: tuple[str, int], value: OffsetCommitValue, position: int) -> None:
        """Make ``value`` (stored at log offset ``position``) the committed offset of ``key``."""
        self.offsets[key] = value
        self.offset_positions[key] = position

    def stage_offset(self, key: tuple[str, int], value: OffsetCommitValue, position: int) -> TxnOffset:
        """Kafka's prepareOffsetCommit: ``value`` was written at ``position`` and waits to be
        committed; the entry returned is what :meth:`unstage_offset` takes out again."""
        entry = TxnOffset(value, position)
        self.unreplicated_offsets.setdefault(key, []).append(entry)
        return entry

    def unstage_offset(self, key: tuple[str, int], entry: TxnOffset) -> bool:
        """Take ``entry`` out of the offsets waiting for their write; False when it is no
        longer there (OffsetDelete or the group's deletion removed it, or the group was
        loaded again): its write then decides nothing."""
        staged = self.unreplicated_offsets.get(key)
        if not staged or not any(e is entry for e in staged):
            return False
        staged[:] = [e for e in staged if e is not entry]
        if not staged:
            del self.unreplicated_offsets[key]
        return True

    def has_pending_offset(self, key: tuple[str, int]) -> bool:
        """Kafka's hasPendingOffsetCommitsForTopicPartition: an OffsetCommit not committed
        yet, or a transaction's offset."""
        return key in self.unreplicated_offsets or any(key in pending for pending in self.pending_txn_offsets.values())

    def has_pending_offsets(self) -> bool:
        """Whether any offset waits for its write or its transaction."""
        return bool(self.unreplicated_offsets) or bool(self.pending_txn_offsets)

    def has_offsets(self) -> bool:
        """Kafka's GroupMetadata.hasOffsets: committed, or still pending (its write or its
        transaction)."""
        return bool(self.offsets) or self.has_pending_offsets()

    def drop_pending_offsets(self, keys: set[tuple[str, int]]) -> None:
        """Forget the pending offsets of ``keys`` (their tombstone was written): those
        waiting for their write, and the transactional ones of any producer (Kafka's
        removeOffsets / replay of a tombstone). A producer left with none keeps its (empty)
        entry: its transaction is still open and the group stays non-empty until the
        marker, as in Kafka."""
        for key in keys & self.unreplicated_offsets.keys():
            del self.unreplicated_offsets[key]
        for pending in self.pending_txn_offsets.values():
            for key in keys & pending.keys():
                del pending[key]

    def adopt_offsets(self, other: GroupBase) -> None:
        """Take over the offsets of ``other``, the group this one replaces under the same id
        (a group changing type keeps its offsets, as Kafka's do)."""
        self.offsets, other.offsets = other.offsets, {}
        self.offset_positions, other.offset_positions = other.offset_positions, {}
        self.pending_txn_offsets, other.pending_txn_offsets = other.pending_txn_offsets, {}
        self.unreplicated_offsets, other.unreplicated_offsets = other.unreplicated_offsets, {}


@dataclass(slots=True, eq=False)
class Group(GroupBase):
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion-ordered: leader choice
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline (ms)
    pending_sync: set[str] = field(default_factory=set)
    num_awaiting_join: int = 0
    # Rebalance bookkeeping (Kafka's DelayedJoin / InitialDelayedJoin / DelayedSync).
    join_deadline: int | None = None
    initial_delay_remaining: int | None = None  # not None while an InitialDelayedJoin runs
    new_member_added: bool = False
    sync_deadline: int | None = None
    subscribed_topics: set[str] | None = None

    # --- state ---------------------------------------------------------------------
    def transition(self, new: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[new]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {new.value}")
        self.state = new
        self.state_timestamp = now

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # --- membership ----------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, pending: Pending | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        member.awaiting_join = pending
        if pending is not None:
            self.num_awaiting_join += 1

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            # Kafka takes the first remaining member; one that is already rejoining is a better
            # leader during a rebalance, and maybe_elect_joined_leader handles that case.
            self.leader_id = next(iter(self.members), None)
        return member

    def set_awaiting_join(self, member: Member, pending: Pending | None) -> Pending | None:
        """Park ``pending`` as the member's JoinGroup; returns a superseded one (to answer)."""
        old = member.awaiting_join
        if old is None and pending is not None:
            self.num_awaiting_join += 1
        elif old is not None and pending is None:
            self.num_awaiting_join -= 1
        member.awaiting_join = pending
        return old

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_joined_leader(self) -> bool:
        """If the leader has not rejoined, hand leadership to one that has (Kafka:
        maybeElectNewJoinedLeader). False when nobody has rejoined."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.awaiting_join is not None:
                return True
            for m in self.members.values():
                if m.awaiting_join is not None:
                    self.leader_id = m.member_id
                    return True
            return False
        return False

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        # An instance id we know, presented with a member id that is not its current one.
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    # --- protocols -------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(set(m.protocol_names()))
        n = len(self.members)
        return {p for p, c in counts.items() if c == n}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        candidates = self.candidate_protocols()
        return any(name in candidates for name, _ in protocols)

    def supports_protocols_excluding(self, member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """supports_protocols as if ``member_id`` had not joined yet: a member changing its own
        protocol list must only agree with the others (Kafka replaces the member's protocols
        in supportedProtocols before comparing)."""
        others = [m for m in self.members.values() if m.member_id != member_id]
        if not others:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        counts: Counter[str] = Counter()
        for m in others:
            counts.update(set(m.protocol_names()))
        return any(counts[name] == len(others) for name, _ in protocols)

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol common to all members")
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        # Kafka breaks ties arbitrarily (maxBy over a hash map); we break them by the
        # preference order of the first member so the outcome is deterministic.
        first = next(iter(self.members.values()))
        for name in first.protocol_names():
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda p: votes[p])  # pragma: no cover - first member always votes

    def compute_subscribed_topics(self) -> set[str] | None:
        """Union of the members' ConsumerProtocolSubscription topics for the elected protocol;
        None when unknown (not a consumer group, or undecodable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            t = decode_subscription_topics(m.metadata(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
