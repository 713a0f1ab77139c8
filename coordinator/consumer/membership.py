"""What every consumer-group operation shares: writing records then replaying them, fencing
members, and the members' timers (Kafka's GroupMetadataManager: consumerGroupFenceMember,
the session and rebalance timeouts, onLoaded).

Timers live in the coordinator's shared TimerQueue, keyed by member id; the deadlines are
kept on the group (soft state) and a due entry re-checks them, so an entry left behind by a
heartbeat, a fence or a rejoin is a no-op:

* ``cg-session``: a member that does not heartbeat for group.consumer.session.timeout.ms is
  fenced (a static member that left with epoch -2 too, which ends its grace period);
* ``cg-rebalance``: a member still owing revoked partitions (UNREVOKED_PARTITIONS) when its
  RebalanceTimeoutMs runs out, at the epoch it had when asked, is fenced;
* ``cg-join`` and ``cg-sync``: a member using the classic protocol that was told to rejoin
  (REBALANCE_IN_PROGRESS) and does not send JoinGroup within its rebalance timeout, or that
  joined and does not send SyncGroup within it, is fenced.

Fencing removes the member (tombstones for its current assignment, target assignment and
subscription), updates the subscription metadata and bumps the group epoch; the next
heartbeat of any member computes the new target assignment. When the member fenced is the
last one using the consumer protocol and group.consumer.migration.policy allows it, the group
becomes a classic group instead (coordinator/consumer/migration.py) and rebalances.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer
from coordinator.classic.responses import join_response, sync_response
from coordinator.consumer.assignors.api import PartitionAssignor
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, MemberState
from coordinator.consumer.migration import can_downgrade_after_fence, consumer_to_classic
from coordinator.consumer.records import (
    CGRecord,
    current_assignment_tombstone,
    encode_record,
    group_epoch_record,
    member_subscription_tombstone,
    subscription_metadata_record,
    target_assignment_tombstone,
)
from coordinator.consumer.replay import ReplayError, replay
from coordinator.consumer.target import Topics, subscription_metadata
from coordinator.consumer_protocol import ConsumerProtocolError
from coordinator.group import Group, GroupBase, GroupState
from coordinator.state import CoordinatorState, Record, reply
from coordinator.txn_offsets import operation_error
from protocol.errors import KafkaError

__all__ = [
    "LiveGroups", "Membership", "SESSION", "REBALANCE", "JOIN", "SYNC", "kafka_uuid", "remove_member_records",
]

log = logging.getLogger(__name__)

E = ErrorCode

SESSION = "cg-session"  # key: member id
REBALANCE = "cg-rebalance"  # key: member id
JOIN = "cg-join"  # key: member id (classic protocol)
SYNC = "cg-sync"  # key: member id (classic protocol)
#: how long a timer whose fencing could not be written waits before it tries again
#: (Kafka's coordinator timers retry failed operations)
RETRY_BACKOFF_MS = 500


def kafka_uuid() -> str:
    """A new id as Kafka's Uuid.randomUuid().toString() prints it: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def remove_member_records(group_id: str, member_id: str) -> list[CGRecord]:
    """Kafka's removeMember: the tombstones of a member, in the order replay needs them."""
    return [
        current_assignment_tombstone(group_id, member_id),
        target_assignment_tombstone(group_id, member_id),
        member_subscription_tombstone(group_id, member_id),
    ]


class LiveGroups:
    """The coordinator's groups as replay sees them (:class:`~coordinator.consumer.replay.GroupSource`).
    A consumer group created over an empty classic group (whose tombstone the same batch
    wrote) takes over its offsets."""

    def __init__(self, state: CoordinatorState) -> None:
        self._state = state

    def get(self, group_id: str) -> ConsumerGroup | None:
        group = self._state.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def create(self, group_id: str) -> ConsumerGroup:
        state = self._state
        old = state.groups.get(group_id)
        if isinstance(old, ConsumerGroup):
            return old
        if isinstance(old, Group) and not (old.is_(GroupState.EMPTY) and not old.members):
            raise ReplayError(f"group {group_id} is a classic group with members")
        group = ConsumerGroup(group_id, state.partition_for(group_id))
        if old is not None:
            group.adopt_offsets(old)
        state.groups[group_id] = group
        return group

    def remove(self, group_id: str) -> None:
        group = self._state.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            del self._state.groups[group_id]

    def replace_classic(self, classic: Group) -> ConsumerGroup:
        """The classic group's tombstone was written (an online upgrade): an empty consumer
        group, with its offsets, takes its place for the consumer group's records."""
        state = self._state
        group = ConsumerGroup(classic.group_id, classic.partition)
        group.adopt_offsets(classic)
        classic.transition(GroupState.DEAD, state.clock())
        state.groups[classic.group_id] = group
        return group


class Membership:
    """Shared services of the consumer-group operations of ``state``.

    ``topics()`` gives the broker's topics (name -> (id, partitions)); ``assignors`` maps
    the names of group.consumer.assignors to their assignors (the first is the default)."""

    def __init__(
        self,
        state: CoordinatorState,
        topics: Callable[[], Topics],
        assignors: Mapping[str, PartitionAssignor],
        rebalancer: Rebalancer | None = None,
    ) -> None:
        """``rebalancer``: the classic groups' (a group converted back to a classic group
        rebalances with it); without it consumer groups are never downgraded."""
        self.state = state
        self.config = state.config
        self.topics = topics
        self.assignors = dict(assignors)
        self.default_assignor = next(iter(self.assignors))
        self.live = LiveGroups(state)
        self.rebalancer = rebalancer

    # ------------------------------------------------------------------ records
    def append(self, group: GroupBase, encoded: list[Record]) -> None:
        """Append records to the group's partition as one batch. Raises KafkaError with the
        code clients get for a failed write (Kafka's handleOperationException)."""
        if not encoded:
            return
        try:
            self.state.append(group, encoded)
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            log.warning("group %s: writing %d records failed: %s", group.group_id, len(encoded), exc)
            raise KafkaError(operation_error(code) if isinstance(code, ErrorCode) and code is not E.none
                             else E.unknown_server_error, str(exc)) from exc

    def write(
        self, group: GroupBase, records: list[CGRecord], extra: list[Record] | None = None,
        replacing: Group | None = None,
    ) -> None:
        """Append ``extra`` (already encoded: a classic group's tombstone) and ``records`` to
        the group's partition as one batch, then replay ``records`` (over an empty consumer
        group taking the place of ``replacing``, the classic group an upgrade converts).
        Raises KafkaError as :meth:`append`."""
        self.append(group, list(extra or ()) + [encode_record(r) for r in records])
        if replacing is not None:
            self.live.replace_classic(replacing)
        for record in records:
            try:
                replay(self.live, record)
            except Exception:  # a bug: the log has the record, memory may now lag behind it
                log.exception("group %s: applying %s failed", group.group_id, record[0])

    def fence_records(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[CGRecord]:
        """Kafka's consumerGroupFenceMember: remove the member, update the subscription
        metadata without it, bump the group epoch."""
        gid = group.group_id
        records = remove_member_records(gid, member.member_id)
        names, regexes = group.computed_subscriptions(member, None)
        metadata = subscription_metadata(names, regexes, self.topics())
        if metadata != group.subscription_metadata:
            records.append(subscription_metadata_record(gid, metadata))
        records.append(group_epoch_record(gid, group.group_epoch + 1))
        return records

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Fence the member now (raises KafkaError if the records cannot be written); the
        last member using the consumer protocol leaving may turn the group into a classic
        group (Kafka's consumerGroupFenceMember)."""
        if (
            self.rebalancer is not None
            and can_downgrade_after_fence(self.config, group, member.member_id)
            and self.downgrade(group, member.member_id) is not None
        ):
            return
        self.write(group, self.fence_records(group, member))
        self.cancel_timers(group, member.member_id)

    # ------------------------------------------------------------------ migration
    def upgraded(self, classic: Group, group: ConsumerGroup) -> None:
        """After an online upgrade was written: the classic group's parked JoinGroup and
        SyncGroup requests are told to rejoin (Kafka's completeAllJoinFutures /
        completeAllSyncFutures with REBALANCE_IN_PROGRESS) and the converted members' sessions
        start, with their classic session timeouts."""
        for m in list(classic.members.values()):
            pending = classic.set_awaiting_join(m, None)
            if pending is not None:
                reply(pending.respond, join_response(pending.req, E.rebalance_in_progress, m.member_id))
            if m.awaiting_sync is not None:
                pending, m.awaiting_sync = m.awaiting_sync, None
                reply(pending.respond, sync_response(pending.req, E.rebalance_in_progress))
        for mid, member in group.members.items():
            if member.classic is not None:
                self.schedule_session(group, mid, member.classic.session_timeout_ms)
        log.info("group %s: classic group upgraded to a consumer group with %d members", group.group_id,
                 len(group.members))

    def downgrade(
        self, group: ConsumerGroup, leaving: str, joining: ConsumerGroupMember | None = None,
        records: list[CGRecord] | None = None,
    ) -> Group | None:
        """Kafka's convertToClassicGroup: write ``records`` (the operation's own, not replayed),
        the consumer group's tombstones and the classic group replacing it without
        ``leaving`` (and with ``joining``); register it; restart its members' sessions;
        rebalance when a member left. None (nothing done) when a member's metadata is not
        the consumer protocol's; raises KafkaError when the write fails."""
        assert self.rebalancer is not None
        state, gid = self.state, group.group_id
        try:
            classic, encoded = consumer_to_classic(group, leaving, joining, self.topics(), state.clock())
        except ConsumerProtocolError as exc:
            log.warning("Cannot downgrade the consumer group %s: %s", gid, exc)
            return None
        self.append(group, [encode_record(r) for r in records or ()] + encoded)
        classic.adopt_offsets(group)
        group.state = ConsumerGroupState.DEAD
        state.groups[gid] = classic
        for m in classic.members.values():
            self.rebalancer.touch(classic, m)
        log.info("group %s: consumer group downgraded to a classic group with %d members", gid, len(classic.members))
        if joining is None:
            self.rebalancer.prepare_rebalance(classic)
        return classic

    # ------------------------------------------------------------------ timers
    def schedule_session(self, group: ConsumerGroup, member_id: str, timeout_ms: int | None = None) -> None:
        """Kafka's scheduleConsumerGroupSessionTimeout (a heartbeat moves the deadline)."""
        timeout = (self.state.group_int(group.group_id, "consumer.session.timeout.ms",
                                        self.config.group_consumer_session_timeout_ms)
                   if timeout_ms is None else timeout_ms)
        deadline = self.state.clock() + timeout
        group.session_deadlines[member_id] = deadline
        queued = group.session_timer_at.get(member_id)
        if queued is None or queued > deadline:
            group.session_timer_at[member_id] = deadline
            self.state.timers.schedule(deadline, SESSION, group, member_id)

    def schedule_rebalance(self, group: ConsumerGroup, member_id: str, epoch: int, timeout_ms: int) -> None:
        """Kafka's scheduleConsumerGroupRebalanceTimeout: fence the member if it is still at
        ``epoch`` (has not revoked) after ``timeout_ms``."""
        deadline = self.state.clock() + max(timeout_ms, 0)
        group.rebalance_timeouts[member_id] = (deadline, epoch)
        self.state.timers.schedule(deadline, REBALANCE, group, member_id)

    def cancel_rebalance(self, group: ConsumerGroup, member_id: str) -> None:
        group.rebalance_timeouts.pop(member_id, None)

    def schedule_join_if_absent(self, group: ConsumerGroup, member_id: str, timeout_ms: int) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent: a member using the classic
        protocol told to rejoin is fenced if it does not within ``timeout_ms``."""
        if member_id not in group.join_timeouts:
            deadline = self.state.clock() + max(timeout_ms, 0)
            group.join_timeouts[member_id] = deadline
            self.state.timers.schedule(deadline, JOIN, group, member_id)

    def schedule_sync(self, group: ConsumerGroup, member_id: str, timeout_ms: int) -> None:
        """Kafka's scheduleConsumerGroupSyncTimeout: a member using the classic protocol that
        joined is fenced if it does not send SyncGroup within ``timeout_ms``."""
        deadline = self.state.clock() + max(timeout_ms, 0)
        group.sync_timeouts[member_id] = deadline
        self.state.timers.schedule(deadline, SYNC, group, member_id)

    def cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        group.session_deadlines.pop(member_id, None)
        group.rebalance_timeouts.pop(member_id, None)
        group.join_timeouts.pop(member_id, None)
        group.sync_timeouts.pop(member_id, None)

    def on_loaded(self, group: ConsumerGroup) -> None:
        """Kafka's onLoaded: every loaded member gets a full session; those revoking, their
        rebalance timeout again."""
        for mid, member in group.members.items():
            self.schedule_session(group, mid)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance(group, mid, member.member_epoch, member.rebalance_timeout_ms)

    def fire(self, kind: str, group: ConsumerGroup, key: Any, at: int, now: int) -> None:
        """Run a due timer of ``group`` (queued for ``at``); stale entries do nothing."""
        member_id = str(key)
        if kind == SESSION:
            if group.session_timer_at.get(member_id) == at:
                del group.session_timer_at[member_id]
            deadline = group.session_deadlines.get(member_id)
            if deadline is None:
                return
            if deadline > now:
                if member_id not in group.session_timer_at:
                    group.session_timer_at[member_id] = deadline
                    self.state.timers.schedule(deadline, SESSION, group, member_id)
                return
            del group.session_deadlines[member_id]
            self._fence_on_timer(group, member_id, kind, None, "the member session expired")
        elif kind == REBALANCE:
            entry = group.rebalance_timeouts.get(member_id)
            if entry is None or entry[0] != at:
                return
            del group.rebalance_timeouts[member_id]
            self._fence_on_timer(group, member_id, kind, entry[1], "it failed to revoke its partitions in time")
        elif kind in (JOIN, SYNC):
            deadlines = group.join_timeouts if kind == JOIN else group.sync_timeouts
            if deadlines.get(member_id) != at:
                return
            del deadlines[member_id]
            reason = "the classic member failed to join within the rebalance timeout" if kind == JOIN \
                else "the member failed to sync within timeout"
            self._fence_on_timer(group, member_id, kind, None, reason)

    def _fence_on_timer(self, group: ConsumerGroup, member_id: str, kind: str, epoch: int | None, reason: str) -> None:
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced because %s", group.group_id, member_id, reason)
        try:
            self.fence(group, member)
        except KafkaError:
            # try again shortly (the write failed; the member stays until it succeeds)
            retry = self.state.clock() + RETRY_BACKOFF_MS
            if kind == SESSION:
                group.session_deadlines[member_id] = retry
                group.session_timer_at[member_id] = retry
            elif kind == REBALANCE:
                assert epoch is not None
                group.rebalance_timeouts[member_id] = (retry, epoch)
            else:
                (group.join_timeouts if kind == JOIN else group.sync_timeouts)[member_id] = retry
            self.state.timers.schedule(retry, kind, group, member_id)
