"""The lag of a topic's table behind the log, per partition: what :mod:`tables.inspect`,
``krait tables`` and the broker's ``/metrics`` report. Kept apart from the table code so
that the broker computes it without importing pyiceberg.

Lag is measured against what the table can hold: the partition's last stable offset. The
``seconds`` are the age of the oldest record the table lacks, from the timestamp of the
batch that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.records import parse_header

__all__ = ["PartitionLag", "batch_time_ms", "partition_lag"]


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    table_offset: int
    log_end: int
    #: records (offsets) the table lacks
    offsets: int
    #: age of the oldest record the table lacks (0.0 when it lacks none; None: unknown)
    seconds: float | None


def partition_lag(partition: int, table_offset: int | None, log_start: int, log_end: int,
                  oldest_missing_ms: int | None, now_ms: int) -> PartitionLag:
    """The lag of one partition: ``table_offset`` None (never written) counts from the log
    start; ``oldest_missing_ms`` is the timestamp of the batch at the table's offset."""
    start = log_start if table_offset is None else max(table_offset, log_start)
    behind = max(0, log_end - start)
    if behind == 0:
        seconds: float | None = 0.0
    else:
        seconds = None if oldest_missing_ms is None else max(0.0, (now_ms - oldest_missing_ms) / 1000)
    return PartitionLag(partition, start, log_end, behind, seconds)


def batch_time_ms(header: bytes) -> int:
    """The age reference of the records a batch holds, from its header bytes: its first
    timestamp, or the broker's append time (the max timestamp) with LogAppendTime."""
    h = parse_header(header)
    return h.max_timestamp if h.is_log_append_time else h.base_timestamp
