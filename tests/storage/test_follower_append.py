"""PartitionLog.append_as_follower (the leader's batches stored as they are) and the high
watermark of a replicated log."""

from __future__ import annotations

import os

import pytest

from protocol.errors import CorruptRecordError, ErrorCode
from protocol.records import assign_offsets, build_batch, iter_headers, validate_batches
from storage import checkpoints as ck
from storage.config import LogConfig
from storage.errors import OutOfOrderSequenceError, UnexpectedAppendOffsetError
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from storage.log import PartitionLog
from storage.manager import LogManager

from .helpers import append, batch, read_all


def _open(path, name: str, cfg: LogConfig | None = None, **kw) -> PartitionLog:
    return PartitionLog(os.path.join(str(path), name, "t-0"), "t", 0, cfg or LogConfig(), **kw)


def _fetch(leader: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> bytes:
    region = leader.read(offset, max_bytes, max_offset=leader.high_watermark)
    return b"" if region is None else region.read()


def _replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int = 1 << 20) -> int:
    """Fetch from the leader at the follower's LEO until caught up; returns fetches."""
    n = 0
    while follower.log_end_offset < leader.log_end_offset:
        data = _fetch(leader, follower.log_end_offset, max_bytes)
        assert data
        follower.append_as_follower(data)
        n += 1
    return n


def _log_files(plog: PartitionLog) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(plog.dir)):
        if name.endswith(".log"):
            with open(os.path.join(plog.dir, name), "rb") as f:
                out[name] = f.read()
    return out


def _gapped(*ranges: tuple[int, int], epoch: int = 0) -> bytearray:
    """Batches as a compacted leader holds them: (base offset, records) with gaps."""
    buf = bytearray()
    for base, n in ranges:
        b = bytearray(build_batch([(b"k", b"v")] * n, timestamp=1000))
        assign_offsets(b, validate_batches(b), base, leader_epoch=epoch)
        buf += b
    return buf


def test_follower_copy_is_byte_identical(tmp_path):
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    leader = _open(tmp_path, "leader", cfg)
    follower = _open(tmp_path, "follower", cfg, replicated=True)
    epochs = [0] * 10 + [3] * 15 + [7] * 20
    for i, epoch in enumerate(epochs):
        append(leader, batch(1 + i % 3, value_size=60, ts=1000 + i), leader_epoch=epoch)
    assert len(leader.segments) > 3
    assert _replicate(leader, follower, max_bytes=5000) > 1
    assert follower.log_end_offset == leader.log_end_offset
    assert _log_files(follower) == _log_files(leader)  # same segments, same bytes
    assert follower.epoch_cache.epoch_entries() == leader.epoch_cache.epoch_entries()
    assert [b[0] for b in follower.epoch_cache.epoch_entries()] == [0, 3, 7]
    assert [(r.offset, r.value) for r in read_all(follower)] == [(r.offset, r.value) for r in read_all(leader)]
    # the follower's indexes work: reads from any offset and timestamp lookups agree
    for off in range(0, leader.log_end_offset, 7):
        assert follower.read(off, 500).read() == leader.read(off, 500).read()
    assert follower.offset_for_timestamp(1020) == leader.offset_for_timestamp(1020)
    follower.close()
    again = _open(tmp_path, "follower", cfg, replicated=True)
    assert again.log_end_offset == leader.log_end_offset
    assert again.epoch_cache.epoch_entries() == leader.epoch_cache.epoch_entries()
    again.close()
    leader.close()


def test_one_fetch_of_many_batches_rolls_like_the_leader(tmp_path, monkeypatch):
    cfg = LogConfig(segment_bytes=1500)
    leader = _open(tmp_path, "leader", cfg)
    follower = _open(tmp_path, "follower", cfg, replicated=True)
    for i in range(30):
        append(leader, batch(1, value_size=100, ts=1000 + i), leader_epoch=2)
    data = b"".join(_fetch(leader, s.base_offset) for s in leader.segments)  # all of it at once
    calls = []
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, b, p: calls.append(len(b)) or real(fd, b, p))
    result = follower.append_as_follower(data)
    assert (result.base_offset, result.last_offset) == (0, 29)
    assert len(leader.segments) > 3 and len(calls) == len(leader.segments)  # one write per segment
    assert _log_files(follower) == _log_files(leader)


def test_partial_trailing_batch_is_ignored(tmp_path):
    leader = _open(tmp_path, "leader")
    follower = _open(tmp_path, "follower", replicated=True)
    for _ in range(3):
        append(leader, batch(2))
    data = _fetch(leader, 0)
    sizes = [h.size for _, h in iter_headers(data)]
    cut = data[: sizes[0] + sizes[1] + 30]  # two batches and part of a third's header
    r = follower.append_as_follower(cut)
    assert (r.base_offset, r.last_offset) == (0, 3) and follower.log_end_offset == 4
    assert follower.append_as_follower(data[sizes[0] + sizes[1]: -1]) is None  # all partial
    assert follower.append_as_follower(b"") is None
    assert follower.append_as_follower(data[:10]) is None
    assert follower.log_end_offset == 4
    r = follower.append_as_follower(memoryview(data)[sizes[0] + sizes[1]:])
    assert r.last_offset == 5 and _log_files(follower) == _log_files(leader)


def test_offset_regression_is_refused(tmp_path):
    leader = _open(tmp_path, "leader")
    follower = _open(tmp_path, "follower", replicated=True)
    for _ in range(3):
        append(leader, batch(2))
    data = _fetch(leader, 0)
    follower.append_as_follower(data)
    before = _log_files(follower)
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        follower.append_as_follower(data)
    assert e.value.first_offset == 0 and e.value.last_offset == 5 and "less than the next offset 6" in str(e.value)
    assert e.value.error_code == ErrorCode.unknown_server_error
    # offsets going back (or overlapping) inside one append
    with pytest.raises(UnexpectedAppendOffsetError, match="Out of order"):
        follower.append_as_follower(_gapped((10, 2), (11, 1)))
    with pytest.raises(UnexpectedAppendOffsetError, match="Out of order"):
        follower.append_as_follower(_gapped((20, 2), (10, 1)))
    assert follower.log_end_offset == 6 and _log_files(follower) == before
    assert not follower.offline


def test_crc_corruption_is_refused(tmp_path):
    leader = _open(tmp_path, "leader")
    follower = _open(tmp_path, "follower", replicated=True)
    for _ in range(3):
        append(leader, batch(2))
    data = bytearray(_fetch(leader, 0))
    first = next(iter_headers(data))[1].size
    data[first + 70] ^= 0xFF  # a record byte of the second batch
    with pytest.raises(CorruptRecordError) as e:
        follower.append_as_follower(data)
    assert e.value.error_code == ErrorCode.corrupt_message
    assert follower.log_end_offset == 0 and _log_files(follower) == {"00000000000000000000.log": b""}
    assert follower.latest_epoch == -1  # nothing learnt from a refused append


def test_gaps_from_a_compacted_leader(tmp_path):
    follower = _open(tmp_path, "follower", replicated=True)
    r = follower.append_as_follower(_gapped((0, 3), (7, 2), (12, 1), epoch=4))
    assert (r.base_offset, r.last_offset) == (0, 12) and follower.log_end_offset == 13
    r = follower.append_as_follower(_gapped((20, 2), epoch=5))
    assert follower.log_end_offset == 22
    assert [r.offset for r in read_all(follower)] == [0, 1, 2, 7, 8, 12, 20, 21]
    assert follower.read(4, 1 << 20).first_offset == 7
    assert follower.epoch_cache.epoch_entries() == [(4, 0), (5, 20)]
    follower.close()
    again = _open(tmp_path, "follower", replicated=True, clean_shutdown=False)
    assert again.log_end_offset == 22 and [r.offset for r in read_all(again)][-3:] == [12, 20, 21]
    again.close()


def test_gap_beyond_an_empty_segment_offset_range_rolls(tmp_path):
    follower = _open(tmp_path, "follower", replicated=True)
    far = (1 << 31) + 100
    follower.append_as_follower(_gapped((far, 2)))
    assert follower.active_segment.base_offset == far and follower.log_end_offset == far + 2
    assert [r.offset for r in read_all(follower, far)] == [far, far + 1]
    follower.close()


def test_producer_state_is_carried(tmp_path):
    leader = _open(tmp_path, "leader")
    follower = _open(tmp_path, "follower", replicated=True)
    for i in range(4):
        append(leader, batch(2, pid=7, epoch=0, seq=2 * i))
    follower.append_as_follower(_fetch(leader, 0))
    assert follower.last_sequence(7) == leader.last_sequence(7) == 7
    assert follower.producer_state.producer_epoch(7) == 0
    follower.close()
    # after a restart, and once it leads: the next sequence is taken, a retry is a
    # duplicate, a gap is refused
    follower = _open(tmp_path, "follower", replicated=True)
    assert follower.last_sequence(7) == 7
    r = append(follower, batch(2, pid=7, epoch=0, seq=8), leader_epoch=1)
    assert (r.base_offset, r.last_offset) == (8, 9)
    dup = append(follower, batch(2, pid=7, epoch=0, seq=8), leader_epoch=1)
    assert dup.duplicate and dup.base_offset == 8
    with pytest.raises(OutOfOrderSequenceError):
        append(follower, batch(1, pid=7, epoch=0, seq=20), leader_epoch=1)
    follower.close()


def test_replicated_batches_are_not_validated_for_sequences(tmp_path):
    follower = _open(tmp_path, "follower", replicated=True)
    buf = bytearray()
    for base, seq in ((0, 0), (1, 5), (2, 3)):  # a leader never sends this; a follower stores it
        b = bytearray(build_batch([(b"k", b"v")], producer_id=3, producer_epoch=0, base_sequence=seq))
        assign_offsets(b, validate_batches(b), base)
        buf += b
    follower.append_as_follower(buf)
    assert follower.log_end_offset == 3 and follower.last_sequence(3) == 3


def test_truncate_then_append_continues(tmp_path):
    cfg = LogConfig(segment_bytes=800)
    leader = _open(tmp_path, "leader", cfg)
    follower = _open(tmp_path, "follower", cfg, replicated=True)
    for i in range(12):
        append(leader, batch(1, value_size=80, ts=1000 + i), leader_epoch=1)
    _replicate(leader, follower)
    # the follower diverged: it holds epoch-2 batches the new leader never had
    follower.append_as_follower(_gapped((12, 2), (14, 2), epoch=2))
    assert follower.latest_epoch == 2
    for i in range(5):
        append(leader, batch(1, value_size=80, ts=2000 + i), leader_epoch=3)
    # KIP-101: ask where our latest epoch ends on the leader, truncate there
    epoch, end = leader.end_offset_for_epoch(follower.latest_epoch)
    assert (epoch, end) == (1, 12)
    follower.truncate_to(end)
    assert follower.log_end_offset == 12 and follower.latest_epoch == 1
    _replicate(leader, follower)
    assert _log_files(follower) == _log_files(leader)
    assert follower.epoch_cache.epoch_entries() == [(1, 0), (3, 12)]
    # truncating into an older segment, then catching up again
    follower.truncate_to(3)
    assert follower.log_end_offset == 3
    _replicate(leader, follower)
    assert _log_files(follower) == _log_files(leader)
    assert follower.epoch_cache.epoch_entries() == [(1, 0), (3, 12)]


def test_replicated_high_watermark(tmp_path):
    leader = _open(tmp_path, "leader", replicated=True)
    append(leader, batch(1), batch(1), batch(1))
    assert leader.log_end_offset == 3 and leader.high_watermark == 0  # appends commit nothing
    assert _fetch(leader, 0) == b""  # nothing below the HW to serve
    assert leader.maybe_increment_high_watermark(2)
    assert not leader.maybe_increment_high_watermark(2)
    assert not leader.maybe_increment_high_watermark(1) and leader.high_watermark == 2
    with pytest.raises(ValueError):
        leader.maybe_increment_high_watermark(4)
    assert leader.update_high_watermark(10) == 3
    assert leader.update_high_watermark(1) == 1  # a follower takes the leader's, even lower
    follower = _open(tmp_path, "follower", replicated=True)
    follower.append_as_follower(leader.read(0, 1 << 20).read())
    assert follower.log_end_offset == 3 and follower.high_watermark == 0
    assert follower.update_high_watermark(2) == 2
    follower.truncate_to(1)
    assert follower.log_end_offset == follower.high_watermark == 1
    # truncation lowers the HW to the new end
    leader.update_high_watermark(3)
    leader.truncate_to(2)
    assert leader.high_watermark == 2
    # a plain log keeps following its LEO, on follower appends too
    plain = _open(tmp_path, "plain")
    plain.append_as_follower(_gapped((0, 2)))
    assert plain.high_watermark == 2


def test_replicated_high_watermark_restored_from_checkpoint(tmp_path):
    d = str(tmp_path / "logs")
    m = LogManager([d], LogConfig(), replicated=True)
    m.load()
    plog = m.create("t", 0)
    other = m.create("u", 0)
    assert plog.replicated and plog.high_watermark == 0
    append(plog, batch(5))
    append(other, batch(5))
    assert plog.high_watermark == 0
    plog.update_high_watermark(3)
    m.shutdown()
    assert ck.read_checkpoint(os.path.join(d, ck.REPLICATION_OFFSET)) == {("t", 0): 3, ("u", 0): 0}
    m = LogManager([d], LogConfig(), replicated=True)
    m.load()
    assert m.get("t", 0).high_watermark == 3 and m.get("t", 0).log_end_offset == 5
    assert m.get("u", 0).high_watermark == 0
    m.shutdown()
    # a partition missing from the checkpoint starts at its log start, not at its end
    os.unlink(os.path.join(d, ck.REPLICATION_OFFSET))
    m = LogManager([d], LogConfig(), replicated=True)
    m.load()
    assert m.get("t", 0).high_watermark == 0
    m.shutdown()
    # a single broker's logs: the HW is the LEO whatever the checkpoint says
    m = LogManager([d], LogConfig())
    m.load()
    assert not m.get("t", 0).replicated and m.get("t", 0).high_watermark == 5
    m.shutdown()


def test_replicated_log_fsyncs_the_epoch_file_at_once(tmp_path, monkeypatch):
    plog = _open(tmp_path, "leader", replicated=True)
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    append(plog, batch(1), leader_epoch=4)
    assert len(synced) == 2  # the checkpoint and its directory, before the batch
    with open(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT), "rb") as f:
        assert f.read() == b"0\n1\n4 0\n"
    append(plog, batch(1), leader_epoch=4)
    assert len(synced) == 2
