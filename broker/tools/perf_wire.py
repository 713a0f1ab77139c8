"""``krait perf consume --client wire``: a consumer at the wire level, to measure what the
broker can serve rather than what a client library can take.

The confluent-kafka consumer builds a Python object per record and tops out near
0.8-0.9 M records/s on a typical machine. This one runs Metadata v1, ListOffsets v1 and
a Fetch v4 loop on one :class:`~broker.tools.wire.WireClient` and counts records from
the record-batch headers: no per-record work, no decompression. The versions are fixed,
not negotiated, so that every broker compared gets exactly the same requests.

Fetch responses are walked in the client's receive buffer rather than decoded by kio,
which would copy every record byte (about 10% of the client's throughput at 1 GB/s).
"""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any

from protocol.apis import ApiKey

from .perf_stats import MB, PerfError, cpu_seconds
from .wire import WireClient, encode_request, parse_bootstrap

__all__ = ["run_consume_wire"]

FETCH_MAX_BYTES = 52428800
PARTITION_MAX_BYTES = 4 * 1048576

# record batch v2 header: base offset, batch length ... last offset delta at 23, record count at 57
_BASE_AND_LENGTH = struct.Struct(">qi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_BATCH_HEADER = 61


def _fetch_v4_partitions(frame: memoryview) -> list[tuple[int, int, int, int]]:
    """(partition, error code, start, end of its records) for every partition of a Fetch
    v4 response frame (response header v0 included)."""
    out = []
    pos = 8  # correlation id, throttle time
    (ntopics,) = _I32.unpack_from(frame, pos)
    pos += 4
    for _ in range(ntopics):
        (name_len,) = _I16.unpack_from(frame, pos)
        pos += 2 + max(0, name_len)
        (nparts,) = _I32.unpack_from(frame, pos)
        pos += 4
        for _ in range(nparts):
            p, err, _hw, _lso = _PARTITION_HEAD.unpack_from(frame, pos)
            pos += _PARTITION_HEAD.size
            (naborted,) = _I32.unpack_from(frame, pos)
            pos += 4 + 16 * max(0, naborted)
            (size,) = _I32.unpack_from(frame, pos)
            pos += 4
            size = max(0, size)
            out.append((p, err, pos, pos + size))
            pos += size
    return out


def _partitions(w: WireClient, topic: str) -> list[int]:
    md = w.request(ApiKey.METADATA, 1, topics=[dict(name=topic)])
    for t in md.topics:
        if t.name == topic:
            if t.error_code:
                raise PerfError(f"Metadata for {topic!r}: error {int(t.error_code)}")
            return sorted(int(p.partition_index) for p in t.partitions)
    raise PerfError(f"topic {topic!r} not in Metadata")


def _earliest(w: WireClient, topic: str, parts: list[int]) -> dict[int, int]:
    resp = w.request(ApiKey.LIST_OFFSETS, 1, replica_id=-1, topics=[
        dict(name=topic, partitions=[dict(partition_index=p, timestamp=-2) for p in parts])])
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise PerfError(f"ListOffsets partition {p.partition_index}: error {int(p.error_code)}")
            out[int(p.partition_index)] = int(p.offset)
    return out


def _fetch_fields(args: argparse.Namespace, topic: str, parts: list[int], offsets: dict[int, int]) -> dict[str, Any]:
    return dict(replica_id=-1, max_wait=args.fetch_wait_ms, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0,
                topics=[dict(topic=topic, partitions=[
                    dict(partition=p, fetch_offset=offsets[p], partition_max_bytes=PARTITION_MAX_BYTES) for p in parts])])


def run_consume_wire(args: argparse.Namespace) -> dict[str, Any]:
    """Read ``--num-records`` records of every partition from the beginning; the result dict."""
    host, port = parse_bootstrap(args.bootstrap_server)[0]
    w = WireClient(host, port, args.timeout, client_id="krait-perf", negotiate=False)
    topic = args.topic
    try:
        deadline = time.perf_counter() + args.timeout
        while True:
            try:
                parts = _partitions(w, topic)
                break
            except PerfError:
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.2)
        offsets = _earliest(w, topic, parts)
        n = args.num_records
        count = 0
        wire_bytes = 0
        unpack_batch = _BASE_AND_LENGTH.unpack_from
        unpack_i32 = _I32.unpack_from
        # the first Fetch built imports kio's schema and caches its type hints (~8 ms):
        # build one before the clock starts
        encode_request(ApiKey.FETCH, 4, 0, **_fetch_fields(args, topic, parts, offsets))
        cpu0 = cpu_seconds()
        t_start = time.perf_counter()
        t_last = t_start
        idle_since = None
        while count < n:
            w.send(ApiKey.FETCH, 4, **_fetch_fields(args, topic, parts, offsets))
            frame = w.receive_frame()
            got = 0
            for p, err, pos, end in _fetch_v4_partitions(frame):
                if err:
                    raise PerfError(f"Fetch {topic}-{p}: error {err}")
                while pos + _BATCH_HEADER <= end:
                    base, blen = unpack_batch(frame, pos)
                    if pos + 12 + blen > end:
                        break  # partial batch at the end of the response
                    got += unpack_i32(frame, pos + 57)[0]
                    offsets[p] = base + unpack_i32(frame, pos + 23)[0] + 1
                    wire_bytes += 12 + blen
                    pos += 12 + blen
            now = time.perf_counter()
            if got:
                count += got
                t_last = now
                idle_since = None
            else:
                idle_since = idle_since or now
                if now - idle_since > args.idle_timeout or now > deadline:
                    break
    finally:
        w.close()
    cpu = cpu_seconds() - cpu0
    elapsed = t_last - t_start
    res: dict[str, Any] = {
        "mode": "consume",
        "client": "wire",
        "topic": topic,
        "partitions": len(parts),
        "records": count,
        "expected": n,
        "bytes": count * args.record_size,
        "wire_bytes": wire_bytes,
        "seconds": elapsed,
        "records_per_sec": count / elapsed if elapsed > 0 else 0.0,
        "mb_per_sec": count * args.record_size / MB / elapsed if elapsed > 0 else 0.0,
        "wire_mb_per_sec": wire_bytes / MB / elapsed if elapsed > 0 else 0.0,
        "client_cpu_pct": 100 * cpu / elapsed if elapsed > 0 else 0.0,
        "errors": 0,
        "first_error": None,
    }
    if count < n:
        res["error"] = f"consumed only {count} of {n} records (timeout {args.timeout}s / idle {args.idle_timeout}s)"
    return res
