"""The timeline charts of :mod:`spark_jobs.rebalance_history`: one PNG per group.

Classic groups: a lane per member (joined, assigned partitions, silent stretches, left or
evicted) and one for the group (rebalancing, sync phase, stable, Empty), per generation.
Consumer-protocol groups: a lane per member (its member epochs and partitions, reconciling
or stable) and one for the group's epochs.
"""

from __future__ import annotations

from typing import Any

from spark_jobs.jobcommon import pyplot, utc

__all__ = ["chart_classic", "chart_consumer"]


def _label(m: dict) -> str:
    return f"{m.get('client_id') or '?'} ({m['member_id'][:12]}…)" if len(m["member_id"]) > 12 else \
        f"{m.get('client_id') or '?'} ({m['member_id']})"


def chart_classic(path: str, group: str, h: dict, end_ms: int) -> None:
    import matplotlib.dates as mdates
    from matplotlib.patches import Patch

    plt = pyplot()
    gens = h["generations"]
    order: dict[str, dict] = {}
    for g in gens:
        for m in g["members"]:
            order.setdefault(m["member_id"], m)
    lanes = list(order)
    fig, ax = plt.subplots(figsize=(12, 1.6 + 0.55 * (len(lanes) + 1)))
    span = lambda a, b: (mdates.date2num(utc(a)), max(mdates.date2num(utc(b)) - mdates.date2num(utc(a)), 1e-9))  # noqa: E731
    top = len(lanes)
    for g in gens:
        r = g["rebalance"]
        # the start is drawn at its estimate (the last commit); its bounds are in the JSON
        est = r["last_commit_before_ms"] if r["last_commit_before_ms"] is not None else r["join_completed_ms"]
        j = r["join_completed_ms"]
        done = r["assigned_ms"] if r["assigned_ms"] is not None else j
        ax.broken_barh([span(est, j)], (top - 0.35, 0.7), facecolors="#f0a030")
        ax.broken_barh([span(j, done)], (top - 0.35, 0.7), facecolors="#d04020")
        until = g["stable_until_ms"] or end_ms
        color = "#bbbbbb" if g["state"] == "Empty" else "#4caf50"
        ax.broken_barh([span(done, max(until, done))], (top - 0.35, 0.7), facecolors=color)
        ax.text(utc(done), top, f" gen {g['generation']}" + (" (Empty)" if g["state"] == "Empty" else ""),
                fontsize=8, va="center", color="white" if g["state"] != "Empty" else "black", fontweight="bold")
        ax.axvline(utc(done), color="#999999", lw=0.6, ls=":")
        for m in g["members"]:
            y = lanes.index(m["member_id"])
            ax.broken_barh([span(done, max(until, done))], (y - 0.3, 0.6), facecolors="#81c784")
            ax.broken_barh([span(est, done)], (y - 0.3, 0.6), facecolors="#ffcc80")
            if m["member_id"] in g["joined"]:
                ax.plot([utc(j)], [y], marker="^", color="#1565c0", ms=8)
            ps = ",".join(p.rsplit("-", 1)[1] for p in m["partitions"])
            ax.text(utc(done), y, f" p{ps}" if ps else " (none)", fontsize=7, va="center")
        for d in g["left"]:
            if d["member_id"] not in lanes:
                continue
            y = lanes.index(d["member_id"])
            if d["how"] != "left" and d.get("last_commit_ms") is not None and d["last_commit_ms"] < j:  # silent
                ax.broken_barh([span(d["last_commit_ms"], j)], (y - 0.3, 0.6), facecolors="#ffcdd2", hatch="xx",
                               edgecolor="#e57373", lw=0)
            evicted = d["how"].startswith("evicted")
            ax.plot([utc(j)], [y], marker="X" if evicted else "v", color="#c62828" if evicted else "#6a1b9a", ms=9)
            ax.text(utc(j), y + 0.32, f" {d['how']}" + (f" (silent {d['silent_ms'] / 1000:.1f} s)"
                                                        if d.get("silent_ms") is not None and evicted else ""),
                    fontsize=7, color="#c62828" if evicted else "#6a1b9a")
    ax.set_yticks(list(range(len(lanes))) + [top])
    ax.set_yticklabels([_label(order[m]) for m in lanes] + ["group"], fontsize=8)
    ax.set_ylim(-0.8, top + 0.8)
    ax.invert_yaxis()
    ax.set_title(f"Classic group {group}: generations and members")
    ax.legend(handles=[Patch(facecolor="#f0a030", label="rebalancing (start estimated: last commit)"),
                       Patch(facecolor="#d04020", label="sync phase (exact)"),
                       Patch(facecolor="#4caf50", label="stable (assigned)"), Patch(facecolor="#bbbbbb", label="Empty"),
                       Patch(facecolor="#ffcdd2", hatch="xx", edgecolor="#e57373", label="member silent (no commits)"),
                       plt.Line2D([], [], marker="^", ls="", color="#1565c0", label="joined"),
                       plt.Line2D([], [], marker="v", ls="", color="#6a1b9a", label="left"),
                       plt.Line2D([], [], marker="X", ls="", color="#c62828", label="evicted")],
              loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, fontsize=7, frameon=False)
    _finish(plt, fig, ax, path)


def _finish(plt: Any, fig: Any, ax: Any, path: str) -> None:
    """The time axis and the file, the same for both kinds of group."""
    import matplotlib.dates as mdates

    ax.set_xlabel("time (UTC)")
    ax.xaxis_date()
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=mdates.UTC))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def chart_consumer(path: str, group: str, h: dict, end_ms: int) -> None:
    import matplotlib.dates as mdates
    from matplotlib.patches import Patch

    plt = pyplot()
    mems = h["members"]
    lanes = [m["member_id"] for m in mems]
    top = len(lanes)
    fig, ax = plt.subplots(figsize=(12, 1.6 + 0.55 * (len(lanes) + 1)))
    span = lambda a, b: (mdates.date2num(utc(a)), max(mdates.date2num(utc(b)) - mdates.date2num(utc(a)), 1e-9))  # noqa: E731
    eps = h["epochs"]
    for i, e in enumerate(eps):
        nxt = eps[i + 1]["started_ms"] if i + 1 < len(eps) else end_ms
        rec = e["reconciled_ms"] if e["reconciled_ms"] is not None else nxt
        ax.broken_barh([span(e["started_ms"], min(rec, nxt))], (top - 0.35, 0.7), facecolors="#f0a030")
        if rec < nxt:
            ax.broken_barh([span(rec, nxt)], (top - 0.35, 0.7), facecolors="#4caf50" if e["members"] else "#bbbbbb")
        ax.text(utc(e["started_ms"]), top, f" epoch {e['epoch']}", fontsize=8, va="center", fontweight="bold",
                color="white" if e["members"] else "black")
        ax.axvline(utc(e["started_ms"]), color="#999999", lw=0.6, ls=":")
    colors = {"stable": "#81c784", "unrevoked partitions": "#ffb74d", "unreleased partitions": "#ffe082"}
    for y, m in enumerate(mems):
        stop = m["left_ms"] or end_ms
        steps = m["epochs"]
        first = steps[0]["ms"] if steps else stop
        ax.broken_barh([span(m["joined_ms"], first)], (y - 0.3, 0.6), facecolors="#ef9a9a")
        for i, s in enumerate(steps):
            until = steps[i + 1]["ms"] if i + 1 < len(steps) else stop
            c = "#ef9a9a" if not s["partitions"] else colors.get(s["state"], "#cccccc")
            ax.broken_barh([span(s["ms"], max(until, s["ms"]))], (y - 0.3, 0.6), facecolors=c)
            if i == 0 or s["member_epoch"] != steps[i - 1]["member_epoch"]:
                ps = ",".join(p.rsplit("-", 1)[1] for p in s["partitions"])
                ax.text(utc(s["ms"]), y, f" e{s['member_epoch']} " + (f"p{ps}" if ps else "(none)"), fontsize=7,
                        va="center")
        ax.plot([utc(m["joined_ms"])], [y], marker="^", color="#1565c0", ms=8)
        if m["left_ms"] is not None:
            ax.plot([utc(m["left_ms"])], [y], marker="v", color="#6a1b9a", ms=9)
            ax.text(utc(m["left_ms"]), y + 0.32, " left or fenced", fontsize=7, color="#6a1b9a")
    ax.set_yticks(list(range(len(lanes))) + [top])
    ax.set_yticklabels([_label(m) for m in mems] + ["group"], fontsize=8)
    ax.set_ylim(-0.8, top + 0.8)
    ax.invert_yaxis()
    ax.set_title(f"Consumer-protocol group {group}: epochs and member reconciliation")
    ax.legend(handles=[Patch(facecolor="#f0a030", label="epoch reconciling"), Patch(facecolor="#4caf50", label="reconciled"),
                       Patch(facecolor="#ef9a9a", label="member: no partitions"),
                       Patch(facecolor="#ffb74d", label="member: revoking"), Patch(facecolor="#ffe082", label="member: waiting for partitions"),
                       Patch(facecolor="#81c784", label="member: stable"),
                       plt.Line2D([], [], marker="^", ls="", color="#1565c0", label="joined"),
                       plt.Line2D([], [], marker="v", ls="", color="#6a1b9a", label="left/fenced")],
              loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, fontsize=7, frameon=False)
    _finish(plt, fig, ax, path)


