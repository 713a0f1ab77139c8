"""Charts of a bench/compare.py run: one PNG per workload, Krait against the peers.

Each PNG has one panel per metric of the workload (report.METRICS): a bar per broker at
the median over rounds, with a whisker from the lowest to the highest round, and the
metric's direction in the title. Written to bench/charts/<workload>.png (overwritten by
every run, so the newest run's charts sit next to bench/RESULTS.md) with matplotlib's
non-interactive backend; without matplotlib the run goes on without charts.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from peers import ROOT
from report import METRICS, fmt
from workloads import Outcome

CHARTS = ROOT / "bench" / "charts"
_COLOURS = {"krait": "#2b7bba", "tansu": "#d95f02", "noida-db": "#7570b3"}


def _values(results: dict[str, list[dict[str, Outcome]]], broker: str, workload: str, key: str) -> list[float]:
    out = []
    for rnd in results.get(broker, []):
        o = rnd.get(workload)
        if o is not None and o.values.get(key) is not None:
            out.append(float(o.values[key]))
    return out


def write_charts(results: dict[str, list[dict[str, Outcome]]], brokers: list[str], wanted: list[str],
                 out_dir: Path = CHARTS, title: str = "") -> list[Path]:
    """One PNG per workload in ``wanted`` that has values; returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("charts skipped: matplotlib is not installed (pip install 'krait[bench]')", flush=True)
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for w in wanted:
        panels = []
        for mw, key, label, higher, _target, _note in METRICS:
            if mw != w:
                continue
            per = {b: _values(results, b, w, key) for b in brokers}
            if any(per.values()):
                panels.append((label, higher, per))
        if not panels:
            continue
        cols = min(3, len(panels))
        rows = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
        for ax, (label, higher, per) in zip(axes.flat, panels, strict=False):
            names = [b for b in brokers if per[b]]
            meds = [statistics.median(per[b]) for b in names]
            lo = [m - min(per[b]) for m, b in zip(meds, names, strict=True)]
            hi = [max(per[b]) - m for m, b in zip(meds, names, strict=True)]
            ax.bar(names, meds, yerr=[lo, hi], capsize=4, color=[_COLOURS.get(b, "#999999") for b in names])
            ax.set_title(f"{label} ({'higher' if higher else 'lower'} is better)", fontsize=8)
            ax.tick_params(labelsize=8)
            for i, m in enumerate(meds):
                ax.annotate(fmt(m), (i, m), ha="center", va="bottom", fontsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.suptitle(f"{w}{' — ' + title if title else ''}", fontsize=10)
        fig.tight_layout()
        path = out_dir / f"{w}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written
