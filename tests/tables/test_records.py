"""tables.records: log regions to Arrow rows of committed data only (Kafka's read_committed)."""

from __future__ import annotations

import time

import pytest

from protocol.compression import Codec
from protocol.records import build_batch, build_end_txn_marker
from tables.layout import KEY_VALUE_ARROW_SCHEMA
from tables.records import region_to_arrow
from tests.storage.helpers import append, open_log

TS = 1_700_000_000_000


def rows(buf, partition=0, **kw):
    r = region_to_arrow(buf, partition, **kw)
    assert r.table.schema == KEY_VALUE_ARROW_SCHEMA
    return r.table.to_pylist(), r.next_offset


def marker(pid, commit, offset, epoch=0):
    return build_end_txn_marker(producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, commit=commit,
                                timestamp=TS, base_offset=offset)


def txn(records, offset, pid, epoch=0):
    return build_batch(records, base_offset=offset, timestamp=TS, producer_id=pid, producer_epoch=epoch,
                       base_sequence=0, transactional=True)


def test_fields_of_each_record():
    big = b"x" * 300  # lengths past one- and two-byte varints
    buf = build_batch([(b"k0", b"v0"), (None, b"v1", [("h", b"1"), ("h2", None)]), (b"k2", None), (big, big * 300)],
                      base_offset=10, timestamp=[TS, TS + 5, TS - 200, TS + 100_000])
    got, nxt = rows(buf, 7)
    assert nxt == 14
    assert [r["offset"] for r in got] == [10, 11, 12, 13]
    assert {r["partition"] for r in got} == {7}
    assert [int(r["timestamp"].timestamp() * 1000) for r in got] == [TS, TS + 5, TS - 200, TS + 100_000]
    assert [r["timestamp_type"] for r in got] == [0, 0, 0, 0]
    assert [r["key"] for r in got] == [b"k0", None, b"k2", big]
    assert [r["value"] for r in got] == [b"v0", b"v1", None, big * 300]
    assert [r["headers"] for r in got] == [[], [{"key": "h", "value": b"1"}, {"key": "h2", "value": None}], [], []]


def test_log_append_time_batches_carry_their_max_timestamp():
    buf = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp=[TS, TS + 1], log_append_time=True)
    got, _ = rows(buf)
    assert [r["timestamp_type"] for r in got] == [1, 1]
    assert [int(r["timestamp"].timestamp() * 1000) for r in got] == [TS + 1, TS + 1]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches(codec):
    recs = [(b"k%d" % i, b"value %d" % i * 20, [("i", b"%d" % i)]) for i in range(200)]
    buf = build_batch(recs[:100], compression=codec, timestamp=TS) + build_batch(
        recs[100:], base_offset=100, compression=codec, timestamp=TS)
    got, nxt = rows(buf)
    assert nxt == 200
    assert [(r["key"], r["value"], r["headers"]) for r in got] == [
        (k, v, [{"key": "i", "value": h[0][1]}]) for k, v, h in recs]


def test_offset_bounds_and_torn_tail():
    buf = build_batch([(b"k", b"%d" % i) for i in range(10)], timestamp=TS) + build_batch(
        [(b"k", b"%d" % i) for i in range(10, 20)], base_offset=10, timestamp=TS)
    got, nxt = rows(buf, start_offset=4, end_offset=15)
    assert [r["offset"] for r in got] == list(range(4, 15)) and nxt == 15
    got, nxt = rows(buf[:-5])  # the second batch is torn: not read, not skipped
    assert [r["offset"] for r in got] == list(range(10)) and nxt == 10
    got, nxt = rows(buf, start_offset=20)
    assert got == [] and nxt == 20
    assert rows(b"", start_offset=3) == ([], 3)


def test_control_batches_and_aborted_transactions_left_out():
    a, b = 1001, 1002
    buf = b"".join([
        build_batch([(b"plain", b"0")], base_offset=0, timestamp=TS),
        txn([(b"a", b"aborted-1"), (b"a", b"aborted-2")], 1, a),  # 1-2 aborted
        txn([(b"b", b"committed-3")], 3, b),  # 3 committed
        txn([(b"a", b"aborted-4")], 4, a),  # 4 aborted
        marker(a, False, 5),  # 5 ABORT of a
        marker(b, True, 6),  # 6 COMMIT of b
        txn([(b"a", b"committed-7")], 7, a, epoch=1),  # a's next transaction, committed
        marker(a, True, 8),
        build_batch([(b"plain", b"9")], base_offset=9, timestamp=TS),
    ])
    got, nxt = rows(buf, aborted=[(a, 1)])
    assert [(r["offset"], r["value"]) for r in got] == [(0, b"0"), (3, b"committed-3"), (7, b"committed-7"),
                                                        (9, b"9")]
    assert nxt == 10
    # read_uncommitted-like input (no aborted list): only the markers go
    got, _ = rows(buf)
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 7, 9]
    # a region starting inside the aborted transaction: its list still names it
    got, _ = rows(buf, aborted=[(a, 1)], start_offset=4)
    assert [r["offset"] for r in got] == [7, 9]


def test_a_real_partition_log_read_committed(tmp_path):
    """Batches and the aborted list as storage writes and answers them."""
    plog = open_log(tmp_path)
    try:
        append(plog, bytearray(build_batch([(b"k", b"p0"), (b"k", b"p1")], timestamp=TS)))
        append(plog, bytearray(txn([(b"t", b"gone-%d" % i) for i in range(3)], 0, 7)))
        append(plog, bytearray(txn([(b"t", b"kept")], 0, 8)))
        plog.append_control_batch(7, 0, 0, False, timestamp=TS)
        plog.append_control_batch(8, 0, 0, True, timestamp=TS)
        append(plog, bytearray(build_batch([(b"k", b"p2")], timestamp=TS, compression=Codec.ZSTD)))
        lso = plog.last_stable_offset
        region = plog.read(0, 1 << 20, max_offset=lso)
        data = region.read()
        aborted = plog.collect_aborted_transactions(0, lso)
        assert aborted == [(7, 2)]
        got, nxt = rows(data, 3, aborted=aborted, end_offset=lso)
        assert [r["value"] for r in got] == [b"p0", b"p1", b"kept", b"p2"]
        assert nxt == plog.log_end_offset == lso
    finally:
        plog.close()


def test_records_per_second():
    """The cost per record (the module doc's figure, smaller here): 100 k records of 16-byte
    keys and 100-byte values in 200 batches."""
    buf = b"".join(build_batch([(b"k%015d" % (b * 500 + i), b"v" * 100) for i in range(500)], base_offset=b * 500,
                               timestamp=TS) for b in range(200))
    region_to_arrow(buf, 0)
    t = time.perf_counter()
    r = region_to_arrow(buf, 0)
    rate = r.table.num_rows / (time.perf_counter() - t)
    print(f"region_to_arrow: {rate:,.0f} records/s")
    assert r.table.num_rows == 100_000 and rate > 100_000
