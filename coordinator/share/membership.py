"""What every share-group operation shares: writing records then replaying them, the target
assignment, fencing members, the members' session timers (Kafka's GroupMetadataManager:
shareGroupFenceMember, scheduleShareGroupSessionTimeout, updateTargetAssignment, onLoaded),
and the hooks through which the broker shell learns what the share-partitions need.

Timers live in the coordinator's shared TimerQueue (kind ``sg-session``, keyed by member id);
the deadline is kept on the group and a due entry re-checks it, so entries left behind by
heartbeats are no-ops. A member that does not heartbeat for group.share.session.timeout.ms is
fenced: its records are deleted, the subscription metadata updated and the group epoch
bumped, and the next heartbeat of any member computes the new target assignment.

Share-partition initialisation (KIP-932): a share-partition is assigned only once its state
exists in ``__share_group_state``. When a heartbeat finds subscribed share-partitions that are
neither initialised nor being initialised, the coordinator either asks the broker shell to
initialise them (:meth:`ShareGroupHooks.initialize`; the shell calls the share coordinator's
InitializeShareGroupState, then ``GroupCoordinator.share_partitions_initialized``, which writes
ShareGroupStatePartitionMetadata and bumps the group epoch so that the next heartbeat assigns
them), or, with hooks that do not initialise state (the default, until the share coordinator is
wired in), records them as initialised in the heartbeat's own batch.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.group import TopicMetadata
from coordinator.consumer.replay import ReplayError
from coordinator.consumer.target import Topics, subscription_metadata
from coordinator.share.assignor import ShareAssignmentSpec, ShareMemberSpec, SimpleAssignor
from coordinator.share.group import ShareGroup, ShareGroupMember
from coordinator.share.records import (
    SGRecord,
    assignment_epoch_record,
    encode_record,
    group_epoch_record,
    remove_member_records,
    state_partition_metadata_record,
    target_assignment_record,
)
from coordinator.share.replay import replay
from coordinator.state import CoordinatorState
from coordinator.txn_offsets import operation_error
from protocol.errors import KafkaError

__all__ = ["SESSION", "ShareGroupHooks", "ShareMembership", "SharePartitions"]

log = logging.getLogger(__name__)

E = ErrorCode

SESSION = "sg-session"  # key: member id
#: how long a session timer whose fencing could not be written waits before it tries again
RETRY_BACKOFF_MS = 500

#: topic id -> partitions
SharePartitions = Mapping[uuid.UUID, frozenset[int]]


class ShareGroupHooks:
    """What the broker shell is told about share groups (override what it needs). Called
    synchronously from inside the coordinator once the records that made the change are
    written; an implementation must not call back into the coordinator before returning
    (schedule the work on the loop instead).

    ``initializes_state``: True once the shell initialises share-partitions through the
    share coordinator (:meth:`initialize`); False (the default) makes the group coordinator
    count new share-partitions as initialised at once."""

    initializes_state: bool = False

    def initialize(self, group_id: str, group_epoch: int, partitions: SharePartitions) -> None:
        """Initialise these share-partitions in ``__share_group_state`` (InitializeShareGroupState
        at ``group_epoch``), then call ``GroupCoordinator.share_partitions_initialized`` (or
        ``share_partitions_initialization_failed``)."""

    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left or was fenced: the share-partitions release the records it had
        acquired (their delivery counts stay)."""

    def assignment_changed(self, group_id: str, member_id: str, assignment: SharePartitions) -> None:
        """The member's current assignment is now ``assignment`` (ShareFetch may check that
        a member fetches only what it was assigned)."""

    def group_deleted(self, group_id: str, partitions: SharePartitions) -> None:
        """The share group was deleted (DeleteGroups): delete its share-partitions' state in
        ``__share_group_state`` (DeleteShareGroupState)."""


class LiveShareGroups:
    """The coordinator's share groups as replay sees them (a ShareGroupSource)."""

    def __init__(self, state: CoordinatorState) -> None:
        self._state = state

    def get(self, group_id: str) -> ShareGroup | None:
        group = self._state.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def create(self, group_id: str) -> ShareGroup:
        state = self._state
        old = state.groups.get(group_id)
        if isinstance(old, ShareGroup):
            return old
        if old is not None:
            raise ReplayError(f"group {group_id} is a {old.protocol_type or 'classic'} group, not a share group")
        group = state.groups[group_id] = ShareGroup(group_id, state.partition_for(group_id))
        return group

    def remove(self, group_id: str) -> None:
        if isinstance(self._state.groups.get(group_id), ShareGroup):
            del self._state.groups[group_id]


class ShareMembership:
    """Shared services of the share-group operations of ``state``. ``topics()`` gives the
    broker's topics (name -> (id, partitions))."""

    def __init__(
        self,
        state: CoordinatorState,
        topics: Callable[[], Topics],
        assignor: SimpleAssignor,
        hooks: ShareGroupHooks | None = None,
    ) -> None:
        self.state = state
        self.config = state.config
        self.topics = topics
        self.assignor = assignor
        self.hooks = hooks or ShareGroupHooks()
        self.live = LiveShareGroups(state)

    # ------------------------------------------------------------------ records
    def write(self, group: ShareGroup, records: list[SGRecord]) -> None:
        """Append the records to the group's partition as one batch, then replay them.
        Raises KafkaError with the code clients get for a failed write."""
        if not records:
            return
        try:
            self.state.append(group, [encode_record(r) for r in records])
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            log.warning("share group %s: writing %d records failed: %s", group.group_id, len(records), exc)
            raise KafkaError(operation_error(code) if isinstance(code, ErrorCode) and code is not E.none
                             else E.unknown_server_error, str(exc)) from exc
        for record in records:
            try:
                replay(self.live, record)
            except Exception:  # a bug: the log has the record, memory may now lag behind it
                log.exception("share group %s: applying %s failed", group.group_id, record[0])

    # ------------------------------------------------------------------ assignment
    def metadata(self, names: Mapping[str, int]) -> dict[str, TopicMetadata]:
        """The subscription metadata of these subscribed names (the existing topics)."""
        return subscription_metadata(names, (), self.topics())

    def target_assignment(
        self,
        group: ShareGroup,
        epoch: int,
        metadata: Mapping[str, TopicMetadata],
        assignable: SharePartitions,
        updated: ShareGroupMember | None = None,
    ) -> tuple[list[SGRecord], dict[str, Any]]:
        """Kafka's updateTargetAssignment for a share group: the members (``updated`` added
        or replacing its older self) assigned by the simple assignor. Returns the records (a
        TargetAssignmentMember record per member whose target changed, then the target
        assignment epoch) and every member's new target."""
        members = dict(group.members)
        if updated is not None:
            members[updated.member_id] = updated
        ids = {name: t.topic_id for name, t in metadata.items()}
        sizes = {t.topic_id: t.num_partitions for t in metadata.values()}
        specs = {
            mid: ShareMemberSpec(
                subscribed_topic_ids=frozenset(ids[n] for n in m.subscribed_topic_names if n in ids),
                assigned=group.target_of(mid),
            )
            for mid, m in members.items()
        }
        allowed = {t: frozenset(p for p in ps if p < sizes[t]) for t, ps in assignable.items() if t in sizes}
        result = self.assignor.assign(ShareAssignmentSpec(members=specs, assignable=allowed))
        new = {mid: result.get(mid, {}) for mid in specs}
        records = [
            target_assignment_record(group.group_id, mid, a)
            for mid, a in sorted(new.items())
            if group.target_assignment.get(mid) != a
        ]
        records.append(assignment_epoch_record(group.group_id, epoch))
        log.info("share group %s: new target assignment for epoch %d", group.group_id, epoch)
        return records, new

    # ------------------------------------------------------------------ fencing
    def fence_records(self, group: ShareGroup, member: ShareGroupMember) -> list[SGRecord]:
        """Kafka's shareGroupFenceMember: remove the member and bump the group epoch (the
        subscription metadata without it is the group's memory only, as Kafka 4.2 keeps its
        hash in the epoch record)."""
        gid = group.group_id
        records = remove_member_records(gid, member.member_id)
        records.append(group_epoch_record(gid, group.group_epoch + 1))
        return records

    def fence(self, group: ShareGroup, member: ShareGroupMember) -> None:
        """Fence the member now (raises KafkaError if the records cannot be written)."""
        self.write(group, self.fence_records(group, member))
        live = self.live.get(group.group_id)
        if live is not None:
            live.set_subscription_metadata(self.metadata(live.subscribed_topic_names))
        group.session_deadlines.pop(member.member_id, None)
        self._call("member_left", group.group_id, member.member_id)

    # ------------------------------------------------------------------ initialisation
    def uninitialized(self, group: ShareGroup, metadata: Mapping[str, TopicMetadata]) -> dict[uuid.UUID, frozenset[int]]:
        """The share-partitions of the subscribed topics that are neither initialised nor
        being initialised (Kafka's subscribedTopicsChangeMap)."""
        out = {}
        for t in metadata.values():
            done = group.initialized.get(t.topic_id, ("", frozenset()))[1] | group.initializing.get(t.topic_id, frozenset())
            missing = frozenset(range(t.num_partitions)) - done
            if missing:
                out[t.topic_id] = missing
        return out

    def initialized_record(
        self, group: ShareGroup, partitions: SharePartitions, names: Mapping[uuid.UUID, str]
    ) -> tuple[SGRecord, dict[uuid.UUID, frozenset[int]]]:
        """The ShareGroupStatePartitionMetadata record with ``partitions`` initialised too,
        and the assignable share-partitions it makes."""
        initialized = dict(group.initialized)
        for t, ps in partitions.items():
            name, have = initialized.get(t, (names.get(t, ""), frozenset()))
            initialized[t] = (name or names.get(t, ""), have | ps)
        # still asked for and not initialised: Kafka's InitializingTopics
        initializing = {
            t: (names.get(t, ""), rest)
            for t, ps in group.initializing.items()
            if (rest := ps - initialized.get(t, ("", frozenset()))[1])
        }
        record = state_partition_metadata_record(group.group_id, initialized, group.deleting, initializing)
        return record, {t: ps for t, (_, ps) in initialized.items()}

    def partitions_initialized(self, group: ShareGroup, partitions: SharePartitions) -> None:
        """The shell initialised these share-partitions (Kafka's initializeShareGroupState):
        record them and bump the group epoch so that the next heartbeat assigns them.
        Raises KafkaError if the write fails."""
        names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
        names.update({t: name for name, (t, _) in self.topics().items()})
        record, _ = self.initialized_record(group, partitions, names)
        self.write(group, [record, group_epoch_record(group.group_id, group.group_epoch + 1)])

    def initialization_failed(self, group: ShareGroup, partitions: SharePartitions) -> None:
        """The shell could not initialise these share-partitions (Kafka's
        uninitializeShareGroupState): forget that they were asked for, so that the next
        heartbeat asks again."""
        for t, ps in partitions.items():
            rest = group.initializing.get(t, frozenset()) - ps
            if rest:
                group.initializing[t] = rest
            else:
                group.initializing.pop(t, None)

    def request_initialization(self, group: ShareGroup, partitions: SharePartitions) -> None:
        """After the heartbeat's records are written: ask the shell to initialise these."""
        if not partitions:
            return
        for t, ps in partitions.items():
            group.initializing[t] = group.initializing.get(t, frozenset()) | ps
        self._call("initialize", group.group_id, group.group_epoch, dict(partitions))

    # ------------------------------------------------------------------ timers
    def schedule_session(self, group: ShareGroup, member_id: str) -> None:
        """Kafka's scheduleShareGroupSessionTimeout (a heartbeat moves the deadline)."""
        deadline = self.state.clock() + self.state.group_int(group.group_id, "share.session.timeout.ms",
                                                             self.config.group_share_session_timeout_ms)
        group.session_deadlines[member_id] = deadline
        queued = group.session_timer_at.get(member_id)
        if queued is None or queued > deadline:
            group.session_timer_at[member_id] = deadline
            self.state.timers.schedule(deadline, SESSION, group, member_id)

    def on_loaded(self, group: ShareGroup) -> None:
        """Kafka's onLoaded: every loaded member gets a full session."""
        for mid in group.members:
            self.schedule_session(group, mid)

    def fire(self, kind: str, group: ShareGroup, key: Any, at: int, now: int) -> None:
        """Run a due timer of ``group`` (queued for ``at``); stale entries do nothing."""
        member_id = str(key)
        if kind != SESSION:
            return
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
        member = group.members.get(member_id)
        if member is None:
            return
        log.info("share group %s: member %s fenced because its session expired", group.group_id, member_id)
        try:
            self.fence(group, member)
        except KafkaError:
            retry = self.state.clock() + RETRY_BACKOFF_MS
            group.session_deadlines[member_id] = retry
            group.session_timer_at[member_id] = retry
            self.state.timers.schedule(retry, SESSION, group, member_id)

    # ------------------------------------------------------------------ hooks
    def _call(self, name: str, *args: Any) -> None:
        try:
            getattr(self.hooks, name)(*args)
        except Exception:  # the shell's hook must not corrupt group state half-way
            log.exception("share-group hook %s failed", name)

    def assignment_changed(self, group_id: str, member: ShareGroupMember) -> None:
        self._call("assignment_changed", group_id, member.member_id, dict(member.assigned))

    def group_deleted(self, group: ShareGroup) -> None:
        self._call("group_deleted", group.group_id, group.assignable())
