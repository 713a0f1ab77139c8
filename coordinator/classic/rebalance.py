"""The classic group's rebalance: its phases, its timers, and members leaving it.

:class:`Rebalancer` moves a group through PreparingRebalance -> CompletingRebalance -> Stable
(Kafka's ClassicGroup with DelayedJoin, InitialDelayedJoin, DelayedSync and the heartbeat
expiration), answers the JoinGroup/SyncGroup requests parked on it, and fires the timers of
the membership: member sessions, pending member ids, the join and sync phase deadlines.
JoinGroup, SyncGroup, Heartbeat and LeaveGroup (the modules beside this one) drive it.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.responses import join_response, sync_response
from coordinator.group import Group, GroupState, Member
from coordinator.records import (
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from coordinator.state import CoordinatorState, Record, reply

__all__ = ["Rebalancer", "group_metadata_record", "SESSION", "PENDING", "JOIN", "SYNC"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState

# Timer kinds (see coordinator.timers): what the queued entry's key is.
SESSION = "session"  # key: the Member
PENDING = "pending"  # key: a pending member id (KIP-394)
JOIN = "join"  # the group's join_deadline
SYNC = "sync"  # the group's sync_deadline


def group_metadata_record(group: Group, assignment: dict[str, bytes] | None = None) -> Record:
    """The GroupMetadata record of ``group`` as it stands (with ``assignment`` instead of the
    members' current ones, when given)."""
    members = tuple(
        MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name),
            assignment=(assignment.get(m.member_id, b"") if assignment is not None else m.assignment),
        )
        for m in group.members.values()
    )
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation,
        protocol=group.protocol_name,
        leader=group.leader_id,
        members=members,
        current_state_timestamp=group.state_timestamp,
    )
    return encode_group_metadata_key(group.group_id), encode_group_metadata_value(value)


class Rebalancer:
    """Rebalance phases and membership timers of every classic group in ``state``."""

    def __init__(self, state: CoordinatorState) -> None:
        self._state = state

    # ------------------------------------------------------------------ sessions
    def touch(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        deadline = self._state.clock() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        member.heartbeat_deadline = deadline
        if member.session_timer_at is None or member.session_timer_at > deadline:
            member.session_timer_at = deadline
            self._state.timers.schedule(deadline, SESSION, group, member)

    # ------------------------------------------------------------------ timers
    def fire(self, kind: str, group: Group, key: Any, at: int, now: int) -> None:
        """Run a due timer of ``group`` (queued at ``at``; stale entries do nothing)."""
        if kind == SESSION:
            self._on_session_timer(group, key, at, now)
        elif kind == PENDING:
            self._on_pending_timer(group, key, now)
        elif kind == JOIN:
            self._on_join_timer(group, now)
        elif kind == SYNC:
            self._on_sync_timer(group, now)

    def _on_session_timer(self, group: Group, member: Member, at: int, now: int) -> None:
        # Keyed by the Member object, not its id: a static member's id changes on restart.
        if group.members.get(member.member_id) is not member:
            return
        if member.session_timer_at == at:
            member.session_timer_at = None
        if member.heartbeat_deadline > now:
            # Heartbeats moved the deadline since this entry was queued: re-arm.
            if member.session_timer_at is None:
                member.session_timer_at = member.heartbeat_deadline
                self._state.timers.schedule(member.heartbeat_deadline, SESSION, group, member)
            return
        if member.is_new:
            # A new member whose join did not complete in time: its client is likely gone.
            self.remove_member_and_update(group, member)
        elif member.awaiting_join is not None or member.awaiting_sync is not None:
            # Members parked in a rebalance satisfy heartbeats; the rebalance/sync timeouts
            # govern them and reschedule their session when the phase completes.
            return
        else:
            log.info("group %s: member %s session timed out", group.group_id, member.member_id)
            self.remove_member_and_update(group, member)

    def _on_pending_timer(self, group: Group, member_id: Any, now: int) -> None:
        deadline = group.pending_members.get(member_id)
        if deadline is None or deadline > now:
            return
        del group.pending_members[member_id]
        if group.is_(_S.PREPARING_REBALANCE):
            self.try_complete_join(group)
        self._state.maybe_drop_unused(group)

    def _on_join_timer(self, group: Group, now: int) -> None:
        if not group.is_(_S.PREPARING_REBALANCE) or group.join_deadline is None or group.join_deadline > now:
            return
        remaining = group.initial_delay_remaining
        if remaining is not None and group.new_member_added and remaining != 0:
            # InitialDelayedJoin: members are still arriving, wait another delay (bounded by
            # the rebalance timeout).
            group.new_member_added = False
            delay = min(self._state.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining = max(remaining - delay, 0)
            # Count from the deadline that just passed, not from when poll() got to run.
            group.join_deadline += delay
            self._state.timers.schedule(group.join_deadline, JOIN, group)
            return
        self.complete_join(group)

    def _on_sync_timer(self, group: Group, now: int) -> None:
        if group.sync_deadline is None or group.sync_deadline > now:
            return
        group.sync_deadline = None
        if group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync:
            return
        # Members that got their JoinGroup answer but never sent SyncGroup are dropped
        # (Kafka's DelayedSync), and the group rebalances without them.
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self.drop_member(group, member)
        group.pending_sync.clear()
        self.maybe_prepare_rebalance(group)

    # ------------------------------------------------------------------ phases
    def maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)

    def prepare_rebalance(self, group: Group) -> None:
        now = self._state.clock()
        if group.is_(_S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.is_(_S.EMPTY):
            # A brand-new (or emptied) group waits group.initial.rebalance.delay.ms so that
            # consumers starting together land in one generation.
            delay = self._state.config.group_initial_rebalance_delay_ms
            group.initial_delay_remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_deadline = now + delay
        else:
            group.initial_delay_remaining = None
            group.join_deadline = now + group.rebalance_timeout_ms()
        group.transition(_S.PREPARING_REBALANCE, now)
        self._state.timers.schedule(group.join_deadline, JOIN, group)
        self.try_complete_join(group)

    def try_complete_join(self, group: Group) -> None:
        # The rebalance completes the moment every known member has rejoined, except during
        # the initial delay, which (as in Kafka's InitialDelayedJoin) always runs its course.
        if (
            group.is_(_S.PREPARING_REBALANCE)
            and group.initial_delay_remaining is None
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        state = self._state
        now = state.clock()
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: evicting member %s (did not rejoin in time)", group.group_id, member.member_id)
                self.drop_member(group, member)
        if not group.maybe_elect_joined_leader() and group.members:
            # Only static members remain and none rejoined: wait another rebalance timeout
            # (their session timeouts will eventually remove them).
            group.initial_delay_remaining = None
            group.join_deadline = now + group.rebalance_timeout_ms()
            state.timers.schedule(group.join_deadline, JOIN, group)
            return
        group.join_deadline = None
        group.initial_delay_remaining = None
        group.new_member_added = False
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.subscribed_topics = None
            group.transition(_S.EMPTY, now)
            try:
                state.append(group, [group_metadata_record(group)])
            except Exception as exc:
                log.warning("group %s: writing empty group metadata failed: %s", group.group_id, exc)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(_S.COMPLETING_REBALANCE, now)
        all_members = list(group.members.values())
        for member in all_members:
            pending = group.set_awaiting_join(member, None)
            member.is_new = False
            self.touch(group, member)
            group.pending_sync.add(member.member_id)
            if pending is not None:
                is_leader = group.is_leader(member.member_id)
                resp = join_response(
                    pending.req,
                    E.none,
                    member.member_id,
                    group,
                    leader=group.leader_id,
                    members=all_members if is_leader else None,
                )
                reply(pending.respond, resp)
        group.sync_deadline = now + group.rebalance_timeout_ms()
        state.timers.schedule(group.sync_deadline, SYNC, group)

    def reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                p, member.awaiting_sync = member.awaiting_sync, None
                reply(p.respond, sync_response(p.req, error))

    # ------------------------------------------------------------------ members leaving
    def fence(self, group: Group, member: Member) -> None:
        """Answer the parked requests of an old static incarnation with FENCED_INSTANCE_ID."""
        old_join = group.set_awaiting_join(member, None)
        if old_join is not None:
            reply(old_join.respond, join_response(old_join.req, E.fenced_instance_id, member.member_id))
        if member.awaiting_sync is not None:
            p, member.awaiting_sync = member.awaiting_sync, None
            reply(p.respond, sync_response(p.req, E.fenced_instance_id))

    def drop_member(self, group: Group, member: Member) -> None:
        """Remove a member, answering its parked requests (it is no longer part of the group)."""
        if member.awaiting_join is not None:
            p = member.awaiting_join
            group.set_awaiting_join(member, None)
            reply(p.respond, join_response(p.req, E.unknown_member_id, member.member_id))
        if member.awaiting_sync is not None:
            p, member.awaiting_sync = member.awaiting_sync, None
            reply(p.respond, sync_response(p.req, E.unknown_member_id))
        group.remove(member.member_id)

    def remove_member_and_update(self, group: Group, member: Member) -> None:
        """Drop a member and let the group react: rebalance, or finish the running one."""
        self.drop_member(group, member)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group)
        elif group.is_(_S.PREPARING_REBALANCE):
            self.try_complete_join(group)
