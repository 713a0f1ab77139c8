"""Shared helpers for the storage tests: build validated batches and append them."""

from __future__ import annotations

import os

from protocol.records import build_batch, iter_records, validate_batches
from storage.config import LogConfig
from storage.log import PartitionLog


def batch(n: int = 1, *, value_size: int = 50, ts: int = 1000, key: bytes | None = b"k", pid: int = -1,
          epoch: int = -1, seq: int = -1, keys: list[bytes | None] | None = None,
          values: list[bytes | None] | None = None) -> bytearray:
    if keys is None:
        keys = [key] * n
    if values is None:
        values = [b"v" * value_size] * n
    return bytearray(build_batch(list(zip(keys, values, strict=True)), timestamp=ts, producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq))


def append(plog: PartitionLog, *bufs: bytearray, **kw):
    buf = bytearray(b"".join(bufs))
    return plog.append(buf, validate_batches(buf), **kw)


def open_log(path: str, cfg: LogConfig | None = None, **kw) -> PartitionLog:
    return PartitionLog(os.path.join(str(path), "t-0"), "t", 0, cfg or LogConfig(), **kw)


def read_all(plog: PartitionLog, start: int | None = None) -> list:
    """Every record from ``start`` (default log start) to the LEO, via read()."""
    out = []
    off = plog.log_start_offset if start is None else start
    while off < plog.log_end_offset:
        region = plog.read(off, 1 << 20)
        if region is None:
            break
        data = region.read()
        pos = 0
        last = off
        while pos < len(data):
            recs = list(iter_records(data, pos))
            for r in recs:
                if r.offset >= off:
                    out.append(r)
            from protocol.records import parse_header
            h = parse_header(data, pos)
            pos += h.size
            last = h.next_offset
        off = last
    return out
