"""decode.py on its own (no Spark): agreement with protocol.records on random batches, and
malformed record sections reported as CorruptRecordError instead of garbage rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from protocol.compression import Codec
from protocol.errors import CorruptRecordError
from protocol.records import HEADER_SIZE, build_batch, iter_records
from spark_jobs.datasource import SCHEMA_WITH_HEADERS, arrow_schema
from spark_jobs.decode import decode_batches, walk_all_headers

SCHEMA = arrow_schema(SCHEMA_WITH_HEADERS)


def _decode(buf: bytes, **kw: int):
    arr = np.frombuffer(buf, dtype=np.uint8)
    headers, end = walk_all_headers(arr)
    return decode_batches(arr, headers, topic="t", partition=3, schema=SCHEMA, **kw), end


@pytest.mark.parametrize("codec", list(Codec))
def test_matches_protocol_records(codec):
    rng = random.Random(int(codec))
    batches = []
    base = 0
    for _ in range(20):
        recs = [(None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 40)),
                 None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 300)),
                 [(f"h{j}", None if j % 2 else rng.randbytes(5)) for j in range(rng.randint(0, 3))])
                for _ in range(rng.randint(1, 30))]
        ts = [1_000_000 + rng.randint(-5000, 5000) for _ in recs]
        batches.append(build_batch(recs, base_offset=base, timestamp=ts, compression=codec,
                                   log_append_time=rng.random() < 0.2))
        base += len(recs)
    buf = b"".join(batches)
    rb, end = _decode(buf)
    assert end == len(buf)
    want = []
    for b in batches:
        lat = bool(b[22] & 0x08)
        want += [(r.key, r.value, r.offset, r.timestamp * 1000, 1 if lat else 0, list(r.headers)) for r in iter_records(b)]
    got = rb.to_pydict()
    assert list(zip(got["key"], got["value"], got["offset"],
                    [t.timestamp() * 1e6 if t else None for t in got["timestamp"]], got["timestampType"],
                    [[(h["key"], h["value"]) for h in hs] for hs in got["headers"]], strict=True)) == \
        [(k, v, o, float(t), tt, h) for k, v, o, t, tt, h in want]
    assert set(got["topic"]) == {"t"} and set(got["partition"]) == {3}


def test_offset_cut_inside_a_batch():
    buf = build_batch([(b"k", b"v")] * 10, base_offset=100)
    rb, _ = _decode(buf, offset_lo=103, offset_hi=107)
    assert rb.column("offset").to_pylist() == [103, 104, 105, 106]


def test_torn_tail_is_not_returned():
    a = build_batch([(b"k", b"v")] * 3, base_offset=0)
    b = build_batch([(b"k", b"v")] * 3, base_offset=3)
    rb, end = _decode(a + b[: len(b) - 1])
    assert end == len(a) and rb.num_rows == 3


def test_malformed_records_raise():
    good = bytearray(build_batch([(b"key", b"value")] * 4))
    # record: length, attributes, timestampDelta, offsetDelta, keyLength (zig-zag varints)
    bad = bytearray(good)
    bad[HEADER_SIZE + 4] = 0x7E  # key length 63 runs past the record
    with pytest.raises(CorruptRecordError):
        _decode(bytes(bad))
    # record count larger than the records present
    bad = bytearray(good)
    bad[57:61] = (9).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        _decode(bytes(bad))
