"""LogDirs: this broker's log dirs as DescribeLogDirs and AlterReplicaLogDirs see them
(Kafka's ReplicaManager.describeLogDirs / alterReplicaLogDirs). A move answers at once and
runs in the background: copy passes on a worker thread while the partition keeps serving
(its future replica shows in DescribeLogDirs with its lag), then a short final pass and the
swap on the event loop (storage.manager.LogManager.complete_move).

Per partition: a destination that is not a configured log dir -> LOG_DIR_NOT_FOUND; an
unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (REPLICA_NOT_AVAILABLE when the
topic knows the partition but this broker holds no replica of it); an offline partition
-> KAFKA_STORAGE_ERROR, as is a destination dir that is offline; the dir it is already in
-> success, nothing moves (and a move in progress elsewhere is cancelled).

An offline log dir (storage.log_dir_failure) is described with KAFKA_STORAGE_ERROR and no
partitions, as Kafka's describeLogDirs does.
"""

from __future__ import annotations

import asyncio
import logging
import os

from protocol.errors import ErrorCode, KafkaError
from storage.log_dir_move import ReplicaMove, future_dir_name
from storage.manager import LogManager

from .topics import TopicRegistry

log = logging.getLogger("krait.log_dirs")

#: a pass smaller than this is left to the final pass, which runs with the partition closed
FINAL_PASS_BYTES = 4 << 20
#: copy passes before the final one, however busy the partition (Kafka's future replica
#: catches up by fetching; a partition written faster than a disk copy would never finish)
MAX_PASSES = 10


#: JDK-8162520: a volume larger than Long.MAX_VALUE reports a negative size; Kafka clamps
_JAVA_LONG_MAX = (1 << 63) - 1


class LogDirs:
    def __init__(self, logs: LogManager, registry: TopicRegistry) -> None:
        self.logs = logs
        self.registry = registry
        #: set at shutdown: a move in progress is left for the next start to settle
        self.stopping = False
        #: keeps the move tasks alive until they finish
        self._running: set[asyncio.Task] = set()

    def describe(self, wanted: set[tuple[str, int]] | None) -> list[dict]:
        """DescribeLogDirs' results for the partitions in ``wanted`` (None: all)."""
        logs = self.logs
        # (log dir -> topic -> partition entries); a future replica lives in its destination dir
        by_dir: dict[str, dict[str, list[dict]]] = {d: {} for d in logs.log_dirs}
        for (topic, partition), plog in sorted(logs.partitions().items()):
            if wanted is not None and (topic, partition) not in wanted:
                continue
            log_dir = logs.log_dir_of(topic, partition)
            by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(dict(
                partition_index=partition, partition_size=plog.size_bytes,
                offset_lag=max(plog.high_watermark - plog.log_end_offset, 0), is_future_key=False))
        for (topic, partition), move in sorted(logs.moves().items()):
            plog = logs.get(topic, partition)
            if plog is None or (wanted is not None and (topic, partition) not in wanted):
                continue
            by_dir.setdefault(move.log_dir, {}).setdefault(topic, []).append(dict(
                partition_index=partition, partition_size=move.size_bytes,
                offset_lag=plog.log_end_offset - move.log_end_offset, is_future_key=True))
        results = []
        for log_dir, topics in by_dir.items():
            try:
                if not logs.is_log_dir_online(log_dir):
                    raise OSError(f"Log directory {log_dir} is offline")
                total, usable = self._volume(log_dir)
            except OSError:
                results.append(dict(error_code=ErrorCode.kafka_storage_error, log_dir=log_dir, topics=[]))
                continue
            results.append(dict(error_code=ErrorCode.none, log_dir=log_dir, total_bytes=total, usable_bytes=usable,
                                topics=[dict(name=name, partitions=parts) for name, parts in topics.items()]))
        return results

    @staticmethod
    def _volume(path: str) -> tuple[int, int]:
        """(total, usable) bytes of the volume holding ``path``, as Java's FileStore reports
        them (usable = what an unprivileged process may still write)."""
        st = os.statvfs(path)
        return min(st.f_blocks * st.f_frsize, _JAVA_LONG_MAX), min(st.f_bavail * st.f_frsize, _JAVA_LONG_MAX)

    def alter(self, topic: str, partition: int, path: str) -> ErrorCode:
        """Start moving a partition to ``path``; the error code AlterReplicaLogDirs answers."""
        if len(future_dir_name(topic, partition)) > 255:
            return ErrorCode.invalid_topic_exception  # KAFKA-4893: the future dir name would not fit
        if path not in self.logs.log_dirs:
            return ErrorCode.log_dir_not_found
        if not self.logs.is_log_dir_online(path):
            return ErrorCode.kafka_storage_error
        if self.logs.get(topic, partition) is None:
            info = self.registry.get(topic)
            return ErrorCode.replica_not_available if info is not None and 0 <= partition < info.partitions \
                else ErrorCode.unknown_topic_or_partition
        try:
            move = self.logs.start_move(topic, partition, path)
        except KafkaError as exc:
            return exc.error_code
        except OSError as exc:
            log.error("cannot create the future replica of %s-%d in %s: %s", topic, partition, path, exc)
            return ErrorCode.kafka_storage_error
        if move is not None:
            task = asyncio.ensure_future(self._run(move))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return ErrorCode.none

    async def _run(self, move: ReplicaMove) -> None:
        logs = self.logs
        try:
            for _ in range(MAX_PASSES):
                pending = logs.plan_move(move)
                if pending < 0:
                    return
                if pending <= FINAL_PASS_BYTES:
                    break
                await asyncio.to_thread(move.copy)
            if not self.stopping:
                logs.complete_move(move)
        except Exception:
            log.exception("moving %s-%d to %s failed", move.topic, move.partition, move.log_dir)
            logs.cancel_move(move)
