"""Smoke tests of bench/share_bench.py (share-group against consumer-group throughput) and
bench/frozen_member_bench.py (a frozen member in each kind of group): their --quick runs,
each on a broker of its own, print their tables (and the timeline is drawn). Behaviour of
the benchmarks, not figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.krait_harness import REPO

pytest.importorskip("confluent_kafka")


def test_share_bench_quick_prints_the_table():
    out = subprocess.run([sys.executable, "bench/share_bench.py", "--quick", "--no-results-file"],
                         cwd=REPO, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "| group | members | records/s | broker CPU-s/M records |" in out.stdout, out.stdout
    for row in ("| share | 1 |", "| consumer | 1 |", "| share | 3 |", "| consumer | 3 |"):
        assert row in out.stdout, out.stdout


def test_frozen_member_bench_quick_prints_the_table_and_draws(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "frozen.png"
    out = subprocess.run([sys.executable, "bench/frozen_member_bench.py", "--quick", "--kinds", "consumer,share",
                          "--no-results-file", "--png", str(png)],
                         cwd=REPO, capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "| longest pause in consuming a partition, s |" in out.stdout, out.stdout
    assert "| records missed (produced, never consumed) | 0 (0) | 0 (0) |" in out.stdout, out.stdout
    assert png.stat().st_size > 10_000
