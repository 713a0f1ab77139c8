"""Log dirs for the Spark tests, written in Kafka's layout, with the records they hold.

``build_rich_log_dir`` writes topics that exercise every reader path (every codec, headers
with null values, null keys and values, LogAppendTime batches, a control batch, several
segments, a preallocated active index, a torn tail, an empty segment) and returns the
records it wrote as dicts: ``{"topic", "partition", "offset", "key", "value", "timestamp_ms",
"timestampType", "headers"}``. ``df_rows`` turns a kafka-segments DataFrame into the same
dicts, so any test (including ones over data produced through the broker, compared with
``spark_jobs.logdir.read_records_python`` or a consumer) can compare lists directly.
"""

from __future__ import annotations

import os
import random
import struct
from typing import Any

from protocol.compression import Codec
from protocol.records import build_batch
from spark_jobs.synth import DEMO_BATCHES as ORDERS_BATCHES
from spark_jobs.synth import DEMO_HOT_KEY as HOT_KEY
from spark_jobs.synth import DEMO_PARTITIONS as ORDERS_PARTITIONS
from spark_jobs.synth import PartitionWriter
from spark_jobs.synth import write_demo_log_dir as build_jobs_log_dir

T0 = 1_700_000_000_000  # ms


def df_rows(df: Any) -> list[dict]:
    """Collect a kafka-segments DataFrame as comparable dicts, sorted by (topic, partition, offset)."""
    cols = df.columns
    exprs = [c for c in cols if c != "timestamp"]
    if "timestamp" in cols:
        exprs.append("unix_millis(timestamp) AS timestamp_ms")
    sel = df.selectExpr(*exprs)
    out = []
    for r in sel.collect():
        d = r.asDict()
        for k in ("key", "value"):
            if d.get(k) is not None:
                d[k] = bytes(d[k])
        if "headers" in d:
            d["headers"] = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in d["headers"]]
        out.append(d)
    out.sort(key=lambda d: (d["topic"], d["partition"], d["offset"]))
    return out


def strip(rows: list[dict], headers: bool = True) -> list[dict]:
    """Expected rows restricted to the columns a DataFrame without headers has."""
    return [r if headers else {k: v for k, v in r.items() if k != "headers"} for r in rows]


def _records(rng: random.Random, i: int, n: int) -> list[tuple]:
    recs = []
    for j in range(n):
        key = None if rng.random() < 0.15 else f"key-{rng.randint(0, 9)}".encode()
        value = None if rng.random() < 0.1 else (b"" if rng.random() < 0.05 else f"value-{i}-{j}-".encode() * rng.randint(1, 6))
        headers = []
        if rng.random() < 0.4:
            headers = [("trace", f"t{i}.{j}".encode()), ("empty", None)][: rng.randint(1, 2)]
        recs.append((key, value, headers))
    return recs


def write_partition(log_dir: str, topic: str, partition: int, batches: int, *, seed: int, segment_bytes: int,
                    index_interval: int = 1024, preallocate_index: int = 0, control_every: int = 0,
                    log_append_every: int = 9, close: bool = True, torn_tail: bool = False) -> list[dict]:
    """Write ``batches`` batches (codecs cycling through all five) and return the records."""
    rng = random.Random(seed)
    w = PartitionWriter(log_dir, topic, partition, segment_bytes=segment_bytes, index_interval=index_interval,
                        preallocate_index=preallocate_index)
    expected = []
    for i in range(batches):
        if control_every and i % control_every == control_every - 1:
            # a transaction commit marker: key = version 0, type 1 (COMMIT); readers skip it
            w.append([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0))], timestamp=T0 + 1000 * i,
                     producer_id=7, producer_epoch=0, transactional=True, control=True)
            continue
        recs = _records(rng, i, rng.randint(1, 12))
        # CreateTime timestamps that are not monotonic inside a batch, as producers can send
        ts = [T0 + 1000 * i + ((j * 373) % 900) - 450 for j in range(len(recs))]
        lat = bool(log_append_every) and i % log_append_every == 4
        base = w.append(recs, timestamp=ts, compression=Codec(i % 5), log_append_time=lat)
        for j, (k, v, h) in enumerate(recs):
            expected.append({
                "topic": topic, "partition": partition, "offset": base + j, "key": k, "value": v,
                "timestamp_ms": max(ts) if lat else ts[j], "timestampType": 1 if lat else 0, "headers": list(h),
            })
    if close:
        w.close()
    else:
        w._log.flush()
    if torn_tail:
        # half of a batch, as a crash mid-append leaves it
        tail = build_batch([(b"k", b"v" * 300)], base_offset=w.next_offset, timestamp=T0)
        path = os.path.join(w.dir, f"{w.base:020d}.log")
        with open(path, "ab") as f:
            f.write(tail[: len(tail) // 2])
    return expected


def build_rich_log_dir(log_dir: str) -> list[dict]:
    """The main test log dir; returns every readable record, sorted."""
    expected = []
    # several segments, many index entries, control batches, LogAppendTime batches
    expected += write_partition(log_dir, "mixed", 0, 90, seed=1, segment_bytes=5000, index_interval=700,
                                control_every=17)
    # active segment with a preallocated (zero-tailed) index and a torn tail
    expected += write_partition(log_dir, "mixed", 1, 70, seed=2, segment_bytes=8000, preallocate_index=64,
                                close=False, torn_tail=True)
    expected += write_partition(log_dir, "mixed", 2, 5, seed=3, segment_bytes=1 << 20)
    expected += write_partition(log_dir, "other", 0, 12, seed=4, segment_bytes=3000)
    # an empty partition: one empty segment
    os.makedirs(os.path.join(log_dir, "empty-0"), exist_ok=True)
    open(os.path.join(log_dir, "empty-0", f"{0:020d}.log"), "wb").close()
    # things that are not partition dirs must be ignored
    os.makedirs(os.path.join(log_dir, "mixed-0.abcdef-delete"), exist_ok=True)
    with open(os.path.join(log_dir, "cleaner-offset-checkpoint"), "w") as f:
        f.write("0\n0\n")
    expected.sort(key=lambda d: (d["topic"], d["partition"], d["offset"]))
    return expected



__all__ = ["ORDERS_BATCHES", "HOT_KEY", "ORDERS_PARTITIONS", "build_jobs_log_dir", "build_rich_log_dir", "df_rows",
           "strip", "write_partition", "T0"]
