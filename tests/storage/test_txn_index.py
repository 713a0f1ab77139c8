"""The ``.txnindex`` file (Kafka's TransactionIndex / AbortedTxn) on its own."""

from __future__ import annotations

import os
import struct

import pytest

from storage.dump_log import main as dump_log
from storage.errors import CorruptIndexError
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, TxnIndexSearchResult


def _kafka_entry(pid: int, first: int, last: int, lso: int) -> bytes:
    # AbortedTxn: version int16 0, producerId, firstOffset, lastOffset, lastStableOffset int64
    return struct.pack(">h", 0) + struct.pack(">q", pid) + struct.pack(">qqq", first, last, lso)


def test_byte_format_round_trip(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path, 100)
    assert not os.path.exists(path)  # created lazily, like Kafka's
    assert idx.all_aborted_txns() == [] and not os.path.exists(path)
    entries = [AbortedTxn(7, 90, 105, 100), AbortedTxn(1 << 40, 101, 120, 121), AbortedTxn(7, 125, 130, 110)]
    for e in entries:
        idx.append(e)
    idx.flush()
    idx.close()
    data = open(path, "rb").read()
    assert ENTRY_SIZE == 34 and len(data) == 3 * 34
    assert data == b"".join(_kafka_entry(*e) for e in entries)
    again = TransactionIndex(path, 100)
    assert again.all_aborted_txns() == entries
    again.sanity_check()
    # last offsets must increase (Kafka's IllegalArgumentException)
    with pytest.raises(ValueError):
        again.append(AbortedTxn(3, 126, 130, 131))
    out = []

    class W:
        def write(self, s):
            out.append(s)

    assert dump_log(["--files", path], out=W(), err=W()) == 0
    assert "version: 0 producerId: 7 firstOffset: 90 lastOffset: 105 lastStableOffset: 100" in "".join(out)


def test_collect_overlap_and_completeness(tmp_path):
    idx = TransactionIndex(str(tmp_path / "0.txnindex"), 0)
    a = AbortedTxn(1, 0, 10, 11)
    b = AbortedTxn(2, 5, 20, 12)  # another transaction was still open: the LSO lagged
    c = AbortedTxn(3, 30, 40, 41)
    for t in (a, b, c):
        idx.append(t)
    # [0, 11): a and b overlap; a's LSO 11 reaches the bound -> complete right away
    assert idx.collect_aborted_txns(0, 11) == TxnIndexSearchResult([a], True)
    assert idx.collect_aborted_txns(11, 25) == TxnIndexSearchResult([b], True)  # c's LSO 41 >= 25
    assert idx.collect_aborted_txns(21, 30) == TxnIndexSearchResult([], True)
    assert idx.collect_aborted_txns(35, 100) == TxnIndexSearchResult([c], False)  # later segments may hold more


def test_truncate_reset_torn_tail_and_version(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path, 0)
    for i in range(4):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    idx.truncate_to(26)  # drops the entries whose marker is at or after 26 (the one at 35)
    assert [t.producer_id for t in idx.all_aborted_txns()] == [0, 1, 2]
    assert os.path.getsize(path) == 3 * 34
    idx.close()
    # a torn entry at the end (crash mid-write) is ignored, then written over
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")
    idx = TransactionIndex(path, 0)
    assert len(idx) == 3
    idx.append(AbortedTxn(9, 40, 45, 46))
    idx.close()
    assert os.path.getsize(path) == 4 * 34
    assert TransactionIndex(path, 0).all_aborted_txns()[-1] == AbortedTxn(9, 40, 45, 46)
    idx = TransactionIndex(path, 0)
    idx.reset()
    assert idx.all_aborted_txns() == [] and os.path.getsize(path) == 0
    idx.close()
    # a version from the future is corruption; so is an entry before the segment
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 1, 1, 2, 3, 4))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 0).all_aborted_txns()
    with open(path, "wb") as f:
        f.write(_kafka_entry(1, 2, 3, 4))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
