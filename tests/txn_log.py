"""A partition log holding committed, aborted and open transactions, written with the
storage API (the way the transaction coordinator's markers will be), for the read_committed
tests of the broker (Fetch, ListOffsets) and of the Spark data source.

The log, offset by offset (``T<pid>`` a transactional batch, C/A a COMMIT/ABORT marker)::

    0-1 plain | 2-4 T1000 | 5 plain | 6-7 T2000 | 8 C1000 | 9 A2000 | 10 plain |
    11-12 T3000 | 13 A3000 | 14-15 T2000 | 16 C2000 | 17-18 T4000 (open) | 19 plain

so the high watermark is 20, the last stable offset 17 (the open transaction's first
offset), producer 2000 has an aborted then a committed transaction, and the aborted
transactions are (2000, 6) and (3000, 11). Each data record's value names its producer
and offset (``b"txn1000-3"``, ``b"plain-5"``), its timestamp is ``T0 + 1000 * offset``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.records import build_batch, validate_batches
from storage.log import PartitionLog

T0 = 1_700_000_000_000

# (operation, producer id or None, records): "txn" data of an open transaction, "commit"
# and "abort" its marker, "plain" non-transactional records
SCRIPT: list[tuple[str, int | None, int]] = [
    ("plain", None, 2), ("txn", 1000, 3), ("plain", None, 1), ("txn", 2000, 2), ("commit", 1000, 1),
    ("abort", 2000, 1), ("plain", None, 1), ("txn", 3000, 2), ("abort", 3000, 1), ("txn", 2000, 2),
    ("commit", 2000, 1), ("txn", 4000, 2), ("plain", None, 1),
]


@dataclass
class TxnLog:
    """What :func:`write_transactions` wrote: each offset's kind ("plain", "committed",
    "aborted", "open" or "marker")."""

    kinds: dict[int, str] = field(default_factory=dict)
    last_stable_offset: int = 0
    log_end_offset: int = 0
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (producer id, first offset)

    def offsets(self, *kinds: str, below: int | None = None) -> list[int]:
        return [o for o, k in sorted(self.kinds.items()) if k in kinds and (below is None or o < below)]

    def read_committed(self, bound: int | None = None) -> list[int]:
        """Offsets a read_committed consumer sees: plain and committed records below the LSO."""
        return self.offsets("plain", "committed", below=self.last_stable_offset if bound is None else bound)

    def read_uncommitted(self) -> list[int]:
        """Every data record (control batches are never returned to applications)."""
        return self.offsets("plain", "committed", "aborted", "open")


def value_of(offset: int, producer_id: int | None) -> bytes:
    return b"%s-%d" % (b"plain" if producer_id is None else b"txn%d" % producer_id, offset)


def write_transactions(plog: PartitionLog) -> TxnLog:
    """Append :data:`SCRIPT` to an empty log; returns what it holds."""
    out = TxnLog()
    seq: dict[int, int] = {}
    open_at: dict[int, list[int]] = {}  # producer id -> offsets of its open transaction
    for op, pid, n in SCRIPT:
        base = plog.log_end_offset
        if op in ("commit", "abort"):
            assert pid is not None
            r = plog.append_control_batch(pid, 0, 0, op == "commit", timestamp=T0 + 1000 * base)
            assert r.base_offset == base
            out.kinds[base] = "marker"
            offsets = open_at.pop(pid)
            for o in offsets:
                out.kinds[o] = "committed" if op == "commit" else "aborted"
            if op == "abort":
                out.aborted.append((pid, offsets[0]))
            continue
        records = [(b"k", value_of(base + i, pid)) for i in range(n)]
        kw: dict = {}
        if pid is not None:
            kw = dict(producer_id=pid, producer_epoch=0, base_sequence=seq.get(pid, 0), transactional=True)
            seq[pid] = seq.get(pid, 0) + n
        buf = bytearray(build_batch(records, timestamp=[T0 + 1000 * (base + i) for i in range(n)], **kw))
        r = plog.append(buf, validate_batches(buf))
        assert r.base_offset == base
        for i in range(n):
            out.kinds[base + i] = "plain" if pid is None else "open"
            if pid is not None:
                open_at.setdefault(pid, []).append(base + i)
    out.log_end_offset = plog.log_end_offset
    out.last_stable_offset = min((offs[0] for offs in open_at.values()), default=out.log_end_offset)
    return out
