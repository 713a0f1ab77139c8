"""Flat Avro records decoded straight into Arrow columns by a numba kernel.

fastavro's C reader costs 1.5-3 µs a record (a Python dict each, and as much again to
resolve an older writer schema against the reader's), then Arrow must take the dicts
apart again. Most registry schemas are flat records of primitives, enums, fixed and
nullable primitives; for those :func:`plan` compiles the (writer schema, reader schema)
pair into a small program, one row per writer field: what to read, whether it is a
[null, X] union, where the value goes (a reader field, or nowhere: a field the reader
dropped is skipped) and how it is promoted (int -> long/float/double, long ->
float/double, float -> double, string <-> bytes, enum symbols mapped by name). The
kernel :func:`_decode` runs the program over every record of a group (one writer
schema) at once, filling numpy columns, and :func:`decode` wraps them as Arrow arrays
without per-record objects. Reader fields the writer lacks take their defaults (one
constant array).

A record that breaks the program (ends early, a union branch or enum index out of
range, a null where the reader allows none, invalid UTF-8 in a string, a negative
length, an int beyond 32 bits) is reported with its reason, as fastavro would refuse it;
trailing bytes are ignored, as fastavro ignores them. Anything :func:`plan` does not
cover (nested records, arrays, maps, other unions, named-type references, records of
different names) returns None and is decoded by fastavro instead.

numba is imported and the kernel compiled (from numba's on-disk cache) on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .decode import _kernels as batch_kernels

__all__ = ["Plan", "plan", "decode", "ERRORS"]

# operations
OP_NULL, OP_BOOL, OP_INT, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_FIXED, OP_ENUM = range(9)
# program columns
P_OP, P_VALID, P_SLOT, P_UNION, P_NULL_BRANCH, P_ARG, P_OUT, P_NULLABLE, P_UTF8, P_ENUM = range(10)
# output kinds: which matrix a value goes to
OUT_INT, OUT_FLOAT, OUT_BIN = range(3)

E_OK, E_TRUNCATED, E_UNION, E_NULL, E_ENUM, E_LENGTH, E_UTF8, E_VARINT, E_INT_RANGE = range(9)
ERRORS = {
    E_TRUNCATED: "truncated", E_UNION: "union branch index out of range",
    E_NULL: "null where the reader schema allows none", E_ENUM: "enum symbol index out of range or unknown to the reader",
    E_LENGTH: "negative length", E_UTF8: "a string is not UTF-8", E_VARINT: "a varint beyond 64 bits",
    E_INT_RANGE: "an int beyond 32 bits",
}

_PRIMS = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_OPS = {"null": OP_NULL, "boolean": OP_BOOL, "int": OP_INT, "long": OP_LONG, "float": OP_FLOAT, "double": OP_DOUBLE,
        "bytes": OP_BYTES, "string": OP_BYTES}
# reader type -> writer types it reads (Avro's promotions)
_READS = {"boolean": ("boolean",), "int": ("int",), "long": ("int", "long"), "float": ("int", "long", "float"),
          "double": ("int", "long", "float", "double"), "string": ("string", "bytes"), "bytes": ("bytes", "string")}


@dataclass
class _Leaf:
    kind: str  # an Avro primitive, "enum" or "fixed"
    nullable: bool = False
    null_branch: int = 0
    name: str | None = None  # full name of an enum / fixed
    symbols: tuple[str, ...] = ()
    size: int = 0
    default_symbol: str | None = None


@dataclass
class Plan:
    """A compiled (writer, reader) pair: the kernel's program and how to build the Arrow
    columns from what it fills."""

    program: np.ndarray  # int64 [writer fields, 10]
    enum_map: np.ndarray  # int64 [enums, writer symbols]: reader symbol index or -1
    n_valid: int
    n_int: int
    n_float: int
    n_bin: int
    #: per reader field: ("slot", valid row, kind, slot, enum symbols or None) or ("default", value)
    fields: list[tuple]
    names: list[str]  # writer field names, for messages


def _full(name: str, ns: str | None) -> str:
    return name if "." in name or not ns else f"{ns}.{name}"


def _leaf(t: Any, ns: str | None, named: dict[str, _Leaf]) -> _Leaf | None:
    """The leaf a field type is, or None when the kernel cannot read it."""
    nullable, null_branch = False, 0
    if isinstance(t, list):
        if len(t) == 1:
            t = t[0]
        elif len(t) == 2 and "null" in t and t[0] != t[1]:
            null_branch = t.index("null")
            t = t[1 - null_branch]
            nullable = True
        else:
            return None
    if isinstance(t, dict):
        typ = t.get("type")
        if typ in _PRIMS:
            leaf = _Leaf(typ)
        elif typ == "enum":
            leaf = _Leaf("enum", name=_full(t["name"], t.get("namespace", ns)), symbols=tuple(t["symbols"]),
                         default_symbol=t.get("default"))
            named[leaf.name] = leaf
        elif typ == "fixed":
            leaf = _Leaf("fixed", name=_full(t["name"], t.get("namespace", ns)), size=int(t["size"]))
            named[leaf.name] = leaf
        else:
            return None
    elif isinstance(t, str):
        if t in _PRIMS:
            leaf = _Leaf(t)
        else:
            ref = named.get(_full(t, ns)) or named.get(t)
            if ref is None:
                return None
            leaf = _Leaf(ref.kind, name=ref.name, symbols=ref.symbols, size=ref.size, default_symbol=ref.default_symbol)
    else:
        return None
    if leaf.kind == "null" and nullable:
        return None
    leaf.nullable, leaf.null_branch = nullable or leaf.kind == "null", null_branch
    return leaf


def _fields(schema: Any) -> tuple[str, list[tuple[dict, _Leaf]]] | None:
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    full = _full(schema["name"], schema.get("namespace"))
    ns = full.rpartition(".")[0] or None
    named: dict[str, _Leaf] = {}
    out = []
    for f in schema.get("fields", ()):
        leaf = _leaf(f["type"], ns, named)
        if leaf is None:
            return None
        out.append((f, leaf))
    return full, out


def plan(writer: Any, reader: Any, reader_fields: list[pa.Field]) -> Plan | None:
    """The kernel's program for records written with ``writer`` and read with ``reader``
    (Avro schemas as parsed JSON, logical types included: they only change what the raw
    values become later), or None when the kernel cannot decode them. ``reader_fields``
    are the raw Arrow fields of the reader record (see ``typed_values._raw_type``)."""
    w, r = _fields(writer), _fields(reader)
    if w is None or r is None or w[0] != r[0]:
        return None
    wfields, rfields = w[1], r[1]
    if len(rfields) != len(reader_fields):
        return None
    by_name = {f["name"]: i for i, (f, _) in enumerate(wfields)}
    target: dict[int, int] = {}  # writer field -> reader field
    for j, (f, _) in enumerate(rfields):
        for name in (f["name"], *f.get("aliases", ())):
            if name in by_name and by_name[name] not in target:
                target[by_name[name]] = j
                break
    program = np.zeros((len(wfields), 10), dtype=np.int64)
    enum_rows: list[np.ndarray] = []
    fields: list[tuple] = [None] * len(rfields)  # type: ignore[list-item]
    counts = {OUT_INT: 0, OUT_FLOAT: 0, OUT_BIN: 0}
    for i, (_, wl) in enumerate(wfields):
        prog = program[i]
        prog[P_OP] = _OPS.get(wl.kind, OP_ENUM if wl.kind == "enum" else OP_FIXED)
        prog[P_UNION] = 1 if wl.nullable and wl.kind != "null" else 0
        prog[P_NULL_BRANCH] = wl.null_branch
        prog[P_ARG] = len(wl.symbols) if wl.kind == "enum" else wl.size
        prog[P_VALID] = prog[P_SLOT] = -1
        prog[P_ENUM] = -1
        j = target.get(i)
        if j is None:
            continue  # the reader dropped it: skipped
        rl = rfields[j][1]
        symbols = None
        if rl.kind == "enum":
            if wl.kind != "enum" or wl.name != rl.name:
                return None
            index = {s: k for k, s in enumerate(rl.symbols)}
            dflt = index.get(rl.default_symbol, -1) if rl.default_symbol is not None else -1
            enum_rows.append(np.array([index.get(s, dflt) for s in wl.symbols], dtype=np.int64))
            prog[P_ENUM] = len(enum_rows) - 1
            out, symbols = OUT_INT, rl.symbols
        elif rl.kind == "fixed":
            if wl.kind != "fixed" or wl.name != rl.name or wl.size != rl.size:
                return None
            out = OUT_BIN
        elif rl.kind == "null":
            if wl.kind != "null":
                return None
            out = OUT_INT
        elif wl.kind not in _READS.get(rl.kind, ()):
            return None
        else:
            out = OUT_FLOAT if rl.kind in ("float", "double") else OUT_BIN if rl.kind in ("string", "bytes") \
                else OUT_INT
            prog[P_UTF8] = 1 if "string" in (rl.kind, wl.kind) else 0  # as fastavro: a written string is decoded
        prog[P_OUT] = out
        prog[P_VALID] = j
        prog[P_SLOT] = counts[out]
        counts[out] += 1
        prog[P_NULLABLE] = 1 if rl.nullable else 0
        fields[j] = ("slot", j, out, int(prog[P_SLOT]), symbols)
    for j, (f, _) in enumerate(rfields):
        if fields[j] is None:
            if "default" not in f:
                return None  # fastavro reports it
            fields[j] = ("default", _default(f["default"], reader_fields[j].type))
    width = max((len(e) for e in enum_rows), default=1)
    enum_map = np.full((max(len(enum_rows), 1), width), -1, dtype=np.int64)
    for k, e in enumerate(enum_rows):
        enum_map[k, :len(e)] = e
    return Plan(program, enum_map, len(rfields), counts[OUT_INT], counts[OUT_FLOAT], counts[OUT_BIN], fields,
                [f["name"] for f, _ in wfields])


def _default(value: Any, typ: pa.DataType) -> Any:
    if value is not None and (pa.types.is_binary(typ) or pa.types.is_fixed_size_binary(typ)):
        # Avro's JSON encoding of bytes: code points 0-255, one byte each (as Java's Avro
        # reads it; fastavro encodes such a default as UTF-8 instead)
        return value.encode("latin-1")
    return value


# --- the kernel ------------------------------------------------------------------------------


def _long(buf, p, end):
    """Zig-zag varint at p: (value, next position); position -1 if truncated, -2 if too long."""
    result = np.int64(0)
    shift = 0
    while True:
        if p >= end:
            return np.int64(0), -1
        b = np.int64(buf[p])
        p += 1
        if shift == 63 and b > 1:
            return np.int64(0), -2  # beyond 64 bits
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return ((result >> 1) & np.int64(0x7FFFFFFFFFFFFFFF)) ^ -(result & 1), p


def _utf8_ok(buf, p, end):
    """Is buf[p:end] valid UTF-8 (as Python's strict decoder has it)?"""
    while p < end:
        c = buf[p]
        if c < 0x80:
            p += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
        elif 0xF0 <= c <= 0xF4:
            n = 3
        else:
            return False
        if p + n >= end:
            return False
        c1 = buf[p + 1]
        if c == 0xE0 and c1 < 0xA0 or c == 0xED and c1 > 0x9F or c == 0xF0 and c1 < 0x90 or c == 0xF4 and c1 > 0x8F:
            return False
        for k in range(1, n + 1):
            if buf[p + k] & 0xC0 != 0x80:
                return False
        p += n + 1
    return True


def _decode(buf, starts, ends, prog, enum_map, ints, flts, bpos, blen, valid, err, err_field):
    u32 = np.empty(1, dtype=np.uint32)
    f32 = u32.view(np.float32)
    u64 = np.empty(1, dtype=np.uint64)
    f64 = u64.view(np.float64)
    nf = prog.shape[0]
    for r in range(starts.shape[0]):
        p = starts[r]
        end = ends[r]
        code = 0
        f = 0
        while f < nf:
            op = prog[f, 0]
            vrow = prog[f, 1]
            slot = prog[f, 2]
            out = prog[f, 6]
            if prog[f, 3] == 1:  # a [null, X] union: its branch
                b, p = _long(buf, p, end)
                if p < 0:
                    code = 1 if p == -1 else 7
                    break
                if b == prog[f, 4]:
                    if vrow >= 0 and prog[f, 7] == 0:
                        code = 3
                        break
                    f += 1
                    continue  # null: valid stays 0, blen -1
                if b != 1 - prog[f, 4]:
                    code = 2
                    break
            if op == 0:  # null
                if vrow >= 0 and prog[f, 7] == 0:
                    code = 3
                    break
                f += 1
                continue
            if op == 1:  # boolean
                if p >= end:
                    code = 1
                    break
                if slot >= 0:
                    ints[slot, r] = 1 if buf[p] != 0 else 0
                p += 1
            elif op == 2 or op == 3:  # int, long
                v, p = _long(buf, p, end)
                if p < 0:
                    code = 1 if p == -1 else 7
                    break
                if op == 2 and (v < -2147483648 or v > 2147483647):
                    code = 8
                    break
                if slot >= 0:
                    if out == 1:
                        flts[slot, r] = np.float64(v)
                    else:
                        ints[slot, r] = v
            elif op == 4:  # float
                if p + 4 > end:
                    code = 1
                    break
                u32[0] = np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | (
                    np.uint32(buf[p + 3]) << 24)
                if slot >= 0:
                    flts[slot, r] = np.float64(f32[0])
                p += 4
            elif op == 5:  # double
                if p + 8 > end:
                    code = 1
                    break
                x = np.uint64(0)
                for k in range(8):
                    x |= np.uint64(buf[p + k]) << np.uint64(8 * k)
                u64[0] = x
                if slot >= 0:
                    flts[slot, r] = f64[0]
                p += 8
            elif op == 6:  # bytes, string
                ln, p = _long(buf, p, end)
                if p < 0:
                    code = 1 if p == -1 else 7
                    break
                if ln < 0:
                    code = 5
                    break
                if p + ln > end:
                    code = 1
                    break
                if slot >= 0:
                    if prog[f, 8] == 1 and not _utf8_ok(buf, p, p + ln):
                        code = 6
                        break
                    bpos[slot, r] = p
                    blen[slot, r] = ln
                p += ln
            elif op == 7:  # fixed
                size = prog[f, 5]
                if p + size > end:
                    code = 1
                    break
                if slot >= 0:
                    bpos[slot, r] = p
                    blen[slot, r] = size
                p += size
            else:  # enum
                v, p = _long(buf, p, end)
                if p < 0:
                    code = 1 if p == -1 else 7
                    break
                if v < 0 or v >= prog[f, 5]:
                    code = 4
                    break
                if slot >= 0:
                    m = enum_map[prog[f, 9], v]
                    if m < 0:
                        code = 4
                        break
                    ints[slot, r] = m
            if vrow >= 0:
                valid[vrow, r] = 1
            f += 1
        err[r] = code
        err_field[r] = f if code else -1


_KERNELS: Any = None


def _kernels() -> Any:
    global _KERNELS
    if _KERNELS is None:
        import types

        import numba

        g = globals()
        if not isinstance(g["_long"], numba.core.dispatcher.Dispatcher):
            g["_long"] = numba.njit(inline="always")(g["_long"])
            g["_utf8_ok"] = numba.njit(g["_utf8_ok"])
        jit = numba.njit(cache=True, nogil=True)
        _KERNELS = types.SimpleNamespace(decode=jit(_decode))
    return _KERNELS


# --- Arrow --------------------------------------------------------------------------------------


def decode(p: Plan, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           raw_type: pa.StructType) -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]:
    """Decode the payloads buf[starts[i]:ends[i]] with the plan: (struct array of the rows
    that decoded, their mask, error code per row, writer field index per row)."""
    n = len(starts)
    k = _kernels()
    ints = np.zeros((p.n_int, n), dtype=np.int64)
    flts = np.zeros((p.n_float, n), dtype=np.float64)
    bpos = np.zeros((p.n_bin, n), dtype=np.int64)
    blen = np.full((p.n_bin, n), -1, dtype=np.int64)
    valid = np.zeros((p.n_valid, n), dtype=np.uint8)
    err = np.zeros(n, dtype=np.int8)
    err_field = np.zeros(n, dtype=np.int64)
    k.decode(buf, np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64), p.program,
             p.enum_map, ints, flts, bpos, blen, valid, err, err_field)
    good = err == 0
    cols = []
    for j, field in enumerate(raw_type):
        spec = p.fields[j]
        typ = field.type
        if spec[0] == "default":
            cols.append(pa.repeat(pa.scalar(spec[1], typ), n) if spec[1] is not None else pa.nulls(n, typ))
            continue
        _, vrow, out, slot, symbols = spec
        ok = valid[vrow].view(bool)
        nulls = n - int(np.count_nonzero(ok))
        validity = pa.py_buffer(np.packbits(ok, bitorder="little")) if nulls else None
        if out == OUT_BIN:
            cols.append(_binary(k, typ, buf, bpos[slot], blen[slot]))
        elif symbols is not None:
            idx = pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(ints[slot])], null_count=nulls)
            cols.append(pa.array(symbols, type=typ).take(idx))
        elif pa.types.is_null(typ):
            cols.append(pa.nulls(n))
        elif pa.types.is_boolean(typ):
            bits = pa.py_buffer(np.packbits(ints[slot].astype(bool), bitorder="little"))
            cols.append(pa.Array.from_buffers(typ, n, [validity, bits], null_count=nulls))
        else:
            src = flts[slot] if out == OUT_FLOAT else ints[slot]
            values = src.astype(typ.to_pandas_dtype(), copy=False)
            cols.append(pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls))
    arr = pa.StructArray.from_arrays(cols, fields=list(raw_type))
    if not good.all():
        arr = arr.filter(pa.array(good))
    return arr, good, err, err_field


def _binary(k: Any, typ: pa.DataType, buf: np.ndarray, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    n = len(pos)
    total = int(length[length > 0].sum())
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(total, dtype=np.uint8)
    batch_kernels().gather(buf, pos, length, offsets, data)  # the batch decoder's copy loop
    valid = length >= 0
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    if pa.types.is_fixed_size_binary(typ):
        return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                     null_count=nulls).cast(typ)
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)
