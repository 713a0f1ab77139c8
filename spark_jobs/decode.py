"""Vectorised decoding of magic-2 record batches into Arrow columns.

Per-record Python (``protocol.records.iter_records``) manages ~0.4 M records/s per core;
Spark ingests Arrow at several million rows/s. So the byte walking here is done by numba
kernels over numpy views of the segment bytes:

1. :func:`walk_headers` walks the 61-byte batch headers of a byte region (stops at a torn
   tail, exactly like ``protocol.records.iter_headers``).
2. Compressed batch bodies are decompressed with ``protocol.compression.decompress`` (one
   C call per batch, the same code as the broker) and laid end to end; uncompressed
   bodies are used in place, without a copy.
3. :func:`decode_bodies` walks the records once, producing per-record offsets, timestamps
   and (position, length) pairs of keys, values and header sections.
4. :func:`gather` copies the key/value bytes into exact-size Arrow buffers, and the
   Arrow arrays are assembled with ``pa.Array.from_buffers`` (no per-record objects).

The record layout (Kafka's DefaultRecord): length varint | attributes int8 |
timestampDelta varlong | offsetDelta varint | keyLength varint | key | valueLength varint |
value | headerCount varint | (headerKeyLength varint | key | headerValueLength varint |
value)*. Varints are zig-zag encoded.

Start-up cost: numba, ``protocol.compression`` and ``protocol.errors`` cost about a second
of imports per Python process, and every Spark worker (the planner's and each executor's)
is a fresh process. So none of them is imported here at module level: the kernels below
are plain functions compiled (from numba's on-disk cache, ``cache=True``) by
:func:`_kernels` on first use, and a read whose columns need no record bodies
(``lazy=True`` with only topic/partition/offset/timestampType, or timestamps of
LogAppendTime batches) walks batch headers with :func:`walk_headers_py` and never loads
numba at all.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

# protocol.records' constants, copied so that this module does not import it (and with it
# the compression libraries); tests/spark/test_projection.py checks that they agree.
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
HEADER_SIZE = 61

__all__ = [
    "H_POS",
    "H_SIZE",
    "H_BASE_OFFSET",
    "H_MAGIC",
    "H_ATTRIBUTES",
    "H_LAST_DELTA",
    "H_BASE_TS",
    "H_MAX_TS",
    "H_PRODUCER_ID",
    "H_RECORD_COUNT",
    "H_CRC",
    "walk_headers",
    "walk_headers_py",
    "walk_all_headers",
    "needs_records",
    "preload_kernels",
    "decode_batches",
    "empty_batch",
]

# Columns of the header table returned by walk_headers (one int64 row per batch).
H_POS, H_SIZE, H_BASE_OFFSET, H_MAGIC, H_ATTRIBUTES, H_LAST_DELTA, H_BASE_TS, H_MAX_TS, H_PRODUCER_ID, H_RECORD_COUNT, H_CRC = range(11)
_H_COLS = 11
_WALK_CAP = 65536  # rows per walk_headers call: bounds the scratch table to ~5.8 MB

_E_OK = -1  # decode kernels return the index of the first bad batch, or this


def _be(buf: np.ndarray, p: int, n: int) -> int:
    """Signed big-endian integer of n bytes at p (two's complement)."""
    v = np.int64(0)
    for i in range(n):
        v = (v << 8) | np.int64(buf[p + i])
    if n < 8:
        sign = np.int64(1) << (8 * n - 1)
        if v & sign:
            v -= sign << 1
    return v


def _varint(buf: np.ndarray, p: int, end: int) -> tuple[int, int]:
    """Zig-zag varint at p; returns (value, next position) or (0, -1) when malformed."""
    result = np.int64(0)
    shift = 0
    while True:
        if p >= end:
            return np.int64(0), -1
        b = np.int64(buf[p])
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return np.int64(0), -1
    # logical shift right, then undo the zig-zag
    return ((result >> 1) & np.int64(0x7FFFFFFFFFFFFFFF)) ^ -(result & 1), p


def _walk_headers(buf: np.ndarray, start: int, end: int, out: np.ndarray) -> tuple[int, int]:
    """Fill ``out`` (int64 [cap, 11]) with the headers of whole batches in buf[start:end].

    Returns (batches found, position after the last whole batch). Stops at a torn or
    zero-filled tail (batchLength below the header size, or running past ``end``), or when
    ``out`` is full; the caller resumes from the returned position.
    """
    n = 0
    p = start
    cap = out.shape[0]
    while n < cap and end - p >= 61:
        blen = _be(buf, p + 8, 4)
        if blen < 49 or p + 12 + blen > end:
            break
        out[n, 0] = p
        out[n, 1] = 12 + blen
        out[n, 2] = _be(buf, p, 8)
        out[n, 3] = buf[p + 16]
        out[n, 4] = _be(buf, p + 21, 2)
        out[n, 5] = _be(buf, p + 23, 4)
        out[n, 6] = _be(buf, p + 27, 8)
        out[n, 7] = _be(buf, p + 35, 8)
        out[n, 8] = _be(buf, p + 43, 8)
        out[n, 9] = _be(buf, p + 57, 4)
        out[n, 10] = _be(buf, p + 17, 4) & np.int64(0xFFFFFFFF)
        n += 1
        p += 12 + blen
    return n, p


def walk_headers(buf: np.ndarray, start: int, end: int, out: np.ndarray) -> tuple[int, int]:
    """The compiled :func:`_walk_headers` (loads numba on first use)."""
    return _kernels().walk_headers(buf, start, end, out)


_HEADER = struct.Struct(">qiiBIhiqqqhii")  # baseOffset .. recordCount (61 bytes)


def walk_headers_py(buf: np.ndarray | bytes, start: int = 0, end: int | None = None,
                    limit: int | None = None) -> tuple[np.ndarray, int]:
    """:func:`walk_all_headers` in plain Python (same table and end position, same torn
    tail rules), a few µs per batch: for the header-only reads of processes that have not
    loaded numba. Stops after ``limit`` batches if given (the caller goes on from the
    returned position)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
    end = len(mv) if end is None else end
    unpack = _HEADER.unpack_from
    rows = []
    p = start
    while end - p >= HEADER_SIZE and (limit is None or len(rows) < limit):
        (base, blen, _epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, _pepoch, _seq,
         count) = unpack(mv, p)
        if blen < 49 or p + 12 + blen > end:
            break
        rows.append((p, 12 + blen, base, magic, attrs, last_delta, base_ts, max_ts, pid, count, crc))
        p += 12 + blen
    table = np.array(rows, dtype=np.int64) if rows else np.empty((0, _H_COLS), dtype=np.int64)
    return table, p


def walk_all_headers(buf: np.ndarray, start: int = 0, end: int | None = None) -> tuple[np.ndarray, int]:
    """Every whole batch header in buf[start:end] as an int64 table, and the end position.

    Uses the compiled kernel when numba is loaded; otherwise walks the first batches in
    Python and loads numba only for a region with many batches."""
    end = len(buf) if end is None else end
    parts = []
    pos = start
    if _KERNELS is None:
        table, pos = walk_headers_py(buf, start, end, limit=_PY_WALK_BATCHES)
        if len(table) < _PY_WALK_BATCHES:
            return table, pos
        parts.append(table)
    while True:
        out = np.empty((min(_WALK_CAP, (end - pos) // HEADER_SIZE + 1), _H_COLS), dtype=np.int64)
        n, pos = walk_headers(buf, pos, end, out)
        parts.append(out[:n])
        if n < out.shape[0]:
            break
    table = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return table, pos


_PY_WALK_BATCHES = 20_000  # ~40 ms of Python; numba's import + cache load costs ~1 s
_KERNELS: Any = None


def preload_kernels() -> None:
    """Load numba and the kernels now (a reader that will walk records anyway)."""
    _kernels()


def needs_records(schema: pa.Schema) -> bool:
    """Will ``decode_batches(lazy=True)`` walk records for this schema (in general: it may
    not for LogAppendTime timestamps)?"""
    return bool(set(schema.names) & {"key", "value", "headers", "timestamp"})


def _kernels() -> Any:
    """The numba kernels, compiled on first use (from numba's on-disk cache when valid)."""
    global _KERNELS
    if _KERNELS is None:
        import types

        import numba

        g = globals()
        # the inlined helpers first: the kernels resolve them as globals when compiled
        if not isinstance(g["_be"], numba.core.dispatcher.Dispatcher):
            g["_be"] = numba.njit(inline="always")(g["_be"])
            g["_varint"] = numba.njit(inline="always")(g["_varint"])
        jit = numba.njit(cache=True, nogil=True)
        _KERNELS = types.SimpleNamespace(
            walk_headers=jit(_walk_headers), decode_bodies=jit(_decode_bodies),
            decode_headers=jit(_decode_headers), gather=jit(_gather))
    return _KERNELS


def _decode_bodies(buf, bstart, bend, bcount, bbase, bbase_ts, bmax_ts, blat, off_lo, off_hi,
                   o_off, o_ts, o_tstype, o_kpos, o_klen, o_vpos, o_vlen, o_hpos, o_hcnt, o_hend):
    """Walk the records of each body buf[bstart[i]:bend[i]]; keep offsets in [off_lo, off_hi).

    Returns (records written, index of the first malformed batch or -1).
    """
    n = 0
    for i in range(bstart.shape[0]):
        p = bstart[i]
        end = bend[i]
        for _ in range(bcount[i]):
            length, p = _varint(buf, p, end)
            if p < 0 or length < 0 or p + length > end:
                return n, i
            rec_end = p + length
            p += 1  # record attributes: unused
            ts_delta, p = _varint(buf, p, rec_end)
            if p < 0:
                return n, i
            off_delta, p = _varint(buf, p, rec_end)
            if p < 0:
                return n, i
            klen, p = _varint(buf, p, rec_end)
            if p < 0 or p + max(klen, 0) > rec_end:
                return n, i
            kpos = p
            p += max(klen, 0)
            vlen, p = _varint(buf, p, rec_end)
            if p < 0 or p + max(vlen, 0) > rec_end:
                return n, i
            vpos = p
            p += max(vlen, 0)
            hcnt, p = _varint(buf, p, rec_end)
            if p < 0 or hcnt < 0 or hcnt > length:
                return n, i
            hpos = p
            # the header section runs to the end of the record; decode_headers checks it
            p = rec_end
            offset = bbase[i] + off_delta
            if offset < off_lo or offset >= off_hi:
                continue
            o_off[n] = offset
            if blat[i]:
                o_ts[n] = bmax_ts[i]
                o_tstype[n] = 1
            else:
                o_ts[n] = bbase_ts[i] + ts_delta
                o_tstype[n] = 0
            o_kpos[n] = kpos
            o_klen[n] = klen
            o_vpos[n] = vpos
            o_vlen[n] = vlen
            o_hpos[n] = hpos
            o_hcnt[n] = hcnt
            o_hend[n] = rec_end
            n += 1
        if p != end:
            return n, i  # trailing garbage or a record count that does not match the body
    return n, -1


def _decode_headers(buf, hend, hpos, hcnt, o_kpos, o_klen, o_vpos, o_vlen):
    """Walk each record's header section; returns the index of the first bad record or -1."""
    j = 0
    for r in range(hpos.shape[0]):
        p = hpos[r]
        end = hend[r]
        for _ in range(hcnt[r]):
            kl, p = _varint(buf, p, end)
            if p < 0 or kl < 0 or p + kl > end:
                return r  # a null (-1) header key is malformed too
            o_kpos[j] = p
            o_klen[j] = kl
            p += kl
            vl, p = _varint(buf, p, end)
            if p < 0 or p + max(vl, 0) > end:
                return r
            o_vpos[j] = p
            o_vlen[j] = vl
            p += max(vl, 0)
            j += 1
        if p != end:
            return r
    return -1


def _gather(buf, pos, length, offsets, data):
    """Copy buf[pos[i]:pos[i]+length[i]] end to end into data; length -1 means null."""
    o = 0
    offsets[0] = 0
    for i in range(pos.shape[0]):
        ln = length[i]
        if ln > 0:
            p = pos[i]
            data[o:o + ln] = buf[p:p + ln]
            o += ln
        offsets[i + 1] = o


def _binary_array(typ: pa.DataType, buf: np.ndarray, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    n = len(pos)
    total = int(length[length > 0].sum()) if n else 0
    if total >= 2**31:
        from protocol.errors import CorruptRecordError

        raise CorruptRecordError("more than 2 GiB of key or value bytes in one Arrow batch")
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(total, dtype=np.uint8)
    _kernels().gather(buf, pos, length, offsets, data)
    valid = length >= 0
    null_count = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count)


def _constant_string(typ: pa.DataType, s: str, n: int) -> pa.Array:
    raw = s.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], null_count=0)


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def decode_batches(
    region: np.ndarray,
    headers: np.ndarray,
    *,
    topic: str,
    partition: int,
    schema: pa.Schema,
    offset_lo: int = -(2**63),
    offset_hi: int = 2**63 - 1,
    base_position: int = 0,
    lazy: bool = False,
) -> pa.RecordBatch:
    """Decode the batches described by ``headers`` (rows of walk_headers over ``region``).

    The caller has already dropped control batches and batches outside the wanted range;
    records are further cut to offsets in [offset_lo, offset_hi). ``schema`` is the Arrow
    schema Spark expects (its column order is followed; ``headers`` is filled if present).
    ``base_position`` is the file position of region[0], for error messages.

    Every record is walked (and so checked) unless ``lazy``: then only what the schema's
    columns need is decoded. Without key, value, headers and (CreateTime) timestamp
    columns, rows come from the batch headers alone (offsets baseOffset..+lastOffsetDelta
    when recordCount == lastOffsetDelta + 1); only batches with offset gaps (compacted)
    that the offset column or an offset bound needs are walked (and decompressed). Key
    and value bytes are copied only for the key and value columns.
    """
    names = set(schema.names)
    if lazy and not names & {"key", "value", "headers"}:
        lat = (headers[:, H_ATTRIBUTES] & ATTR_TIMESTAMP_TYPE) != 0
        if "timestamp" not in names or lat.all():
            return _decode_from_headers(region, headers, topic=topic, partition=partition, schema=schema,
                                        offset_lo=offset_lo, offset_hi=offset_hi, base_position=base_position)
    return _decode_records(region, headers, topic=topic, partition=partition, schema=schema,
                           offset_lo=offset_lo, offset_hi=offset_hi, base_position=base_position)


def _decode_from_headers(region: np.ndarray, headers: np.ndarray, *, topic: str, partition: int,
                         schema: pa.Schema, offset_lo: int, offset_hi: int, base_position: int) -> pa.RecordBatch:
    """Rows of columns that batch headers determine (every timestamp asked for is a
    LogAppendTime batch's maxTimestamp): no record is walked unless a batch has offset
    gaps and its offsets are needed."""
    names = set(schema.names)
    base = headers[:, H_BASE_OFFSET]
    last = base + headers[:, H_LAST_DELTA]
    lo = np.maximum(base, offset_lo)
    hi = np.minimum(last + 1, offset_hi)
    cnt = np.maximum(hi - lo, 0)
    gap = headers[:, H_RECORD_COUNT] != headers[:, H_LAST_DELTA] + 1
    walk = None
    if gap.any():
        cut = (base < offset_lo) | (last >= offset_hi)
        # a gapless batch's offsets are base..last; a gapped one inside the bounds holds
        # recordCount rows; its offsets, or how many a bound keeps, need its records
        cnt = np.where(gap, headers[:, H_RECORD_COUNT], cnt)
        walk = gap & (cut | ("offset" in names))
        if walk.any():
            sub = np.ascontiguousarray(headers[walk])
            rb = _decode_records(region, sub, topic=topic, partition=partition, schema=_OFFSET_SCHEMA,
                                 offset_lo=offset_lo, offset_hi=offset_hi, base_position=base_position)
            walked = rb.column(0).to_numpy()
            first = np.searchsorted(walked, sub[:, H_BASE_OFFSET], side="left")
            after = np.searchsorted(walked, sub[:, H_BASE_OFFSET] + sub[:, H_LAST_DELTA], side="right")
            cnt[walk] = after - first
        else:
            walk = None
    n = int(cnt.sum())
    columns = []
    for field in schema:
        name = field.name
        if name == "offset":
            starts = np.cumsum(cnt) - cnt
            off = np.arange(n, dtype=np.int64) + np.repeat(lo - starts, cnt)
            if walk is not None:
                off[np.repeat(walk, cnt)] = walked
            columns.append(pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(off)], null_count=0))
        elif name == "timestamp":
            us = np.repeat(headers[:, H_MAX_TS] * 1000, cnt)
            columns.append(pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(us)], null_count=0))
        elif name == "timestampType":
            tt = np.repeat(((headers[:, H_ATTRIBUTES] & ATTR_TIMESTAMP_TYPE) != 0).astype(np.int32), cnt)
            columns.append(pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(tt)], null_count=0))
        else:
            columns.append(_constant_column(field, topic, partition, n))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


_OFFSET_SCHEMA = pa.schema([("offset", pa.int64())])


def _constant_column(field: pa.Field, topic: str, partition: int, n: int) -> pa.Array:
    if field.name == "topic":
        return _constant_string(field.type, topic, n)
    if field.name == "partition":
        return pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(np.full(n, partition, dtype=np.int32))],
                                     null_count=0)
    raise ValueError(f"unknown column {field.name!r} in the requested schema")


def _decode_records(region: np.ndarray, headers: np.ndarray, *, topic: str, partition: int, schema: pa.Schema,
                    offset_lo: int, offset_hi: int, base_position: int) -> pa.RecordBatch:
    """Walk every record of the batches (decompressing bodies as needed)."""
    nb = len(headers)
    attrs = headers[:, H_ATTRIBUTES]
    codecs = attrs & ATTR_COMPRESSION_MASK
    body_start = headers[:, H_POS] + HEADER_SIZE
    body_end = headers[:, H_POS] + headers[:, H_SIZE]
    if nb and codecs.any():
        # Lay every body end to end (decompressing those that are compressed); one copy.
        parts: list[bytes | memoryview] = []
        mv = memoryview(region)
        starts = np.empty(nb, dtype=np.int64)
        ends = np.empty(nb, dtype=np.int64)
        o = 0
        for i in range(nb):
            raw = mv[body_start[i] : body_end[i]]
            body = _decompress()(int(codecs[i]), raw) if codecs[i] else raw
            parts.append(body)
            starts[i] = o
            o += len(body)
            ends[i] = o
        buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
        body_start, body_end = starts, ends
    else:
        buf = region
    cap = int(headers[:, H_RECORD_COUNT].sum()) if nb else 0
    o_off = np.empty(cap, dtype=np.int64)
    o_ts = np.empty(cap, dtype=np.int64)
    o_tstype = np.empty(cap, dtype=np.int32)
    o_kpos = np.empty(cap, dtype=np.int64)
    o_klen = np.empty(cap, dtype=np.int64)
    o_vpos = np.empty(cap, dtype=np.int64)
    o_vlen = np.empty(cap, dtype=np.int64)
    o_hpos = np.empty(cap, dtype=np.int64)
    o_hcnt = np.empty(cap, dtype=np.int64)
    o_hend = np.empty(cap, dtype=np.int64)
    if nb:
        n, bad = _kernels().decode_bodies(
            buf, np.ascontiguousarray(body_start), np.ascontiguousarray(body_end),
            np.ascontiguousarray(headers[:, H_RECORD_COUNT]), np.ascontiguousarray(headers[:, H_BASE_OFFSET]),
            np.ascontiguousarray(headers[:, H_BASE_TS]), np.ascontiguousarray(headers[:, H_MAX_TS]),
            np.ascontiguousarray((attrs & ATTR_TIMESTAMP_TYPE) != 0), offset_lo, offset_hi,
            o_off, o_ts, o_tstype, o_kpos, o_klen, o_vpos, o_vlen, o_hpos, o_hcnt, o_hend,
        )
        if bad != _E_OK:
            from protocol.errors import CorruptRecordError

            pos = int(headers[bad, H_POS]) + base_position
            raise CorruptRecordError(f"batch at position {pos} (offset {int(headers[bad, H_BASE_OFFSET])}): malformed records")
    else:
        n = 0
    columns = []
    for field in schema:
        name = field.name
        if name == "key":
            columns.append(_binary_array(field.type, buf, o_kpos[:n], o_klen[:n]))
        elif name == "value":
            columns.append(_binary_array(field.type, buf, o_vpos[:n], o_vlen[:n]))
        elif name == "offset":
            columns.append(pa.array(o_off[:n], type=field.type))
        elif name == "timestamp":
            us = o_ts[:n] * 1000
            columns.append(pa.Array.from_buffers(field.type, n, [None, pa.py_buffer(us)], null_count=0))
        elif name == "timestampType":
            columns.append(pa.array(o_tstype[:n], type=field.type))
        elif name == "headers":
            columns.append(_headers_array(field.type, buf, o_hpos[:n], o_hcnt[:n], o_hend[:n], base_position))
        else:
            columns.append(_constant_column(field, topic, partition, n))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _decompress() -> Any:
    from protocol.compression import decompress

    return decompress


def _headers_array(typ: pa.DataType, buf: np.ndarray, hpos: np.ndarray, hcnt: np.ndarray, hend: np.ndarray,
                   base_position: int) -> pa.Array:
    """list<struct<key string, value binary>> from each record's header section."""
    n = len(hpos)
    total = int(hcnt.sum()) if n else 0
    hk_pos = np.empty(total, dtype=np.int64)
    hk_len = np.empty(total, dtype=np.int64)
    hv_pos = np.empty(total, dtype=np.int64)
    hv_len = np.empty(total, dtype=np.int64)
    bad = _kernels().decode_headers(buf, hend, hpos, hcnt, hk_pos, hk_len, hv_pos, hv_len)
    if bad != _E_OK:
        from protocol.errors import CorruptRecordError

        raise CorruptRecordError(f"record headers are malformed (record {bad} of a region at position {base_position})")
    struct_type = typ.value_type
    keys = _binary_array(struct_type.field(0).type, buf, hk_pos, hk_len)
    values = _binary_array(struct_type.field(1).type, buf, hv_pos, hv_len)
    structs = pa.StructArray.from_arrays([keys, values], fields=[struct_type.field(0), struct_type.field(1)])
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(hcnt, out=list_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(list_offsets), structs, type=typ)


def is_control(headers: np.ndarray) -> np.ndarray:
    """Boolean mask of transactional control batches (commit/abort markers)."""
    return (headers[:, H_ATTRIBUTES] & ATTR_CONTROL) != 0


def select_rows(headers: np.ndarray, offset_lo: int, offset_hi: int, ts_lo: int | None) -> np.ndarray:
    """Batches that may hold wanted records: not control, overlapping the offset range,
    and (for a timestamp lower bound) with maxTimestamp >= ts_lo."""
    last = headers[:, H_BASE_OFFSET] + headers[:, H_LAST_DELTA]
    keep = ~is_control(headers) & (last >= offset_lo) & (headers[:, H_BASE_OFFSET] < offset_hi)
    if ts_lo is not None:
        keep &= headers[:, H_MAX_TS] >= ts_lo
    return keep
