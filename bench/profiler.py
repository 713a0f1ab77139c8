"""py-spy on the Krait broker for bench/compare.py --profile DIR.

Owns `Profiler` (record raw collapsed stacks while a chosen workload runs) and
`summarise_profile` (top frames by self and inclusive samples).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from pathlib import Path

from peers import PY, Running


class Profiler:
    def __init__(self, out_dir: Path | None, workloads: set[str]):
        self.out_dir = out_dir
        self.workloads = workloads
        self.proc: subprocess.Popen | None = None
        self.path: Path | None = None

    @contextlib.contextmanager
    def around(self, b: Running, workload: str, active: bool):
        if not (active and self.out_dir and workload in self.workloads and b.kind.name == "krait"):
            yield
            return
        exe = shutil.which("py-spy") or str(Path(PY).parent / "py-spy")
        path = self.out_dir / f"{workload}.txt"
        cmd = [exe, "record", "--pid", str(b.proc.pid), "--rate", "200", "--format", "raw", "--nonblocking",
               "--idle",
               "-o", str(path)]
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            prof = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as exc:
            print(f"  no profile: {exc}", flush=True)
            yield
            return
        time.sleep(1.0)
        try:
            yield
        finally:
            prof.send_signal(signal.SIGINT)
            try:
                _, err = prof.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                prof.kill()
                _, err = prof.communicate()
            if path.exists():
                summary = summarise_profile(path)
                (self.out_dir / f"{workload}.summary.txt").write_text(summary)
                print(f"  profile {path}:\n" + "\n".join("    " + ln for ln in summary.splitlines()[:40]),
                      flush=True)
            else:
                print(f"  py-spy wrote nothing: {err.decode(errors='replace')[-300:]}", flush=True)


def summarise_profile(path: Path, top: int = 25) -> str:
    """Top frames by self and by inclusive samples from py-spy's raw (collapsed) output.

    Recorded with --idle, so percentages are of wall time: the event loop's own frame
    (uvloop waiting in epoll, and its C socket work) shows as Runner.run self time."""
    self_c: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        total += c
        frames = stack.split(";")
        if frames and frames[0].startswith(("process ", "thread ")):
            frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        self_c[frames[-1]] = self_c.get(frames[-1], 0) + c
        for f in set(frames):
            incl[f] = incl.get(f, 0) + c
    if not total:
        return "no samples\n"
    out = [f"{total} samples", "", "top self:"]
    for f, c in sorted(self_c.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    out += ["", "top inclusive:"]
    for f, c in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    return "\n".join(out) + "\n"
