"""What a topic's table holds, for operators (``krait tables``, ``krait topics --describe``,
``/metrics``): its offsets per partition, its snapshots, files, rows and bytes, read from
the current snapshot's summary (Iceberg keeps running totals there: no manifest is read),
and its lag behind the log.

Lag is measured against what the table can hold: the partition's last stable offset (the
table takes committed records only). ``seconds`` is the age of the oldest record the table
lacks, from the timestamp of the batch that holds it (its first timestamp, so at most one
batch's spread too old).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.table import Table

from .writer import snapshot_offsets

__all__ = ["PartitionLag", "TableSummary", "partition_lag", "summarize"]


@dataclass
class TableSummary:
    identifier: str
    #: partition -> next offset held
    offsets: dict[int, int] = field(default_factory=dict)
    snapshots: int = 0
    data_files: int = 0
    rows: int = 0
    bytes: int = 0
    #: epoch ms of the current snapshot (0: none)
    last_commit_ms: int = 0
    columns: int = 0


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    table_offset: int
    log_end: int
    #: records (offsets) the table lacks
    offsets: int
    #: age of the oldest record the table lacks (0.0 when it lacks none; None: unknown)
    seconds: float | None


def _int(summary: dict, key: str) -> int:
    try:
        return int(summary.get(key, 0))
    except (TypeError, ValueError):
        return 0


def summarize(table: Table) -> TableSummary:
    """The table's offsets, snapshots and totals (its current snapshot's summary)."""
    ident = ".".join(table.name()) if hasattr(table, "name") else str(table.identifier)
    out = TableSummary(ident, offsets=snapshot_offsets(table), snapshots=len(table.metadata.snapshots),
                       columns=len(table.schema().fields))
    snap = table.current_snapshot()
    if snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        out.data_files = _int(props, "total-data-files")
        out.rows = _int(props, "total-records")
        out.bytes = _int(props, "total-files-size")
        out.last_commit_ms = snap.timestamp_ms
    return out


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
