"""GroupCoordinator: Kafka's classic group protocol as a pure state machine.

The broker (an asyncio shell) owns sockets, the clock source and the ``__consumer_offsets``
partition logs; this module owns everything else. It follows Apache Kafka's GroupCoordinator
(core/.../GroupCoordinator.scala) and its successor ClassicGroup/GroupMetadataManager:
same states, same error codes in the same precedence, same records.

How the broker drives it
------------------------
* Construct ``GroupCoordinator(config, clock, log)``; ``clock()`` returns wall-clock ms and
  ``log.append(partition, [(key, value|None), ...])`` synchronously appends records to
  ``__consumer_offsets-<partition>`` (one batch, all or nothing) or raises.
* For every request call the operation with the kio request and a ``respond`` callback.
  ``respond`` is called exactly once, maybe later (JoinGroup and SyncGroup park until the
  rebalance moves on), always from inside one of the coordinator's methods.
* Call :meth:`poll` when :meth:`next_deadline_ms` says so (operations also run due timers
  themselves on the way out).
* At start-up, for each ``__consumer_offsets`` partition: :meth:`load_partition` (any number of
  times, records in offset order), then :meth:`finished_loading`. Until then the groups of that
  partition answer COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member, Pending
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    UnknownRecordVersion,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from coordinator.responses import ms, response_for, version_of

__all__ = ["GroupCoordinator", "OffsetsLog", "java_string_hash", "partition_for_group"]

log = logging.getLogger(__name__)

Respond = Callable[[Any], None]
Record = tuple[bytes, bytes | None]

E = ErrorCode
_S = GroupState

# DescribeGroups authorized_operations when the caller injects none: every operation Kafka
# supports on a group (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), what Kafka
# reports without an authorizer. The broker injects the authorizer's answer.
_GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
_OPS_NOT_REQUESTED = -(2**31)


class OffsetsLog(Protocol):
    """Where the coordinator persists records: the ``__consumer_offsets`` partitions."""

    def append(self, partition: int, records: list[Record]) -> None:
        """Append (key, value) records (value None = tombstone) as one batch, durably enough
        for the broker's settings, before returning. Raise to report failure; an exception with
        an ``error_code: ErrorCode`` attribute is mapped the way Kafka maps append errors."""
        ...


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, int32 arithmetic."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (it is `n & 0x7fffffff`).
    return (h & 0x7FFFFFFF) % num_partitions


def _storage_error(exc: BaseException, *, commit: bool) -> ErrorCode:
    """Kafka's mapping of append errors to what group clients understand
    (GroupMetadataManager.storeGroup / storeOffsets)."""
    code = getattr(exc, "error_code", None)
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append, E.request_timed_out):
        return E.coordinator_not_available
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size if commit else E.unknown_server_error
    if isinstance(code, ErrorCode) and code is not E.none:
        return code
    return E.coordinator_not_available


@dataclass(slots=True)
class _LoadState:
    offsets: dict[tuple[str, str, int], OffsetCommitValue | None] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    skipped: int = 0


class GroupCoordinator:
    """All classic groups of this broker. Not thread-safe; call from one thread (the loop)."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Callable[[], int],
        log: OffsetsLog,
        *,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        """``partition_exists(topic, partition)``, if given, makes OffsetCommit answer
        UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (Kafka's KafkaApis check)."""
        self.config = config
        self._clock = clock
        self._log = log
        self._partition_exists = partition_exists
        self._groups: dict[str, Group] = {}
        self._loading: dict[int, _LoadState] = {}
        # Timer heap: (deadline, seq, kind, group, key). Entries are never cancelled; a firing
        # entry re-checks the deadline stored on the group/member, so stale ones are no-ops.
        self._timers: list[tuple[int, int, str, Group | None, Any]] = []
        self._seq = 0
        self._next_cleanup = clock() + config.offsets_retention_check_interval_ms

    # ================================================================ public helpers
    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition (and so the coordinator) of a group."""
        return partition_for_group(group_id, self.config.offsets_topic_num_partitions)

    def group(self, group_id: str) -> Group | None:
        """Read-only view for the broker/CLI (do not mutate)."""
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    # ================================================================ timers
    def next_deadline_ms(self) -> int | None:
        """Earliest time poll() has work to do (may be early: stale timers are lazily skipped)."""
        nxt = self._next_cleanup
        if self._timers and self._timers[0][0] < nxt:
            nxt = self._timers[0][0]
        return nxt

    def poll(self) -> None:
        """Run every timer that is due: session and new-member timeouts, rebalance (join)
        and sync timeouts, the initial rebalance delay, pending member ids, offset expiry."""
        now = self._clock()
        timers = self._timers
        while timers and timers[0][0] <= now:
            at, _, kind, group, key = heapq.heappop(timers)
            if group is None or self._groups.get(group.group_id) is not group:
                continue
            try:
                if kind == "session":
                    self._on_session_timer(group, key, at, now)
                elif kind == "pending":
                    self._on_pending_timer(group, key, now)
                elif kind == "join":
                    self._on_join_timer(group, now)
                elif kind == "sync":
                    self._on_sync_timer(group, now)
            except Exception:  # a bug must not stop the other groups' timers
                log.exception("group %s: %s timer failed", group.group_id, kind)
            now = self._clock()
        if now >= self._next_cleanup:
            self._next_cleanup = now + self.config.offsets_retention_check_interval_ms
            self._cleanup_expired_offsets(now)

    def _schedule(self, deadline: int, kind: str, group: Group, key: Any = "") -> None:
        self._seq += 1
        heapq.heappush(self._timers, (deadline, self._seq, kind, group, key))

    def _touch(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        deadline = self._clock() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        member.heartbeat_deadline = deadline
        if member.session_timer_at is None or member.session_timer_at > deadline:
            member.session_timer_at = deadline
            self._schedule(deadline, "session", group, member)

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
                self._schedule(member.heartbeat_deadline, "session", group, member)
            return
        if member.is_new:
            # A new member whose join did not complete in time: its client is likely gone.
            self._remove_member_and_update(group, member)
        elif member.awaiting_join is not None or member.awaiting_sync is not None:
            # Members parked in a rebalance satisfy heartbeats; the rebalance/sync timeouts
            # govern them and reschedule their session when the phase completes.
            return
        else:
            log.info("group %s: member %s session timed out", group.group_id, member.member_id)
            self._remove_member_and_update(group, member)

    def _on_pending_timer(self, group: Group, member_id: Any, now: int) -> None:
        deadline = group.pending_members.get(member_id)
        if deadline is None or deadline > now:
            return
        del group.pending_members[member_id]
        if group.is_(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        self._maybe_drop_unused(group)

    def _on_join_timer(self, group: Group, now: int) -> None:
        if not group.is_(_S.PREPARING_REBALANCE) or group.join_deadline is None or group.join_deadline > now:
            return
        remaining = group.initial_delay_remaining
        if remaining is not None and group.new_member_added and remaining != 0:
            # InitialDelayedJoin: members are still arriving, wait another delay (bounded by
            # the rebalance timeout).
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining = max(remaining - delay, 0)
            # Count from the deadline that just passed, not from when poll() got to run.
            group.join_deadline += delay
            self._schedule(group.join_deadline, "join", group)
            return
        self._complete_join(group)

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
                self._drop_member(group, member)
        group.pending_sync.clear()
        self._maybe_prepare_rebalance(group)

    # ================================================================ loading
    def start_loading(self, partitions: Iterable[int]) -> None:
        """Mark partitions as loading before their records are read (optional: load_partition
        does it too). Their groups answer COORDINATOR_LOAD_IN_PROGRESS until finished_loading."""
        for p in partitions:
            self._loading.setdefault(p, _LoadState())

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def load_partition(self, partition: int, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        """Replay (offset, key, value) records of ``__consumer_offsets-<partition>`` in log order.
        May be called repeatedly (chunks). Never raises for bad records: unknown versions are
        skipped, malformed ones logged and skipped."""
        st = self._loading.setdefault(partition, _LoadState())
        it = iter(records)
        while True:
            try:
                offset, key, value = next(it)
            except StopIteration:
                break
            except Exception:
                # The broker's record iterator failed (e.g. a corrupt batch): stop this
                # partition here rather than crash; what was read so far stays loaded.
                log.exception("__consumer_offsets-%d: reading records failed; loaded what was readable", partition)
                break
            try:
                self._load_record(partition, st, offset, key, value)
            except UnknownRecordVersion as e:
                st.skipped += 1
                log.debug("__consumer_offsets-%d offset %s: skipping record: %s", partition, offset, e)
            except RecordDecodeError as e:
                st.skipped += 1
                log.warning("__consumer_offsets-%d offset %s: skipping malformed record: %s", partition, offset, e)
            except Exception:
                st.skipped += 1
                log.exception("__consumer_offsets-%d offset %s: skipping record", partition, offset)

    def _load_record(self, partition: int, st: _LoadState, offset: int, key: bytes | None, value: bytes | None) -> None:
        k = decode_key(key)
        if self.partition_for(k.group) != partition:
            raise RecordDecodeError(f"group {k.group!r} belongs to partition {self.partition_for(k.group)}")
        if isinstance(k, OffsetCommitKey):
            st.offsets[(k.group, k.topic, k.partition)] = None if value is None else decode_offset_commit_value(value)
        else:
            assert isinstance(k, GroupMetadataKey)
            st.groups[k.group] = None if value is None else decode_group_metadata_value(value)

    def finished_loading(self, partition: int) -> None:
        """Build the partition's groups from what was replayed and start serving them."""
        st = self._loading.pop(partition, None) or _LoadState()
        now = self._clock()
        for gid in [g for g, grp in self._groups.items() if grp.partition == partition]:
            del self._groups[gid]
        for gid, value in st.groups.items():
            if value is not None:
                self._groups[gid] = self._group_from_record(gid, partition, value, now)
        for (gid, topic, p), ov in st.offsets.items():
            if ov is None:
                continue
            group = self._groups.get(gid)
            if group is None:
                # Offsets without group metadata: a group that only stores offsets.
                group = self._groups[gid] = Group(gid, partition, state_timestamp=now)
            group.offsets[(topic, p)] = ov
        log.info(
            "__consumer_offsets-%d loaded: %d groups, %d records skipped",
            partition,
            sum(1 for g in self._groups.values() if g.partition == partition),
            st.skipped,
        )

    def _group_from_record(self, gid: str, partition: int, v: GroupMetadataValue, now: int) -> Group:
        group = Group(gid, partition, generation=v.generation, protocol_type=v.protocol_type or None)
        group.state_timestamp = v.current_state_timestamp
        if v.members and v.protocol is None:
            log.warning("group %s: metadata with members but no protocol; loading it without members", gid)
        elif v.members:
            group.protocol_name = v.protocol
            for mm in v.members:
                m = Member(
                    member_id=mm.member_id,
                    group_instance_id=mm.group_instance_id,
                    client_id=mm.client_id,
                    client_host=mm.client_host,
                    # v0 records have no rebalance timeout; Kafka then uses the session timeout.
                    rebalance_timeout_ms=mm.rebalance_timeout if mm.rebalance_timeout != -1 else mm.session_timeout,
                    session_timeout_ms=mm.session_timeout,
                    protocol_type=v.protocol_type,
                    protocols=[(v.protocol, mm.subscription)],
                    assignment=mm.assignment,
                )
                group.add(m, None)
                self._touch(group, m)
            if v.leader in group.members:
                group.leader_id = v.leader
            group.state = _S.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # ================================================================ common
    def _group_error(self, group_id: str | None, *, allow_empty: bool) -> ErrorCode | None:
        # Kafka accepts the empty group id for OffsetCommit/OffsetFetch/DescribeGroups/
        # DeleteGroups (backwards compatibility) and refuses it for everything else.
        if group_id is None or (group_id == "" and not allow_empty):
            return E.invalid_group_id
        if self._loading and self.partition_for(group_id) in self._loading:
            return E.coordinator_load_in_progress
        return None

    @staticmethod
    def _reply(respond: Respond, response: Any) -> None:
        try:
            respond(response)
        except Exception:  # the broker's callback must not corrupt group state half-way
            log.exception("respond callback failed")

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_for(group_id), state_timestamp=self._clock())
        self._groups[group_id] = group
        return group

    def _maybe_drop_unused(self, group: Group) -> None:
        # A group created by a failed first JoinGroup was never written anywhere: forget it.
        if (
            group.is_(_S.EMPTY)
            and group.generation == 0
            and not group.members
            and not group.pending_members
            and not group.offsets
            and self._groups.get(group.group_id) is group
        ):
            del self._groups[group.group_id]

    def _append(self, group: Group, records: list[Record]) -> None:
        self._log.append(group.partition, records)

    def _group_record(self, group: Group, assignment: dict[str, bytes] | None = None) -> Record:
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

    # ================================================================ JoinGroup
    def _join_response(
        self,
        req: Any,
        error: ErrorCode,
        member_id: str,
        group: Group | None = None,
        *,
        leader: str | None = None,
        members: list[Member] | None = None,
        skip_assignment: bool = False,
    ) -> Any:
        ok = error is E.none and group is not None
        protocol_name = group.protocol_name if ok and group is not None else None
        if protocol_name is None and version_of(req) < 7:
            protocol_name = ""  # non-nullable before v7
        return response_for(
            req,
            error_code=error,
            generation_id=group.generation if ok and group is not None else -1,
            protocol_type=group.protocol_type if ok and group is not None else None,
            protocol_name=protocol_name,
            leader=(leader or "") if ok else "",
            skip_assignment=skip_assignment,
            member_id=member_id,
            members=[
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata(group.protocol_name if group else None),
                }
                for m in (members or ())
            ],
        )

    def _current_join_result(self, req: Any, group: Group, member: Member) -> Any:
        is_leader = group.is_leader(member.member_id)
        return self._join_response(
            req,
            E.none,
            member.member_id,
            group,
            leader=group.leader_id,
            members=list(group.members.values()) if is_leader else None,
        )

    def join_group(self, req: Any, respond: Respond, *, client_id: str, client_host: str) -> None:
        """JoinGroup v0-9. ``client_host`` is shown by DescribeGroups; Kafka's form is
        ``"/" + ip``."""
        try:
            self._join_group(req, respond, client_id, client_host)
        finally:
            self.poll()

    def _join_group(self, req: Any, respond: Respond, client_id: str, client_host: str) -> None:
        v = version_of(req)
        member_id: str = req.member_id
        err = self._group_error(req.group_id, allow_empty=False)
        if err is not None:
            return self._reply(respond, self._join_response(req, err, member_id))
        session_ms = ms(req.session_timeout)
        # JoinGroup v0 has no rebalance timeout: the session timeout serves as both.
        rebalance_ms = session_ms if v == 0 else ms(req.rebalance_timeout)
        if not self.config.group_min_session_timeout_ms <= session_ms <= self.config.group_max_session_timeout_ms:
            return self._reply(respond, self._join_response(req, E.invalid_session_timeout, member_id))
        is_unknown = member_id == ""
        group = self._groups.get(req.group_id)
        if group is None:
            if not is_unknown:
                return self._reply(respond, self._join_response(req, E.unknown_member_id, member_id))
            group = self._new_group(req.group_id)
        try:
            if not self._accept_joining_member(group, member_id):
                member = group.members.get(member_id)
                if member is not None:
                    self._remove_member_and_update(group, member)
                return self._reply(respond, self._join_response(req, E.group_max_size_reached, ""))
            instance_id: str | None = getattr(req, "group_instance_id", None)
            protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
            args = (req, respond, client_id, client_host, session_ms, rebalance_ms, protocols, instance_id)
            if is_unknown:
                self._join_new_member(group, *args)
            else:
                self._join_known_member(group, *args)
            if group.is_(_S.PREPARING_REBALANCE):
                self._try_complete_join(group)
        finally:
            self._maybe_drop_unused(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            # Count members already rejoined: the group may still hold members that will be
            # evicted for not rejoining.
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(
        self,
        group: Group,
        req: Any,
        respond: Respond,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocols: list[tuple[str, bytes]],
        instance_id: str | None,
    ) -> None:
        if group.is_(_S.DEAD):
            return self._reply(respond, self._join_response(req, E.coordinator_not_available, ""))
        if not self._supports_protocols(group, req.protocol_type, protocols):
            return self._reply(respond, self._join_response(req, E.inconsistent_group_protocol, ""))
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            return self._join_static_member(
                group, req, respond, new_id, instance_id, client_id, client_host, session_ms, rebalance_ms, protocols
            )
        if version_of(req) >= 4:
            # KIP-394: hand out the member id first, so a client that times out and retries
            # rejoins as the same member instead of leaving ghosts in the group.
            deadline = self._clock() + session_ms
            group.pending_members[new_id] = deadline
            self._schedule(deadline, "pending", group, new_id)
            return self._reply(respond, self._join_response(req, E.member_id_required, new_id))
        self._add_member_and_rebalance(
            group, req, respond, new_id, None, client_id, client_host, session_ms, rebalance_ms, protocols
        )

    def _supports_protocols(self, group: Group, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        # Kafka's ClassicGroup.supportsProtocols: an Empty group accepts any non-empty offer;
        # otherwise the type must match and one offered protocol must be supported by all.
        if group.is_(_S.EMPTY):
            return bool(protocol_type) and bool(protocols)
        if protocol_type != group.protocol_type:
            return False
        n = len(group.members)
        if n == 0:
            return True
        candidates = group.candidate_protocols()
        return any(name in candidates for name, _ in protocols)

    def _join_known_member(
        self,
        group: Group,
        req: Any,
        respond: Respond,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocols: list[tuple[str, bytes]],
        instance_id: str | None,
    ) -> None:
        member_id: str = req.member_id
        if group.is_(_S.DEAD):
            return self._reply(respond, self._join_response(req, E.coordinator_not_available, member_id))
        if not self._supports_protocols(group, req.protocol_type, protocols):
            return self._reply(respond, self._join_response(req, E.inconsistent_group_protocol, member_id))
        if member_id in group.pending_members:
            if instance_id is not None:
                # Static members never get a pending id; a client mixing both is confused.
                return self._reply(respond, self._join_response(req, E.unknown_member_id, member_id))
            return self._add_member_and_rebalance(
                group, req, respond, member_id, None, client_id, client_host, session_ms, rebalance_ms, protocols
            )
        if group.is_static_member_fenced(member_id, instance_id):
            return self._reply(respond, self._join_response(req, E.fenced_instance_id, member_id))
        member = group.members.get(member_id)
        if member is None:
            return self._reply(respond, self._join_response(req, E.unknown_member_id, member_id))
        pending = Pending(req, respond)
        state = group.state
        if state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, pending)
        elif state is _S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retried JoinGroup: answer with the generation it already belongs to.
                self._reply(respond, self._current_join_result(req, group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, pending)
        elif state is _S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, pending)
            else:
                self._reply(respond, self._current_join_result(req, group, member))
        else:
            self._reply(respond, self._join_response(req, E.unknown_member_id, member_id))

    def _join_static_member(
        self,
        group: Group,
        req: Any,
        respond: Respond,
        new_id: str,
        instance_id: str,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        old_id = group.static_member_id(instance_id)
        if old_id is None or old_id not in group.members:
            return self._add_member_and_rebalance(
                group, req, respond, new_id, instance_id, client_id, client_host, session_ms, rebalance_ms, protocols
            )
        # A known static member came back with no member id (restart): it takes over its old
        # identity, and whoever still uses the old member id is fenced.
        member = group.members[old_id]
        old_leader = group.leader_id
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._fence(group, member)
        group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        member.client_id, member.client_host = client_id, client_host
        self._touch(group, member)
        state = group.state
        if state is _S.STABLE:
            try:
                same_protocol = group.select_protocol() == group.protocol_name
            except ValueError:
                same_protocol = False
            if not same_protocol:
                group.set_awaiting_join(member, Pending(req, respond))
                return self._maybe_prepare_rebalance(group)
            try:
                self._append(group, [self._group_record(group)])
            except Exception as exc:
                log.warning("group %s: persisting static member %s failed: %s", group.group_id, instance_id, exc)
                group.replace_static_member(instance_id, new_id, old_id)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                self._touch(group, member)
                resp = self._join_response(req, _storage_error(exc, commit=False), "")
                return self._reply(respond, resp)
            if version_of(req) >= 9:
                # v9+: tell a returning leader it leads, but must not re-run the assignor
                # while the group is stable (skip_assignment).
                is_leader = group.is_leader(new_id)
                resp = self._join_response(
                    req,
                    E.none,
                    new_id,
                    group,
                    leader=group.leader_id,
                    members=list(group.members.values()) if is_leader else None,
                    skip_assignment=is_leader,
                )
            else:
                # Before v9, return the old leader id so a returning leader does not think it
                # leads and compute an assignment a stable group would ignore.
                resp = self._join_response(req, E.none, new_id, group, leader=old_leader)
            return self._reply(respond, resp)
        group.set_awaiting_join(member, Pending(req, respond))
        if state is _S.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group)
        # PREPARING_REBALANCE: it simply counts as rejoined under the new id.

    def _fence(self, group: Group, member: Member) -> None:
        """Answer the parked requests of an old static incarnation with FENCED_INSTANCE_ID."""
        old_join = group.set_awaiting_join(member, None)
        if old_join is not None:
            self._reply(old_join.respond, self._join_response(old_join.req, E.fenced_instance_id, member.member_id))
        if member.awaiting_sync is not None:
            p, member.awaiting_sync = member.awaiting_sync, None
            self._reply(p.respond, self._sync_response(p.req, E.fenced_instance_id))

    def _add_member_and_rebalance(
        self,
        group: Group,
        req: Any,
        respond: Respond,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        session_ms: int,
        rebalance_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_ms,
            session_timeout_ms=session_ms,
            protocol_type=req.protocol_type,
            protocols=protocols,
            is_new=True,
        )
        if group.is_(_S.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, Pending(req, respond))
        self._touch(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_ms: int,
        session_ms: int,
        pending: Pending,
    ) -> None:
        old = group.set_awaiting_join(member, pending)
        if old is not None:
            # The client retried its JoinGroup (it gave up on the first one); the old request
            # still needs an answer so the connection's response order is not stuck.
            self._reply(old.respond, self._join_response(old.req, E.rebalance_in_progress, member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        self._maybe_prepare_rebalance(group)

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        now = self._clock()
        if group.is_(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.is_(_S.EMPTY):
            # A brand-new (or emptied) group waits group.initial.rebalance.delay.ms so that
            # consumers starting together land in one generation.
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_delay_remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_deadline = now + delay
        else:
            group.initial_delay_remaining = None
            group.join_deadline = now + group.rebalance_timeout_ms()
        group.transition(_S.PREPARING_REBALANCE, now)
        self._schedule(group.join_deadline, "join", group)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        # The rebalance completes the moment every known member has rejoined, except during
        # the initial delay, which (as in Kafka's InitialDelayedJoin) always runs its course.
        if (
            group.is_(_S.PREPARING_REBALANCE)
            and group.initial_delay_remaining is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        now = self._clock()
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: evicting member %s (did not rejoin in time)", group.group_id, member.member_id)
                self._drop_member(group, member)
        if not group.maybe_elect_joined_leader() and group.members:
            # Only static members remain and none rejoined: wait another rebalance timeout
            # (their session timeouts will eventually remove them).
            group.initial_delay_remaining = None
            group.join_deadline = now + group.rebalance_timeout_ms()
            self._schedule(group.join_deadline, "join", group)
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
                self._append(group, [self._group_record(group)])
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
            self._touch(group, member)
            group.pending_sync.add(member.member_id)
            if pending is not None:
                is_leader = group.is_leader(member.member_id)
                resp = self._join_response(
                    pending.req,
                    E.none,
                    member.member_id,
                    group,
                    leader=group.leader_id,
                    members=all_members if is_leader else None,
                )
                self._reply(pending.respond, resp)
        group.sync_deadline = now + group.rebalance_timeout_ms()
        self._schedule(group.sync_deadline, "sync", group)

    def _drop_member(self, group: Group, member: Member) -> None:
        """Remove a member, answering its parked requests (it is no longer part of the group)."""
        if member.awaiting_join is not None:
            p = member.awaiting_join
            group.set_awaiting_join(member, None)
            self._reply(p.respond, self._join_response(p.req, E.unknown_member_id, member.member_id))
        if member.awaiting_sync is not None:
            p, member.awaiting_sync = member.awaiting_sync, None
            self._reply(p.respond, self._sync_response(p.req, E.unknown_member_id))
        group.remove(member.member_id)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        self._drop_member(group, member)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(_S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================ SyncGroup
    def _sync_response(self, req: Any, error: ErrorCode, group: Group | None = None, assignment: bytes = b"") -> Any:
        ok = error is E.none and group is not None
        return response_for(
            req,
            error_code=error,
            protocol_type=group.protocol_type if ok and group is not None else None,
            protocol_name=group.protocol_name if ok and group is not None else None,
            assignment=assignment,
        )

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                p, member.awaiting_sync = member.awaiting_sync, None
                self._reply(p.respond, self._sync_response(p.req, error))

    def sync_group(self, req: Any, respond: Respond) -> None:
        """SyncGroup v0-5."""
        try:
            self._sync_group(req, respond)
        finally:
            self.poll()

    def _sync_group(self, req: Any, respond: Respond) -> None:
        err = self._group_error(req.group_id, allow_empty=False)
        if err is not None:
            return self._reply(respond, self._sync_response(req, err))
        group = self._groups.get(req.group_id)
        member_id: str = req.member_id
        instance_id = getattr(req, "group_instance_id", None)
        protocol_type = getattr(req, "protocol_type", None)
        protocol_name = getattr(req, "protocol_name", None)
        if group is None:
            err = E.unknown_member_id
        elif group.is_(_S.DEAD):
            err = E.coordinator_not_available
        elif group.is_static_member_fenced(member_id, instance_id):
            err = E.fenced_instance_id
        elif not group.has(member_id):
            err = E.unknown_member_id
        elif req.generation_id != group.generation:
            err = E.illegal_generation
        elif (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            err = E.inconsistent_group_protocol
        elif group.is_(_S.EMPTY):
            err = E.unknown_member_id
        elif group.is_(_S.PREPARING_REBALANCE):
            err = E.rebalance_in_progress
        if err is not None:
            return self._reply(respond, self._sync_response(req, err))
        assert group is not None
        member = group.members[member_id]
        if group.is_(_S.STABLE):
            group.pending_sync.discard(member_id)
            self._touch(group, member)
            return self._reply(respond, self._sync_response(req, E.none, group, member.assignment))
        # CompletingRebalance: park until the leader's assignment is stored.
        if member.awaiting_sync is not None:
            old = member.awaiting_sync
            self._reply(old.respond, self._sync_response(old.req, E.rebalance_in_progress))
        member.awaiting_sync = Pending(req, respond)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None
        if not group.is_leader(member_id):
            return
        # Members the leader left out get an empty assignment (Kafka does the same).
        assignment = {m: b"" for m in group.members}
        for a in req.assignments:
            if a.member_id in assignment:
                assignment[a.member_id] = bytes(a.assignment)
        try:
            self._append(group, [self._group_record(group, assignment)])
        except Exception as exc:
            log.warning("group %s: storing the assignment failed: %s", group.group_id, exc)
            self._reset_and_propagate_assignment_error(group, _storage_error(exc, commit=False))
            return self._maybe_prepare_rebalance(group)
        for m in group.members.values():
            m.assignment = assignment[m.member_id]
            if m.awaiting_sync is not None:
                p, m.awaiting_sync = m.awaiting_sync, None
                self._reply(p.respond, self._sync_response(p.req, E.none, group, m.assignment))
            # Sessions restart now: an expiry while we waited for the leader was ignored.
            self._touch(group, m)
        group.transition(_S.STABLE, self._clock())

    # ================================================================ Heartbeat
    def heartbeat(self, req: Any, respond: Respond) -> None:
        """Heartbeat v0-4."""
        try:
            self._reply(respond, response_for(req, error_code=self._heartbeat(req)))
        finally:
            self.poll()

    def _heartbeat(self, req: Any) -> ErrorCode:
        err = self._group_error(req.group_id, allow_empty=False)
        if err is not None:
            return err
        group = self._groups.get(req.group_id)
        member_id: str = req.member_id
        if group is None:
            return E.unknown_member_id
        if group.is_(_S.DEAD):
            return E.coordinator_not_available
        if group.is_static_member_fenced(member_id, getattr(req, "group_instance_id", None)):
            return E.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if req.generation_id != group.generation:
            return E.illegal_generation
        if group.is_(_S.EMPTY):
            return E.unknown_member_id
        self._touch(group, member)
        if group.is_(_S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        # Stable, or CompletingRebalance (a member may heartbeat between its JoinGroup
        # answer and its SyncGroup): all good.
        return E.none

    # ================================================================ LeaveGroup
    def leave_group(self, req: Any, respond: Respond) -> None:
        """LeaveGroup v0-5 (v3+ batches members, each with its own error)."""
        try:
            self._leave_group(req, respond)
        finally:
            self.poll()

    def _leave_group(self, req: Any, respond: Respond) -> None:
        v = version_of(req)
        leaving: list[tuple[str, str | None]]
        if v >= 3:
            leaving = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            leaving = [(req.member_id, None)]
        top = self._group_error(req.group_id, allow_empty=False)
        results: list[ErrorCode] = []
        group = self._groups.get(req.group_id) if top is None else None
        if top is None and group is not None and group.is_(_S.DEAD):
            top = E.coordinator_not_available
        if top is None:
            for member_id, instance_id in leaving:
                results.append(self._leave_one(group, member_id, instance_id))
        if v >= 3:
            resp = response_for(
                req,
                error_code=top or E.none,
                members=[
                    {"member_id": mid, "group_instance_id": iid, "error_code": e}
                    for (mid, iid), e in zip(leaving, results, strict=False)
                ],
            )
        else:
            # Before v3 the single member's error is the response's error.
            resp = response_for(req, error_code=top or (results[0] if results else E.none))
        self._reply(respond, resp)

    def _leave_one(self, group: Group | None, member_id: str, instance_id: str | None) -> ErrorCode:
        if group is None:
            return E.unknown_member_id
        if member_id == "" and instance_id is not None:
            member_id = group.static_member_id(instance_id) or ""
        if group.is_static_member_fenced(member_id, instance_id):
            return E.fenced_instance_id
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            if group.is_(_S.PREPARING_REBALANCE):
                self._try_complete_join(group)
            self._maybe_drop_unused(group)
            return E.none
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        log.info("group %s: member %s left", group.group_id, member_id)
        self._remove_member_and_update(group, member)
        return E.none

    # ================================================================ OffsetCommit
    def offset_commit(self, req: Any, respond: Respond) -> None:
        """OffsetCommit v2-9."""
        try:
            self._offset_commit(req, respond)
        finally:
            self.poll()

    def _commit_response(self, req: Any, errors: dict[tuple[str, int], ErrorCode]) -> Any:
        topics: dict[str, list[dict[str, Any]]] = {}
        for t in req.topics:
            parts = topics.setdefault(t.name, [])
            for p in t.partitions:
                parts.append({"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]})
        return response_for(req, topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])

    def _offset_commit(self, req: Any, respond: Respond) -> None:
        keys = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]

        def fail(e: ErrorCode) -> None:
            self._reply(respond, self._commit_response(req, dict.fromkeys(keys, e)))

        err = self._group_error(req.group_id, allow_empty=True)
        if err is not None:
            return fail(err)
        generation: int = req.generation_id_or_member_epoch
        member_id: str = req.member_id
        instance_id = getattr(req, "group_instance_id", None)
        group = self._groups.get(req.group_id)
        if group is None:
            if generation >= 0:
                # A generation for a group we do not know: an old generation, reject.
                return fail(E.illegal_generation)
            group = self._new_group(req.group_id)  # a group that only stores offsets
        try:
            if group.is_(_S.DEAD):
                return fail(E.coordinator_not_available)
            if generation < 0 and group.is_(_S.EMPTY):
                return self._store_offsets(group, req, respond, keys)
            if group.is_static_member_fenced(member_id, instance_id):
                return fail(E.fenced_instance_id)
            member = group.members.get(member_id)
            if member is None:
                return fail(E.unknown_member_id)
            if generation != group.generation:
                return fail(E.illegal_generation)
            if group.is_(_S.COMPLETING_REBALANCE):
                # The member has its new generation from JoinGroup but no assignment yet.
                return fail(E.rebalance_in_progress)
            # Stable or PreparingRebalance: commits of the current generation are accepted
            # during a rebalance (the heartbeat tells the member to rejoin).
            self._touch(group, member)
            self._store_offsets(group, req, respond, keys)
        finally:
            self._maybe_drop_unused(group)

    def _store_offsets(self, group: Group, req: Any, respond: Respond, keys: list[tuple[str, int]]) -> None:
        now = self._clock()
        v = version_of(req)
        expire = -1
        if v <= 4:
            retention = ms(req.retention_time)
            if retention != -1:
                expire = now + retention
        errors: dict[tuple[str, int], ErrorCode] = {}
        values: dict[tuple[str, int], OffsetCommitValue] = {}
        records: list[Record] = []
        max_meta = self.config.offset_metadata_max_bytes
        for t in req.topics:
            for p in t.partitions:
                key = (t.name, p.partition_index)
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                if len(metadata) > max_meta:
                    errors[key] = E.offset_metadata_too_large
                    continue
                if self._partition_exists is not None and not self._partition_exists(t.name, p.partition_index):
                    errors[key] = E.unknown_topic_or_partition
                    continue
                value = OffsetCommitValue(
                    offset=p.committed_offset,
                    metadata=metadata,
                    commit_timestamp=now,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    expire_timestamp=expire,
                )
                values[key] = value
                records.append(
                    (encode_offset_commit_key(group.group_id, t.name, p.partition_index), encode_offset_commit_value(value))
                )
        if records:
            try:
                self._append(group, records)
            except Exception as exc:
                log.warning("group %s: storing offsets failed: %s", group.group_id, exc)
                e = _storage_error(exc, commit=True)
                for key in values:
                    errors[key] = e
                values = {}
        for key, value in values.items():
            group.offsets[key] = value
            errors[key] = E.none
        for key in keys:
            errors.setdefault(key, E.none)
        self._reply(respond, self._commit_response(req, errors))

    # ================================================================ OffsetFetch
    def offset_fetch(self, req: Any, respond: Respond) -> None:
        """OffsetFetch v1-9 (v8+ several groups). Offsets never committed come back as -1."""
        v = version_of(req)
        if v >= 8:
            groups = []
            for g in req.groups:
                err, topics = self._fetch_group(g.group_id, g.topics)
                groups.append({"group_id": g.group_id, "topics": topics if err is None else [], "error_code": err or E.none})
            resp = response_for(req, groups=groups)
        else:
            err, topics = self._fetch_group(req.group_id, req.topics)
            if err is not None and v < 2:
                # v1 has no group-level error: report it on every requested partition.
                topics = [
                    {"name": t.name, "partitions": [self._fetch_partition(p, None, err) for p in t.partition_indexes]}
                    for t in req.topics or ()
                ]
            elif err is not None:
                topics = []
            resp = response_for(req, topics=topics, error_code=err or E.none)
        self._reply(respond, resp)
        self.poll()

    @staticmethod
    def _fetch_partition(index: int, value: OffsetCommitValue | None, error: ErrorCode = E.none) -> dict[str, Any]:
        if value is None:
            return {
                "partition_index": index,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": error,
            }
        return {
            "partition_index": index,
            "committed_offset": value.offset,
            "committed_leader_epoch": value.leader_epoch,
            "metadata": value.metadata,
            "error_code": error,
        }

    def _fetch_group(self, group_id: str, topics: Any) -> tuple[ErrorCode | None, list[dict[str, Any]]]:
        err = self._group_error(group_id, allow_empty=True)
        if err is not None:
            return err, []
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            # Null topic list (v2+): every committed offset of the group.
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (topic, p), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(self._fetch_partition(p, value))
            return None, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        return None, [
            {"name": t.name, "partitions": [self._fetch_partition(p, offsets.get((t.name, p))) for p in t.partition_indexes]}
            for t in topics
        ]

    # ================================================================ DescribeGroups
    def describe_groups(self, req: Any, respond: Respond,
                        authorized_operations: Callable[[str], int] | None = None) -> None:
        """DescribeGroups v0-5. Unknown groups are described as Dead with no error (Kafka).
        ``authorized_operations(group_id)`` gives the group's operation bit field when the
        client asks for it (the broker's authorizer decides; default: all of them)."""
        include_ops = bool(getattr(req, "include_authorized_operations", False))
        ops_of = authorized_operations or (lambda _gid: _GROUP_AUTHORIZED_OPERATIONS)
        out = []
        for gid in req.groups:
            out.append(self._describe(gid, ops_of(gid) if include_ops else _OPS_NOT_REQUESTED))
        self._reply(respond, response_for(req, groups=out))
        self.poll()

    def _describe(self, gid: str, ops: int) -> dict[str, Any]:
        err = self._group_error(gid, allow_empty=True)
        base: dict[str, Any] = {
            "group_id": gid,
            "error_code": E.none,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": ops,
        }
        if err is not None:
            base["error_code"] = err
            return base
        group = self._groups.get(gid)
        if group is None:
            base["group_state"] = _S.DEAD.value
            return base
        stable = group.is_(_S.STABLE)
        base["group_state"] = group.state.value
        base["protocol_type"] = group.protocol_type or ""
        # Kafka only reveals the protocol, metadata and assignments of a Stable group.
        base["protocol_data"] = (group.protocol_name or "") if stable else ""
        base["members"] = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        return base

    # ================================================================ ListGroups
    def list_groups(self, req: Any, respond: Respond) -> None:
        """ListGroups v0-5 (states filter v4+, types filter v5; all groups here are "classic")."""
        states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
        types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
        out = []
        if not types or "classic" in types:
            for g in self._groups.values():
                if g.is_(_S.DEAD) or (states and g.state.value.lower() not in states):
                    continue
                out.append(
                    {
                        "group_id": g.group_id,
                        "protocol_type": g.protocol_type or "",
                        "group_state": g.state.value,
                        "group_type": "classic",
                    }
                )
        err = E.coordinator_load_in_progress if self._loading else E.none
        self._reply(respond, response_for(req, error_code=err, groups=out))
        self.poll()

    # ================================================================ DeleteGroups
    def delete_groups(self, req: Any, respond: Respond) -> None:
        """DeleteGroups v0-2: only Empty groups; writes tombstones for offsets and metadata."""
        results = [{"group_id": gid, "error_code": self._delete_group(gid)} for gid in req.groups_names]
        self._reply(respond, response_for(req, results=results))
        self.poll()

    def _delete_group(self, gid: str) -> ErrorCode:
        err = self._group_error(gid, allow_empty=True)
        if err is not None:
            return err
        group = self._groups.get(gid)
        if group is None or group.is_(_S.DEAD):
            return E.group_id_not_found
        if not group.is_(_S.EMPTY):
            return E.non_empty_group
        records: list[Record] = [
            (encode_offset_commit_key(gid, topic, p), None) for topic, p in sorted(group.offsets)
        ]
        records.append((encode_group_metadata_key(gid), None))
        try:
            self._append(group, records)
        except Exception as exc:
            log.warning("group %s: deletion failed: %s", gid, exc)
            return _storage_error(exc, commit=False)
        self._kill(group)
        return E.none

    def _kill(self, group: Group) -> None:
        group.transition(_S.DEAD, self._clock())
        group.offsets.clear()
        group.pending_members.clear()
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    # ================================================================ OffsetDelete
    def offset_delete(self, req: Any, respond: Respond) -> None:
        """OffsetDelete v0: refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics an
        active consumer group is subscribed to."""
        try:
            self._reply(respond, self._offset_delete(req))
        finally:
            self.poll()

    def _offset_delete(self, req: Any) -> Any:
        def group_error(e: ErrorCode) -> Any:
            return response_for(req, error_code=e, topics=[])

        err = self._group_error(req.group_id, allow_empty=False)
        if err is not None:
            return group_error(err)
        group = self._groups.get(req.group_id)
        if group is None or group.is_(_S.DEAD):
            return group_error(E.group_id_not_found)
        requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        if group.is_(_S.EMPTY):
            deletable = set(requested)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = {k for k in requested if not group.is_subscribed_to(k[0])}
        else:
            return group_error(E.non_empty_group)
        removed = sorted(k for k in deletable if k in group.offsets)
        records: list[Record] = [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in removed]
        dies = group.is_(_S.EMPTY) and not (set(group.offsets) - set(removed)) and not group.pending_members
        if dies and group.generation > 0:
            # As Kafka's cleanupGroupMetadata: an Empty group left without offsets is dead.
            # A generation-0 group only stored offsets and has no metadata record to remove.
            records.append((encode_group_metadata_key(group.group_id), None))
        if records:
            try:
                self._append(group, records)
            except Exception as exc:
                log.warning("group %s: offset deletion failed: %s", group.group_id, exc)
                return group_error(_storage_error(exc, commit=False))
        for k in removed:
            del group.offsets[k]
        if dies:
            self._kill(group)
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in requested:
            e = E.none if (t, p) in deletable else E.group_subscribed_to_topic
            topics.setdefault(t, []).append({"partition_index": p, "error_code": e})
        return response_for(
            req, error_code=E.none, topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]
        )

    # ================================================================ offset expiry
    def _cleanup_expired_offsets(self, now: int) -> None:
        """Kafka's GroupMetadata.removeExpiredOffsets + cleanupGroupMetadata."""
        retention = self.config.offsets_retention_ms
        for group in list(self._groups.values()):
            if group.partition in self._loading:
                continue
            try:
                self._expire_group_offsets(group, now, retention)
            except Exception:
                log.exception("group %s: offset expiry failed", group.group_id)

    def _expire_group_offsets(self, group: Group, now: int, retention: int) -> None:
        def expired(base: Callable[[OffsetCommitValue], int], subscribed: set[str] | None = None) -> list[tuple[str, int]]:
            out = []
            for k, v in group.offsets.items():
                if subscribed is not None and k[0] in subscribed:
                    continue
                if v.expire_timestamp != -1:
                    if now >= v.expire_timestamp:
                        out.append(k)
                elif now - base(v) >= retention:
                    out.append(k)
            return out

        if group.protocol_type is None:
            # Offsets-only group: each offset expires from its own commit time.
            gone = expired(lambda v: v.commit_timestamp)
        elif group.is_(_S.EMPTY):
            # Counted from when the group became empty (KIP-211), not from the commit.
            gone = expired(lambda v: group.state_timestamp if group.state_timestamp >= 0 else v.commit_timestamp)
        elif (
            group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.subscribed_topics is not None
            and group.is_(_S.STABLE)
        ):
            # A stable consumer group keeps offsets of what it consumes; others age normally.
            gone = expired(lambda v: v.commit_timestamp, group.subscribed_topics)
        else:
            gone = []
        remaining = set(group.offsets) - set(gone)
        dies = group.is_(_S.EMPTY) and not remaining and not group.members and not group.pending_members
        if not gone and not dies:
            return
        records: list[Record] = [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in sorted(gone)]
        if dies and group.generation > 0:
            records.append((encode_group_metadata_key(group.group_id), None))
        if records:
            try:
                self._append(group, records)
            except Exception as exc:
                log.warning("group %s: writing expiry tombstones failed: %s", group.group_id, exc)
                return
        for k in gone:
            del group.offsets[k]
        if dies:
            self._kill(group)
