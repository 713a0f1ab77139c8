import os

import pytest

import storage.cleaner as cleaner
from protocol.records import build_batch, validate_batches
from storage.cleaner import clean_log
from storage.config import LogConfig

from .helpers import append, batch, open_log, read_all

CFG = LogConfig(segment_bytes=1500, cleanup_policy=frozenset({"compact"}), delete_retention_ms=1000)


def _fill(tmp_path, clock, rounds=6, keys=5, ts=0):
    plog = open_log(tmp_path, CFG, clock=clock)
    for r in range(rounds):
        for k in range(keys):
            append(plog, batch(1, keys=[bytes([0, k, 255])], values=[b"r%d" % r], ts=ts))
    return plog


def _latest(plog):
    return {r.key: r.value for r in read_all(plog)}


def test_keeps_latest_per_binary_key(tmp_path):
    plog = _fill(tmp_path, lambda: 10.0)
    before = _latest(plog)
    n_before = len(read_all(plog))
    stats = clean_log(plog, 10_000)
    assert stats is not None and stats.records_kept < stats.records_read
    recs = read_all(plog)
    assert _latest(plog) == before
    assert len(recs) < n_before
    # offsets still increasing and unique, keys of cleaned part unique
    offs = [r.offset for r in recs]
    assert offs == sorted(set(offs))
    cleaned_keys = [r.key for r in recs if r.offset < plog.active_segment.base_offset]
    assert len(cleaned_keys) == len(set(cleaned_keys))
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(plog.dir))
    # survives reopen
    plog.close()
    again = open_log(tmp_path, CFG)
    assert _latest(again) == before


def test_partial_batch_rewritten_with_original_offsets(tmp_path):
    plog = open_log(tmp_path, CFG)
    b = bytearray(build_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], timestamp=[5, 6, 7]))
    plog.append(b, validate_batches(b))
    for _ in range(30):
        append(plog, batch(1, keys=[b"z"], values=[b"x" * 50]))
    clean_log(plog, 10_000)
    recs = read_all(plog)
    assert [(r.offset, r.key, r.timestamp) for r in recs[:2]] == [(1, b"b", 6), (2, b"a", 7)]


def test_tombstones_kept_for_delete_retention(tmp_path):
    now = [10.0]
    plog = _fill(tmp_path, lambda: now[0], ts=10_000)
    append(plog, batch(1, keys=[bytes([0, 1, 255])], values=[None], ts=10_000))
    for _ in range(30):
        append(plog, batch(1, keys=[b"filler"], values=[b"x" * 50], ts=10_000))
    clean_log(plog, 10_000)
    assert bytes([0, 1, 255]) in _latest(plog) and _latest(plog)[bytes([0, 1, 255])] is None
    # after delete.retention.ms the tombstone goes
    clean_log(plog, 20_000, first_dirty=0)
    assert bytes([0, 1, 255]) not in _latest(plog)


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted"])
def test_crash_mid_clean_loses_nothing(tmp_path, monkeypatch, step):
    plog = _fill(tmp_path, lambda: 10.0)
    before = _latest(plog)
    end = plog.log_end_offset

    def boom(s):
        if s == step:
            raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(cleaner, "FAULT_HOOK", boom)
    with pytest.raises(KeyboardInterrupt):
        clean_log(plog, 10_000)
    monkeypatch.setattr(cleaner, "FAULT_HOOK", None)
    # the process "dies": reopen from disk as after a crash
    again = open_log(tmp_path, CFG, clean_shutdown=False)
    assert again.log_end_offset == end
    assert _latest(again) == before
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(again.dir))
    offs = [r.offset for r in read_all(again)]
    assert offs == sorted(set(offs))
