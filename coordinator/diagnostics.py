"""Rebalance diagnostics: read-only views over the group coordinator's state, and the lines
the broker logs when a rebalance is slow.

Pure: nothing here does I/O, mutates a group or reads a clock; ``now`` (ms, the
coordinator's clock) is passed in. The broker's group driver calls
:meth:`SlowRebalanceWatch.check` on a timer and logs what it returns.

What is slow, per protocol:

* a classic group in PreparingRebalance waits for every member to send JoinGroup again
  (and for members given an id by KIP-394 to join with it); the members that have not
  rejoined hold everybody up until they do, or until the rebalance timeout (the largest
  ``max.poll.interval.ms`` of the members) evicts them. Kafka's DescribeGroups does not say
  which members have rejoined, so the log line is the only place that names them;
* a consumer (KIP-848) group waits for members asked to revoke partitions (member state
  UNREVOKED_PARTITIONS): the partitions are not given to their new owners until the
  member's heartbeat stops reporting them. ConsumerGroupDescribe reports a member's
  assignment without the partitions pending revocation, so here too the log line is the
  place that names them.

Each line is logged once per rebalance (classic: per generation being formed) and member,
and once per epoch and member (consumer), however long the wait lasts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, MemberState
from coordinator.group import Group, GroupState

__all__ = [
    "SLOW_REBALANCE_MS",
    "ClassicWait",
    "ConsumerMemberView",
    "MemberRef",
    "Revocation",
    "SlowRebalanceWatch",
    "classic_wait",
    "consumer_member_views",
    "format_classic_wait",
    "format_revocation",
    "pending_revocations",
]

#: How long a rebalance may wait for members before the broker logs whom it waits for.
#: A constant, not a config key: a healthy rebalance of the classic protocol takes well
#: under a second once every member polls, and 5 s is short enough to catch a member stuck
#: in processing (max.poll.interval.ms defaults to 5 minutes) and long enough to stay quiet
#: during group.initial.rebalance.delay.ms (3 s by default).
SLOW_REBALANCE_MS = 5000


@dataclass(frozen=True, slots=True)
class MemberRef:
    """Who a member is, for a person reading the log: its id and where it runs."""

    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None

    def __str__(self) -> str:
        inst = f"instance-id {self.instance_id}, " if self.instance_id else ""
        return f"{self.member_id} ({inst}client-id {self.client_id}, host {self.client_host})"


@dataclass(frozen=True, slots=True)
class ClassicWait:
    """A classic group in PreparingRebalance and the members it still waits for."""

    group_id: str
    #: the generation this rebalance will form
    generation: int
    #: when the group entered PreparingRebalance (coordinator clock, ms)
    since_ms: int
    waited_ms: int
    #: the group's rebalance timeout: the largest max.poll.interval.ms of its members
    rebalance_timeout_ms: int
    #: members whose JoinGroup has not arrived in this rebalance
    not_rejoined: tuple[MemberRef, ...]
    #: member ids handed out by KIP-394 (MEMBER_ID_REQUIRED) whose JoinGroup with that id has not come
    pending_ids: tuple[str, ...]


def classic_wait(group: Group, now: int) -> ClassicWait | None:
    """What a classic group in PreparingRebalance waits for; None in any other state, and
    when it waits for nobody (the initial rebalance delay running its course)."""
    if not group.is_(GroupState.PREPARING_REBALANCE):
        return None
    waiting = tuple(
        MemberRef(m.member_id, m.client_id, m.client_host, m.group_instance_id) for m in group.not_yet_rejoined()
    )
    pending = tuple(sorted(group.pending_members))
    if not waiting and not pending:
        return None
    since = group.state_timestamp
    return ClassicWait(
        group_id=group.group_id,
        generation=group.generation + 1,
        since_ms=since,
        waited_ms=max(0, now - since) if since >= 0 else 0,
        rebalance_timeout_ms=group.rebalance_timeout_ms(),
        not_rejoined=waiting,
        pending_ids=pending,
    )


def format_classic_wait(w: ClassicWait) -> str:
    """``group G: rebalance (generation N) waiting 5.0s for members [m1 (client-id c1, host h1)]
    to rejoin; max.poll.interval.ms=300000``."""
    who = [str(m) for m in w.not_rejoined] + [f"{mid} (new member, not yet joined with its id)" for mid in w.pending_ids]
    return (
        f"group {w.group_id}: rebalance (generation {w.generation}) waiting {w.waited_ms / 1000:.1f}s for members "
        f"[{', '.join(who)}] to rejoin; max.poll.interval.ms={w.rebalance_timeout_ms}"
    )


@dataclass(frozen=True, slots=True)
class ConsumerMemberView:
    """A consumer-group member as the coordinator sees it, topic ids resolved to names."""

    member: MemberRef
    member_epoch: int
    #: the epoch of the group's target assignment, which the member reconciles towards
    target_epoch: int
    state: MemberState
    assigned: tuple[tuple[str, int], ...]
    target: tuple[tuple[str, int], ...]
    pending_revocation: tuple[tuple[str, int], ...]
    rebalance_timeout_ms: int


def _topic_names(group: ConsumerGroup) -> dict[uuid.UUID, str]:
    return {meta.topic_id: name for name, meta in group.subscription_metadata.items()}


def _partitions(assignment: dict[uuid.UUID, frozenset[int]], names: dict[uuid.UUID, str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((names.get(tid, str(tid)), p) for tid, ps in assignment.items() for p in ps))


def _ref(m: ConsumerGroupMember) -> MemberRef:
    return MemberRef(m.member_id, m.client_id, m.client_host, m.instance_id)


def consumer_member_views(group: ConsumerGroup) -> list[ConsumerMemberView]:
    """Every member of a consumer group: epochs, state, current and target assignment and
    the partitions it still has to revoke."""
    names = _topic_names(group)
    return [
        ConsumerMemberView(
            member=_ref(m),
            member_epoch=m.member_epoch,
            target_epoch=group.assignment_epoch,
            state=m.state,
            assigned=_partitions(m.assigned, names),
            target=_partitions(group.target_of(mid), names),
            pending_revocation=_partitions(m.pending_revocation, names),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
        )
        for mid, m in group.members.items()
    ]


@dataclass(frozen=True, slots=True)
class Revocation:
    """A consumer-group member that owes partitions back to the group."""

    group_id: str
    #: the epoch of the target assignment the group waits to reach
    group_epoch: int
    member: MemberRef
    member_epoch: int
    partitions: tuple[tuple[str, int], ...]
    rebalance_timeout_ms: int
    #: when the member was asked to revoke, when the coordinator's revocation timer tells
    #: (its deadline minus the member's rebalance timeout); None when unknown
    since_ms: int | None
    #: a classic-protocol member inside the consumer group (after an online upgrade): it
    #: revokes by rejoining (JoinGroup), which its client sends only from poll()
    classic: bool = False


def pending_revocations(group: ConsumerGroup) -> list[Revocation]:
    """The members of a consumer group in UNREVOKED_PARTITIONS, with what they must revoke."""
    names = _topic_names(group)
    out = []
    for mid, m in group.members.items():
        if m.state is not MemberState.UNREVOKED_PARTITIONS or not m.pending_revocation:
            continue
        since = None
        timer = group.rebalance_timeouts.get(mid)
        if timer is not None and timer[1] == m.member_epoch and m.rebalance_timeout_ms >= 0:
            since = timer[0] - m.rebalance_timeout_ms
        out.append(Revocation(group.group_id, group.assignment_epoch, _ref(m), m.member_epoch,
                              _partitions(m.pending_revocation, names), m.rebalance_timeout_ms, since,
                              m.uses_classic_protocol))
    return out


def format_revocation(r: Revocation, waited_ms: int) -> str:
    """``group G: epoch N waiting 5.0s for member m1 (client-id c1, host h1) to revoke [t-0, t-3];
    member epoch N-1, max.poll.interval.ms=300000``."""
    parts = ", ".join(f"{t}-{p}" for t, p in r.partitions)
    return (
        f"group {r.group_id}: epoch {r.group_epoch} waiting {waited_ms / 1000:.1f}s for member {r.member} to revoke "
        f"[{parts}]{' by rejoining (classic protocol member)' if r.classic else ''}; member epoch {r.member_epoch}, "
        f"max.poll.interval.ms={r.rebalance_timeout_ms}"
    )


class SlowRebalanceWatch:
    """Decides which slow-rebalance lines to log: call :meth:`check` periodically with the
    coordinator's groups. It remembers what it logged (and, for a revocation whose start
    the coordinator's timers do not tell, when it first saw it), forgetting a wait once it
    is over."""

    def __init__(self, threshold_ms: int = SLOW_REBALANCE_MS) -> None:
        self.threshold_ms = threshold_ms
        #: (group id, generation, member id) of classic waits logged
        self._classic_logged: set[tuple[str, int, str]] = set()
        #: (group id, group epoch, member id) of revocations logged
        self._revocations_logged: set[tuple[str, int, str]] = set()
        #: (group id, member epoch, member id) -> when the revocation was first seen
        self._first_seen: dict[tuple[str, int, str], int] = {}

    def check(self, groups: Iterable[Group | ConsumerGroup], now: int) -> list[str]:
        """The lines to log now (each wait once)."""
        lines: list[str] = []
        classic_keys: set[tuple[str, int, str]] = set()
        revoking: set[tuple[str, int, str]] = set()
        seen: set[tuple[str, int, str]] = set()
        for group in groups:
            if isinstance(group, ConsumerGroup):
                if group.state in (ConsumerGroupState.RECONCILING, ConsumerGroupState.ASSIGNING):
                    self._check_consumer(group, now, lines, revoking, seen)
            elif isinstance(group, Group) and group.is_(GroupState.PREPARING_REBALANCE):
                self._check_classic(group, now, lines, classic_keys)
        # forget the waits that are over, so that memory stays bounded
        self._classic_logged &= classic_keys
        self._revocations_logged &= revoking
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in seen}
        return lines

    def _check_classic(self, group: Group, now: int, lines: list[str], keys: set[tuple[str, int, str]]) -> None:
        w = classic_wait(group, now)
        if w is None:
            return
        mine = {(w.group_id, w.generation, m.member_id) for m in w.not_rejoined}
        mine |= {(w.group_id, w.generation, mid) for mid in w.pending_ids}
        keys |= mine
        if w.waited_ms >= self.threshold_ms and not mine <= self._classic_logged:
            lines.append(format_classic_wait(w))
            self._classic_logged |= mine

    def _check_consumer(self, group: ConsumerGroup, now: int, lines: list[str], revoking: set[tuple[str, int, str]],
                        seen: set[tuple[str, int, str]]) -> None:
        for r in pending_revocations(group):
            first = (r.group_id, r.member_epoch, r.member.member_id)
            seen.add(first)
            self._first_seen.setdefault(first, now)
            since = r.since_ms if r.since_ms is not None else self._first_seen[first]
            key = (r.group_id, r.group_epoch, r.member.member_id)
            revoking.add(key)
            waited = max(0, now - since)
            if waited >= self.threshold_ms and key not in self._revocations_logged:
                lines.append(format_revocation(r, waited))
                self._revocations_logged.add(key)
