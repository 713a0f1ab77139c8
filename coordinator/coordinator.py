"""GroupCoordinator: Kafka's group coordinator (classic and KIP-848 consumer groups) as a
pure state machine.

The broker (an asyncio shell) owns sockets, the clock source and the ``__consumer_offsets``
partition logs; the coordinator owns everything else. It follows Apache Kafka's
GroupCoordinator (core/.../GroupCoordinator.scala) and its successor ClassicGroup/
GroupMetadataManager: same states, same error codes in the same precedence, same records.

This class is the coordinator's one entry point. It creates the shared
:class:`~coordinator.state.CoordinatorState` and composes the parts that act on it:

* ``coordinator/classic/``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance
  with its membership timers,
* ``coordinator/consumer/``: KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe,
  server-side assignors, reconciliation and the members' session and revocation timers,
  members using the classic protocol in consumer groups and the online migration between
  classic and consumer groups (group.consumer.migration.policy),
* ``coordinator/share/``: KIP-932's ShareGroupHeartbeat and ShareGroupDescribe, the simple
  assignor and the members' session timers; what the share-partitions need from it goes to
  the broker shell through :class:`~coordinator.share.membership.ShareGroupHooks`,
* ``coordinator/offsets.py``: OffsetCommit, OffsetFetch, OffsetDelete, offset expiry,
* ``coordinator/txn_offsets.py``: TxnOffsetCommit and the pending transactional offsets,
* ``coordinator/loader.py``: replaying ``__consumer_offsets`` partitions,
* ``coordinator/admin.py``: DescribeGroups, ListGroups, DeleteGroups.

How the broker drives it
------------------------
* Construct ``GroupCoordinator(config, clock, log, topics=...)``; ``clock()`` returns wall-clock ms and
  ``log.append(partition, [(key, value|None), ...])`` synchronously appends records to
  ``__consumer_offsets-<partition>`` (one batch, all or nothing) or raises; with
  ``producer_id=, producer_epoch=`` (TxnOffsetCommit) the batch is transactional.
* ``topics()`` returns the broker's topics as ``{name: (topic id, number of partitions)}``;
  consumer groups resolve their subscriptions (names and regexes) against it on every
  heartbeat, so new topics and partitions are assigned without a restart.
* For every request call the operation with the kio request and a ``respond`` callback.
  ``respond`` is called exactly once, maybe later (JoinGroup and SyncGroup park until the
  rebalance moves on), always from inside one of the coordinator's methods.
* Call :meth:`poll` when :meth:`next_deadline_ms` says so (operations also run due timers
  themselves on the way out).
* At start-up, for each ``__consumer_offsets`` partition: :meth:`load_legacy_partition` (the
  records of :meth:`legacy_partition`, unless it is the partition itself), :meth:`load_partition`
  (any number of times, records in offset order), then :meth:`finished_loading`, and the
  tombstones it asks for into the legacy partition. Until then the groups of that partition
  answer COORDINATOR_LOAD_IN_PROGRESS.
* Transactions: before :meth:`txn_offset_commit`, verify with the transaction coordinator
  that the partition :meth:`txn_offset_commit_partition` names is in the producer's
  transaction (KIP-890) and pass its answer; after writing a COMMIT/ABORT marker into a
  ``__consumer_offsets`` partition, call :meth:`complete_transaction`.
* Replicated logs (``log.high_watermark(partition)``): what the coordinator wrote shows
  (committed offsets, a SyncGroup's assignment) only once committed. After waiting for the
  ISR, report each append's outcome with :meth:`on_committed` or :meth:`on_write_failed`,
  before releasing the answers of the operation that made it (coordinator/writes.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.admin import GROUP_AUTHORIZED_OPERATIONS, GroupAdmin
from coordinator.classic import Heartbeat, JoinGroup, LeaveGroup, Rebalancer, SyncGroup
from coordinator.config import CoordinatorConfig
from coordinator.consumer.assignors import ASSIGNORS, PartitionAssignor
from coordinator.consumer.classic_members import ClassicMembers
from coordinator.consumer.describe import ConsumerGroupDescribe
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.heartbeat import ConsumerGroupHeartbeat
from coordinator.consumer.membership import Membership
from coordinator.loader import GroupLoader, LoadItem
from coordinator.offsets import Offsets
from coordinator.placement import Relocation, legacy_partition
from coordinator.share.assignor import SHARE_ASSIGNORS
from coordinator.share.describe import ShareGroupDescribe
from coordinator.share.group import ShareGroup
from coordinator.share.heartbeat import ShareGroupHeartbeat, share_group_of
from coordinator.share.membership import ShareGroupHooks, ShareMembership, SharePartitions
from coordinator.share.offsets import AlterPlan, DeletePlan, ShareGroupOffsets
from coordinator.state import AnyGroup, CoordinatorState, OffsetsLog, Respond, java_string_hash, partition_for_group
from coordinator.txn_offsets import TxnOffsets
from protocol.errors import KafkaError

__all__ = ["GroupCoordinator", "OffsetsLog", "ShareGroupHooks", "Topics", "java_string_hash", "partition_for_group"]

#: the broker's topics: name -> (topic id, number of partitions)
Topics = Mapping[str, tuple[uuid.UUID, int]]


def _no_topics() -> Topics:
    return {}


def _enabled_assignors(config: CoordinatorConfig, known: Mapping[str, PartitionAssignor]) -> dict[str, PartitionAssignor]:
    """The assignors group.consumer.assignors names, in its order (the first is the default)."""
    unknown = [name for name in config.group_consumer_assignors if name not in known]
    if unknown:
        raise ValueError(
            f"group.consumer.assignors: unknown assignors {unknown} (known: {', '.join(known)})"
        )
    return {name: known[name] for name in config.group_consumer_assignors}

log = logging.getLogger(__name__)


class GroupCoordinator:
    """All groups of this broker. Not thread-safe; call from one thread (the loop)."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Callable[[], int],
        log: OffsetsLog,
        *,
        partition_exists: Callable[[str, int], bool] | None = None,
        topics: Callable[[], Topics] | None = None,
        assignors: Mapping[str, PartitionAssignor] | None = None,
        share_hooks: ShareGroupHooks | None = None,
        group_config: Callable[[str, str], str | None] | None = None,
    ) -> None:
        """``partition_exists(topic, partition)``, if given, makes OffsetCommit answer
        UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (Kafka's KafkaApis check).
        ``topics()``: the broker's topics, ``{name: (topic id, partitions)}`` (default: none).
        ``assignors``: the server assignors by name (default: coordinator.consumer.assignors'
        ASSIGNORS); config.group_consumer_assignors picks among them (ValueError naming
        group.consumer.assignors for an unknown one). ``share_hooks``: what the broker shell
        is told about share groups (coordinator/share/membership.py; default: nothing, and
        new share-partitions count as initialised at once). ``group_config(group id, key)``: a
        group's override of a group config (consumer.session.timeout.ms, ...), or None."""
        self.config = config
        self._state = state = CoordinatorState(config, clock, log)
        if group_config is not None:
            state.group_config = group_config
        self._rebalance = Rebalancer(state)
        self._membership = Membership(
            state, topics or _no_topics, _enabled_assignors(config, assignors or ASSIGNORS), self._rebalance
        )
        self._cg_heartbeat = ConsumerGroupHeartbeat(self._membership)
        self._cg_describe = ConsumerGroupDescribe(self._membership, GROUP_AUTHORIZED_OPERATIONS)
        classic_members = ClassicMembers(self._membership)
        self._join = JoinGroup(state, self._rebalance, classic_members)
        self._sync = SyncGroup(state, self._rebalance, classic_members)
        self._heartbeat = Heartbeat(state, self._rebalance, classic_members)
        self._leave = LeaveGroup(state, self._rebalance, classic_members)
        self._offsets = Offsets(state, self._rebalance, partition_exists)
        self._txn_offsets = TxnOffsets(state, partition_exists)
        share_assignor = config.group_share_assignors[0]
        if share_assignor not in SHARE_ASSIGNORS:
            raise ValueError(
                f"group.share.assignors: unknown assignor {share_assignor} (known: {', '.join(SHARE_ASSIGNORS)})"
            )
        self._share = ShareMembership(state, topics or _no_topics, SHARE_ASSIGNORS[share_assignor], share_hooks)
        self._sg_heartbeat = ShareGroupHeartbeat(self._share)
        self._sg_describe = ShareGroupDescribe(self._share, GROUP_AUTHORIZED_OPERATIONS)
        self._sg_offsets = ShareGroupOffsets(self._share)
        self._loader = GroupLoader(state, self._rebalance, self._membership.on_loaded, self._share.on_loaded)
        self._admin = GroupAdmin(state, self._share.group_deleted)

    # ================================================================ groups
    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition (and so the coordinator) of a group."""
        return self._state.partition_for(group_id)

    def group(self, group_id: str) -> AnyGroup | None:
        """Read-only view for the broker/CLI (do not mutate): a classic
        :class:`~coordinator.group.Group` or a :class:`~coordinator.consumer.group.ConsumerGroup`."""
        return self._state.groups.get(group_id)

    def groups(self) -> list[AnyGroup]:
        return list(self._state.groups.values())

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether ConsumerGroupHeartbeat is served (group.coordinator.rebalance.protocols
        lists "consumer"); when not, the broker should not advertise it (Kafka answers
        UNSUPPORTED_VERSION, and so does :meth:`consumer_group_heartbeat`)."""
        return self.config.consumer_protocol_enabled

    # ================================================================ timers
    def next_deadline_ms(self) -> int | None:
        """Earliest time poll() has work to do (may be early: stale timers are lazily skipped)."""
        nxt = self._offsets.next_expiry_ms
        timer = self._state.timers.next_deadline()
        if timer is not None and timer < nxt:
            nxt = timer
        return nxt

    def poll(self) -> None:
        """Run every timer that is due: session and new-member timeouts, rebalance (join)
        and sync timeouts, the initial rebalance delay, pending member ids, consumer-group
        members' session and revocation timeouts, offset expiry."""
        state = self._state
        now = state.clock()
        while (timer := state.timers.pop_due(now)) is not None:
            at, kind, group, key = timer
            if state.groups.get(group.group_id) is not group:
                continue  # the group was deleted or reloaded since
            try:
                if isinstance(group, ConsumerGroup):
                    self._membership.fire(kind, group, key, at, now)
                elif isinstance(group, ShareGroup):
                    self._share.fire(kind, group, key, at, now)
                else:
                    self._rebalance.fire(kind, group, key, at, now)
            except Exception:  # a bug must not stop the other groups' timers
                log.exception("group %s: %s timer failed", group.group_id, kind)
            now = state.clock()
        self._offsets.maybe_expire(now)

    # ================================================================ loading
    def start_loading(self, partitions: Iterable[int]) -> None:
        """Mark partitions as loading before their records are read (optional: load_partition
        does it too). Their groups answer COORDINATOR_LOAD_IN_PROGRESS until finished_loading."""
        self._loader.start(partitions)

    def is_loading(self, partition: int) -> bool:
        return self._loader.is_loading(partition)

    def load_partition(self, partition: int, records: Iterable[LoadItem], *, high_watermark: int | None = None) -> None:
        """Replay ``__consumer_offsets-<partition>`` in log order: (offset, key, value) records,
        or (offset, key, value, producer_id, transactional) ones, and
        :class:`~coordinator.loader.TxnMarker` for the COMMIT/ABORT control batches. May be
        called repeatedly (chunks). Never raises for bad records: unknown versions are
        skipped, malformed ones logged and skipped. Transactional offsets stay pending until
        their producer's marker; those still pending at the end wait for the marker the
        transaction coordinator will write (:meth:`complete_transaction`).
        ``high_watermark``: a new leader's records from there on are not committed yet; the
        offsets they commit show once :meth:`on_committed` passes the loaded log end."""
        self._loader.replay(partition, records, high_watermark)

    def legacy_partition(self, partition: int) -> int:
        """The partition where Krait's former placement put some of ``partition``'s groups
        (coordinator/placement.py); the partition itself when none can be elsewhere."""
        return legacy_partition(partition, self.config.offsets_topic_num_partitions)

    def load_legacy_partition(self, partition: int, records: Iterable[LoadItem]) -> None:
        """Before :meth:`load_partition`: replay the records of :meth:`legacy_partition`
        (all of them, in log order, as for load_partition; only this partition's groups
        are kept). Those groups are moved here when the load finishes."""
        self._loader.replay_legacy(partition, self.legacy_partition(partition), records)

    def finished_loading(self, partition: int) -> Relocation | None:
        """Build the partition's groups from what was replayed and start serving them.
        Groups found in the legacy partition are written into this one; the answer names
        their keys to delete there, which the broker does once those writes are durable
        (None: nothing to delete)."""
        return self._loader.finish(partition)

    def serve_only(self, partitions: Iterable[int]) -> None:
        """Cluster mode: serve the groups of these partitions only (this broker leads
        them); others answer NOT_COORDINATOR. Load each newly served one before use."""
        state = self._state
        state.owned = set(partitions) if state.owned is None else state.owned | set(partitions)

    def unload_partition(self, partition: int) -> int:
        """Leadership of the partition moved away (Kafka's onResignation): forget its
        groups, which answer NOT_COORDINATOR from now on. Returns how many were dropped."""
        state = self._state
        # what waited for the partition's high watermark will not hear of it here any more:
        # members parked on such a write are answered before their groups go
        state.writes.fail_all(partition, ErrorCode.not_leader_or_follower)
        # the next leadership's log may end lower (truncated): its load says where
        state.log_end.pop(partition, None)
        if state.owned is not None:
            state.owned.discard(partition)
        state.loading.pop(partition, None)
        dropped = [g for g in state.groups.values() if g.partition == partition]
        for group in dropped:
            state.kill(group)
        return len(dropped)

    def served_partitions(self) -> set[int] | None:
        return None if self._state.owned is None else set(self._state.owned)

    # ================================================================ replication
    def on_committed(self, partition: int, offset: int) -> None:
        """The high watermark of ``__consumer_offsets-<partition>`` reached ``offset``: what
        the coordinator wrote below it takes effect (offsets show, assignments are sent)."""
        try:
            self._state.writes.committed(partition, offset)
        finally:
            self.poll()

    def on_write_failed(self, partition: int, end: int, error: ErrorCode) -> None:
        """The append to ``__consumer_offsets-<partition>`` that ended at log offset ``end``
        did not reach the ISR (``error``: REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...):
        its effects are dropped as Kafka drops them (committed offsets stay as they were,
        the members waiting for an assignment are told the error)."""
        try:
            self._state.writes.failed(partition, end, error)
        finally:
            self.poll()

    # ================================================================ membership
    def join_group(self, req: Any, respond: Respond, *, client_id: str, client_host: str) -> None:
        """JoinGroup v0-9. ``client_host`` is shown by DescribeGroups; Kafka's form is
        ``"/" + ip``."""
        try:
            self._join(req, respond, client_id, client_host)
        finally:
            self.poll()

    def sync_group(self, req: Any, respond: Respond) -> None:
        """SyncGroup v0-5."""
        try:
            self._sync(req, respond)
        finally:
            self.poll()

    def heartbeat(self, req: Any, respond: Respond) -> None:
        """Heartbeat v0-4."""
        try:
            self._heartbeat(req, respond)
        finally:
            self.poll()

    def leave_group(self, req: Any, respond: Respond) -> None:
        """LeaveGroup v0-5 (v3+ batches members, each with its own error)."""
        try:
            self._leave(req, respond)
        finally:
            self.poll()

    # ================================================================ consumer groups (KIP-848)
    def consumer_group_heartbeat(self, req: Any, respond: Respond, *, client_id: str = "", client_host: str = "") -> None:
        """ConsumerGroupHeartbeat v0-1: join (epoch 0), heartbeat, leave (-1; -2 for a static
        member coming back). ``client_id`` and ``client_host`` (Kafka's form, "/" + ip) are
        the request's, shown by ConsumerGroupDescribe."""
        try:
            self._cg_heartbeat(req, respond, client_id, client_host)
        finally:
            self.poll()

    def consumer_group_describe(
        self, req: Any, respond: Respond, authorized_operations: Callable[[str], int] | None = None
    ) -> None:
        """ConsumerGroupDescribe v0-1. GROUP_ID_NOT_FOUND for unknown and classic groups.
        ``authorized_operations(group_id)`` as for :meth:`describe_groups`."""
        self._cg_describe(req, respond, authorized_operations)
        self.poll()

    # ================================================================ share groups (KIP-932)
    def share_group_heartbeat(self, req: Any, respond: Respond, *, client_id: str = "", client_host: str = "") -> None:
        """ShareGroupHeartbeat v1: join (epoch 0), heartbeat, leave (-1). ``client_id`` and
        ``client_host`` (Kafka's form, "/" + ip) are shown by ShareGroupDescribe."""
        try:
            self._sg_heartbeat(req, respond, client_id, client_host)
        finally:
            self.poll()

    def share_group_describe(
        self, req: Any, respond: Respond, authorized_operations: Callable[[str], int] | None = None
    ) -> None:
        """ShareGroupDescribe v1. GROUP_ID_NOT_FOUND for unknown groups and other types."""
        self._sg_describe(req, respond, authorized_operations)
        self.poll()

    def share_assignment(self, group_id: str, member_id: str) -> SharePartitions | None:
        """The share-partitions the member is assigned now (ShareFetch's check that a member
        fetches what it may); None when the group or member is unknown here."""
        group = self._state.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return None
        member = group.members.get(member_id)
        return None if member is None else dict(member.assigned)

    def share_partitions_initialized(self, group_id: str, partitions: SharePartitions) -> ErrorCode:
        """The share coordinator initialised these share-partitions of the group (after
        :meth:`ShareGroupHooks.initialize`): record it; the next heartbeat assigns them.
        Answers the error of the write (NONE, NOT_COORDINATOR, GROUP_ID_NOT_FOUND, ...)."""
        try:
            err = self._state.group_error(group_id, allow_empty=False)
            if err is not None:
                return err
            self._share.partitions_initialized(share_group_of(self._state.groups, group_id), partitions)
            return ErrorCode.none
        except KafkaError as exc:
            return exc.error_code
        finally:
            self.poll()

    def share_partitions_initialization_failed(self, group_id: str, partitions: SharePartitions) -> None:
        """The share coordinator could not initialise these: the next heartbeat asks again."""
        group = self._state.groups.get(group_id)
        if isinstance(group, ShareGroup):
            self._share.initialization_failed(group, partitions)

    # The share-group offset admin APIs: each step is pure; the broker shell makes the
    # persister calls between them (coordinator/share/offsets.py).
    def share_group_initialized_partitions(self, group_id: str) -> tuple[ErrorCode | None, SharePartitions]:
        """DescribeShareGroupOffsets without topics: the share-partitions the group initialised."""
        return self._sg_offsets.initialized_partitions(group_id)

    def alter_share_group_offsets(self, group_id: str, topics: Any) -> AlterPlan:
        """AlterShareGroupOffsets, first step: what to initialise, at which state epoch."""
        return self._sg_offsets.alter(group_id, topics)

    def share_group_offsets_altered(self, group_id: str, partitions: SharePartitions) -> ErrorCode:
        """AlterShareGroupOffsets, last step: record the initialised share-partitions."""
        try:
            self._sg_offsets.altered(group_id, partitions)
            return ErrorCode.none
        except KafkaError as exc:
            return exc.error_code
        finally:
            self.poll()

    def delete_share_group_offsets(self, group_id: str, topic_names: list[str]) -> DeletePlan:
        """DeleteShareGroupOffsets, first step: the topics move to DeletingTopics."""
        try:
            return self._sg_offsets.delete_begin(group_id, topic_names)
        except KafkaError as exc:
            return DeletePlan(group_id, exc.error_code, exc.message)
        finally:
            self.poll()

    def share_group_offsets_deleted(self, group_id: str, topic_ids: list[uuid.UUID]) -> None:
        """DeleteShareGroupOffsets, last step: their state is gone; they leave DeletingTopics."""
        try:
            self._sg_offsets.delete_complete(group_id, topic_ids)
        finally:
            self.poll()

    # ================================================================ offsets
    def offset_commit(self, req: Any, respond: Respond) -> None:
        """OffsetCommit v2-9."""
        try:
            self._offsets.commit(req, respond)
        finally:
            self.poll()

    def offset_fetch(self, req: Any, respond: Respond) -> None:
        """OffsetFetch v1-9 (v8+ several groups). Offsets never committed come back as -1."""
        self._offsets.fetch(req, respond)
        self.poll()

    def txn_offset_commit(self, req: Any, respond: Respond, *, verification: ErrorCode | None = None) -> None:
        """TxnOffsetCommit v0-4: the offsets are written as a transactional batch of the
        request's producer and stay pending (invisible to OffsetFetch) until
        :meth:`complete_transaction`. ``verification`` is the transaction coordinator's
        answer when the broker verified :meth:`txn_offset_commit_partition` in the
        producer's transaction (KIP-890); None when it did not ask."""
        try:
            self._txn_offsets.commit(req, respond, verification)
        finally:
            self.poll()

    def txn_offset_commit_partition(self, req: Any) -> int | None:
        """The ``__consumer_offsets`` partition a TxnOffsetCommit writes to, which the broker
        verifies with the transaction coordinator first; None when the request will be
        answered without a write (unknown partitions only, no group id, not coordinator)."""
        return self._txn_offsets.write_partition(req)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool, marker_end: int | None = None) -> int:
        """The transaction of ``producer_id`` ended (its COMMIT or ABORT marker was written to
        ``__consumer_offsets-<partition>``, ending at log offset ``marker_end``): its pending
        offsets in that partition's groups become committed (``commit``) or are dropped once
        the marker is committed (at once without ``marker_end``). Returns how many groups
        have some. While the partition loads, the loader replays the marker from the log
        instead."""
        return self._txn_offsets.complete(partition, producer_id, commit, marker_end)

    def offset_delete(self, req: Any, respond: Respond) -> None:
        """OffsetDelete v0: refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics an
        active consumer group is subscribed to."""
        try:
            self._offsets.delete(req, respond)
        finally:
            self.poll()

    # ================================================================ admin
    def describe_groups(
        self, req: Any, respond: Respond, authorized_operations: Callable[[str], int] | None = None
    ) -> None:
        """DescribeGroups v0-5. Unknown groups are described as Dead with no error (Kafka).
        ``authorized_operations(group_id)`` gives the group's operation bit field when the
        client asks for it (the broker's authorizer decides; default: all of them)."""
        self._admin.describe_groups(req, respond, authorized_operations)
        self.poll()

    def list_groups(self, req: Any, respond: Respond) -> None:
        """ListGroups v0-5 (states filter v4+, types filter v5: "classic", "consumer" or "share")."""
        self._admin.list_groups(req, respond)
        self.poll()

    def delete_groups(self, req: Any, respond: Respond) -> None:
        """DeleteGroups v0-2: only Empty groups (classic, consumer or share); writes tombstones
        for offsets and the group's records (a share group's state in ``__share_group_state``
        goes through ShareGroupHooks.group_deleted)."""
        self._admin.delete_groups(req, respond)
        self.poll()
