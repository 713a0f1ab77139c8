"""Committed offsets: OffsetCommit v2-9, OffsetFetch v1-9, OffsetDelete v0, and their expiry.

Offsets live on their group (``Group.offsets``) and are persisted as OffsetCommit records of
``__consumer_offsets``; a group that only ever stores offsets (no members) is a group of
generation 0 without protocol type. Expiry follows Kafka's GroupMetadata.removeExpiredOffsets
(KIP-211: an Empty group's offsets age from when it became empty).

KIP-848 consumer groups (coordinator/consumer/) keep their offsets the same way; their
commits and fetches are checked against the member's epoch (Kafka's ConsumerGroup.
validateOffsetCommit / validateOffsetFetch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
UNSUPPORTED_VERSION before OffsetCommit v9), offsets of the topics they subscribe to never
expire nor can be deleted, and an empty one left without offsets is deleted by expiry.

Pending transactional offsets (TxnOffsetCommit, ``Group.pending_txn_offsets``) are written
and completed in coordinator/txn_offsets.py; here they show as OffsetFetch's
UNSTABLE_OFFSET_COMMIT when the client requires stable offsets, they keep their partition's
committed offset from expiring and their group alive, and OffsetDelete removes them too.

An OffsetCommit's offsets are pending the same way until their record is committed (below
the partition's high watermark: ``Group.unreplicated_offsets``, Kafka's
pendingOffsetCommits, coordinator/writes.py): OffsetFetch returns the offset committed
before, or UNSTABLE_OFFSET_COMMIT to a stable read; expiry and OffsetDelete treat them as
transactional ones. A failed write drops them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.classic.rebalance import Rebalancer
from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import encode_record, group_tombstones
from coordinator.group import CONSUMER_PROTOCOL_TYPE, Group, GroupState
from coordinator.records import (
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from coordinator.responses import ms, response_for, version_of
from coordinator.share.group import ShareGroup
from coordinator.state import AnyGroup, CoordinatorState, Record, Respond, reply, storage_error

__all__ = ["Offsets"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState


def _fetched_partition(index: int, value: OffsetCommitValue | None, error: ErrorCode = E.none) -> dict[str, Any]:
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


def _commit_response(req: Any, errors: dict[tuple[str, int], ErrorCode]) -> Any:
    topics: dict[str, list[dict[str, Any]]] = {}
    for t in req.topics:
        parts = topics.setdefault(t.name, [])
        for p in t.partitions:
            parts.append({"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]})
    return response_for(req, topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])


class Offsets:
    """Offset APIs and expiry for the groups of ``state``.

    ``partition_exists(topic, partition)``, if given, makes OffsetCommit answer
    UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (Kafka's KafkaApis check).
    """

    def __init__(
        self,
        state: CoordinatorState,
        rebalancer: Rebalancer,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        self._state = state
        self._rebalance = rebalancer
        self._partition_exists = partition_exists
        self.next_expiry_ms = state.clock() + state.config.offsets_retention_check_interval_ms

    # ------------------------------------------------------------------ OffsetCommit
    def commit(self, req: Any, respond: Respond) -> None:
        state = self._state
        keys = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]

        def fail(e: ErrorCode) -> None:
            reply(respond, _commit_response(req, dict.fromkeys(keys, e)))

        err = state.group_error(req.group_id, allow_empty=True)
        if err is not None:
            return fail(err)
        generation: int = req.generation_id_or_member_epoch
        member_id: str = req.member_id
        instance_id = getattr(req, "group_instance_id", None)
        group = state.groups.get(req.group_id)
        if group is None:
            if generation >= 0:
                # A generation for a group we do not know: an old generation, reject.
                return fail(E.illegal_generation)
            group = state.new_group(req.group_id)  # a group that only stores offsets
        if isinstance(group, ShareGroup):
            return fail(E.group_id_not_found)  # share groups keep no offsets here
        if isinstance(group, ConsumerGroup):
            err = group.offset_commit_error(member_id, generation, transactional=False, version=version_of(req))
            if err is not None:
                return fail(err)
            return self._store(group, req, respond, keys)
        try:
            if group.is_(_S.DEAD):
                return fail(E.coordinator_not_available)
            if generation < 0 and group.is_(_S.EMPTY):
                return self._store(group, req, respond, keys)
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
            self._rebalance.touch(group, member)
            self._store(group, req, respond, keys)
        finally:
            state.maybe_drop_unused(group)

    def _store(self, group: AnyGroup, req: Any, respond: Respond, keys: list[tuple[str, int]]) -> None:
        now = self._state.clock()
        expire = -1
        if version_of(req) <= 4:
            retention = ms(req.retention_time)
            if retention != -1:
                expire = now + retention
        errors: dict[tuple[str, int], ErrorCode] = {}
        values: dict[tuple[str, int], OffsetCommitValue] = {}
        records: list[Record] = []
        max_meta = self._state.config.offset_metadata_max_bytes
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
        base = 0
        if records:
            try:
                base = self._state.append(group, records)
            except Exception as exc:
                log.warning("group %s: storing offsets failed: %s", group.group_id, exc)
                e = storage_error(exc, commit=True)
                for key in values:
                    errors[key] = e
                values = {}
        # values are in record order: the i-th lies at log offset base + i
        if values:
            self._state.commit_when_written(group, [(key, value, base + i) for i, (key, value) in enumerate(values.items())])
        for key in keys:
            errors.setdefault(key, E.none)
        reply(respond, _commit_response(req, errors))

    # ------------------------------------------------------------------ OffsetFetch
    def fetch(self, req: Any, respond: Respond) -> None:
        v = version_of(req)
        # v7+: a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT
        # (retriable) instead of the committed offset the transaction may yet replace (KIP-447).
        stable = bool(getattr(req, "require_stable", False))
        if v >= 8:
            groups = []
            for g in req.groups:
                member = (getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
                err, topics = self._fetch_group(g.group_id, g.topics, stable, member)
                groups.append({"group_id": g.group_id, "topics": topics if err is None else [], "error_code": err or E.none})
            resp = response_for(req, groups=groups)
        else:
            err, topics = self._fetch_group(req.group_id, req.topics, stable)
            if err is not None and v < 2:
                # v1 has no group-level error: report it on every requested partition.
                topics = [
                    {"name": t.name, "partitions": [_fetched_partition(p, None, err) for p in t.partition_indexes]}
                    for t in req.topics or ()
                ]
            elif err is not None:
                topics = []
            resp = response_for(req, topics=topics, error_code=err or E.none)
        reply(respond, resp)

    def _fetch_group(
        self, group_id: str, topics: Any, require_stable: bool = False, member: tuple[str | None, int] = (None, -1)
    ) -> tuple[ErrorCode | None, list[dict[str, Any]]]:
        """``member``: the request's member id and epoch (OffsetFetch v9+), checked against a
        consumer group's member (Kafka's ConsumerGroup.validateOffsetFetch)."""
        err = self._state.group_error(group_id, allow_empty=True)
        if err is not None:
            return err, []
        group = self._state.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return E.group_id_not_found, []
        if isinstance(group, ConsumerGroup):
            err = group.offset_fetch_error(*member)
            if err is not None:
                return err, []
        offsets = group.offsets if group is not None else {}
        # a commit whose record is not committed yet is pending too (Kafka's
        # hasPendingOffsetCommitsForTopicPartition): the committed offset may change any moment
        unstable = require_stable and group is not None and group.has_pending_offsets()

        def fetched(topic: str, p: int) -> dict[str, Any]:
            if unstable and group is not None and group.has_pending_offset((topic, p)):
                return _fetched_partition(p, None, E.unstable_offset_commit)
            return _fetched_partition(p, offsets.get((topic, p)))

        if topics is None:
            # Null topic list (v2+): every committed offset of the group (as Kafka, a
            # partition with only a pending offset is not listed).
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for topic, p in sorted(offsets):
                by_topic.setdefault(topic, []).append(fetched(topic, p))
            return None, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        return None, [{"name": t.name, "partitions": [fetched(t.name, p) for p in t.partition_indexes]} for t in topics]

    # ------------------------------------------------------------------ OffsetDelete
    def delete(self, req: Any, respond: Respond) -> None:
        reply(respond, self._delete(req))

    def _delete(self, req: Any) -> Any:
        def group_error(e: ErrorCode) -> Any:
            return response_for(req, error_code=e, topics=[])

        state = self._state
        err = state.group_error(req.group_id, allow_empty=False)
        if err is not None:
            return group_error(err)
        group = state.groups.get(req.group_id)
        if group is None or group.state.value == _S.DEAD.value or isinstance(group, ShareGroup):
            return group_error(E.group_id_not_found)
        requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        if isinstance(group, ConsumerGroup):
            # Kafka's deleteOffsets: refused for the topics the group subscribes to
            deletable = {k for k in requested if not group.is_subscribed_to(k[0])}
        elif group.is_(_S.EMPTY):
            deletable = set(requested)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = {k for k in requested if not group.is_subscribed_to(k[0])}
        else:
            return group_error(E.non_empty_group)
        # A pending offset is deleted too, transactional (Kafka writes the tombstone for it and
        # its replay drops the pending entry; the transaction itself stays open) or waiting for
        # its write (the tombstone follows its record in the log).
        removed = sorted(k for k in deletable if k in group.offsets or group.has_pending_offset(k))
        records: list[Record] = [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in removed]
        dies = (
            isinstance(group, Group)
            and group.is_(_S.EMPTY)
            and not (set(group.offsets) - set(removed))
            and not (set(group.unreplicated_offsets) - set(removed))
            and not group.pending_txn_offsets
            and not group.pending_members
        )
        if dies and isinstance(group, Group) and group.generation > 0:
            # As Kafka's cleanupGroupMetadata: an Empty group left without offsets is dead.
            # A generation-0 group only stored offsets and has no metadata record to remove.
            records.append((encode_group_metadata_key(group.group_id), None))
        if records:
            try:
                state.append(group, records)
            except Exception as exc:
                log.warning("group %s: offset deletion failed: %s", group.group_id, exc)
                return group_error(storage_error(exc, commit=False))
        for k in removed:
            group.offsets.pop(k, None)
        group.drop_pending_offsets(set(removed))
        if dies:
            state.kill(group)
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in requested:
            e = E.none if (t, p) in deletable else E.group_subscribed_to_topic
            topics.setdefault(t, []).append({"partition_index": p, "error_code": e})
        return response_for(
            req, error_code=E.none, topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]
        )

    # ------------------------------------------------------------------ expiry
    def maybe_expire(self, now: int) -> None:
        """Expire offsets if offsets.retention.check.interval.ms has passed since the last run."""
        if now >= self.next_expiry_ms:
            self.next_expiry_ms = now + self._state.config.offsets_retention_check_interval_ms
            self._expire_all(now)

    def _expire_all(self, now: int) -> None:
        """Kafka's GroupMetadata.removeExpiredOffsets + cleanupGroupMetadata."""
        retention = self._state.config.offsets_retention_ms
        for group in list(self._state.groups.values()):
            if group.partition in self._state.loading:
                continue
            try:
                self._expire_group(group, now, retention)
            except Exception:
                log.exception("group %s: offset expiry failed", group.group_id)

    def _expire_group(self, group: AnyGroup, now: int, retention: int) -> None:
        def expired(base: Callable[[OffsetCommitValue], int], subscribed: set[str] | None = None) -> list[tuple[str, int]]:
            out = []
            for k, v in group.offsets.items():
                if subscribed is not None and k[0] in subscribed:
                    continue
                if pending and group.has_pending_offset(k):
                    continue  # a transaction or a write may still commit it (Kafka keeps it too)
                if v.expire_timestamp != -1:
                    if now >= v.expire_timestamp:
                        out.append(k)
                elif now - base(v) >= retention:
                    out.append(k)
            return out

        if isinstance(group, ShareGroup):
            return  # no offsets here: a share group's progress is in __share_group_state
        pending = group.has_pending_offsets()
        if isinstance(group, ConsumerGroup):
            return self._expire_consumer_group(group, expired(lambda v: v.commit_timestamp, group.subscribed_topics()))
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
        # An open transaction with offsets in the group keeps it alive (Kafka's hasOffsets).
        dies = group.is_(_S.EMPTY) and not remaining and not pending and not group.members and not group.pending_members
        if not gone and not dies:
            return
        records: list[Record] = [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in sorted(gone)]
        if dies and group.generation > 0:
            records.append((encode_group_metadata_key(group.group_id), None))
        self._expire(group, records, gone, dies)

    def _expire_consumer_group(self, group: ConsumerGroup, gone: list[tuple[str, int]]) -> None:
        """Kafka's cleanupExpiredOffsets for a consumer group (offsets age from their commit;
        those of subscribed topics are kept), then maybeDeleteGroup: an empty group left
        without offsets nor open transactions is deleted."""
        remaining = set(group.offsets) - set(gone)
        dies = group.is_empty() and not remaining and not group.has_pending_offsets()
        if not gone and not dies:
            return
        records: list[Record] = [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in sorted(gone)]
        if dies:
            records += [encode_record(r) for r in group_tombstones(group)]
        self._expire(group, records, gone, dies)

    def _expire(self, group: AnyGroup, records: list[Record], gone: Iterable[tuple[str, int]], dies: bool) -> None:
        """Write the expiry's tombstones, then forget the offsets (and the group, if it dies)."""
        if records:
            try:
                self._state.append(group, records)
            except Exception as exc:
                log.warning("group %s: writing expiry tombstones failed: %s", group.group_id, exc)
                return
        for k in gone:
            del group.offsets[k]
        if dies:
            self._state.kill(group)
