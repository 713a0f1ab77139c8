"""Smoke test of bench/security_bench.py: its --quick run (tiny sizes, its own brokers with
PLAINTEXT, SSL, SASL_SSL and SASL_PLAINTEXT listeners, a SCRAM user, 500 ACLs) completes and
prints every table with a row per variant. Behaviour of the benchmark, not figures."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.krait_harness import REPO

pytest.importorskip("confluent_kafka")
pytest.importorskip("psutil")
pytest.importorskip("scramp")


def _row(out: str, *cells: str) -> list[str]:
    """The cells of the one table row whose leading cells are `cells`."""
    prefix = "| " + " | ".join(cells) + " |"
    rows = [line for line in out.splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, f"{prefix!r} in:\n{out}"
    return [c.strip() for c in rows[0].strip("|").split("|")]


def _number(cell: str) -> float:
    m = re.fullmatch(r"([\d,]+(?:\.\d+)?)x?", cell)
    assert m, cell
    return float(m.group(1).replace(",", ""))


def test_quick_run_prints_every_table():
    out = subprocess.run([sys.executable, "bench/security_bench.py", "--quick"], cwd=REPO, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    for heading in ("### 1. PLAINTEXT against SASL_SSL", "### 2. New connections per second",
                    "### 3a. ACL checks in process", "### 3b. On the wire"):
        assert heading in text, text

    for size in ("100 B", "1024 B"):
        for direction in ("produce", "consume"):
            for proto in ("PLAINTEXT", "SASL_SSL"):
                cells = _row(text, size, direction, proto)
                assert _number(cells[3]) > 0  # records/s
            assert _number(_row(text, size, direction, "SASL_SSL")[5]) > 0  # the ratio

    for label, listener in (("TCP + ApiVersions", "PLAINTEXT"), ("TLS handshake + ApiVersions", "SSL"),
                            ("TLS + ApiVersions + SCRAM-SHA-512 authentication", "SASL_SSL")):
        cells = _row(text, label, listener)
        assert _number(cells[2]) > 0, cells  # connections/s
        assert cells[9] == "0", cells        # no failed connection

    small, big = _row(text, "10"), _row(text, "500")
    assert _number(small[1]) > 0 and _number(big[1]) > 0
    # the index: a check reads a few buckets, not the 500 ACLs
    assert _number(big[2]) < 100, big
    assert _row(text, "500, linear scan (reference, not the broker's code)")[2] == "500"

    for variant in ("batches (linger.ms 5, up to 1 MiB), 2,000 records", "one record per request, 200 records"):
        for broker in ("authorizer off", "authorizer on, 500 ACLs"):
            assert _number(_row(text, variant, broker)[2]) > 0
