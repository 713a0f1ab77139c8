"""Bad input and faults: torn/corrupt/zero-filled tails, missing and garbage indexes,
crashes (SIGKILL of a writer process), all recovered without losing earlier records."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from storage.config import LogConfig
from storage.segment import LogSegment

from .helpers import append, batch, open_log, read_all

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=300)


def _fill(tmp_path, n=60, cfg=CFG):
    plog = open_log(tmp_path, cfg)
    for i in range(n):
        append(plog, batch(2, value_size=60, ts=i))
    return plog


def _crash(plog):
    """Leave the files as a crash would: no trimming, no snapshot, no marker."""
    for seg in plog.segments:
        if seg.offset_index.writable:
            seg.offset_index.flush()
            seg.time_index.flush()


def _offsets(plog):
    return [r.offset for r in read_all(plog)]


def test_truncated_tail(tmp_path):
    plog = _fill(tmp_path)
    _crash(plog)
    active = plog.active_segment.log_path
    size = os.path.getsize(active)
    os.truncate(active, size - 7)
    again = open_log(tmp_path, CFG, clean_shutdown=False)
    assert again.log_end_offset == 118
    assert _offsets(again) == list(range(118))
    assert append(again, batch(1)).base_offset == 118


@pytest.mark.parametrize("where", [30, 61, 100])
def test_flipped_byte_truncates_from_that_batch(tmp_path, where):
    plog = _fill(tmp_path)
    _crash(plog)
    seg = plog.active_segment
    base = seg.base_offset
    # flip a byte inside the CRC-covered part of the 3rd batch of the active segment
    batches = list(seg.iter_headers())
    pos, h = batches[2]
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + where)
        b = f.read(1)
        f.seek(pos + where)
        f.write(bytes([b[0] ^ 0xFF]))
    again = open_log(tmp_path, CFG, clean_shutdown=False)
    assert again.log_end_offset == h.base_offset
    assert _offsets(again) == list(range(h.base_offset))
    assert h.base_offset > base


def test_corruption_in_older_segment_drops_later_segments(tmp_path):
    plog = _fill(tmp_path)
    _crash(plog)
    assert len(plog.segments) >= 3
    victim = plog.segments[1]
    pos, h = list(victim.iter_headers())[1]
    with open(victim.log_path, "r+b") as f:
        f.seek(pos + 40)
        f.write(b"\x00\x01\x02")
    again = open_log(tmp_path, CFG, clean_shutdown=False, recovery_point=0)
    assert again.log_end_offset == h.base_offset
    assert len(again.segments) == 2
    assert _offsets(again) == list(range(h.base_offset))


def test_zero_filled_tail(tmp_path):
    plog = _fill(tmp_path)
    _crash(plog)
    with open(plog.active_segment.log_path, "ab") as f:
        f.write(bytes(8192))  # preallocated / never-written pages
    again = open_log(tmp_path, CFG, clean_shutdown=False)
    assert again.log_end_offset == 120
    assert _offsets(again) == list(range(120))
    # zero tail also handled by a "clean" start (file ends mid-nothing)
    plog2 = _fill(tmp_path / "b")
    plog2.close()
    with open(plog2.active_segment.log_path, "ab") as f:
        f.write(bytes(100))
    again2 = open_log(tmp_path / "b", CFG)
    assert again2.log_end_offset == 120
    assert append(again2, batch(1)).base_offset == 120
    assert _offsets(again2) == list(range(121))


def test_missing_index_files_rebuilt(tmp_path):
    plog = _fill(tmp_path)
    plog.close()
    seg0 = plog.segments[0]
    os.unlink(seg0.offset_index.path)
    os.unlink(plog.segments[1].time_index.path)
    os.unlink(plog.segments[-1].offset_index.path)
    again = open_log(tmp_path, CFG)
    assert os.path.exists(seg0.offset_index.path)
    assert _offsets(again) == list(range(120))
    assert again.offset_for_timestamp(30) == (60, 30)


@pytest.mark.parametrize("clean", [True, False])
def test_garbage_index_files(tmp_path, clean):
    plog = _fill(tmp_path)
    plog.close()
    for seg in plog.segments:
        for p in (seg.offset_index.path, seg.time_index.path):
            n = os.path.getsize(p)
            with open(p, "wb") as f:
                f.write(os.urandom(max(n, 24)))
    again = open_log(tmp_path, CFG, clean_shutdown=clean)
    assert _offsets(again) == list(range(120))
    for off in range(0, 120, 7):
        assert again.read(off, 1).first_offset in (off, off - 1)
    assert again.offset_for_timestamp(30) == (60, 30)
    assert append(again, batch(1)).base_offset == 120


def test_clean_start_does_not_scan_closed_segments(tmp_path, monkeypatch):
    plog = _fill(tmp_path, n=200)
    plog.close()
    assert len(plog.segments) > 5
    scanned = []
    import storage.segment as seg_mod

    real = seg_mod.scan_headers
    monkeypatch.setattr(seg_mod, "scan_headers", lambda fd, s, e, *a: scanned.append(e - s) or real(fd, s, e, *a))
    monkeypatch.setattr(LogSegment, "recover", lambda *a, **k: pytest.fail("clean start must not recover"))
    again = open_log(tmp_path, CFG)
    assert again.log_end_offset == 400
    assert sum(scanned) <= CFG.index_interval_bytes + 500  # only the tail of the active segment


def test_unclean_start_recovers_from_recovery_point_only(tmp_path, monkeypatch):
    plog = _fill(tmp_path, n=200)
    plog.flush_rolled()
    rp = plog.recovery_point
    assert rp == plog.active_segment.base_offset > 0
    _crash(plog)
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, *a, **k: recovered.append(self.base_offset) or real(self, *a, **k))
    again = open_log(tmp_path, CFG, clean_shutdown=False, recovery_point=rp)
    assert recovered == [rp]
    assert again.log_end_offset == 400


WRITER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    from protocol.records import build_batch, validate_batches
    from storage.config import LogConfig
    from storage.log import PartitionLog
    plog = PartitionLog({dir!r}, "t", 0, LogConfig(segment_bytes=200000, index_interval_bytes=1000))
    i = plog.log_end_offset
    while True:
        b = bytearray(build_batch([(b"k%d" % i, os.urandom(300)) for _ in range(5)], timestamp=i))
        r = plog.append(b, validate_batches(b))
        i = r.last_offset + 1
        if i % 500 == 0:
            plog.flush()
            sys.stdout.write("%d\\n" % i)
            sys.stdout.flush()
""")


def test_sigkill_mid_append_then_reopen(tmp_path):
    d = str(tmp_path / "t-0")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    flushed = 0
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=root, dir=d)], stdout=subprocess.PIPE, text=True)
        deadline = time.time() + 20
        lines = 0
        while lines < 4 and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            flushed = max(flushed, int(line))
            lines += 1
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        plog = open_log(tmp_path, LogConfig(segment_bytes=200000, index_interval_bytes=1000), clean_shutdown=False)
        assert plog.log_end_offset >= flushed
        offsets = [r.offset for r in read_all(plog)]
        assert offsets == list(range(plog.log_end_offset))
        # every batch CRC-valid (read_all decodes; validate checks CRCs)
        from protocol.records import validate_batches

        for seg in plog.segments:
            with open(seg.log_path, "rb") as f:
                data = f.read()
            if data:
                validate_batches(data, from_client=False)
        plog.close()


def test_loader_settles_leftover_files(tmp_path):
    # storage.loader on its own, as PartitionLog calls it at open
    import shutil

    from protocol.records import build_batch
    from storage.loader import load_log
    from storage.producer_state import ProducerStateManager

    plog = open_log(tmp_path, CFG)
    for i in range(60):
        append(plog, bytearray(build_batch([(b"k", b"v" * 60)] * 2, timestamp=i, producer_id=9, producer_epoch=0,
                                           base_sequence=2 * i)))
    segs = list(plog.segments)
    assert len(segs) >= 3
    plog.close()
    d = plog.dir
    for n in os.listdir(d):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(d, n))
    leftovers = [segs[0].log_path + ".cleaned", segs[1].log_path + ".deleted",
                 os.path.join(d, "00000000000000000050.snapshot.tmp"), os.path.join(d, "00000000000099999999.index"),
                 os.path.join(d, "00000000000099999999.timeindex")]
    for path in leftovers:
        shutil.copy(segs[0].log_path, path)
    os.unlink(segs[2].offset_index.path)
    ps = ProducerStateManager(d)
    loaded = load_log(d, CFG, ps, recovery_point=0, log_start_offset=4, clean_shutdown=True)
    assert not any(os.path.exists(p) for p in leftovers)
    assert [s.base_offset for s in loaded.segments] == [s.base_offset for s in segs]
    assert os.path.exists(segs[2].offset_index.path)  # rebuilt
    assert (loaded.log_start_offset, loaded.recovery_point, loaded.log_end_offset) == (4, 120, 120)
    assert loaded.segments[-1].active and not loaded.segments[0].active
    # no snapshot: the last two segments are replayed, enough for the producer's sequence
    assert ps.last_sequence(9) == 119 and ps.map_end_offset == 120
    for seg in loaded.segments:
        seg.close()
