import os

import pytest

from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, TimeIndex


def test_offset_index_append_lookup_trim_reopen(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100)
    idx.open_writable(8 * 1000)
    assert os.path.getsize(p) == 8000  # preallocated
    for i in range(1, 501):
        idx.append(100 + i * 3, i * 4096)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(103) == (103, 4096)
    assert idx.lookup(104) == (103, 4096)
    assert idx.lookup(10**9) == (100 + 1500, 500 * 4096)
    assert idx.lookup_by_position(4096 * 10 + 5) == (130, 40960)
    idx.trim_to_valid_size()
    assert os.path.getsize(p) == 500 * 8
    again = OffsetIndex(p, 100)
    assert again.entries == 500
    assert again.lookup(250) == (250, 50 * 4096)
    again.sanity_check()
    again.close()


def test_offset_index_big_endian_layout(tmp_path):
    p = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(p, 0)
    idx.open_writable(80)
    idx.append(5, 4100)
    idx.close()
    assert open(p, "rb").read() == (5).to_bytes(4, "big") + (4100).to_bytes(4, "big")


def test_offset_index_rejects_non_increasing_and_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0)
    idx.open_writable(16)
    idx.append(1, 10)
    with pytest.raises(CorruptIndexError):
        idx.append(1, 20)
    idx.append(2, 20)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.append(3, 30)


def test_offset_index_truncate(tmp_path):
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0)
    idx.open_writable(800)
    for i in range(1, 11):
        idx.append(i * 10, i * 100)
    idx.truncate_to(50)
    assert idx.entries == 4
    idx.truncate_to(35)
    assert idx.entries == 3


def test_zero_filled_tail_is_not_entries(tmp_path):
    p = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(p, 0)
    idx.open_writable(8000)
    for i in range(1, 8):
        idx.append(i, i * 5000)
    idx.flush()
    # Simulate a crash: the preallocated file is never trimmed.
    idx._close_map()
    assert os.path.getsize(p) == 8000
    again = OffsetIndex(p, 0)
    again.open_writable(8000)
    assert again.entries == 7


def test_time_index(tmp_path):
    p = str(tmp_path / "00000000000000000000.timeindex")
    t = TimeIndex(p, 0)
    t.open_writable(12 * 10)
    t.maybe_append(100, 5)
    t.maybe_append(100, 6)  # not increasing: skipped
    t.maybe_append(200, 9)
    assert t.entries == 2
    assert t.lookup(50) == (-1, 0)
    assert t.lookup(150) == (100, 5)
    assert t.last_entry == (200, 9)
    t.truncate_to(9)
    assert t.entries == 1
    t.close()
    assert os.path.getsize(p) == 12
    assert open(p, "rb").read() == (100).to_bytes(8, "big") + (5).to_bytes(4, "big")


def test_time_index_reserves_last_slot(tmp_path):
    t = TimeIndex(str(tmp_path / "00000000000000000000.timeindex"), 0)
    t.open_writable(12 * 3)
    t.maybe_append(1, 1)
    t.maybe_append(2, 2)
    assert t.is_full
    t.maybe_append(3, 3)  # refused by the full check
    assert t.entries == 2
    t.maybe_append(3, 3, skip_full_check=True)
    assert t.entries == 3


def test_garbage_index_fails_sanity(tmp_path):
    p = str(tmp_path / "00000000000000000000.index")
    with open(p, "wb") as f:
        f.write(os.urandom(8 * 50 + 3))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(p, 0).sanity_check()
