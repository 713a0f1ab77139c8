"""ReplicaManager: the one place that appends to and reads from partitions (Kafka's
ReplicaManager with its Partition objects).

Handlers and the group coordinator's driver go through it for every partition operation:
appending as the partition's leader (validation is storage's, in storage/validator.py),
reading for Fetch (offset and size limits to a byte region, up to the high watermark, or
the last stable offset with the aborted transactions for read_committed),
parking fetches that want more data (the purgatory) and waking them on append, and the
offset lookups of ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeProducers.

Each local replica is a :class:`~broker.partition.Partition` that leads or follows at
the epoch the metadata store gives it (:mod:`broker.replica.replication` applies that state and
answers followers' fetches), on a single node as in a cluster: a single node leads every
partition with an ISR of itself, so its high watermark reaches each append at once, by
the same code that waits for followers elsewhere. The leader's appends are stamped with
its epoch, refused below ``min.insync.replicas`` for acks=all, and acks=all answers wait
until the high watermark passes the records (:meth:`ReplicaManager.wait_for_high_watermark`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.records import HEADER_SIZE, iter_headers, parse_header
from storage.errors import KafkaStorageError
from storage.log import AppendResult, PartitionLog
from storage.manager import LogManager
from storage.producer_state import ProducerStateEntry
from storage.transactions import VerificationGuard
from storage.validator import validate_for_append

from ..topics import INTERNAL_TOPICS
from .partition import Partition
from .purgatory import Purgatory
from .turned_away import TurnedAway

if TYPE_CHECKING:
    from .replication import FollowerRead, Replication

#: ListOffsets special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
NO_LEADER_EPOCH = -1
#: Fetch and ListOffsets isolation levels (Kafka's IsolationLevel)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionRead:
    """One partition's share of a Fetch: the partition's offsets and the record bytes."""

    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    #: read_committed: (producer id, first offset) of the transactions aborted in the range
    #: of ``records`` (empty when none); None for other reads, which Fetch answers as null
    aborted_transactions: list[tuple[int, int]] | None = None


class ReplicaManager:
    def __init__(self, logs: LogManager, broker_id: int = 0) -> None:
        self.logs = logs
        self.broker_id = broker_id
        #: this broker's replicas, leading or following at the metadata store's epochs
        self.partitions: dict[TopicPartition, Partition] = {}
        #: parks fetches until an append and acks=all produces until the HW moves
        self.purgatory = Purgatory()
        #: idempotent producers whose batch was refused here unwritten moments ago (a sequence gap
        #: from them is answered "retry": broker/replica/turned_away.py)
        self.turned_away = TurnedAway()
        #: the leader's side of replication (broker.replication.Replication sets itself here)
        self.replication: Replication | None = None
        logs.on_replaced = self._log_replaced

    def _log_replaced(self, tp: TopicPartition, plog: PartitionLog) -> None:
        """A replica moved to another log dir (AlterReplicaLogDirs): its Partition goes on
        with the reopened log."""
        part = self.partitions.get(tp)
        if part is not None:
            part.log = plog
            self.purgatory.notify(tp)

    # --- lookup -----------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionLog:
        """The log of the local replica this broker leads: UNKNOWN_TOPIC_OR_PARTITION
        without one, NOT_LEADER_OR_FOLLOWER when another broker leads it."""
        return self.leader(topic, partition).log

    def leader(self, topic: str, partition: int) -> Partition:
        """The Partition this broker leads (errors as :meth:`partition`)."""
        part = self.partitions.get((topic, partition))
        if part is None:
            plog = self.logs.get(topic, partition)
            if plog is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition)
            raise _offline(topic, partition) if plog.offline else KafkaError(ErrorCode.not_leader_or_follower)
        if part.log.offline:
            raise _offline(topic, partition)
        if not part.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return part

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch as this broker knows it."""
        part = self.partitions.get((topic, partition))
        return part.leader_epoch if part is not None else NO_LEADER_EPOCH

    def local_log(self, topic: str, partition: int) -> PartitionLog | None:
        """This broker's replica of a partition, led or followed (a coordinator loading
        its partition, a tool); None when it holds none."""
        return self.logs.get(topic, partition)

    def local_offsets(self, topic: str, partition: int) -> tuple[int, int, int] | None:
        """(high watermark, LSO, log start) of the local replica, led or not; None without one."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            return None
        return plog.high_watermark, plog.last_stable_offset, plog.log_start_offset

    def check_leader_epoch(self, current_leader_epoch: int, topic: str, partition: int) -> None:
        """KIP-320: a client that knows a newer epoch than ours is ahead of this broker's
        metadata (UNKNOWN_LEADER_EPOCH, retried); an older one is stale (FENCED_LEADER_EPOCH)."""
        if current_leader_epoch < 0:
            return
        epoch = self.leader_epoch_of(topic, partition)
        if current_leader_epoch > epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch)
        if current_leader_epoch < epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)

    # --- append -----------------------------------------------------------------------------
    def start_transaction_verification(self, topic: str, partition: int, producer_id: int, base_sequence: int,
                                       producer_epoch: int) -> VerificationGuard:
        """KIP-890: the guard an append opening this producer's transaction here must carry
        once its coordinator confirms it (SENTINEL_GUARD: none needed, already open)."""
        return self.partition(topic, partition).maybe_start_transaction_verification(producer_id, base_sequence,
                                                                                     producer_epoch)

    def append_records(self, topic: str, partition: int, records: bytes | bytearray | memoryview | None,
                       now_ms: int, *, internal_ok: bool = False, acks: int = 1,
                       verification_guard: VerificationGuard | None = None,
                       origin_coordinator: bool = False) -> AppendResult:
        """Append a producer's batches as the partition's leader: validate (storage's
        LogValidator), assign offsets, write, wake fetches parked on the partition.
        ``verification_guard``: the transaction this append opens was verified (KIP-890).
        ``origin_coordinator``: the group coordinator's own batches (Kafka's AppendOrigin
        COORDINATOR): a transactional offset commit carries no producer sequence."""
        if topic in INTERNAL_TOPICS and not internal_ok:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")
        if records is None:
            raise KafkaError(ErrorCode.corrupt_message, "null records")
        try:
            part = self.leader(topic, partition)
            plog = part.log
            min_isr = plog.config.min_insync_replicas
            if acks == -1 and len(part.isr) < min_isr:
                raise KafkaError(ErrorCode.not_enough_replicas,
                                 f"The size of the current ISR {sorted(part.isr)} is insufficient to satisfy the "
                                 f"min.isr requirement of {min_isr} for partition {plog.name}")
        except KafkaError as exc:
            self.turned_away.note((topic, partition), _producer_id(records), exc.error_code)
            raise
        epoch = part.leader_epoch
        cfg = plog.config
        valid = validate_for_append(records, cfg, now_ms, topic_partition=plog.name,
                                    log_start_offset=plog.log_start_offset)
        try:
            result = plog.append(valid.buffer, valid.headers, leader_epoch=epoch,
                                 log_append_time_ms=now_ms if cfg.log_append_time else None,
                                 verification_guard=verification_guard, coordinator=origin_coordinator)
        except KafkaError as exc:
            pid = valid.headers[0].producer_id if valid.headers else -1
            if exc.error_code != ErrorCode.out_of_order_sequence_number:
                raise
            # see broker/replica/turned_away.py: the earlier batches come first
            retry = self.turned_away.answer_gap((topic, partition), pid, now_ms - part.leading_since_ms)
            if retry is not None:
                raise KafkaError(retry[0], f"{exc.message}; {retry[1]}") from None
            raise
        if not result.duplicate:
            part.maybe_increment_high_watermark()  # an ISR of one (a single node) commits at once
            self.purgatory.notify((topic, partition))
        return result

    def append_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int, commit: bool) -> AppendResult:
        """Write a transaction's COMMIT/ABORT control batch as the partition's leader
        (WriteTxnMarkers); storage raises for a fenced producer or coordinator epoch."""
        part = self.leader(topic, partition)
        result = part.log.append_control_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                               leader_epoch=part.leader_epoch)
        part.maybe_increment_high_watermark()
        self.purgatory.notify((topic, partition))
        return result

    def replicated_to(self, topic: str, partition: int, required_offset: int, epoch: int) -> ErrorCode | None:
        """Kafka's checkEnoughReplicasReachOffset for an acks=all append made at leader
        ``epoch``: None while the high watermark is below ``required_offset``, else the
        answer's error code. A later epoch of the same unbroken leadership (the controller
        took a replica out of the ISR) still holds the records: they count when the high
        watermark passes them, as in Kafka, whose check asks only whether this broker leads."""
        part = self.partitions.get((topic, partition))
        if part is not None and part.log.offline:
            return ErrorCode.kafka_storage_error  # Kafka's delayed produce on an offline partition
        if part is None or not part.is_leader or epoch < part.leading_since_epoch:
            return ErrorCode.not_leader_or_follower
        if part.log.high_watermark < required_offset:
            return None
        if len(part.maximal_isr) < part.log.config.min_insync_replicas:
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    async def wait_for_high_watermark(self, waits: list[tuple[TopicPartition, int, int]], timeout: float
                                      ) -> dict[TopicPartition, ErrorCode]:
        """acks=all: park until the high watermark of each (partition, required offset,
        epoch) passes its offset, leadership moves, or ``timeout`` (REQUEST_TIMED_OUT)."""
        deadline = time.monotonic() + timeout
        out: dict[TopicPartition, ErrorCode] = {}
        pending = list(waits)
        while True:
            still = []
            for tp, required, epoch in pending:
                code = self.replicated_to(tp[0], tp[1], required, epoch)
                if code is None:
                    still.append((tp, required, epoch))
                else:
                    out[tp] = code
            pending = still
            left = deadline - time.monotonic()
            if not pending or left <= 0:
                break
            await self.purgatory.wait([tp for tp, _, _ in pending], left)
        for tp, _, _ in pending:
            out[tp] = ErrorCode.request_timed_out
        return out

    # --- read -------------------------------------------------------------------------------
    def follower_fetch(self, replica_id: int, topic: str, partition: int, fetch_offset: int, last_fetched_epoch: int,
                       current_leader_epoch: int, max_bytes: int, min_one_batch: bool) -> FollowerRead:
        """A follower's fetch of a partition this broker leads (broker.replication)."""
        return self.replication.follower_fetch(replica_id, topic, partition, fetch_offset, last_fetched_epoch,
                                               current_leader_epoch, max_bytes, min_one_batch)

    def read(self, plog: PartitionLog, fetch_offset: int, max_bytes: int, *, min_one_batch: bool,
             to_log_end: bool = False, read_committed: bool = False) -> PartitionRead:
        """Whole batches from ``fetch_offset`` up to the high watermark (``to_log_end``: up
        to the log end, for followers; ``read_committed``: up to the last stable offset,
        with the aborted transactions of the range read), at most ``max_bytes`` unless
        ``min_one_batch`` (the first partition of a response always gets one whole batch,
        so a batch larger than the limits still makes progress).

        Kafka's UnifiedLog.read with FetchIsolation LOG_END / HIGH_WATERMARK /
        TXN_COMMITTED; the offsets reported are taken before the read, as Kafka does."""
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        log_start = plog.log_start_offset
        max_offset = None if to_log_end else lso if read_committed else hw
        region = plog.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        data = region.read() if region is not None and region.length > 0 else b""
        aborted = _aborted_transactions(plog, fetch_offset, lso, data) if read_committed else None
        return PartitionRead(hw, lso, log_start, data, aborted)

    async def wait_for_appends(self, partitions: Iterable[TopicPartition], timeout: float) -> bool:
        """Park until one of ``partitions`` is appended to (True) or ``timeout`` passes."""
        return await self.purgatory.wait(partitions, timeout)

    def wake(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Answer parked reads now: for some partitions (deleted), or all (shutdown)."""
        if partitions is None:
            self.purgatory.notify_all()
        else:
            for tp in partitions:
                self.purgatory.notify(tp)

    # --- offsets ----------------------------------------------------------------------------
    def list_offset(self, topic: str, partition: int, timestamp: int, current_leader_epoch: int = -1,
                    isolation_level: int | None = READ_UNCOMMITTED) -> tuple[int, int, int]:
        """ListOffsets for one partition: (offset, timestamp, leader epoch). Without tiered
        storage the whole log is local: earliest-local is the log start and latest-tiered
        finds nothing, as in Kafka.

        Kafka's fetchOffsetForTimestamp: the last fetchable offset is the LSO for
        read_committed, the high watermark for read_uncommitted and the log end for
        ``isolation_level`` None (a request from a replica rather than a consumer). LATEST
        answers it; a timestamp lookup finding an offset at or above it finds nothing, since
        that consumer could not read the record yet."""
        plog = self.partition(topic, partition)
        self.check_leader_epoch(current_leader_epoch, topic, partition)
        epoch = self.leader_epoch_of(topic, partition)
        if isolation_level is None:
            last_fetchable = plog.log_end_offset
        elif isolation_level == READ_COMMITTED:
            last_fetchable = plog.last_stable_offset
        else:
            last_fetchable = plog.high_watermark
        if timestamp == LATEST:
            return last_fetchable, -1, epoch
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1, epoch
        if timestamp == LATEST_TIERED:
            return -1, -1, NO_LEADER_EPOCH
        found = plog.max_timestamp() if timestamp == MAX_TIMESTAMP else plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= last_fetchable:
            # Kafka answers with its error-response defaults: no offset, no timestamp, no epoch
            return -1, -1, NO_LEADER_EPOCH
        return found[0], found[1], epoch

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Move the log start offset to ``offset`` (-1: the high watermark); returns it."""
        plog = self.partition(topic, partition)
        target = plog.high_watermark if offset == -1 else offset
        if target < 0 or target > plog.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range)
        return plog.delete_records_before(target)

    def end_offset_for_epoch(self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int
                             ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) from the leader-epoch cache (KIP-101/279):
        the largest epoch at or below the one asked for and where it ends."""
        plog = self.partition(topic, partition)
        self.check_leader_epoch(current_leader_epoch, topic, partition)
        return plog.end_offset_for_epoch(leader_epoch)

    def active_producers(self, topic: str, partition: int) -> list[ProducerStateEntry]:
        return list(self.partition(topic, partition).producer_state.producers.values())


def _producer_id(records: bytes | bytearray | memoryview) -> int:
    """The producer id of a Produce's first batch (-1: none, or not a readable batch)."""
    if len(records) < HEADER_SIZE:
        return -1
    try:
        return parse_header(records).producer_id
    except ProtocolError:
        return -1


def _offline(topic: str, partition: int) -> KafkaStorageError:
    """Kafka's answer for a partition hosted in an offline log dir: KAFKA_STORAGE_ERROR,
    before any leadership check (getPartitionOrException)."""
    return KafkaStorageError(f"Partition {topic}-{partition} is in an offline log directory")


def _aborted_transactions(plog: PartitionLog, fetch_offset: int, last_stable_offset: int, data: bytes
                          ) -> list[tuple[int, int]]:
    """(producer id, first offset) of the transactions aborted that overlap the batches of
    ``data`` read from ``fetch_offset``: what a read_committed consumer needs to drop
    their records (Kafka's LocalLog.addAbortedTransactions).

    Kafka bounds the search with the offset index entry after the bytes read; here the
    bound is exact, the offset after the last batch read, so the answer is the subset of
    Kafka's that overlaps the data (the rest is ignored by clients anyway). The header walk
    that finds it is done only when the cheap question, any aborted transaction between
    the fetch offset and the LSO, says yes: on a log without aborts a read costs one look
    at each segment's in-memory index from the fetch offset on, like Kafka's."""
    if not data:
        return []
    maybe = plog.aborted_txns(fetch_offset, last_stable_offset)
    if not maybe:
        return []
    upper = fetch_offset
    for _, h in iter_headers(data):
        upper = h.next_offset
    if upper > last_stable_offset:  # not with batch-aligned LSOs; stay exact whatever happens
        maybe = plog.aborted_txns(fetch_offset, upper)
    return [(t.producer_id, t.first_offset) for t in maybe if t.first_offset < upper]
