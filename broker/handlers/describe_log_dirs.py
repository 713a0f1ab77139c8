"""DescribeLogDirs: every configured log dir with the size of its volume and, for the
requested partitions (null: all), each replica it holds: size on disk (bytes of its
segment .log files, Kafka's UnifiedLog.size), offset lag and whether it is the future
replica of a move in progress (AlterReplicaLogDirs). Kafka's ReplicaManager.describeLogDirs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

#: JDK-8162520: a volume larger than Long.MAX_VALUE reports a negative size; Kafka clamps
_JAVA_LONG_MAX = (1 << 63) - 1


def _volume(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding ``path``, as Java's FileStore reports
    them (usable = what an unprivileged process may still write)."""
    st = os.statvfs(path)
    return min(st.f_blocks * st.f_frsize, _JAVA_LONG_MAX), min(st.f_bavail * st.f_frsize, _JAVA_LONG_MAX)


@handles(ApiKey.DESCRIBE_LOG_DIRS)
def describe_log_dirs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    logs = broker.logs
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
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
            total, usable = _volume(log_dir)
        except OSError:
            results.append(dict(error_code=ErrorCode.kafka_storage_error, log_dir=log_dir, topics=[]))
            continue
        results.append(dict(error_code=ErrorCode.none, log_dir=log_dir, total_bytes=total, usable_bytes=usable,
                            topics=[dict(name=name, partitions=parts) for name, parts in topics.items()]))
    return make(apis.response_type(ApiKey.DESCRIBE_LOG_DIRS, ctx.version), throttle_time=0,
                error_code=ErrorCode.none, results=results)
