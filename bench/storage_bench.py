"""Storage benchmarks (issue 3): prints figures, asserts nothing.

    .venv/bin/python bench/storage_bench.py [--dir DIR] [--gib 10] [--append-gib 2]

1. append: 1 MiB batches into the page cache (PartitionLog.append, offsets assigned in
   place, one pwrite per call), GB/s.
2. read lookup: random-offset reads in a 1 MiB segment vs a 1 GiB segment of 1 KiB
   batches (binary search over the mmapped index + short header walk), µs per read.
3. restart: a cleanly shut down log dir of N GiB (10 x 1 GiB segments by default)
   reopened by LogManager.load(), seconds.
4. recovery: the same dir reopened without the clean-shutdown marker, with the recovery
   point at the last segment vs 3 segments back: time grows with data after the point.
The data directory is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.records import build_batch, validate_batches
from storage import checkpoints as ck
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.manager import LogManager

MiB = 1 << 20
GiB = 1 << 30


def one_mib_batch() -> tuple[bytearray, list]:
    probe = build_batch([(b"k", b"")])
    buf = bytearray(build_batch([(b"k", os.urandom(MiB - len(probe) - 3))]))
    buf = bytearray(build_batch([(b"k", os.urandom(MiB - len(probe) - 3 - (len(buf) - MiB)))]))
    assert len(buf) == MiB, len(buf)
    return buf, validate_batches(buf)


def _raw_pwrite(root: str, buf: bytearray, n: int) -> float:
    """GB/s of plain 1 MiB pwrites to a new file (no storage code): the kernel's ceiling."""
    path = os.path.join(root, "raw.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    t = time.perf_counter()
    for i in range(n):
        os.pwrite(fd, buf, i * MiB)
    dt = time.perf_counter() - t
    os.close(fd)
    os.unlink(path)
    return n * MiB / dt / 1e9


def bench_append(root: str, gib: float) -> None:
    buf, headers = one_mib_batch()
    n = int(gib * 1024)
    # On this VM the first touch of fresh memory is slow (~0.3 GB/s even for tmpfs or a
    # bytearray); once pages have been used and freed, writes run at memory speed. A
    # broker's page cache is always recycled, so warm up first and report both.
    cold = _raw_pwrite(root, buf, n)
    _raw_pwrite(root, buf, n)
    for attempt in (1, 2, 3):
        plog = PartitionLog(os.path.join(root, f"append-{attempt}"), "append", 0, LogConfig())
        t = time.perf_counter()
        for _ in range(n):
            plog.append(buf, headers)
        dt = time.perf_counter() - t
        print(f"append 1 MiB batches, run {attempt}: {n} MiB in {dt:.2f} s = {n * MiB / dt / 1e9:.2f} GB/s "
              f"({n / dt:.0f} appends/s, {dt / n * 1e6:.0f} µs each)")
        plog.delete()
    warm = _raw_pwrite(root, buf, n)
    print(f"  baseline raw os.pwrite of 1 MiB to a new file: {warm:.2f} GB/s warm, {cold:.2f} GB/s cold (first touch)")
    # Storage overhead alone: pwrite stubbed out (what the Python code costs per append).
    plog = PartitionLog(os.path.join(root, "append-cpu"), "append", 0, LogConfig())
    real = os.pwrite
    os.pwrite = lambda fd, data, pos: len(data)
    try:
        t = time.perf_counter()
        for _ in range(n):
            plog.append(buf, headers)
        dt_cpu = time.perf_counter() - t
    finally:
        os.pwrite = real
    print(f"  storage code only (pwrite stubbed): {dt_cpu / n * 1e6:.1f} µs per 1 MiB append")
    plog.delete()


def bench_lookup(root: str) -> None:
    small = [build_batch([(b"k", os.urandom(1024 - 80))]) for _ in range(1024)]
    chunk = bytearray(b"".join(small))
    headers = validate_batches(chunk)
    for label, size in (("1 MiB", MiB), ("1 GiB", GiB)):
        plog = PartitionLog(os.path.join(root, f"lookup-{label[0]}"), "lookup", 0, LogConfig(segment_bytes=2 * GiB))
        for _ in range(size // len(chunk)):
            plog.append(chunk, headers)
        leo = plog.log_end_offset
        rnd = random.Random(1)
        offsets = [rnd.randrange(leo) for _ in range(20000)]
        seg = plog.active_segment
        t = time.perf_counter()
        for off in offsets:
            seg.offset_index.lookup(off)
        idx_us = (time.perf_counter() - t) / len(offsets) * 1e6
        t = time.perf_counter()
        for off in offsets:
            plog.read(off, 16384)
        read_us = (time.perf_counter() - t) / len(offsets) * 1e6
        t = time.perf_counter()
        for off in offsets[:5000]:
            plog.read(off, MiB)
        read_mib_us = (time.perf_counter() - t) / 5000 * 1e6
        print(f"lookup in a {label} segment ({leo} batches of 1 KiB, {seg.offset_index.entries} index entries): "
              f"index {idx_us:.1f} µs, read(16 KiB) {read_us:.1f} µs, read(1 MiB) {read_mib_us:.1f} µs")
        plog.delete()


def build_dir(root: str, gib: int) -> str:
    log_dir = os.path.join(root, "restart")
    buf, headers = one_mib_batch()
    m = LogManager([log_dir], LogConfig())
    m.load()
    plog = m.create("big", 0)
    t = time.perf_counter()
    for _ in range(gib * 1024):
        plog.append(buf, headers)
    dt = time.perf_counter() - t
    t = time.perf_counter()
    m.shutdown()
    print(f"built {gib} GiB log dir ({len(os.listdir(os.path.join(log_dir, 'big-0')))} files) in {dt:.1f} s; "
          f"clean shutdown (fsync of everything) {time.perf_counter() - t:.1f} s")
    return log_dir


def bench_restart(log_dir: str) -> None:
    for attempt in (1, 2):
        t = time.perf_counter()
        m = LogManager([log_dir], LogConfig())
        m.load()
        dt = time.perf_counter() - t
        plog = m.get("big", 0)
        print(f"clean restart #{attempt}: {plog.size_bytes / GiB:.1f} GiB, {len(plog.segments)} segments, "
              f"LEO {plog.log_end_offset}: load {dt * 1000:.1f} ms")
        m.shutdown()


def bench_recovery(log_dir: str) -> None:
    m = LogManager([log_dir], LogConfig())
    m.load()
    plog = m.get("big", 0)
    bases = [s.base_offset for s in plog.segments]
    m.shutdown()
    for back in (1, 3):
        rp = bases[-back]
        os.unlink(os.path.join(log_dir, ck.CLEAN_SHUTDOWN))
        ck.write_checkpoint(os.path.join(log_dir, ck.RECOVERY_POINT), {("big", 0): rp})
        t = time.perf_counter()
        m = LogManager([log_dir], LogConfig())
        m.load()
        dt = time.perf_counter() - t
        after = m.get("big", 0).size_bytes - sum(s.size for s in m.get("big", 0).segments if s.base_offset < rp)
        print(f"unclean restart, recovery point {back} segment(s) back: {after / GiB:.2f} GiB re-read with CRC "
              f"in {dt:.2f} s ({after / dt / 1e9:.2f} GB/s)")
        m.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir under /work or /tmp)")
    ap.add_argument("--gib", type=int, default=10, help="size of the restart log dir")
    ap.add_argument("--append-gib", type=float, default=2.0)
    ap.add_argument("--skip-restart", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="krait-bench-", dir=args.dir)
    free = shutil.disk_usage(root).free
    try:
        bench_append(root, args.append_gib)
        bench_lookup(root)
        if not args.skip_restart:
            gib = args.gib
            if free < (gib + 4) * GiB:
                gib = max(1, int(free / GiB) - 4)
                print(f"only {free / GiB:.0f} GiB free: scaling the restart test down to {gib} GiB")
            log_dir = build_dir(root, gib)
            bench_restart(log_dir)
            bench_recovery(log_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
