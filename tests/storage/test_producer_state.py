import os
import struct

import pytest
from crc32c import crc32c

from storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from storage.producer_state import read_snapshot

from .helpers import append, batch, open_log


def test_dedup_of_last_five_batches(tmp_path):
    plog = open_log(tmp_path)
    results = [append(plog, batch(2, pid=7, epoch=0, seq=s)) for s in range(0, 14, 2)]
    assert [r.base_offset for r in results] == list(range(0, 14, 2))
    leo = plog.log_end_offset
    dup = append(plog, batch(2, pid=7, epoch=0, seq=8))
    assert dup.duplicate and dup.base_offset == 8 and dup.last_offset == 9
    assert plog.log_end_offset == leo
    # older than the last five: not a duplicate, and out of sequence
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, batch(2, pid=7, epoch=0, seq=0))
    assert plog.last_sequence(7) == 13


def test_sequence_gap_and_epoch(tmp_path):
    plog = open_log(tmp_path)
    append(plog, batch(1, pid=1, epoch=3, seq=0))
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, batch(1, pid=1, epoch=3, seq=5))
    with pytest.raises(InvalidProducerEpochError) as ei:
        append(plog, batch(1, pid=1, epoch=2, seq=1))
    assert ei.value.error_code.value == 47
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, batch(1, pid=1, epoch=4, seq=3))  # new epoch must restart at 0
    assert append(plog, batch(1, pid=1, epoch=4, seq=0)).base_offset == 1
    # unknown producer: any starting sequence accepted (state may have expired)
    assert not append(plog, batch(1, pid=2, epoch=0, seq=42)).duplicate
    # non-idempotent batches are never checked
    append(plog, batch(1))
    append(plog, batch(1))


def test_sequence_wraps(tmp_path):
    plog = open_log(tmp_path)
    append(plog, batch(1, pid=1, epoch=0, seq=2**31 - 1))
    assert append(plog, batch(1, pid=1, epoch=0, seq=0)).base_offset == 1


def test_dedup_survives_restart(tmp_path):
    plog = open_log(tmp_path)
    for s in range(5):
        append(plog, batch(1, pid=9, epoch=1, seq=s))
    plog.close()
    again = open_log(tmp_path)
    assert again.last_sequence(9) == 4
    assert append(again, batch(1, pid=9, epoch=1, seq=4)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        append(again, batch(1, pid=9, epoch=1, seq=6))
    assert append(again, batch(1, pid=9, epoch=1, seq=5)).base_offset == 5


def test_dedup_survives_crash(tmp_path):
    plog = open_log(tmp_path)
    for s in range(5):
        append(plog, batch(1, pid=9, epoch=1, seq=s))
    # no close(): state is rebuilt by replaying the log tail
    again = open_log(tmp_path, clean_shutdown=False)
    for s in range(5):
        assert append(again, batch(1, pid=9, epoch=1, seq=s)).duplicate


def test_snapshot_is_kafkas_layout(tmp_path):
    plog = open_log(tmp_path)
    append(plog, batch(3, pid=77, epoch=2, seq=10, ts=1234))
    plog.close()
    path = os.path.join(plog.dir, f"{3:020d}.snapshot")
    data = open(path, "rb").read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])
    fields = struct.unpack_from(">qhiqiqiq", data, 10)
    # producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch, txn first offset
    assert fields == (77, 2, 12, 2, 2, 1234, -1, -1)
    [e] = read_snapshot(path)
    assert e.batches[-1].first_seq == 10
    # a corrupt snapshot is ignored, state rebuilt from the log
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    again = open_log(tmp_path)
    assert again.last_sequence(77) == 12
