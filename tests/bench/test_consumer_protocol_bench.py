"""Smoke test of bench/consumer_protocol_bench.py: its quick busy-member run under the
consumer protocol (a broker of its own, 4 s busy period) prints the table, loses no
record and draws the timeline. Behaviour of the benchmark, not figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.krait_harness import REPO

pytest.importorskip("confluent_kafka")
pytest.importorskip("matplotlib")


def test_quick_busy_run_prints_table_and_draws(tmp_path):
    png = tmp_path / "timeline.png"
    out = subprocess.run([sys.executable, "bench/consumer_protocol_bench.py", "--quick", "--parts", "busy",
                          "--protocols", "consumer", "--no-results-file", "--png", str(png)],
                         cwd=REPO, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "| join → new member's first record, s |" in out.stdout, out.stdout
    assert "| records missed (produced, never consumed) | 0 |" in out.stdout, out.stdout
    assert png.stat().st_size > 10_000
