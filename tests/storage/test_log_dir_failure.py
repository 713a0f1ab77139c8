"""LogDirFailureChannel (KIP-112) in the LogManager: an I/O error in one partition takes its
whole log dir offline and nothing else; a write the disk took only part of is cut back;
index pages are allocated before they are written through the mapping."""

from __future__ import annotations

import errno
import os

import pytest

from storage import checkpoints as ck
from storage import index as storage_index
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.manager import LogManager

from .helpers import append, batch, read_all


def _two_dirs(tmp_path) -> tuple[LogManager, list[str]]:
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    m = LogManager(dirs, LogConfig(segment_bytes=100_000))
    m.load()
    for p in range(4):
        append(m.create("t", p), batch(2))
    return m, dirs


def _fail_writes_to(monkeypatch, fd: int, *, partial: bool = False) -> None:
    real = os.pwrite

    def pwrite(f, data, pos):
        if f == fd:
            if partial and len(data) > 1:
                return real(f, bytes(data)[: len(data) // 2], pos)  # the disk takes half, then is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(f, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)


def test_io_error_takes_the_whole_dir_offline_and_only_it(tmp_path, monkeypatch):
    m, dirs = _two_dirs(tmp_path)
    failed_dir = m.log_dir_of("t", 0)
    same = [p for p in range(4) if m.log_dir_of("t", p) == failed_dir]
    other = [p for p in range(4) if m.log_dir_of("t", p) != failed_dir]
    seen = []
    m.failure_channel.listeners.append(seen.append)
    _fail_writes_to(monkeypatch, m.get("t", 0).active_segment.fd)
    with pytest.raises(KafkaStorageError):
        append(m.get("t", 0), batch(1))
    assert seen == [failed_dir] and m.live_log_dirs == [d for d in dirs if d != failed_dir]
    for p in same:
        assert m.get("t", p).offline
        with pytest.raises(KafkaStorageError):
            m.get("t", p).read(0, 1000)
    for p in other:
        assert append(m.get("t", p), batch(1)).base_offset == 2
    # new partitions go to the live dir; nothing more is written in the failed one
    assert m.log_dir_of(*("t", 9)) is None and os.path.dirname(m.create("t", 9).dir) != failed_dir
    before = os.stat(os.path.join(failed_dir, ck.RECOVERY_POINT)).st_mtime_ns \
        if os.path.exists(os.path.join(failed_dir, ck.RECOVERY_POINT)) else None
    m.checkpoint()
    after = os.stat(os.path.join(failed_dir, ck.RECOVERY_POINT)).st_mtime_ns \
        if os.path.exists(os.path.join(failed_dir, ck.RECOVERY_POINT)) else None
    assert before == after
    monkeypatch.undo()
    m.shutdown()
    assert not os.path.exists(os.path.join(failed_dir, ck.CLEAN_SHUTDOWN))
    assert all(os.path.exists(os.path.join(d, ck.CLEAN_SHUTDOWN)) for d in dirs if d != failed_dir)
    # the next start recovers it: everything appended before the error is there
    m2 = LogManager(dirs, LogConfig(segment_bytes=100_000))
    m2.load()
    assert [m2.get("t", p).log_end_offset for p in range(4)] == [2 if p in same else 3 for p in range(4)]
    m2.shutdown()


def test_a_partly_written_append_is_cut_back(tmp_path, monkeypatch):
    m, _ = _two_dirs(tmp_path)
    plog = m.get("t", 0)
    size = plog.active_segment.size
    _fail_writes_to(monkeypatch, plog.active_segment.fd, partial=True)
    with pytest.raises(KafkaStorageError):
        append(plog, batch(5, value_size=500))
    assert os.fstat(plog.active_segment.fd).st_size == size  # no torn batch left after the last whole one
    assert plog.log_end_offset == 2
    monkeypatch.undo()
    m.shutdown()
    m2 = LogManager(m.log_dirs, LogConfig(segment_bytes=100_000))
    m2.load()
    assert [r.offset for r in read_all(m2.get("t", 0))] == [0, 1]
    m2.shutdown()


def test_index_space_is_allocated_before_the_record_is_written(tmp_path, monkeypatch):
    """A page of a mapped, sparse index file first written on a full disk is a SIGBUS;
    allocating it first makes it ENOSPC, before the record goes in the log."""
    monkeypatch.setattr(storage_index, "_RESERVE_CHUNK", 8)  # every new entry needs new space
    m, _ = _two_dirs(tmp_path)
    plog = m.get("t", 0)
    plog.config = LogConfig(segment_bytes=100_000, index_interval_bytes=1)
    for _ in range(3):
        append(plog, batch(1))
    size, leo = plog.active_segment.size, plog.log_end_offset

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(KafkaStorageError):
        append(plog, batch(1))
    assert (plog.active_segment.size, plog.log_end_offset) == (size, leo)
    monkeypatch.undo()
    m.shutdown()


def test_a_dir_that_cannot_be_opened_is_offline_from_the_start(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file where a directory should be")
    m = LogManager([str(good), str(bad)], LogConfig())
    m.load()
    assert m.live_log_dirs == [str(good)]
    assert os.path.dirname(m.create("t", 0).dir) == str(good)
    m.shutdown()
    only = LogManager([str(bad)], LogConfig())
    with pytest.raises(OSError, match="can be created or validated"):
        only.load()
