"""The report of bench/compare.py: the metrics table, the run's header, and where it goes.

Owns `METRICS` (each metric's label, direction and Krait target), number formatting, the
Markdown table of medians and Krait/peer ratios with footnotes for failures, the header
(date, commit, machine, brokers, sizes), and writing the raw JSON and bench/RESULTS.md.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import statistics
from pathlib import Path

from peers import KINDS, ROOT, git
from workloads import Outcome, Sizes

RESULTS = ROOT / "bench" / "RESULTS.md"

# (workload, metric key, label, higher_is_better, krait target: (op, value) or None, note)
# rows name their client: "librdkafka" (krait perf, confluent-kafka), "wire" (the wire-level
# clients), "java" (kafka-clients); "broker CPU-s/M" is the broker's CPU-seconds per million
# records over that client's run, the figure that does not depend on the client
METRICS = [
    ("produce-100B", "records_per_sec", "records/s, librdkafka", True, (">=", 1.0e6), "and >= 0.95x best peer"),
    ("produce-100B", "mb_per_sec", "MB/s, librdkafka", True, None, ""),
    ("produce-100B", "ack_p99", "ack p99 ms, librdkafka", False, None, ""),
    ("produce-100B", "cpu_s_per_mrec", "broker CPU-s/M records, librdkafka", False, ("x<=", 0.8), "tansu"),
    ("produce-100B", "cpu_s_per_gib", "broker CPU-s/GiB, librdkafka", False, None, ""),
    ("produce-100B", "broker_cpu_pct", "broker CPU %, librdkafka", False, None, ""),
    ("produce-100B", "client_cpu_pct", "client CPU %, librdkafka", False, None, ""),
    ("produce-100B", "java_records_per_sec", "records/s, java", True, None, ""),
    ("produce-100B", "java_cpu_s_per_mrec", "broker CPU-s/M records, java", False, None, ""),
    ("produce-100B", "java_client_cpu_pct", "client CPU %, java", False, None, ""),
    ("consume-100B", "records_per_sec", "records/s, librdkafka", True, (">=", 1.4e6), "and >= 1.0x best peer"),
    ("consume-100B", "mb_per_sec", "MB/s, librdkafka", True, None, ""),
    ("consume-100B", "cpu_s_per_mrec", "broker CPU-s/M records, librdkafka", False, ("x<=", 0.3), "tansu"),
    ("consume-100B", "cpu_s_per_gib", "broker CPU-s/GiB, librdkafka", False, None, ""),
    ("consume-100B", "broker_cpu_pct", "broker CPU %, librdkafka", False, None, ""),
    ("consume-100B", "client_cpu_pct", "client CPU %, librdkafka", False, None, ""),
    ("consume-100B", "wire_records_per_sec", "records/s, wire", True, (">=", 1.4e6), ""),
    ("consume-100B", "wire_cpu_s_per_mrec", "broker CPU-s/M records, wire", False, None, ""),
    ("consume-100B", "wire_client_cpu_pct", "client CPU %, wire", False, None, ""),
    ("consume-100B", "java_records_per_sec", "records/s, java", True, None, ""),
    ("consume-100B", "java_cpu_s_per_mrec", "broker CPU-s/M records, java", False, None, ""),
    ("consume-100B", "java_client_cpu_pct", "client CPU %, java", False, None, ""),
    ("produce-1KiB", "records_per_sec", "records/s, librdkafka", True, None, ""),
    ("produce-1KiB", "mb_per_sec", "MB/s, librdkafka", True, (">=", 500), ""),
    ("produce-1KiB", "ack_p99", "ack p99 ms, librdkafka", False, None, ""),
    ("produce-1KiB", "cpu_s_per_mrec", "broker CPU-s/M records, librdkafka", False, None, ""),
    ("produce-1KiB", "cpu_s_per_gib", "broker CPU-s/GiB, librdkafka", False, None, ""),
    ("produce-1KiB", "client_cpu_pct", "client CPU %, librdkafka", False, None, ""),
    ("produce-1KiB", "java_mb_per_sec", "MB/s, java", True, None, ""),
    ("produce-1KiB", "java_cpu_s_per_gib", "broker CPU-s/GiB, java", False, None, ""),
    ("produce-1KiB", "java_client_cpu_pct", "client CPU %, java", False, None, ""),
    ("consume-1KiB", "records_per_sec", "records/s, librdkafka", True, None, ""),
    ("consume-1KiB", "mb_per_sec", "MB/s, librdkafka", True, (">=", 600), ""),
    ("consume-1KiB", "cpu_s_per_gib", "broker CPU-s/GiB, librdkafka", False, None, ""),
    ("consume-1KiB", "client_cpu_pct", "client CPU %, librdkafka", False, None, ""),
    ("consume-1KiB", "wire_mb_per_sec", "MB/s, wire", True, (">=", 600), ""),
    ("consume-1KiB", "wire_cpu_s_per_gib", "broker CPU-s/GiB, wire", False, None, ""),
    ("consume-1KiB", "java_mb_per_sec", "MB/s, java", True, None, ""),
    ("consume-1KiB", "java_cpu_s_per_gib", "broker CPU-s/GiB, java", False, None, ""),
    ("consume-1KiB", "java_client_cpu_pct", "client CPU %, java", False, None, ""),
    ("produce-8p-lz4-all", "records_per_sec", "records/s, librdkafka", True, (">=", 1.0e6), ""),
    ("produce-8p-lz4-all", "ack_p99", "ack p99 ms, librdkafka", False, None, ""),
    ("produce-8p-lz4-all", "cpu_s_per_mrec", "broker CPU-s/M records, librdkafka", False, None, ""),
    ("produce-8p-lz4-all", "client_cpu_pct", "client CPU %, librdkafka", False, None, ""),
    ("consume-8p-lz4", "records_per_sec", "records/s, librdkafka", True, (">=", 1.5e6), ""),
    ("consume-8p-lz4", "cpu_s_per_mrec", "broker CPU-s/M records, librdkafka", False, None, ""),
    ("consume-8p-lz4", "wire_records_per_sec", "records/s, wire", True, (">=", 1.5e6), ""),
    ("consume-8p-lz4", "wire_cpu_s_per_mrec", "broker CPU-s/M records, wire", False, None, ""),
    ("e2e-10k", "e2e_p50", "e2e p50 ms, librdkafka", False, None, ""),
    ("e2e-10k", "e2e_p99", "e2e p99 ms, librdkafka", False, ("<=", 5), ""),
    ("e2e-10k", "e2e_p999", "e2e p99.9 ms, librdkafka", False, None, ""),
    ("ingest-ceiling", "records_per_sec", "records/s, wire", True, None, ""),
    ("ingest-ceiling", "mb_per_sec", "MB/s, wire", True, None, ""),
    ("ingest-ceiling", "broker_cpu_pct", "broker CPU %, wire", False, None, ""),
    ("ingest-ceiling", "cpu_s_per_mrec", "broker CPU-s/M records, wire", False, None, ""),
    ("ingest-ceiling", "client_cpu_pct", "client CPU %, wire", False, None, ""),
    ("idle-conns", "rss_growth_mb", "RSS growth MB", False, ("<=", 50), ""),
    ("partitions", "create_s", "create s", False, None, ""),
    ("partitions", "rss_mb", "RSS MB", False, None, ""),
    ("partitions", "metadata_p99_ms", "Metadata p99 ms", False, ("<=", 50), ""),
    ("partitions", "startup_s", "start-up s", False, ("<=", 5), "after SIGTERM"),
]


def fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    return str(v)


def build_table(results: dict[str, list[dict[str, Outcome]]], brokers: list[str], wanted: list[str],
                rounds: int) -> tuple[str, list[str]]:
    """Markdown table of medians and Krait/peer ratios, plus footnotes for failures."""
    peers = [b for b in brokers if b != "krait"]
    has_krait = "krait" in brokers
    head = ["workload", "metric", *brokers]
    if has_krait:
        head += [f"krait/{p}" for p in peers] + ["krait target"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes: list[str] = []
    note_ids: dict[str, int] = {}

    def note(text: str) -> str:
        if text not in note_ids:
            note_ids[text] = len(notes) + 1
            notes.append(text)
        return f"[{note_ids[text]}]"

    for w, key, label, higher, target, tnote in METRICS:
        if w not in wanted:
            continue
        client = key.split("_", 1)[0] if key.startswith(("wire_", "java_")) else None
        per: dict[str, tuple[list, list]] = {}
        for bname in brokers:
            outs = [r.get(w) for r in results.get(bname, []) if r.get(w) is not None]
            vals = [o.values[key] for o in outs if o.values.get(key) is not None and
                    (o.error is None or key not in ("startup_s",))]
            errs = [e for e in ((o.values.get(f"{client}_error") if client else None) or o.error
                                for o in outs if o.values.get(key) is None) if e]
            per[bname] = (vals, errs)
        if not any(vals or errs for vals, errs in per.values()):
            continue  # a client this run did not use (--quick has no Java rows): no row, no footnotes
        med: dict[str, float | None] = {}
        cells = []
        for bname, (vals, errs) in per.items():
            if vals:
                med[bname] = statistics.median(vals)
                cell = fmt(med[bname])
                if len(vals) < rounds:
                    cell += f" ({len(vals)}/{rounds} rounds{' ' + note(f'{bname} {w}: {errs[0]}') if errs else ''})"
            else:
                med[bname] = None
                reason = errs[0] if errs else "not run"
                cell = "n/a " + note(f"{bname} {w}: {reason}")
            cells.append(cell)
        arrow = "↑" if higher else "↓"
        row = [w, f"{label} {arrow}", *cells]
        if has_krait:
            for p in peers:
                k, v = med.get("krait"), med.get(p)
                row.append(f"{k / v:.2f}x" if k is not None and v else "n/a")
            if target and target[0] == "x<=":
                # a ratio target against the peer named in the note (issue 15's CPU targets)
                k, v = med.get("krait"), med.get(tnote)
                met = k is not None and bool(v) and k / v <= target[1]
                row.append(f"<= {target[1]}x {tnote}" + (" ✓" if met else " ✗" if k is not None and v else ""))
            elif target:
                op, val = target
                k = med.get("krait")
                met = k is not None and (k >= val if op == ">=" else k <= val)
                row.append(f"{op} {fmt(float(val))} {tnote}".strip() + (" ✓" if met else " ✗"))
            else:
                row.append("")
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows), [f"[{i + 1}] {t}" for i, t in enumerate(notes)]


def machine() -> str:
    model = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    return f"{os.cpu_count()} cores, {model}{mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def ck_version() -> str:
    try:
        import confluent_kafka

        return confluent_kafka.version()[0] if isinstance(confluent_kafka.version(), tuple) else confluent_kafka.version()
    except ImportError:
        return "missing"



def render(results: dict[str, list[dict[str, Outcome]]], brokers: list[str], skipped: list[str], wanted: list[str],
           sizes: Sizes, scale: float, quick: bool, elapsed: float, load0: float) -> str:
    """The run's Markdown section: header, table, footnotes."""
    done = max((len(v) for v in results.values()), default=0)
    table, notes = build_table(results, brokers, wanted, done)
    versions = ", ".join(KINDS[b].version() for b in brokers)
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    header = (f"## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} — commit {commit}{dirty}\n\n"
              f"- machine: {machine()}; load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end "
              f"(other work on the machine skews results)\n"
              f"- brokers: {versions}" + (f" (skipped: {'; '.join(skipped)})" if skipped else "") + "\n"
              f"- {done} round(s), median per metric; scale {scale}{' (quick)' if quick else ''}; "
              f"records: 100 B x {sizes.n100:,}, 1 KiB x {sizes.n1k:,}, 8p lz4 100 B x {sizes.n8:,}; "
              f"e2e {sizes.e2e_rate:,}/s for {sizes.e2e_seconds:g} s; {sizes.idle_conns} idle connections; "
              f"partitions {sizes.partition_layout}; run took {elapsed / 60:.1f} min\n"
              f"- clients (each row names its own): librdkafka = `krait perf` (confluent-kafka {ck_version()}); "
              f"java = `krait perf --client java` (kafka-clients, one JVM); wire = `krait perf consume --client "
              f"wire` (a Fetch v4 loop counting records from batch headers) or, for ingest-ceiling, `krait perf "
              f"produce --client wire` (pre-built 1,000-record batches over {sizes.ingest_connections} "
              f"connections, 4 partitions, {sizes.ingest:,} records); one client process at a time, same machine; "
              f"MB = 2^20 bytes of record values; ↑ higher is better, ↓ lower is better; CPU % = share of one "
              f"core; broker CPU-s/M records and /GiB = the broker's user + system CPU seconds over that client's "
              f"run per million records or GiB of values (the broker's own cost, whichever client is the bound)\n")
    return header + "\n" + table + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def write_json(path: str | Path, results: dict[str, list[dict[str, Outcome]]]) -> None:
    """Every round's raw values and errors, per broker."""
    raw = {b: [{w: {"values": o.values, "error": o.error} for w, o in rnd.items()} for rnd in rs]
           for b, rs in results.items()}
    Path(path).write_text(json.dumps(raw, indent=1))


def append_results(path: str | Path, text: str) -> Path:
    """Append the run's section to the results file (created with its title if missing)."""
    path = Path(path)
    if not path.exists():
        path.write_text("# Benchmark results\n\nAppended by `bench/compare.py` (`make bench`). "
                        "Newest last.\n")
    with path.open("a") as f:
        f.write("\n" + text)
    return path
