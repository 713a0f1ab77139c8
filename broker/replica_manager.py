"""ReplicaManager: the one place that appends to and reads from partitions (Kafka's
ReplicaManager with its Partition objects).

Handlers and the group coordinator's driver go through it for every partition operation:
appending as the partition's leader (validation is storage's, in storage/validator.py),
reading for Fetch (offset and size limits to a byte region, up to the high watermark),
parking fetches that want more data (the purgatory) and waking them on append, and the
offset lookups of ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeProducers.

Today every partition has one replica, this broker, leading at epoch 0, so the high
watermark is the log end offset. Replication adds here: ``append_as_follower`` (the
leader's bytes, as they are), follower fetch states that move the high watermark, and
acks=all produces parked until the ISR has the records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError
from storage.log import AppendResult, PartitionLog
from storage.manager import LogManager
from storage.producer_state import ProducerStateEntry
from storage.validator import validate_for_append

from .purgatory import Purgatory
from .topics import INTERNAL_TOPICS

#: every partition has had one leader (this broker) since it was created
LEADER_EPOCH = 0
#: ListOffsets special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
NO_LEADER_EPOCH = -1

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionRead:
    """One partition's share of a Fetch: the partition's offsets and the record bytes."""

    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes


class ReplicaManager:
    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.purgatory = Purgatory()

    # --- lookup -----------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionLog:
        """The local replica this broker leads, or UNKNOWN_TOPIC_OR_PARTITION."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return plog

    @staticmethod
    def check_leader_epoch(current_leader_epoch: int) -> None:
        """A client that knows a newer epoch than ours is ahead of this broker's metadata."""
        if current_leader_epoch > LEADER_EPOCH:
            raise KafkaError(ErrorCode.unknown_leader_epoch)

    # --- append -----------------------------------------------------------------------------
    def append_records(self, topic: str, partition: int, records: bytes | bytearray | memoryview | None,
                       now_ms: int, *, internal_ok: bool = False) -> AppendResult:
        """Append a producer's batches as the partition's leader: validate (storage's
        LogValidator), assign offsets, write, wake fetches parked on the partition."""
        if topic in INTERNAL_TOPICS and not internal_ok:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")
        plog = self.partition(topic, partition)
        if records is None:
            raise KafkaError(ErrorCode.corrupt_message, "null records")
        cfg = plog.config
        valid = validate_for_append(records, cfg, now_ms, topic_partition=plog.name,
                                    log_start_offset=plog.log_start_offset)
        result = plog.append(valid.buffer, valid.headers, leader_epoch=LEADER_EPOCH,
                             log_append_time_ms=now_ms if cfg.log_append_time else None)
        if not result.duplicate:
            self.purgatory.notify((topic, partition))
        return result

    # --- read -------------------------------------------------------------------------------
    def read(self, plog: PartitionLog, fetch_offset: int, max_bytes: int, *, min_one_batch: bool) -> PartitionRead:
        """Whole batches from ``fetch_offset`` up to the high watermark, at most
        ``max_bytes`` unless ``min_one_batch`` (the first partition of a response always
        gets one whole batch, so a batch larger than the limits still makes progress)."""
        hw = plog.high_watermark
        region = plog.read(fetch_offset, max_bytes, max_offset=hw, min_one_batch=min_one_batch)
        data = region.read() if region is not None and region.length > 0 else b""
        return PartitionRead(hw, hw, plog.log_start_offset, data)

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
    def list_offset(self, topic: str, partition: int, timestamp: int, current_leader_epoch: int = -1
                    ) -> tuple[int, int, int]:
        """ListOffsets for one partition: (offset, timestamp, leader epoch). Without tiered
        storage the whole log is local: earliest-local is the log start and latest-tiered
        finds nothing, as in Kafka."""
        plog = self.partition(topic, partition)
        self.check_leader_epoch(current_leader_epoch)
        if timestamp == LATEST:
            return plog.high_watermark, -1, LEADER_EPOCH
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1, LEADER_EPOCH
        if timestamp == LATEST_TIERED:
            return -1, -1, NO_LEADER_EPOCH
        found = plog.max_timestamp() if timestamp == MAX_TIMESTAMP else plog.offset_for_timestamp(timestamp)
        return (found[0], found[1], LEADER_EPOCH) if found else (-1, -1, LEADER_EPOCH)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Move the log start offset to ``offset`` (-1: the high watermark); returns it."""
        plog = self.partition(topic, partition)
        target = plog.high_watermark if offset == -1 else offset
        if target < 0 or target > plog.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range)
        return plog.delete_records_before(target)

    def end_offset_for_epoch(self, topic: str, partition: int, leader_epoch: int, current_leader_epoch: int
                             ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset). Every partition has had one leader
        epoch (0), so epoch 0 ends at the log end."""
        plog = self.partition(topic, partition)
        self.check_leader_epoch(current_leader_epoch)
        if 0 <= current_leader_epoch < LEADER_EPOCH:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        if leader_epoch <= LEADER_EPOCH:
            return LEADER_EPOCH, plog.log_end_offset
        return -1, -1

    def active_producers(self, topic: str, partition: int) -> list[ProducerStateEntry]:
        return list(self.partition(topic, partition).producer_state.producers.values())
