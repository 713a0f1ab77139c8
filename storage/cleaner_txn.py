"""What compaction does with transactions: Kafka's CleanedTransactionMetadata (LogCleaner).

The cleaner walks the log in offset order; this state follows the transactions it goes
through, from the aborted transactions the ``.txnindex`` files list for the range:

- a transactional data batch of an aborted transaction is dropped whole, whatever its
  keys (and its keys never enter the offset map, so they cannot shadow committed ones);
- an ABORT marker is kept while data of its transaction is still met (its AbortedTxn is
  then written to the cleaned segment's ``.txnindex``); once none is, it may go;
- a COMMIT marker may go once no batch of its transaction is met any more.

A marker that may go is first kept with a delete horizon (now + ``delete.retention.ms``,
in its baseTimestamp with the delete-horizon attribute bit, as Kafka writes it) and only
dropped by a cleaning after that horizon: a consumer that read the transaction's data
before it was cleaned still gets to see the marker.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from protocol.records import ATTR_DELETE_HORIZON, ATTR_TRANSACTIONAL, BatchHeader, EndTxnMarker

from .txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTxnState", "control_batch_fate"]


@dataclass(slots=True)
class _Aborted:
    txn: AbortedTxn
    last_observed_batch_offset: int = -1


class CleanedTxnState:
    """Transactions met by one cleaning pass (carried from segment group to group)."""

    def __init__(self) -> None:
        self._committed: set[int] = set()  # producers with a committed-so-far transaction met
        self._aborted: dict[int, _Aborted] = {}  # producer id -> its aborted transaction being met
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # min-heap by first offset
        self._seq = 0
        #: where kept ABORT markers' transactions go (the cleaned segment's index)
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1  # (ties never compare AbortedTxns)
            heapq.heappush(self._pending, (t.first_offset, self._seq, t))

    def _consume_up_to(self, offset: int) -> None:
        # Only transactional and control batches call this: the transactions a plain
        # batch would consume are consumed by the next one of those, before they matter.
        while self._pending and self._pending[0][0] <= offset:
            t = heapq.heappop(self._pending)[2]
            # (the same transaction may be listed again for a later segment: keep the first)
            self._aborted.setdefault(t.producer_id, _Aborted(t))

    def on_data_batch(self, h: BatchHeader) -> bool:
        """A data batch with the transactional bit: True if it belongs to an aborted
        transaction (drop it)."""
        self._consume_up_to(h.last_offset)
        if not h.attributes & ATTR_TRANSACTIONAL:
            return False
        a = self._aborted.get(h.producer_id)
        if a is not None:
            a.last_observed_batch_offset = h.last_offset
            return True
        self._committed.add(h.producer_id)
        return False

    def on_control_batch(self, h: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch: True if no data of its transaction is left (it may go)."""
        self._consume_up_to(h.last_offset)
        if h.record_count == 0:
            return True  # emptied by an earlier cleaning
        if marker is None:
            return False  # a control record that is no transaction marker: kept
        if not marker.commit:
            a = self._aborted.pop(h.producer_id, None)
            if a is not None and a.last_observed_batch_offset >= 0:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(a.txn)
                return False
            return True
        if h.producer_id in self._committed:
            self._committed.discard(h.producer_id)
            return False
        return True


def control_batch_fate(h: BatchHeader, may_go: bool, now_ms: int, delete_retention_ms: int) -> int | None:
    """What to do with a control batch: -1 drop it, None keep it as it is, or the delete
    horizon to write into it (Kafka's filterTo for markers of emptied transactions)."""
    if not may_go:
        return None
    if h.record_count == 0 or (h.attributes & ATTR_DELETE_HORIZON and h.base_timestamp <= now_ms):
        return -1  # (an empty batch has no record to keep a horizon in: Kafka drops it too)
    if h.attributes & ATTR_DELETE_HORIZON:
        return None
    return now_ms + delete_retention_ms
