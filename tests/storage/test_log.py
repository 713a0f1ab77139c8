import os

import pytest

from protocol.records import build_batch, iter_records, parse_header, validate_batches
from storage.config import LogConfig
from storage.errors import KafkaStorageError, OffsetOutOfRangeError
from storage.segment import filename_prefix

from .helpers import append, batch, open_log, read_all


def test_append_assigns_offsets_and_reads_back(tmp_path):
    plog = open_log(tmp_path)
    r1 = append(plog, batch(3))
    r2 = append(plog, batch(2), batch(4))
    assert (r1.base_offset, r1.last_offset) == (0, 2)
    assert (r2.base_offset, r2.last_offset) == (3, 8)
    assert r1.log_append_time_ms == -1
    assert plog.log_end_offset == plog.high_watermark == 9
    assert [r.offset for r in read_all(plog)] == list(range(9))
    # the stored bytes are the batches with patched base offsets, CRC still valid
    region = plog.read(0, 1 << 20)
    data = region.read()
    assert validate_batches(data, from_client=False)[1].base_offset == 3
    assert os.path.basename(region.path) == filename_prefix(0) + ".log"


def test_many_batches_cost_one_write(tmp_path, monkeypatch):
    plog = open_log(tmp_path)
    calls = []
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, b, p: calls.append(len(b)) or real(fd, b, p))
    append(plog, *[batch(1) for _ in range(20)])
    assert len(calls) == 1


def test_read_semantics(tmp_path):
    plog = open_log(tmp_path)
    sizes = []
    for i in range(10):
        b = batch(5, value_size=100, ts=1000 + i)
        sizes.append(len(b))
        append(plog, b)
    # offset inside a batch returns from that batch
    reg = plog.read(7, 10**6)
    assert reg.first_offset == 5 and reg.position == sizes[0]
    # whole batches only
    reg = plog.read(0, sizes[0] + sizes[1] + 10)
    assert reg.length == sizes[0] + sizes[1]
    # at least one batch even if larger than max_bytes
    reg = plog.read(0, 1)
    assert reg.length == sizes[0]
    assert plog.read(0, 1, min_one_batch=False) is None
    # max_offset is exclusive and cuts on batch boundaries
    reg = plog.read(0, 10**6, max_offset=15)
    assert reg.length == sum(sizes[:3])
    assert plog.read(15, 10**6, max_offset=15) is None
    # end of log
    assert plog.read(50, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(51, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)


def test_roll_by_size_and_reads_cross_segments(tmp_path):
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    plog = open_log(tmp_path, cfg)
    for _ in range(40):
        append(plog, batch(2, value_size=100))
    assert len(plog.segments) > 5
    for s in plog.segments[:-1]:
        assert s.size <= 2000
        assert not s.active
        # closed indexes are trimmed to their entries
        assert os.path.getsize(s.offset_index.path) == s.offset_index.entries * 8
    assert os.path.getsize(plog.active_segment.offset_index.path) == cfg.segment_index_bytes // 8 * 8
    assert [r.offset for r in read_all(plog)] == list(range(80))
    for off in range(80):
        reg = plog.read(off, 1)
        assert reg.first_offset <= off < reg.first_offset + 2


def test_index_entry_every_interval(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=1000))
    for _ in range(30):
        append(plog, batch(1, value_size=200))
    seg = plog.active_segment
    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert entries, "expected sparse entries"
    data = open(seg.log_path, "rb").read()
    for off, pos in entries:
        assert parse_header(data, pos).last_offset == off  # (batch last offset, batch position)
    gaps = [b[1] - a[1] for a, b in zip(entries, entries[1:], strict=False)]
    assert all(g > 1000 for g in gaps)


def test_roll_by_segment_ms_uses_record_timestamps(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_ms=1000))
    append(plog, batch(1, ts=10_000))
    append(plog, batch(1, ts=10_500))
    assert len(plog.segments) == 1
    append(plog, batch(1, ts=11_001))
    assert len(plog.segments) == 2
    assert plog.active_segment.base_offset == 2


def test_roll_when_index_full(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=0, segment_index_bytes=8 * 4))
    for _ in range(12):
        append(plog, batch(1))
    assert len(plog.segments) >= 3
    assert [r.offset for r in read_all(plog)] == list(range(12))


def test_roll_on_relative_offset_overflow(tmp_path):
    plog = open_log(tmp_path)
    big = bytearray(build_batch([(b"k", b"v"), (b"k", b"v")], offset_deltas=[0, 2**31 - 1]))
    plog.append(big, validate_batches(big, from_client=False))
    append(plog, batch(1))
    assert plog.log_end_offset == 2**31 + 1
    assert [s.base_offset for s in plog.segments] == [0, 2**31]


def test_timestamps(tmp_path):
    plog = open_log(tmp_path, LogConfig(index_interval_bytes=100, segment_bytes=3000))
    for i in range(50):
        b = bytearray(build_batch([(b"k", b"x" * 50), (b"k", b"y" * 50)], timestamp=[1000 + 10 * i, 1005 + 10 * i]))
        plog.append(b, validate_batches(b))
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1003) == (1, 1005)
    assert plog.offset_for_timestamp(1255) == (51, 1255)
    assert plog.offset_for_timestamp(1256) == (52, 1260)
    assert plog.offset_for_timestamp(10**9) is None
    assert plog.max_timestamp() == (99, 1495)


def test_log_append_time(tmp_path):
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"), clock=lambda: 5000.0)
    r = append(plog, batch(2, ts=1))
    assert r.log_append_time_ms == 5_000_000
    recs = read_all(plog)
    assert [x.timestamp for x in recs] == [5_000_000, 5_000_000]
    assert plog.max_timestamp() == (0, 5_000_000)


def test_reopen_after_clean_close(tmp_path):
    cfg = LogConfig(segment_bytes=5000, index_interval_bytes=500)
    plog = open_log(tmp_path, cfg)
    for i in range(100):
        append(plog, batch(2, ts=i))
    plog.close()
    again = open_log(tmp_path, cfg)
    assert again.log_end_offset == 200
    assert [r.offset for r in read_all(again)] == list(range(200))
    r = append(again, batch(1, ts=5))
    assert r.base_offset == 200
    assert again.max_timestamp()[1] == 99


def test_delete_records_and_retention(tmp_path):
    now = [100_000.0]
    cfg = LogConfig(segment_bytes=1000, retention_ms=50_000, file_delete_delay_ms=1000)
    plog = open_log(tmp_path, cfg, clock=lambda: now[0])
    for i in range(30):
        append(plog, batch(1, value_size=100, ts=1000 * i))
    assert plog.delete_records_before(5) == 5
    n_before = len(plog.segments)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(4, 100)
    assert plog.read(5, 1).first_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(31)
    # retention.ms: records timestamped 0..29 s, now is 100 s, retention 50 s -> all old
    region = plog.read(5, 100)
    deleted = plog.delete_old_segments(int(now[0] * 1000))
    assert deleted == n_before
    assert plog.log_start_offset == 30 == plog.log_end_offset
    assert len(plog.segments) == 1 and plog.active_segment.size == 0
    # files renamed to .deleted, fd still readable until the delay passes
    assert any(n.endswith(".deleted") for n in os.listdir(plog.dir))
    assert len(region.read()) == region.length
    plog.delete_pending(int(now[0] * 1000) + 2000)
    assert not any(n.endswith(".deleted") for n in os.listdir(plog.dir))
    assert append(plog, batch(1)).base_offset == 30


def test_retention_bytes(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    plog = open_log(tmp_path, cfg)
    for _ in range(40):
        append(plog, batch(1, value_size=100))
    plog.delete_old_segments()
    assert plog.size_bytes - plog.active_segment.size <= 2500 or len(plog.segments) <= 3
    assert plog.size_bytes >= 2500 - 1000
    assert plog.log_start_offset == plog.segments[0].base_offset


def test_truncate_to(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=1000))
    for _ in range(30):
        append(plog, batch(2, value_size=50))
    plog.truncate_to(21)  # mid-batch: the whole batch [20, 21] goes
    assert plog.log_end_offset == 20
    assert [r.offset for r in read_all(plog)] == list(range(20))
    assert append(plog, batch(1)).base_offset == 20
    plog.truncate_to(0)
    assert plog.log_end_offset == 0
    assert append(plog, batch(1)).base_offset == 0


def test_disk_full_takes_only_that_partition_offline(tmp_path, monkeypatch):
    a = open_log(tmp_path / "a")
    b = open_log(tmp_path / "b")
    append(a, batch(1))
    append(b, batch(1))
    real = os.pwrite
    bad_fd = a.active_segment.fd

    def pwrite(fd, data, pos):
        if fd == bad_fd:
            raise OSError(28, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    with pytest.raises(KafkaStorageError) as ei:
        append(a, batch(1))
    assert ei.value.error_code.value == 56
    assert append(b, batch(1)).base_offset == 1
    with pytest.raises(KafkaStorageError):
        a.read(0, 100)
    assert b.read(0, 100) is not None


def test_flush_messages_forces_fsync(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    plog = open_log(tmp_path, LogConfig(flush_messages=3))
    append(plog, batch(2))
    assert not synced and plog.recovery_point == 0
    append(plog, batch(1))
    assert synced and plog.recovery_point == 3


def test_compressed_batches(tmp_path):
    from protocol.compression import Codec

    plog = open_log(tmp_path)
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD):
        b = bytearray(build_batch([(b"k", b"v" * 100)] * 5, compression=codec, timestamp=7))
        plog.append(b, validate_batches(b))
    assert [r.offset for r in read_all(plog)] == list(range(20))
    assert plog.offset_for_timestamp(7) == (0, 7)
    reg = plog.read(12, 1)
    assert list(iter_records(reg.read()))[0].offset == 10
