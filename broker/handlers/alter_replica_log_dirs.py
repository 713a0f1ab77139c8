"""AlterReplicaLogDirs: move partitions to another of this broker's log dirs (Kafka's
ReplicaManager.alterReplicaLogDirs). The answer comes at once, as in Kafka; the move runs
in the background: copy passes on a worker thread while the partition keeps serving (its
future replica shows in DescribeLogDirs with its lag), then a short final pass and the
swap on the event loop (storage.manager.LogManager.complete_move).

Per partition: a destination that is not a configured log dir -> LOG_DIR_NOT_FOUND; an
unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (REPLICA_NOT_AVAILABLE when the
topic knows the partition but this broker holds no replica of it); an offline partition
-> KAFKA_STORAGE_ERROR; the dir it is already in -> success, nothing moves (and a move in
progress elsewhere is cancelled).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError
from storage.manager import ReplicaMove, future_dir_name

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

log = logging.getLogger("krait.log_dirs")

#: a pass smaller than this is left to the final pass, which runs with the partition closed
FINAL_PASS_BYTES = 4 << 20
#: copy passes before the final one, however busy the partition (Kafka's future replica
#: catches up by fetching; a partition written faster than a disk copy would never finish)
MAX_PASSES = 10
#: keeps the move tasks alive until they finish
_running: set[asyncio.Task] = set()


def _start(broker: Broker, topic: str, partition: int, path: str) -> ErrorCode:
    if len(future_dir_name(topic, partition)) > 255:
        return ErrorCode.invalid_topic_exception  # KAFKA-4893: the future dir name would not fit
    if path not in broker.logs.log_dirs:
        return ErrorCode.log_dir_not_found
    if broker.logs.get(topic, partition) is None:
        info = broker.registry.get(topic)
        return ErrorCode.replica_not_available if info is not None and 0 <= partition < info.partitions \
            else ErrorCode.unknown_topic_or_partition
    try:
        move = broker.logs.start_move(topic, partition, path)
    except KafkaError as exc:
        return exc.error_code
    except OSError as exc:
        log.error("cannot create the future replica of %s-%d in %s: %s", topic, partition, path, exc)
        return ErrorCode.kafka_storage_error
    if move is not None:
        task = asyncio.ensure_future(_run(broker, move))
        _running.add(task)
        task.add_done_callback(_running.discard)
    return ErrorCode.none


async def _run(broker: Broker, move: ReplicaMove) -> None:
    logs = broker.logs
    try:
        for _ in range(MAX_PASSES):
            pending = logs.plan_move(move)
            if pending < 0:
                return
            if pending <= FINAL_PASS_BYTES:
                break
            await asyncio.to_thread(move.copy)
        if not broker.stopping:
            logs.complete_move(move)
    except Exception:
        log.exception("moving %s-%d to %s failed", move.topic, move.partition, move.log_dir)
        logs.cancel_move(move)


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS)
def alter_replica_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    # Kafka builds a map: a partition named under two dirs goes to the last one
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path
    results: dict[str, list[dict]] = {}
    for (topic, partition), path in wanted.items():
        code = _start(broker, topic, partition, path)
        results.setdefault(topic, []).append(dict(partition_index=partition, error_code=code))
    return make(apis.response_type(ApiKey.ALTER_REPLICA_LOG_DIRS, ctx.version), throttle_time=0,
                results=[dict(topic_name=t, partitions=parts) for t, parts in results.items()])
