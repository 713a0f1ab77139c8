"""Transactional offset commits: TxnOffsetCommit v0-4, and the end of their transactions.

A transactional producer (``sendOffsetsToTransaction``, Kafka Streams' exactly-once) commits
a consumer group's offsets inside its transaction. The coordinator writes them into the
group's ``__consumer_offsets`` partition as one transactional batch of that producer, and
keeps them *pending* on the group (``Group.pending_txn_offsets``, Kafka's
pendingTransactionalOffsetCommits): OffsetFetch does not return them, and answers
UNSTABLE_OFFSET_COMMIT for their partitions when the client requires stable offsets
(coordinator/offsets.py). Once the transaction coordinator has written the COMMIT or ABORT
marker into that partition, the broker calls :meth:`TxnOffsets.complete`, which acts once
the marker is committed (Kafka completes them after the marker's acks=all append): a commit
makes them the group's committed offsets, except where a plain OffsetCommit of the same
partition was written after them (the later record wins, as on replay: Kafka's
CommitRecordMetadataAndOffset ordering); an abort drops them. A TxnOffsetCommit whose
record does not reach the ISR is no longer pending (Kafka's failPendingTxnOffsetCommit).
Loading replays both the pending offsets and the markers (coordinator/loader.py).

Checks and their precedence follow Kafka: KafkaApis.handleTxnOffsetCommitRequest (unknown
partitions are answered first and go no further), GroupCoordinatorService.
commitTransactionalOffsets (the group id), the runtime's transactional write (the
coordinator's partition, the broker's verification of the transaction, KIP-890, then
loading) and OffsetMetadataManager.commitTransactionalOffset (the group and member, v3+,
then each partition's metadata size). Errors are translated as Kafka's
CoordinatorOperationExceptionHelper does; v0-1 clients get COORDINATOR_NOT_AVAILABLE for
COORDINATOR_LOAD_IN_PROGRESS, which they cannot handle (KAFKA-7296).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.consumer.group import ConsumerGroup
from coordinator.group import GroupState, TxnOffset
from coordinator.placement import legacy_partition
from coordinator.records import OffsetCommitValue, encode_offset_commit_key, encode_offset_commit_value
from coordinator.responses import response_for, version_of
from coordinator.share.group import ShareGroup
from coordinator.state import AnyGroup, CoordinatorState, Record, Respond, reply

__all__ = ["TxnOffsets", "operation_error", "verification_error"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = GroupState

# Kafka's CoordinatorOperationExceptionHelper.handleOperationException: what a failed group
# coordinator write (or the verification before it) becomes for the client.
_OPERATION_ERRORS: dict[ErrorCode, ErrorCode] = {
    # verification can fail with NETWORK_EXCEPTION, which older clients do not retry well;
    # COORDINATOR_LOAD_IN_PROGRESS makes them retry without a coordinator lookup
    E.network_exception: E.coordinator_load_in_progress,
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
    E.invalid_fetch_size: E.unknown_server_error,
}


def operation_error(code: ErrorCode) -> ErrorCode:
    """The code a TxnOffsetCommit answers for a failed write or verification (Kafka's
    handleOperationException)."""
    return _OPERATION_ERRORS.get(code, code)


def verification_error(code: ErrorCode | int, version: int) -> ErrorCode:
    """What TxnOffsetCommit ``version`` answers when the transaction coordinator did not
    confirm the group's ``__consumer_offsets`` partition in the transaction, ``code`` being
    its answer to the verification (AddPartitionsToTxn verify_only): first Kafka's
    AddPartitionsToTxnManager translation, then the group coordinator's."""
    code = ErrorCode(code)
    if code == E.cluster_authorization_failed:
        # the broker's own request was refused: the client must not see an authorization error
        code = E.invalid_txn_state
    elif code == E.producer_fenced:
        code = E.invalid_producer_epoch  # what producers expect here
    elif code == E.transaction_abortable and version < 4:
        code = E.invalid_txn_state  # TRANSACTION_ABORTABLE is known from v4 (KIP-890)
    return operation_error(code)


def _append_error(exc: BaseException) -> ErrorCode:
    code = getattr(exc, "error_code", None)
    if isinstance(code, ErrorCode) and code is not E.none:
        return operation_error(code)
    return E.unknown_server_error  # an unexpected failure, as Kafka answers it


def _response(req: Any, errors: dict[tuple[str, int], ErrorCode]) -> Any:
    old_client = version_of(req) < 2
    topics: dict[str, list[dict[str, Any]]] = {}
    for t in req.topics:
        parts = topics.setdefault(t.name, [])
        for p in t.partitions:
            e = errors[(t.name, p.partition_index)]
            if old_client and e == E.coordinator_load_in_progress:
                # 0.11-2.0 producers could crash on it (KAFKA-7296); KafkaApis rewrites it
                e = E.coordinator_not_available
            parts.append({"partition_index": p.partition_index, "error_code": e})
    return response_for(req, topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])


class TxnOffsets:
    """TxnOffsetCommit and transaction completion for the groups of ``state``.

    ``partition_exists(topic, partition)``, if given, makes TxnOffsetCommit answer
    UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist (Kafka's KafkaApis check).
    """

    def __init__(self, state: CoordinatorState, partition_exists: Callable[[str, int], bool] | None = None) -> None:
        self._state = state
        self._partition_exists = partition_exists

    def _known(self, topic: str, partition: int) -> bool:
        return self._partition_exists is None or self._partition_exists(topic, partition)

    # ------------------------------------------------------------------ TxnOffsetCommit
    def write_partition(self, req: Any) -> int | None:
        """The ``__consumer_offsets`` partition this TxnOffsetCommit would write to, which
        the broker must verify is in the producer's transaction before calling
        :meth:`commit`; None when the request is answered without a write anyway (every
        partition unknown, no group id, a group another broker coordinates)."""
        if not req.group_id:
            return None
        if not any(self._known(t.name, p.partition_index) for t in req.topics for p in t.partitions):
            return None
        partition = self._state.partition_for(req.group_id)
        return partition if self._state.serves(partition) else None

    def commit(self, req: Any, respond: Respond, verification: ErrorCode | None = None) -> None:
        """TxnOffsetCommit v0-4. ``verification``: the transaction coordinator's answer
        when the broker verified the group's partition in the transaction (NONE or None:
        verified, or not verified at all)."""
        errors: dict[tuple[str, int], ErrorCode] = {}
        known: list[tuple[str, Any]] = []
        for t in req.topics:
            for p in t.partitions:
                if self._known(t.name, p.partition_index):
                    known.append((t.name, p))
                else:
                    errors[(t.name, p.partition_index)] = E.unknown_topic_or_partition
        if known:
            self._commit(req, known, errors, verification)
        reply(respond, _response(req, errors))

    def _commit(
        self, req: Any, known: list[tuple[str, Any]], errors: dict[tuple[str, int], ErrorCode],
        verification: ErrorCode | None,
    ) -> None:
        def fail(e: ErrorCode) -> None:
            for name, p in known:
                errors[(name, p.partition_index)] = e

        state = self._state
        group_id: str = req.group_id
        if not group_id:
            return fail(E.invalid_group_id)
        partition = state.partition_for(group_id)
        if not state.serves(partition):
            return fail(E.not_coordinator)
        if verification is not None and verification != E.none:
            return fail(verification_error(verification, version_of(req)))
        if partition in state.loading:
            return fail(E.coordinator_load_in_progress)
        # v0-2 carry no member: the defaults are Kafka's (generation -1, no member id)
        generation: int = getattr(req, "generation_id", -1)
        group = state.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return fail(E.illegal_generation)
            group = state.new_group(group_id)  # a "simple" group that only stores offsets
        try:
            err = self._validate(group, getattr(req, "member_id", ""), getattr(req, "group_instance_id", None), generation)
            if err is not None:
                return fail(err)
            self._store(group, req, known, errors)
        finally:
            state.maybe_drop_unused(group)

    @staticmethod
    def _validate(group: AnyGroup, member_id: str, instance_id: str | None, generation: int) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateOffsetCommit for a transactional commit: unlike
        OffsetCommit, no member is needed when none is given, and the group's state (a
        rebalance in progress) does not matter. A consumer group checks the member's epoch
        (ConsumerGroup.validateOffsetCommit; a stale epoch is ILLEGAL_GENERATION here)."""
        if isinstance(group, ShareGroup):
            return E.group_id_not_found  # share groups keep no offsets here
        if isinstance(group, ConsumerGroup):
            err = group.offset_commit_error(member_id, generation, transactional=True, version=0)
            return E.illegal_generation if err == E.stale_member_epoch else err
        if group.is_(_S.DEAD):
            return E.coordinator_not_available
        if generation < 0 and group.is_(_S.EMPTY):
            return None
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    return E.unknown_member_id
                if current != member_id:
                    return E.fenced_instance_id
            if member_id not in group.members:
                return E.unknown_member_id
            if generation != group.generation:
                return E.illegal_generation
        return None

    def _store(
        self, group: AnyGroup, req: Any, known: list[tuple[str, Any]], errors: dict[tuple[str, int], ErrorCode]
    ) -> None:
        state = self._state
        now = state.clock()
        max_meta = state.config.offset_metadata_max_bytes
        values: list[tuple[tuple[str, int], OffsetCommitValue]] = []
        records: list[Record] = []
        for name, p in known:
            key = (name, p.partition_index)
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if len(metadata) > max_meta:
                errors[key] = E.offset_metadata_too_large
                continue
            # Kafka's OffsetAndMetadata.fromRequest: no expiry timestamp for transactional commits
            value = OffsetCommitValue(
                offset=p.committed_offset,
                metadata=metadata,
                commit_timestamp=now,
                leader_epoch=getattr(p, "committed_leader_epoch", -1),
                expire_timestamp=-1,
            )
            values.append((key, value))
            records.append((encode_offset_commit_key(group.group_id, name, p.partition_index), encode_offset_commit_value(value)))
        if not records:
            return
        producer_id: int = req.producer_id
        try:
            base = state.append(group, records, producer_id=producer_id, producer_epoch=req.producer_epoch)
        except Exception as exc:
            log.warning("group %s: storing transactional offsets of producer %d failed: %s", group.group_id, producer_id, exc)
            e = _append_error(exc)
            for key, _ in values:
                errors[key] = e
            return
        for key, _ in values:
            errors[key] = E.none
        if producer_id < 0:
            # Without a producer the batch is not transactional: Kafka's replay stores such
            # offsets as committed (only reachable with verification disabled), so they show
            # once the record is, as an OffsetCommit's.
            state.commit_when_written(group, [(key, value, base + i) for i, (key, value) in enumerate(values)])
            return
        # Pending at once, as Kafka's prepareTxnOffsetCommit: they show nowhere before the
        # transaction's marker, and keep OffsetFetch's stable reads waiting meanwhile.
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        written = [(key, TxnOffset(value, base + i)) for i, (key, value) in enumerate(values)]
        pending.update(written)
        state.txn_groups.setdefault(producer_id, set()).add(group.group_id)
        state.when_committed(group.partition, lambda: None,
                             lambda _e: self._write_failed(group.group_id, producer_id, written))

    def _write_failed(self, gid: str, producer_id: int, written: list[tuple[tuple[str, int], TxnOffset]]) -> None:
        """Kafka's failPendingTxnOffsetCommit: offsets whose record did not reach the ISR are
        no longer pending, so the transaction's COMMIT marker does not make them committed
        (the client was told of the error and retries, writing them again)."""
        state = self._state
        group = state.groups.get(gid)
        pending = group.pending_txn_offsets.get(producer_id) if group is not None else None
        if group is None or pending is None:
            return
        for key, entry in written:
            if pending.get(key) is entry:
                del pending[key]
        if not pending:
            del group.pending_txn_offsets[producer_id]
            gids = state.txn_groups.get(producer_id)
            if gids is not None:
                gids.discard(gid)
                if not gids:
                    del state.txn_groups[producer_id]
            state.maybe_drop_unused(group)

    def _copy_legacy_commits(self, group: AnyGroup, moved: list[tuple[tuple[str, int], OffsetCommitValue]]) -> None:
        """Offsets committed from records of the legacy partition: written into the group's
        partition, where the group's next load finds them (the legacy records lose to any
        record there)."""
        records = [(encode_offset_commit_key(group.group_id, t, p), encode_offset_commit_value(v)) for (t, p), v in moved]
        try:
            base = self._state.append(group, records)
        except Exception as exc:  # the next load finds them in the legacy partition again
            log.warning("group %s: copying offsets committed in its legacy partition failed: %s", group.group_id, exc)
            return
        for i, (key, _) in enumerate(moved):
            group.offset_positions[key] = base + i

    # ------------------------------------------------------------------ completion
    def complete(self, partition: int, producer_id: int, commit: bool, marker_end: int | None = None) -> int:
        """The COMMIT (``commit``) or ABORT marker of ``producer_id`` is in
        ``__consumer_offsets-<partition>``: complete the producer's pending offsets in the
        groups of that partition (Kafka's handleTxnCompletion / completePendingTxnOffsetCommit)
        once the marker is committed: ``marker_end`` is the log offset after it (None: it
        is committed already). Until then they stay pending, and if the marker's write
        fails they wait for the one the transaction coordinator writes again. Returns how
        many groups have some. A group left without offsets or members goes at the next
        expiry run, as in Kafka."""
        state = self._state
        n = state.config.offsets_topic_num_partitions
        due = sum(
            1 for gid in state.txn_groups.get(producer_id, ())
            if (g := state.groups.get(gid)) is not None and producer_id in g.pending_txn_offsets
            and partition in (g.partition, legacy_partition(g.partition, n))
        )
        if marker_end is None:
            self._complete(partition, producer_id, commit)
        else:
            state.writes.after(partition, marker_end, lambda: self._complete(partition, producer_id, commit),
                               lambda _e: None)
        return due

    def _complete(self, partition: int, producer_id: int, commit: bool) -> None:
        state = self._state
        gids = state.txn_groups.get(producer_id)
        if not gids:
            return
        done = 0
        n = state.config.offsets_topic_num_partitions
        for gid in list(gids):
            group = state.groups.get(gid)
            if group is None:
                gids.discard(gid)  # the group went (deleted, unloaded) with its pending offsets
                continue
            # The legacy partition's marker too (coordinator/relocation.py): the offsets a
            # group has pending there belong to the one transaction its producer has open,
            # whose markers go to every partition it wrote to.
            if partition not in (group.partition, legacy_partition(group.partition, n)):
                continue  # the same transaction's marker in another partition completes those
            gids.discard(gid)
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending is None:
                continue
            done += 1
            if commit:
                moved: list[tuple[tuple[str, int], OffsetCommitValue]] = []
                for key, entry in pending.items():
                    # The later record wins: a plain commit written after the transactional
                    # one stays (compaction would keep it too).
                    if key not in group.offsets or group.offset_positions.get(key, -1) < entry.position:
                        group.commit_offset(key, entry.value, entry.position)
                        if entry.position < 0:
                            moved.append((key, entry.value))
                if moved:
                    self._copy_legacy_commits(group, moved)
        if not gids:
            del state.txn_groups[producer_id]
        log.debug("producer %d: %s pending offsets of %d groups in partition %d",
                  producer_id, "committed" if commit else "aborted", done, partition)
