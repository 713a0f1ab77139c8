"""How far each table topic's table is behind the log, on this broker: for every partition it
leads of a topic kept as a table, the records the table lacks (up to the last stable offset)
and the age of the oldest of them. The table's offsets are the ones the table driver last
saw committed (:class:`broker.tables.driver.TableTopics`); the age comes from the header of
the batch at the table's offset (one small pread per lagging partition). Read by
``/metrics`` (:mod:`broker.metrics`)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from protocol.errors import ProtocolError
from protocol.records import HEADER_SIZE
from tables.lag import PartitionLag, batch_time_ms, partition_lag

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["table_lags"]


def _batch_time_ms(plog, offset: int, end: int) -> int | None:
    """The first timestamp of the batch holding ``offset`` (its max timestamp with
    LogAppendTime), or None when it cannot be read."""
    try:
        region = plog.read(offset, HEADER_SIZE, max_offset=end)
        if region is None:
            return None
        return batch_time_ms(os.pread(region.fd, HEADER_SIZE, region.position))
    except (OSError, ProtocolError, ValueError):
        return None


def table_lags(broker: Broker, now_ms: int | None = None) -> dict[str, list[PartitionLag]]:
    """topic -> the lag of each partition of it this broker leads (topics kept as tables)."""
    tables = broker.tables
    if tables is None:
        return {}
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    out: dict[str, list[PartitionLag]] = {}
    for topic, (_mode, partitions) in sorted(tables.table_topics().items()):
        known = tables.known_offsets(topic)
        for p in sorted(partitions):
            part = broker.replicas.partitions.get((topic, p))
            if part is None or part.log.offline:
                continue
            plog = part.log
            end = min(plog.last_stable_offset, plog.high_watermark)
            table_offset = known.get(p)
            start = plog.log_start_offset if table_offset is None else max(table_offset, plog.log_start_offset)
            ts = _batch_time_ms(plog, start, end) if start < end else None
            out.setdefault(topic, []).append(partition_lag(p, table_offset, plog.log_start_offset, end, ts, now_ms))
    return out
