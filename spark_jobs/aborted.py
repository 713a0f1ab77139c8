"""The batches of aborted transactions in a header table: what a read_committed read drops.

The driver finds the aborted transactions of a partition in its ``.txnindex`` files
(:func:`spark_jobs.transactions.aborted_transactions`) and hands each slice those that
overlap it; the executor reading the slice (``logdir.read_slice``) masks their batches out
of each header table with :func:`aborted_mask`. A transactional batch of producer P whose
base offset lies in [first offset, ABORT marker offset] of one of P's aborted transactions
is dropped whole: a producer has one transaction open at a time, so every transactional
batch of P in that range is that transaction's.

Like :mod:`spark_jobs.decode`, this imports numba only when a read has aborted batches to
look for (read_uncommitted never loads it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .decode import ATTR_TRANSACTIONAL, H_ATTRIBUTES, H_BASE_OFFSET, H_PRODUCER_ID

__all__ = ["aborted_mask"]

_ABORTED_JIT = None


def _aborted_jit() -> Any:
    """The kernel below compiled by numba on first use (from its on-disk cache when valid)."""
    global _ABORTED_JIT
    if _ABORTED_JIT is None:
        import numba

        _ABORTED_JIT = numba.njit(cache=True, nogil=True)(_aborted_kernel)
    return _ABORTED_JIT


def _aborted_kernel(pids, bases, txn, ab_pid, ab_first, ab_last, out):
    """out[i] = batch i is transactional and inside an aborted transaction of its producer
    (a binary search over the ranges sorted by (producer id, first offset))."""
    n = ab_pid.shape[0]
    for i in range(pids.shape[0]):
        if not txn[i]:
            continue
        p = pids[i]
        b = bases[i]
        lo = 0
        hi = n
        while lo < hi:  # the first range with (pid, first) > (p, b)
            mid = (lo + hi) // 2
            if ab_pid[mid] < p or (ab_pid[mid] == p and ab_first[mid] <= b):
                lo = mid + 1
            else:
                hi = mid
        j = lo - 1
        out[i] = j >= 0 and ab_pid[j] == p and b <= ab_last[j]


def aborted_mask(headers: np.ndarray, aborted: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    """Batches of a header table that belong to an aborted transaction, given the aborted
    (producer id, first offset, ABORT marker offset) ranges."""
    out = np.zeros(len(headers), dtype=np.bool_)
    if not aborted or not len(headers):
        return out
    txn = (headers[:, H_ATTRIBUTES] & ATTR_TRANSACTIONAL) != 0
    if not txn.any():
        return out
    ab = np.array(sorted(aborted), dtype=np.int64).reshape(-1, 3)
    _aborted_jit()(np.ascontiguousarray(headers[:, H_PRODUCER_ID]), np.ascontiguousarray(headers[:, H_BASE_OFFSET]),
                   txn, np.ascontiguousarray(ab[:, 0]), np.ascontiguousarray(ab[:, 1]),
                   np.ascontiguousarray(ab[:, 2]), out)
    return out
