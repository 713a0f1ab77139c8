"""What a topic's table holds, for operators (``krait tables``, ``krait topics --describe``,
``/metrics``): its offsets per partition, its snapshots, files, rows and bytes, read from
the current snapshot's summary (Iceberg keeps running totals there: no manifest is read),
its partition spec, and its lag behind the log (:mod:`tables.lag`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyiceberg.table import Table

from .layout import spec_text
from .writer import snapshot_offsets

__all__ = ["TableSummary", "summarize"]


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
    #: the current partition spec, in the config's syntax (``krait.iceberg.partition.spec``)
    partition_spec: str = "()"


def _int(summary: dict, key: str) -> int:
    try:
        return int(summary.get(key, 0))
    except (TypeError, ValueError):
        return 0


def summarize(table: Table) -> TableSummary:
    """The table's offsets, snapshots and totals (its current snapshot's summary)."""
    ident = ".".join(table.name()) if hasattr(table, "name") else str(table.identifier)
    out = TableSummary(ident, offsets=snapshot_offsets(table), snapshots=len(table.metadata.snapshots),
                       columns=len(table.schema().fields), partition_spec=spec_text(table.schema(), table.spec()))
    snap = table.current_snapshot()
    if snap is not None:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        out.data_files = _int(props, "total-data-files")
        out.rows = _int(props, "total-records")
        out.bytes = _int(props, "total-files-size")
        out.last_commit_ms = snap.timestamp_ms
    return out
