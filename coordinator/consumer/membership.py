"""What every consumer-group operation shares: writing records then replaying them, fencing
members, and the members' timers (Kafka's GroupMetadataManager: consumerGroupFenceMember,
the session and rebalance timeouts, onLoaded).

Timers live in the coordinator's shared TimerQueue, keyed by member id; the deadlines are
kept on the group (soft state) and a due entry re-checks them, so an entry left behind by a
heartbeat, a fence or a rejoin is a no-op:

* ``cg-session``: a member that does not heartbeat for group.consumer.session.timeout.ms is
  fenced (a static member that left with epoch -2 too, which ends its grace period);
* ``cg-rebalance``: a member still owing revoked partitions (UNREVOKED_PARTITIONS) when its
  RebalanceTimeoutMs runs out, at the epoch it had when asked, is fenced.

Fencing removes the member (tombstones for its current assignment, target assignment and
subscription), updates the subscription metadata and bumps the group epoch; the next
heartbeat of any member computes the new target assignment.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.assignors.api import PartitionAssignor
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState
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
from coordinator.group import Group, GroupBase, GroupState
from coordinator.state import CoordinatorState, Record
from coordinator.txn_offsets import operation_error
from protocol.errors import KafkaError

__all__ = ["LiveGroups", "Membership", "SESSION", "REBALANCE", "kafka_uuid", "remove_member_records"]

log = logging.getLogger(__name__)

E = ErrorCode

SESSION = "cg-session"  # key: member id
REBALANCE = "cg-rebalance"  # key: member id
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


class Membership:
    """Shared services of the consumer-group operations of ``state``.

    ``topics()`` gives the broker's topics (name -> (id, partitions)); ``assignors`` maps
    the names of group.consumer.assignors to their assignors (the first is the default)."""

    def __init__(
        self,
        state: CoordinatorState,
        topics: Callable[[], Topics],
        assignors: Mapping[str, PartitionAssignor],
    ) -> None:
        self.state = state
        self.config = state.config
        self.topics = topics
        self.assignors = dict(assignors)
        self.default_assignor = next(iter(self.assignors))
        self.live = LiveGroups(state)

    # ------------------------------------------------------------------ records
    def write(self, group: GroupBase, records: list[CGRecord], extra: list[Record] | None = None) -> None:
        """Append ``extra`` (already encoded: a classic group's tombstone) and ``records`` to
        the group's partition as one batch, then replay ``records``. Raises KafkaError with
        the code clients get for a failed write (Kafka's handleOperationException)."""
        encoded = list(extra or ()) + [encode_record(r) for r in records]
        if not encoded:
            return
        try:
            self.state.append(group, encoded)
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            log.warning("group %s: writing %d records failed: %s", group.group_id, len(encoded), exc)
            raise KafkaError(operation_error(code) if isinstance(code, ErrorCode) and code is not E.none
                             else E.unknown_server_error, str(exc)) from exc
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
        """Fence the member now (raises KafkaError if the records cannot be written)."""
        self.write(group, self.fence_records(group, member))
        self.cancel_timers(group, member.member_id)

    # ------------------------------------------------------------------ timers
    def schedule_session(self, group: ConsumerGroup, member_id: str, timeout_ms: int | None = None) -> None:
        """Kafka's scheduleConsumerGroupSessionTimeout (a heartbeat moves the deadline)."""
        timeout = self.config.group_consumer_session_timeout_ms if timeout_ms is None else timeout_ms
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

    def cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        group.session_deadlines.pop(member_id, None)
        group.rebalance_timeouts.pop(member_id, None)

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
            self._fence_on_timer(group, member_id, None, "the member session expired")
        elif kind == REBALANCE:
            entry = group.rebalance_timeouts.get(member_id)
            if entry is None or entry[0] != at:
                return
            del group.rebalance_timeouts[member_id]
            self._fence_on_timer(group, member_id, entry[1], "it failed to revoke its partitions in time")

    def _fence_on_timer(self, group: ConsumerGroup, member_id: str, epoch: int | None, reason: str) -> None:
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced because %s", group.group_id, member_id, reason)
        try:
            self.fence(group, member)
        except KafkaError:
            # try again shortly (the write failed; the member stays until it succeeds)
            retry = self.state.clock() + RETRY_BACKOFF_MS
            if epoch is None:
                group.session_deadlines[member_id] = retry
                group.session_timer_at[member_id] = retry
                self.state.timers.schedule(retry, SESSION, group, member_id)
            else:
                group.rebalance_timeouts[member_id] = (retry, epoch)
                self.state.timers.schedule(retry, REBALANCE, group, member_id)
