"""Narrow (user-given) schemas: any subset of the columns, in any order, decoded alone.

Spark gives Python data sources no column pruning, so ``.schema("partition int, offset
long")`` is how a query says that it needs no record bodies. These tests check that narrow
reads give exactly the full read's projection (every codec, LogAppendTime, control
batches, compacted offset gaps, offset bounds that cut batches, read_committed), that a
header-only read never walks or decompresses a record body (a log whose bodies are garbage
still counts right, while a value read fails), and the errors for bad schemas."""

from __future__ import annotations

import json
import os
import random

import pytest
from pyspark.sql.types import StructType

from protocol.compression import Codec
from protocol.records import HEADER_SIZE, iter_headers
from spark_jobs import decode
from spark_jobs.datasource import SCHEMA_WITH_HEADERS, arrow_schema, check_schema, plan_slices
from spark_jobs.logdir import read_slice
from spark_jobs.synth import PartitionWriter
from tests.spark.helpers import T0, write_partition

NARROW = [
    "partition int, offset long",
    "offset long",
    "partition int",
    "topic string, offset long, timestampType int, partition int",
    "timestamp timestamp, offset long, partition int, topic string",
    "value binary, offset long, partition int, topic string",
    "offset long, key binary, topic string, partition int",
    "headers array<struct<key:string,value:binary>>, offset long, partition int, topic string",
]


def _ddl_schema(ddl: str) -> StructType:
    """The source's fields named in a DDL string like "offset long, partition int"."""
    by_name = {f.name: f for f in SCHEMA_WITH_HEADERS.fields}
    return StructType([by_name[part.split()[0]] for part in ddl.split(", ")])


@pytest.fixture(scope="module")
def gap_log_dir(tmp_path_factory) -> str:
    """Compacted-looking batches (offset gaps) in every codec, mixed with gapless ones,
    LogAppendTime batches, a transaction commit marker, and several segments."""
    d = str(tmp_path_factory.mktemp("gaps"))
    rng = random.Random(5)
    w = PartitionWriter(d, "gaps", 0, segment_bytes=4000, index_interval=300)
    for i in range(60):
        n = rng.randint(1, 9)
        recs = [(None if rng.random() < 0.3 else b"k%d" % j, b"v" * rng.randint(0, 50), [("h", b"x")] if j % 3 else [])
                for j in range(n)]
        deltas = None
        if i % 3 == 0:  # gaps: deltas increasing, the last one larger than n - 1
            deltas, o = [], 0
            for _ in range(n):
                deltas.append(o)
                o += rng.randint(1, 4)
        if i % 11 == 10:
            w.append([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], timestamp=T0, producer_id=3,
                     producer_epoch=0, transactional=True, control=True)
        w.append(recs, timestamp=[T0 + 1000 * i + ((j * 37) % 50) for j in range(n)], compression=Codec(i % 5),
                 offset_deltas=deltas, log_append_time=i % 7 == 2)
    w.close()
    write_partition(d, "gaps", 1, 40, seed=9, segment_bytes=3000, index_interval=500, control_every=13)
    return d


def _rows(spark, log_dir: str, ddl: str | None, cols: list[str], **opts: str) -> list[tuple]:
    r = spark.read.format("kafka-segments").option("log.dirs", log_dir)
    for k, v in opts.items():
        r = r.option(k, v)
    if ddl:
        r = r.schema(ddl)
    df = r.load()
    exprs = [f"unix_micros({c}) AS {c}" if c == "timestamp" else c for c in cols]
    out = []
    for row in df.selectExpr(*exprs).collect():
        out.append(tuple(bytes(v) if isinstance(v, bytearray) else
                         [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in v]
                         if isinstance(v, list) else v for v in row))
    return sorted(out, key=repr)


@pytest.mark.parametrize("ddl", NARROW)
def test_narrow_schema_is_the_full_reads_projection(spark, rich_log_dir, gap_log_dir, ddl):
    cols = [f.name for f in _ddl_schema(ddl).fields]
    starts = json.dumps({"gaps": {"0": 7, "1": 5}, "mixed": {"0": 13, "1": 3}})
    ends = json.dumps({"gaps": {"0": 150}, "mixed": {"0": 200}})
    for d, opts in ((rich_log_dir[0], {"includeHeaders": "true"}), (gap_log_dir, {"includeHeaders": "true"}),
                    (gap_log_dir, {"includeHeaders": "true", "startingOffsets": starts, "endingOffsets": ends}),
                    (rich_log_dir[0], {"includeHeaders": "true", "startingOffsets": starts, "endingOffsets": ends}),
                    (rich_log_dir[0], {"includeHeaders": "true", "isolation.level": "read_committed"})):
        want = _rows(spark, d, None, cols, **opts)
        assert want, (d, opts)
        got = _rows(spark, d, ddl, cols, **opts)
        assert got == want, (ddl, d, opts)


def test_offset_bounds_cutting_batches_without_spark(gap_log_dir):
    """Every (lo, hi) bound around batch edges: header-only offsets equal the walked ones."""
    full = arrow_schema(SCHEMA_WITH_HEADERS)
    narrow = arrow_schema(_ddl_schema("offset long, partition int"))
    every = sorted(o for s in plan_slices({"log.dirs": gap_log_dir}) for b in read_slice(s, full)
                   for o in b.column("offset").to_pylist())
    points = sorted({every[0], every[-1] + 1, *every[::7], *(o + 1 for o in every[::5])})
    for lo in points[::3]:
        for hi in points[::4]:
            opts = {"log.dirs": gap_log_dir, "assign": '{"gaps": [0]}',
                    "startingOffsets": json.dumps({"gaps": {"0": lo}}), "endingOffsets": json.dumps({"gaps": {"0": hi}})}
            slices = plan_slices(opts)
            want = [o for s in slices for b in read_slice(s, full) for o in b.column("offset").to_pylist()]
            got = [o for s in slices for b in read_slice(s, narrow) for o in b.column("offset").to_pylist()]
            assert got == want, (lo, hi)
            counted = sum(b.num_rows for s in slices for b in read_slice(s, arrow_schema(_ddl_schema("partition int"))))
            assert counted == len(want), (lo, hi)


def test_header_only_reads_walk_no_records(gap_log_dir, rich_log_dir, monkeypatch):
    """decode._decode_records (the record walk, decompression included) is not called for
    header-only columns of gapless batches, and only for the gapped batches otherwise."""
    calls = []
    real = decode._decode_records

    def counting(region, headers, **kw):
        calls.append(len(headers))
        return real(region, headers, **kw)

    monkeypatch.setattr(decode, "_decode_records", counting)
    d = rich_log_dir[0]  # no offset gaps
    for ddl in ("partition int, offset long", "topic string, timestampType int", "partition int"):
        n = sum(b.num_rows for s in plan_slices({"log.dirs": d}) for b in read_slice(s, arrow_schema(_ddl_schema(ddl))))
        assert n > 0
    assert calls == []
    sum(b.num_rows for s in plan_slices({"log.dirs": d}) for b in read_slice(s, arrow_schema(_ddl_schema("value binary"))))
    assert calls, "a value read walks the records"
    # gapped batches: counting needs no walk (recordCount), offsets walk only those batches
    calls.clear()
    slices = plan_slices({"log.dirs": gap_log_dir, "assign": '{"gaps": [0]}'})
    sum(b.num_rows for s in slices for b in read_slice(s, arrow_schema(_ddl_schema("partition int"))))
    assert calls == []
    sum(b.num_rows for s in slices for b in read_slice(s, arrow_schema(_ddl_schema("offset long"))))
    gapped = 20  # every third of 60 batches
    assert 0 < sum(calls) <= gapped


def _corrupt_bodies(log_dir: str) -> tuple[int, int, int]:
    """Overwrite every batch body (after the 61-byte header) with 0xFF; returns (records,
    min offset, max offset) from the intact headers."""
    n, lo, hi = 0, None, None
    for root, _, files in os.walk(log_dir):
        for name in files:
            if not name.endswith(".log"):
                continue
            path = os.path.join(root, name)
            with open(path, "r+b") as f:
                data = bytearray(f.read())
                for pos, h in iter_headers(bytes(data)):
                    end = pos + 12 + h.batch_length
                    data[pos + HEADER_SIZE : end] = b"\xff" * (end - pos - HEADER_SIZE)
                    n += h.record_count
                    lo = h.base_offset if lo is None else min(lo, h.base_offset)
                    hi = h.last_offset if hi is None else max(hi, h.last_offset)
                f.seek(0)
                f.write(data)
    return n, lo, hi


def test_header_only_query_reads_a_log_with_garbage_bodies(spark, tmp_path):
    d = str(tmp_path)
    w = PartitionWriter(d, "bad", 0, segment_bytes=20000, index_interval=2000)
    for i in range(200):
        w.append([(None, b"value-%d" % i)] * 25, timestamp=T0 + i, compression=Codec(i % 5))
    w.close()
    n, lo, hi = _corrupt_bodies(d)
    assert (n, lo, hi) == (5000, 0, 4999)

    def load(ddl: str, **opts: str):
        r = spark.read.format("kafka-segments").option("log.dirs", d).schema(ddl)
        for k, v in opts.items():
            r = r.option(k, v)
        return r.load()

    from pyspark.sql import functions as F

    row = load("partition int, offset long").agg(F.count("*"), F.min("offset"), F.max("offset")).first()
    assert tuple(row) == (5000, 0, 4999)
    assert load("partition int").count() == 5000
    cut = load("offset long, topic string, timestampType int",
               startingOffsets='{"bad": {"0": 1010}}', endingOffsets='{"bad": {"0": 2003}}')
    assert cut.agg(F.count("*"), F.min("offset"), F.max("offset")).first() == (993, 1010, 2002)
    assert cut.where("offset >= 1500 AND offset < 1600").count() == 100  # pushed-down filter
    with pytest.raises(Exception, match="(?i)corrupt|malformed|compress|decompress|invalid|lz4|snappy|zstd|gzip"):
        load("value binary, offset long").agg(F.sum(F.length("value"))).collect()


def test_bad_schemas_name_the_column(spark, rich_log_dir):
    d = rich_log_dir[0]
    for ddl, match in (("offset long, valu binary", "valu"), ("offset int", "offset.*bigint"),
                       ("timestamp timestamp_ntz", "timestamp"), ("headers array<string>", "headers")):
        with pytest.raises(Exception, match=match):
            spark.read.format("kafka-segments").option("log.dirs", d).schema(ddl).load().collect()
    with pytest.raises(ValueError, match="twice"):
        check_schema(_ddl_schema("offset long, offset long"))


def test_decode_constants_match_protocol_records():
    from protocol import records

    for name in ("ATTR_COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE", "ATTR_TRANSACTIONAL", "ATTR_CONTROL", "HEADER_SIZE"):
        assert getattr(decode, name) == getattr(records, name), name
    assert decode._HEADER.size == records.HEADER_SIZE


def test_python_header_walk_matches_the_kernel(rich_log_dir):
    import numpy as np

    for root, _, files in os.walk(rich_log_dir[0]):
        for name in files:
            if name.endswith(".log"):
                with open(os.path.join(root, name), "rb") as f:
                    buf = np.frombuffer(f.read(), dtype=np.uint8)
                t_py, end_py = decode.walk_headers_py(buf)
                out = np.empty((len(buf) // HEADER_SIZE + 1, 11), dtype=np.int64)
                n, end = decode.walk_headers(buf, 0, len(buf), out)
                assert end_py == end and np.array_equal(t_py, out[:n]), name
