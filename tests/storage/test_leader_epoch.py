"""The leader epoch cache (Kafka's LeaderEpochFileCacheTest cases), its checkpoint file,
and how PartitionLog / LogManager keep it: leader appends, truncation, retention,
reopening, rebuilding, log-dir moves."""

from __future__ import annotations

import logging
import os
import re

import pytest

from protocol.records import iter_headers
from storage.config import LogConfig
from storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from storage.log import PartitionLog
from storage.manager import LogManager

from .helpers import append, batch, open_log, read_all

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochCache(str(tmp_path), "TestTopic-5")


def entries(c: LeaderEpochCache) -> list[tuple[int, int]]:
    return [tuple(e) for e in c.epoch_entries()]


def kafka_read(path: str) -> list[tuple[int, int]]:
    """Kafka's CheckpointReadBuffer + LeaderEpochCheckpointFile.Formatter, strictly: version
    0, the count, then exactly that many "<int32> <int64>" lines, "\\n" after each line."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n") and b"\r" not in data
    lines = data.decode("utf-8").split("\n")[:-1]
    assert lines[0] == "0"
    assert re.fullmatch(r"[0-9]+", lines[1])
    out = []
    for line in lines[2:]:
        m = re.fullmatch(r"([0-9]+) ([0-9]+)", line)
        assert m, line
        epoch, offset = int(m.group(1)), int(m.group(2))
        assert epoch < 2**31 and offset < 2**63
        out.append((epoch, offset))
    assert len(out) == int(lines[1])
    return out


# --- Kafka's LeaderEpochFileCacheTest ---------------------------------------------------


def test_add_epoch_and_end_offset_of_latest_epoch(cache):
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.epoch_entries() == [EpochEntry(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)  # the latest epoch ends at the log end
    cache.assign(2, 12)
    assert cache.end_offset_for(2, 14) == (2, 14)


def test_undefined_and_unknown_epochs(cache):
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.end_offset_for(0, 0) == UNDEFINED  # empty cache
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    cache.assign(2, 11)
    cache.assign(3, 12)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED
    cache.assign(4, 100)
    assert cache.end_offset_for(5, 100) == UNDEFINED  # above the latest


def test_epoch_keeps_its_first_start_offset(cache):
    cache.assign(2, 9)
    cache.assign(2, 10)
    assert entries(cache) == [(2, 9)]
    cache.assign(2, 6)  # ... unless the same epoch is assigned lower: that one wins
    assert entries(cache) == [(2, 6)]


def test_new_epoch_at_same_offset_replaces_the_previous(cache):
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert entries(cache) == [(3, 9)]


def test_offsets_going_back_remove_the_conflicting_entries(cache):
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert entries(cache) == [(3, 5)]


def test_epochs_going_back_remove_later_epochs(cache):
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)
    assert cache.latest_epoch == 1
    assert entries(cache) == [(1, 7)]
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED


def test_matching_epoch_with_earlier_start_truncates(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    cache.assign(7, 12)
    assert entries(cache) == [(5, 11), (7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_earlier_epochs_end_where_the_next_one_starts(cache):
    for epoch, offset in ((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)):
        cache.assign(epoch, offset)
    assert cache.end_offset_for(2, 17) == (2, 15)
    cache.clear()
    cache.assign(0, 10)
    cache.assign(2, 13)
    cache.assign(4, 17)
    assert cache.end_offset_for(1, 0) == (0, 13)  # no exact epoch: the largest below it
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)


def test_requested_epoch_below_the_first(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_epochs_as_leaders_change_many_times(cache):
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_epochs_as_a_follower_receives_messages(cache):
    for epoch, offsets in ((0, (0, 1, 2)), (1, (3, 4, 5)), (2, (6, 7, 8))):
        for o in offsets:
            cache.assign(epoch, o)
    assert entries(cache) == [(0, 0), (1, 3), (2, 6)]
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


def _three(c):
    c.assign(2, 6)
    c.assign(3, 8)
    c.assign(4, 11)


@pytest.mark.parametrize(("end", "expected"), [
    (8, [(2, 6)]),  # on an epoch boundary: inclusive
    (9, [(2, 6), (3, 8)]),  # between boundaries
    (11, [(2, 6), (3, 8)]),
    (12, [(2, 6), (3, 8), (4, 11)]),
    (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
])
def test_truncate_from_end(cache, end, expected):
    _three(cache)
    cache.truncate_from_end(end)
    assert entries(cache) == expected
    assert cache.latest_epoch == expected[-1][0]
    assert kafka_read(cache.path) == expected


@pytest.mark.parametrize(("start", "expected"), [
    (8, [(3, 8), (4, 11)]),  # on a boundary: that entry stays
    (9, [(3, 9), (4, 11)]),  # between: the covering epoch moves to the new start
    (1, [(2, 6), (3, 8), (4, 11)]),  # before the first: nothing changes
    (6, [(2, 6), (3, 8), (4, 11)]),
    (11, [(4, 11)]),
    (15, [(4, 15)]),
    (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
])
def test_truncate_from_start(cache, start, expected):
    _three(cache)
    cache.truncate_from_start(start)
    assert entries(cache) == expected
    assert kafka_read(cache.path) == expected


def test_truncate_from_start_keeps_epoch_zero(cache):
    cache.assign(0, 0)
    cache.assign(1, 7)
    cache.assign(2, 10)
    cache.truncate_from_start(5)
    assert entries(cache) == [(0, 5), (1, 7), (2, 10)]


def test_truncations_write_the_checkpoint(cache):
    _three(cache)
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert kafka_read(cache.path) == [(3, 8)]


def test_empty_cache_operations(cache):
    assert not cache.truncate_from_start(7)
    assert not cache.truncate_from_end(7)
    assert cache.epoch_for_offset(3) is None
    assert cache.latest_entry is None and cache.earliest_entry is None


def test_clear(cache):
    _three(cache)
    cache.clear()
    assert entries(cache) == [] and cache.latest_epoch == UNDEFINED_EPOCH
    with open(cache.path, "rb") as f:
        assert f.read() == b"0\n0\n"


def test_epoch_for_offset(cache):
    cache.assign(0, 10)
    cache.assign(1, 20)
    cache.assign(5, 30)
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(5) is None


def test_invalid_entries_are_refused(cache):
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


# --- the file ---------------------------------------------------------------------------


def test_file_format_byte_for_byte_and_round_trip(tmp_path, cache):
    _three(cache)
    with open(cache.path, "rb") as f:
        assert f.read() == b"0\n3\n2 6\n3 8\n4 11\n"
    assert kafka_read(cache.path) == [(2, 6), (3, 8), (4, 11)]
    again = LeaderEpochCache(str(tmp_path))
    assert again.loaded and entries(again) == [(2, 6), (3, 8), (4, 11)] and again.latest_epoch == 4
    assert not os.path.exists(cache.path + ".tmp")


def test_reads_what_kafka_writes(tmp_path):
    # Kafka creates the file empty; and splits entry lines on any whitespace
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"")
    c = LeaderEpochCache(str(tmp_path))
    assert c.loaded and entries(c) == []
    path.write_bytes(b"0\n2\n0 0\n7\t\t12345678901 \n")
    c = LeaderEpochCache(str(tmp_path))
    assert c.loaded and entries(c) == [(0, 0), (7, 12345678901)]


@pytest.mark.parametrize("content", [
    b"1\n0\n",  # unknown version
    b"0\n2\n1 0\n",  # fewer entries than counted
    b"0\n1\n1 0\n2 5\n",  # more
    b"0\n1\n1\n",  # one field
    b"0\n1\n1 x\n",
    b"0\n1\n-1 0\n",  # a negative epoch
    b"0\n1\n2147483648 0\n",  # not an int32
    b"garbage",
    b"\xff\xfe",
])
def test_malformed_file_is_not_loaded(tmp_path, caplog, content):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        c = LeaderEpochCache(str(tmp_path))
    assert not c.loaded and entries(c) == []
    assert "rebuilt" in caplog.text


def test_unsynced_cache_is_fsynced_by_flush(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    c = LeaderEpochCache(str(tmp_path), sync=False)
    c.assign(0, 0)
    assert not synced and kafka_read(c.path) == [(0, 0)]
    c.flush()
    assert len(synced) == 2  # the file and its directory
    c.flush()
    assert len(synced) == 2
    os.makedirs(tmp_path / "x")
    s = LeaderEpochCache(str(tmp_path / "x"), sync=True)
    s.assign(1, 0)
    assert len(synced) == 4


# --- PartitionLog -----------------------------------------------------------------------


def _epochs_on_disk(plog: PartitionLog) -> list[int]:
    out = []
    for seg in plog.segments:
        with open(seg.log_path, "rb") as f:
            out += [h.partition_leader_epoch for _, h in iter_headers(f.read())]
    return out


def test_leader_append_stamps_and_caches_the_epoch(tmp_path):
    plog = open_log(tmp_path)
    append(plog, batch(2), leader_epoch=3)
    append(plog, batch(1), leader_epoch=3)
    assert entries(plog.epoch_cache) == [(3, 0)] and plog.latest_epoch == 3
    append(plog, batch(2), batch(1), leader_epoch=5)
    assert entries(plog.epoch_cache) == [(3, 0), (5, 3)]
    assert _epochs_on_disk(plog) == [3, 3, 5, 5]
    assert plog.end_offset_for_epoch(3) == (3, 3)
    assert plog.end_offset_for_epoch(4) == (3, 3)
    assert plog.end_offset_for_epoch(5) == (5, 6)
    assert plog.end_offset_for_epoch(6) == UNDEFINED
    assert plog.end_offset_for_epoch(1) == (1, 0)
    # no epoch (-1) or an older one leaves the cache alone
    append(plog, batch(1), leader_epoch=-1)
    assert plog.latest_epoch == 5
    plog.close()
    assert kafka_read(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT)) == [(3, 0), (5, 3)]
    again = open_log(tmp_path)
    assert entries(again.epoch_cache) == [(3, 0), (5, 3)]
    again.close()


def test_default_append_records_epoch_zero(tmp_path):
    plog = open_log(tmp_path)
    assert plog.latest_epoch == -1
    append(plog, batch(1))
    assert entries(plog.epoch_cache) == [(0, 0)]
    plog.close()


def test_fresh_log_creates_an_empty_checkpoint_like_kafka(tmp_path):
    plog = open_log(tmp_path)
    with open(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT), "rb") as f:
        assert f.read() == b""
    plog.close()


def _log_with_epochs(tmp_path, cfg: LogConfig | None = None) -> PartitionLog:
    plog = open_log(tmp_path, cfg)
    for epoch in (0, 0, 1, 1, 4, 4, 4):
        append(plog, batch(2, value_size=100), leader_epoch=epoch)
    assert entries(plog.epoch_cache) == [(0, 0), (1, 4), (4, 8)]
    return plog


def test_cache_rebuilt_from_the_log_when_the_file_is_deleted(tmp_path):
    plog = _log_with_epochs(tmp_path, LogConfig(segment_bytes=500))
    assert len(plog.segments) > 2
    plog.close()
    os.unlink(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT))
    again = open_log(tmp_path, LogConfig(segment_bytes=500))
    assert entries(again.epoch_cache) == [(0, 0), (1, 4), (4, 8)]
    assert kafka_read(os.path.join(again.dir, LEADER_EPOCH_CHECKPOINT)) == [(0, 0), (1, 4), (4, 8)]
    again.close()


def test_cache_rebuilt_when_the_file_is_malformed(tmp_path, caplog):
    plog = _log_with_epochs(tmp_path)
    plog.close()
    with open(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("0\n5\n1 2\n")
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path)
    assert entries(again.epoch_cache) == [(0, 0), (1, 4), (4, 8)]
    assert "leader-epoch-checkpoint" in caplog.text
    again.close()


def test_entries_outside_the_log_are_dropped_at_open(tmp_path):
    plog = _log_with_epochs(tmp_path)
    plog.delete_records_before(5)
    assert entries(plog.epoch_cache) == [(1, 5), (4, 8)]
    plog.close()
    # a crash after the epoch was written and before its batches were
    with open(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("0\n4\n0 0\n1 4\n4 8\n7 14\n")
    again = open_log(tmp_path, log_start_offset=5)
    assert entries(again.epoch_cache) == [(1, 5), (4, 8)]
    again.close()


def test_unclean_recovery_learns_epochs_the_file_lost(tmp_path):
    plog = _log_with_epochs(tmp_path)
    plog.close()
    with open(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT), "w") as f:
        f.write("0\n1\n0 0\n")
    again = open_log(tmp_path, clean_shutdown=False)
    assert entries(again.epoch_cache) == [(0, 0), (1, 4), (4, 8)]
    again.close()


def test_truncation_trims_the_cache(tmp_path):
    plog = _log_with_epochs(tmp_path)
    plog.truncate_to(9)  # inside epoch 4's first batch [8, 9]: that batch goes
    assert plog.log_end_offset == 8
    assert entries(plog.epoch_cache) == [(0, 0), (1, 4)]
    append(plog, batch(1), leader_epoch=6)
    assert entries(plog.epoch_cache) == [(0, 0), (1, 4), (6, 8)]
    # truncating at or beyond the end still drops an epoch that never got a batch
    plog.epoch_cache.assign(7, plog.log_end_offset)
    plog.truncate_to(plog.log_end_offset + 5)
    assert entries(plog.epoch_cache) == [(0, 0), (1, 4), (6, 8)]
    plog.truncate_fully_and_start_at(100)
    assert entries(plog.epoch_cache) == [] and plog.latest_epoch == -1
    assert kafka_read(os.path.join(plog.dir, LEADER_EPOCH_CHECKPOINT)) == []
    append(plog, batch(1), leader_epoch=8)
    assert entries(plog.epoch_cache) == [(8, 100)]
    plog.close()


def test_retention_truncates_the_cache_from_the_start(tmp_path):
    size = len(batch(2, value_size=100))  # one batch per segment: keep the last 4 (offsets 6-13)
    cfg = LogConfig(segment_bytes=size + 10, retention_ms=-1, retention_bytes=4 * size, file_delete_delay_ms=0)
    plog = _log_with_epochs(tmp_path, cfg)
    assert plog.delete_old_segments() == 3
    assert plog.log_start_offset == 6 and [r.offset for r in read_all(plog)][0] == 6
    assert entries(plog.epoch_cache) == [(1, 6), (4, 8)]
    plog.close()
    assert entries(open_log(tmp_path, cfg, log_start_offset=6).epoch_cache) == [(1, 6), (4, 8)]


def test_log_dir_move_carries_the_checkpoint(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    m = LogManager([a, b], LogConfig(segment_bytes=1000), replicated=True)
    m.load()
    plog = m.create("t", 0)
    source = m.log_dir_of("t", 0)
    dest = b if source == a else a
    for epoch in (1, 1, 2):
        append(plog, batch(3, value_size=100), leader_epoch=epoch)
    plog.update_high_watermark(4)
    move = m.start_move("t", 0, dest)
    m.plan_move(move)
    move.copy()
    append(plog, batch(1), leader_epoch=5)  # the file changes during the move
    assert m.complete_move(move)
    moved = m.get("t", 0)
    assert moved.dir.startswith(dest)
    assert kafka_read(os.path.join(moved.dir, LEADER_EPOCH_CHECKPOINT)) == [(1, 0), (2, 6), (5, 9)]
    assert entries(moved.epoch_cache) == [(1, 0), (2, 6), (5, 9)]
    assert moved.replicated and moved.high_watermark == 4
    m.shutdown()
