"""JoinGroup v0-9: admitting members to a classic group and starting its rebalance.

One request arrives as a :class:`JoinContext` (the kio request, the broker's callback and the
values derived from both), and takes one of three paths: a new member (no member id; KIP-394
hands out an id first from v4), a static member coming back (KIP-345), or a known member
rejoining. The rebalance itself is :class:`~coordinator.classic.rebalance.Rebalancer`'s.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import PENDING, Rebalancer, group_metadata_record
from coordinator.classic.responses import current_join_result, join_response
from coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from coordinator.consumer.records import encode_record, group_tombstones
from coordinator.group import Group, GroupState, Member, Pending
from coordinator.responses import ms, version_of
from coordinator.share.group import ShareGroup
from coordinator.state import CoordinatorState, Respond, reply, storage_error

if TYPE_CHECKING:
    from coordinator.consumer.classic_members import ClassicMembers

__all__ = ["JoinContext", "JoinGroup"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState


@dataclass(frozen=True, slots=True)
class JoinContext:
    """One JoinGroup request with what the coordinator derived from it."""

    req: Any
    respond: Respond
    client_id: str
    client_host: str  # Kafka's form, "/" + ip
    session_ms: int
    rebalance_ms: int
    # A list, as Member.protocols is: members compare their protocols for equality.
    protocols: list[tuple[str, bytes]]
    instance_id: str | None

    @property
    def version(self) -> int:
        return version_of(self.req)

    def pending(self) -> Pending:
        """The request, to park until the rebalance answers it."""
        return Pending(self.req, self.respond)

    def answer(self, response: Any) -> None:
        reply(self.respond, response)

    def fail(self, error: ErrorCode, member_id: str) -> None:
        reply(self.respond, join_response(self.req, error, member_id))


class JoinGroup:
    """JoinGroup against the groups of ``state``; rebalances through ``rebalancer``. A
    non-empty consumer group takes the member through ``consumer_groups`` (KIP-848's members
    using the classic protocol)."""

    def __init__(self, state: CoordinatorState, rebalancer: Rebalancer, consumer_groups: ClassicMembers) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._consumer_groups = consumer_groups

    def __call__(self, req: Any, respond: Respond, client_id: str, client_host: str) -> None:
        state = self._state
        member_id: str = req.member_id
        err = state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            return reply(respond, join_response(req, err, member_id))
        session_ms = ms(req.session_timeout)
        # JoinGroup v0 has no rebalance timeout: the session timeout serves as both.
        rebalance_ms = session_ms if version_of(req) == 0 else ms(req.rebalance_timeout)
        config = state.config
        if not config.group_min_session_timeout_ms <= session_ms <= config.group_max_session_timeout_ms:
            return reply(respond, join_response(req, E.invalid_session_timeout, member_id))
        is_unknown = member_id == ""
        join = JoinContext(
            req=req,
            respond=respond,
            client_id=client_id,
            client_host=client_host,
            session_ms=session_ms,
            rebalance_ms=rebalance_ms,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            instance_id=getattr(req, "group_instance_id", None),
        )
        existing = state.groups.get(req.group_id)
        if isinstance(existing, ShareGroup):
            # Kafka's classicGroupJoin: a group of another type (a share group) is not joined
            return reply(respond, join_response(req, E.inconsistent_group_protocol, ""))
        if isinstance(existing, ConsumerGroup):
            # Kafka's classicGroupJoinToConsumerGroup: a consumer group with members takes a
            # classic member in. An empty consumer group is deleted and becomes a classic group.
            if not existing.is_empty():
                return self._consumer_groups.join(existing, join)
            err = self._replace_empty_consumer_group(existing)
            if err is not None:
                return reply(respond, join_response(req, err, member_id))
        group = state.groups.get(req.group_id)
        assert not isinstance(group, (ConsumerGroup, ShareGroup))
        if group is None:
            if not is_unknown:
                return reply(respond, join_response(req, E.unknown_member_id, member_id))
            group = state.new_group(req.group_id)
        try:
            if not self._accept_joining_member(group, member_id):
                member = group.members.get(member_id)
                if member is not None:
                    self._rebalance.remove_member_and_update(group, member)
                return reply(respond, join_response(req, E.group_max_size_reached, ""))
            if is_unknown:
                self._join_new_member(group, join)
            else:
                self._join_known_member(group, join)
            if group.is_(_S.PREPARING_REBALANCE):
                self._rebalance.try_complete_join(group)
        finally:
            state.maybe_drop_unused(group)

    def _replace_empty_consumer_group(self, group: ConsumerGroup) -> ErrorCode | None:
        """Kafka's maybeDeleteEmptyConsumerGroup: write the group's tombstones; a classic
        group takes its place (and its offsets)."""
        state = self._state
        try:
            state.append(group, [encode_record(r) for r in group_tombstones(group)])
        except Exception as exc:
            log.warning("group %s: deleting the empty consumer group failed: %s", group.group_id, exc)
            return storage_error(exc, commit=False)
        classic = state.new_group(group.group_id)
        classic.adopt_offsets(group)
        group.state = ConsumerGroupState.DEAD
        log.info("group %s: empty consumer group replaced by a classic group", group.group_id)
        return None

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self._state.config.group_max_size
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            # Count members already rejoined: the group may still hold members that will be
            # evicted for not rejoining.
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join < limit
        return member is not None or len(group.members) < limit

    @staticmethod
    def _supports_protocols(group: Group, join: JoinContext) -> bool:
        # Kafka's ClassicGroup.supportsProtocols: an Empty group accepts any non-empty offer;
        # otherwise the type must match and one offered protocol must be supported by all.
        protocol_type: str = join.req.protocol_type
        if group.is_(_S.EMPTY):
            return bool(protocol_type) and bool(join.protocols)
        if protocol_type != group.protocol_type:
            return False
        if not group.members:
            return True
        candidates = group.candidate_protocols()
        return any(name in candidates for name, _ in join.protocols)

    # ------------------------------------------------------------------ the three paths
    def _join_new_member(self, group: Group, join: JoinContext) -> None:
        if group.is_(_S.DEAD):
            return join.fail(E.coordinator_not_available, "")
        if not self._supports_protocols(group, join):
            return join.fail(E.inconsistent_group_protocol, "")
        instance_id = join.instance_id
        new_id = f"{instance_id if instance_id is not None else join.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            return self._join_static_member(group, join, new_id, instance_id)
        if join.version >= 4:
            # KIP-394: hand out the member id first, so a client that times out and retries
            # rejoins as the same member instead of leaving ghosts in the group.
            deadline = self._state.clock() + join.session_ms
            group.pending_members[new_id] = deadline
            self._state.timers.schedule(deadline, PENDING, group, new_id)
            return join.fail(E.member_id_required, new_id)
        self._add_member_and_rebalance(group, join, new_id)

    def _join_known_member(self, group: Group, join: JoinContext) -> None:
        member_id: str = join.req.member_id
        if group.is_(_S.DEAD):
            return join.fail(E.coordinator_not_available, member_id)
        if not self._supports_protocols(group, join):
            return join.fail(E.inconsistent_group_protocol, member_id)
        if member_id in group.pending_members:
            if join.instance_id is not None:
                # Static members never get a pending id; a client mixing both is confused.
                return join.fail(E.unknown_member_id, member_id)
            return self._add_member_and_rebalance(group, join, member_id)
        if group.is_static_member_fenced(member_id, join.instance_id):
            return join.fail(E.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return join.fail(E.unknown_member_id, member_id)
        state = group.state
        if state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, join)
        elif state is _S.COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # A retried JoinGroup: answer with the generation it already belongs to.
                join.answer(current_join_result(join.req, group, member))
            else:
                self._update_member_and_rebalance(group, member, join)
        elif state is _S.STABLE:
            if group.is_leader(member_id) or not member.matches(join.protocols):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                self._update_member_and_rebalance(group, member, join)
            else:
                join.answer(current_join_result(join.req, group, member))
        else:
            join.fail(E.unknown_member_id, member_id)

    def _join_static_member(self, group: Group, join: JoinContext, new_id: str, instance_id: str) -> None:
        old_id = group.static_member_id(instance_id)
        if old_id is None or old_id not in group.members:
            return self._add_member_and_rebalance(group, join, new_id)
        # A known static member came back with no member id (restart): it takes over its old
        # identity, and whoever still uses the old member id is fenced.
        member = group.members[old_id]
        old_leader = group.leader_id
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._rebalance.fence(group, member)
        group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = join.protocols
        member.rebalance_timeout_ms = join.rebalance_ms
        member.session_timeout_ms = join.session_ms
        member.client_id, member.client_host = join.client_id, join.client_host
        self._rebalance.touch(group, member)
        state = group.state
        if state is _S.STABLE:
            try:
                same_protocol = group.select_protocol() == group.protocol_name
            except ValueError:
                same_protocol = False
            if not same_protocol:
                group.set_awaiting_join(member, join.pending())
                return self._rebalance.maybe_prepare_rebalance(group)
            def revert() -> None:
                group.replace_static_member(instance_id, new_id, old_id)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                self._rebalance.touch(group, member)

            try:
                self._state.append(group, [group_metadata_record(group)])
            except Exception as exc:
                log.warning("group %s: persisting static member %s failed: %s", group.group_id, instance_id, exc)
                revert()
                return join.fail(storage_error(exc, commit=False), "")

            def failed(error: ErrorCode) -> None:
                log.warning("group %s: static member %s's record was not replicated (%s)",
                            group.group_id, instance_id, error.name)
                if self._state.groups.get(group.group_id) is group and group.static_members.get(instance_id) == new_id:
                    revert()
                join.fail(storage_error(error, commit=False), "")

            # The member learns its new id once the record holding it is committed (Kafka
            # answers in the append's callback); a failed write gives the old id back.
            self._state.when_committed(group.partition, lambda: join.answer(self._rejoined(join, group, new_id, old_leader)),
                                       failed)
            return None
        group.set_awaiting_join(member, join.pending())
        if state is _S.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._rebalance.prepare_rebalance(group)
        # PREPARING_REBALANCE: it simply counts as rejoined under the new id.

    @staticmethod
    def _rejoined(join: JoinContext, group: Group, new_id: str, old_leader: str | None) -> Any:
        """The answer to a static member that took its identity back in a stable group."""
        if join.version >= 9:
            # v9+: tell a returning leader it leads, but must not re-run the assignor
            # while the group is stable (skip_assignment).
            is_leader = group.is_leader(new_id)
            return join_response(
                join.req,
                E.none,
                new_id,
                group,
                leader=group.leader_id,
                members=list(group.members.values()) if is_leader else None,
                skip_assignment=is_leader,
            )
        # Before v9, return the old leader id so a returning leader does not think it
        # leads and compute an assignment a stable group would ignore.
        return join_response(join.req, E.none, new_id, group, leader=old_leader)

    # ------------------------------------------------------------------ joining the rebalance
    def _add_member_and_rebalance(self, group: Group, join: JoinContext, member_id: str) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=join.instance_id,
            client_id=join.client_id,
            client_host=join.client_host,
            rebalance_timeout_ms=join.rebalance_ms,
            session_timeout_ms=join.session_ms,
            protocol_type=join.req.protocol_type,
            protocols=join.protocols,
            is_new=True,
        )
        if group.is_(_S.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, join.pending())
        self._rebalance.touch(group, member, self._state.config.new_member_join_timeout_ms)
        self._rebalance.maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group: Group, member: Member, join: JoinContext) -> None:
        old = group.set_awaiting_join(member, join.pending())
        if old is not None:
            # The client retried its JoinGroup (it gave up on the first one); the old request
            # still needs an answer so the connection's response order is not stuck.
            reply(old.respond, join_response(old.req, E.rebalance_in_progress, member.member_id))
        member.protocols = join.protocols
        member.rebalance_timeout_ms = join.rebalance_ms
        member.session_timeout_ms = join.session_ms
        self._rebalance.maybe_prepare_rebalance(group)
