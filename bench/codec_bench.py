"""Codec costs on the broker's hot paths. Run: .venv/bin/python bench/codec_bench.py

- decode of a 1 MiB Produce request (framing.parse_request_header + decode_request)
- encode of a 1 MiB Fetch response through kio vs protocol.fetch_codec (and a plain
  1 MiB copy for reference)
- MB/s (of uncompressed data) to decode and encode each compression codec on a 1 MiB
  batch of JSON-ish ~100-byte values
Every figure is the median of several runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol import apis, framing
from protocol.build import make
from protocol.compression import Codec, codec_name, compress, decompress
from protocol.fetch_codec import FetchPartition, FetchTopic, encode_fetch_response
from protocol.records import build_batch

MIB = 1 << 20


def median_us(fn, runs: int = 15, inner: int = 5) -> float:
    fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return statistics.median(samples) * 1e6


def realistic_records(total: int) -> list[tuple[bytes, bytes]]:
    out, size, i = [], 0, 0
    while size < total:
        value = json.dumps({"user_id": 10_000 + i % 5000, "event": ("view", "click", "buy")[i % 3],
                            "ts": 1_700_000_000_000 + i * 17, "page": f"/item/{i % 997}"}).encode()
        value = value.ljust(100, b" ")[:100]
        key = f"user-{i % 5000}".encode()
        out.append((key, value))
        size += len(key) + len(value) + 8
        i += 1
    return out


def main() -> None:
    records = realistic_records(MIB)
    batch = build_batch(records, timestamp=1_700_000_000_000)
    print(f"python {sys.version.split()[0]}; batch: {len(records)} records, {len(batch)} bytes uncompressed")

    # Produce decode
    v = 9
    req = make(apis.request_type(0, v), transactional_id=None, acks=-1, timeout=30000,
               topic_data=[dict(name="events", partition_data=[dict(index=0, records=batch)])])
    frame = framing.encode_request(0, v, 1, req)[4:]
    recv = memoryview(bytearray(frame))  # what a BufferedProtocol receive buffer hands over

    def produce_decode():
        h = framing.parse_request_header(recv)
        framing.decode_request(h, recv)

    mv_batch = memoryview(batch)
    copy = median_us(lambda: mv_batch.tobytes())
    print(f"plain 1 MiB copy                         {copy:8.1f} us")
    print(f"Produce v{v} decode, 1 MiB (header+body)   {median_us(produce_decode):8.1f} us")
    for pv in (3, 7):
        f = framing.encode_request(0, pv, 1, make(apis.request_type(0, pv), acks=-1, timeout=30000, topic_data=[
            dict(name="events", partition_data=[dict(index=0, records=batch)])]))[4:]
        mv = memoryview(bytearray(f))
        print(f"Produce v{pv} decode, 1 MiB                 "
              f"{median_us(lambda mv=mv: framing.decode_request(framing.parse_request_header(mv), mv)):8.1f} us")

    # Fetch encode
    for fv in (11, 16):
        topics = [FetchTopic("events", uuid.UUID(int=7), [FetchPartition(0, 0, 1000, 1000, 0, None, -1, memoryview(batch))])]
        resp = make(apis.response_type(1, fv), throttle_time=0, error_code=0, session_id=0, responses=[
            dict(topic="events", topic_id=uuid.UUID(int=7), partitions=[
                dict(partition_index=0, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
                     aborted_transactions=None, records=batch)])])
        kio_us = median_us(lambda resp=resp, fv=fv: framing.encode_response(1, fv, 1, resp))
        fast_us = median_us(lambda topics=topics, fv=fv: encode_fetch_response(fv, 1, topics))
        print(f"Fetch v{fv} encode, 1 MiB via kio          {kio_us:8.1f} us")
        print(f"Fetch v{fv} encode, 1 MiB via fetch_codec  {fast_us:8.1f} us  (chunks, records not copied)")

    # Compression
    print(f"{'codec':8} {'ratio':>6} {'decode MB/s':>12} {'encode MB/s':>12}")
    body = batch[61:]
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD):
        packed = compress(codec, body)
        dec = median_us(lambda codec=codec, packed=packed: decompress(codec, packed), runs=9, inner=3)
        enc = median_us(lambda codec=codec: compress(codec, body), runs=9, inner=3)
        print(f"{codec_name(codec):8} {len(body) / len(packed):6.1f} {len(body) / dec:12.0f} {len(body) / enc:12.0f}")


if __name__ == "__main__":
    main()
