"""``isolation.level=read_committed`` for the kafka-segments source, from Kafka's on-disk
state alone (the data source never asks the broker).

What a read_committed consumer of the broker sees, the data source reproduces per
partition:

- It stops at the **last stable offset**. The read is bounded already (the high watermark
  of ``replication-offset-checkpoint``, or the log end): a transaction counts as decided
  iff its COMMIT/ABORT marker lies below that bound, so the LSO is the first offset of the
  oldest transaction without a marker below the bound (or the bound when there is none).
  The transactions open at the bound are found as Kafka's own recovery finds them: the
  newest producer-state snapshot (``<offset>.snapshot``, Kafka's layout, whose entries
  carry each producer's CurrentTxnFirstOffset) at or below the bound, then the batch
  headers from there to the bound. Snapshots are taken at every segment roll, so the
  walk is usually the active segment's headers only; without a usable snapshot it starts
  at the first segment.
- It drops the records of **aborted transactions**: the segments' ``.txnindex`` files
  (Kafka's AbortedTxn entries: version int16, producerId int64, firstOffset int64,
  lastOffset int64 (the ABORT marker), lastStableOffset int64) list them; an entry counts
  when its marker lies below the bound. A transactional batch of producer P whose base
  offset lies in [firstOffset, lastOffset] of one of P's aborted transactions is dropped,
  a whole batch at a time (one producer has one transaction open at a time, so every
  transactional batch of P in that range belongs to it).
- Control batches are never returned, in either isolation level (``decode.select_rows``);
  the aborted batches are dropped in ``logdir.read_slice`` by :mod:`spark_jobs.aborted`
  (executor side: this module plans, on the driver).

This module reads files only and imports neither ``storage/`` (see
:mod:`spark_jobs.logdir`) nor ``protocol.records`` (the attribute bits are
:mod:`spark_jobs.decode`'s copies), so that a read_committed plan costs no compression
library imports.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

import numpy as np
from crc32c import crc32c

from .decode import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_LAST_DELTA,
    H_PRODUCER_ID,
    walk_all_headers,
)
from .logdir import PartitionLog, lookup_position

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "aborted_transactions",
    "isolation_level",
    "last_stable_offset",
    "open_transactions",
    "read_snapshot",
    "read_txn_index",
]

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"

TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
_TXN_ENTRY = struct.Struct(">hqqqq")
_SNAP_HEAD = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
_WALK_CHUNK = 16 << 20


def isolation_level(options: dict[str, str]) -> str:
    """The isolation level of the (lower-cased) options: ``isolation.level``, or Spark's
    Kafka-source spelling ``kafka.isolation.level``; read_uncommitted by default."""
    level = (options.get("isolation.level") or options.get("kafka.isolation.level") or READ_UNCOMMITTED).strip().lower()
    if level not in (READ_UNCOMMITTED, READ_COMMITTED):
        raise ValueError(f"isolation.level must be read_uncommitted or read_committed, not {level!r}")
    return level


# --- Kafka's files ---------------------------------------------------------------------


def read_txn_index(path: str) -> list[tuple[int, int, int, int]]:
    """(producer id, first offset, last offset, LSO) of each AbortedTxn in a ``.txnindex``;
    [] when the file does not exist (Kafka creates it at the first abort). A torn trailing
    entry is ignored, as Kafka's reader does; an unknown version is an error, since
    ignoring it would let aborted records through."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for pos in range(0, len(data) - _TXN_ENTRY.size + 1, _TXN_ENTRY.size):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
        if version != 0:
            raise ValueError(f"{path}: unknown aborted transaction entry version {version} at byte {pos}")
        out.append((pid, first, last, lso))
    return out


def read_snapshot(path: str) -> dict[int, int] | None:
    """Producer id -> first offset of its open transaction, from a producer-state snapshot
    (Kafka's ProducerSnapshot v1); None when the file is unreadable, short or fails its
    CRC (the caller then uses an older snapshot, or the log from its start)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < _SNAP_HEAD.size:
        return None
    version, crc, count = _SNAP_HEAD.unpack_from(data)
    if version != 1 or crc32c(data[6:]) != crc or count < 0 or len(data) != _SNAP_HEAD.size + count * _SNAP_ENTRY.size:
        return None
    out = {}
    for pid, _epoch, _seq, _off, _delta, _ts, _coord, txn_first in _SNAP_ENTRY.iter_unpack(data[_SNAP_HEAD.size:]):
        if txn_first >= 0:
            out[pid] = txn_first
    return out


def _snapshots(directory: str) -> list[tuple[int, str]]:
    out = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)] if name.endswith(SNAPSHOT_SUFFIX) else ""
        if stem.isdigit():
            out.append((int(stem), os.path.join(directory, name)))
    return sorted(out)


def _header_tables(path: str, start: int, end: int | None) -> Iterator[np.ndarray]:
    """Header tables (decode.walk_headers' columns) of the whole batches in path[start:end],
    a chunk at a time; stops quietly at a torn tail."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        fd = f.fileno()
        limit = os.fstat(fd).st_size if end is None else end
        pos, chunk = start, _WALK_CHUNK
        while pos < limit:
            data = os.pread(fd, min(chunk, limit - pos), pos)
            headers, used = walk_all_headers(np.frombuffer(data, dtype=np.uint8))
            if not len(headers):
                size = int.from_bytes(data[8:12], "big", signed=True) + 12 if len(data) >= 12 else 0
                if len(data) < size <= limit - pos:
                    chunk = size  # one batch larger than the chunk: read it whole
                    continue
                return
            yield headers
            pos += used


# --- per partition (driver side) -------------------------------------------------------


def open_transactions(plog: PartitionLog, bound: int, stable_from: int | None = None) -> dict[int, int]:
    """Producer id -> first offset of each transaction with no marker below ``bound``: the
    newest usable snapshot at or below the bound, then the batch headers from it to the
    bound. ``stable_from``: an offset no transaction open at the bound starts below (an
    earlier last stable offset of this log, as an Iceberg table's offset is: every
    transaction open then started at or after it, and any later one after it); the walk then
    starts there when that is past the snapshot, with no transaction open (a transaction
    that closed before the bound has its marker after its batches, so it is closed again)."""
    segs = plog.segments
    if not segs:
        return {}
    state: dict[int, int] = {}
    start = segs[0].base_offset
    for off, path in reversed(_snapshots(plog.path)):
        # a snapshot below the first segment misses the markers of the deleted segments
        if segs[0].base_offset <= off <= bound:
            snap = read_snapshot(path)
            if snap is not None:
                state, start = snap, off
                break
    if stable_from is not None and start < stable_from <= bound:
        state, start = {}, stable_from
    leo, last_size = plog.log_end()
    for i, seg in enumerate(segs):
        seg_end = segs[i + 1].base_offset if i + 1 < len(segs) else leo
        if seg_end <= start:
            continue
        if seg.base_offset >= bound:
            break
        pos = lookup_position(seg, start)[0] if start > seg.base_offset else 0
        for headers in _header_tables(seg.path, pos, last_size if i == len(segs) - 1 else None):
            if _replay(headers, state, start, bound):
                return state
    return state


def _replay(headers: np.ndarray, state: dict[int, int], start: int, bound: int) -> bool:
    """Open and close transactions with the transactional batches of one header table
    (Python per transactional batch only); True once past the bound."""
    attrs = headers[:, H_ATTRIBUTES]
    pids = headers[:, H_PRODUCER_ID]
    bases = headers[:, H_BASE_OFFSET]
    lasts = bases + headers[:, H_LAST_DELTA]
    txn = ((attrs & (ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0) & (pids >= 0) & (lasts >= start) & (bases < bound)
    for j in np.nonzero(txn)[0].tolist():
        pid = int(pids[j])
        if attrs[j] & ATTR_CONTROL:
            state.pop(pid, None)  # the COMMIT/ABORT marker ends the producer's transaction
        else:
            state.setdefault(pid, int(bases[j]))  # its first batch opens it
    return bool(len(bases)) and int(bases[-1]) >= bound


def last_stable_offset(plog: PartitionLog, bound: int, stable_from: int | None = None) -> int:
    """Where read_committed reads of ``plog`` stop when reads are bounded by ``bound``:
    never below the first readable offset, never above the bound (Kafka's LSO).
    ``stable_from``: see :func:`open_transactions`."""
    open_txns = open_transactions(plog, bound, stable_from)
    if not open_txns:
        return bound
    return min(bound, max(min(open_txns.values()), plog.earliest))


def aborted_transactions(plog: PartitionLog, bound: int) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) of the aborted transactions of ``plog``
    whose ABORT marker lies below ``bound``, sorted by producer id and first offset (what
    :func:`spark_jobs.aborted.aborted_mask` searches)."""
    out = []
    for seg in plog.segments:
        for pid, first, last, _lso in read_txn_index(seg.path[:-4] + TXN_INDEX_SUFFIX):
            if last < bound:
                out.append((pid, first, last))
    return sorted(set(out))
