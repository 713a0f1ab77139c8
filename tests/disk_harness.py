"""A small real file system for a broker's log dir: a tmpfs of its own (root only), which
fills up (ENOSPC) and can be made bigger again, without touching the machine's disks.

    with Tmpfs(path, size_kb=2048) as fs:   # pytest.skip when it cannot be mounted
        ...; fs.resize(8192)

Remounting it read-only is no way to get EROFS under a running broker: Linux refuses
(EBUSY) while files on it are open for writing, as a broker's segments are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


class Tmpfs:
    def __init__(self, path: str | Path, size_kb: int) -> None:
        self.path = Path(path)
        self.size_kb = size_kb
        self.mounted = False

    def __enter__(self) -> Tmpfs:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root")
        self.path.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_kb}k", "tmpfs", str(self.path)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        self.mounted = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.umount()

    def resize(self, size_kb: int) -> None:
        """Give it more room (what freeing space on a full disk does)."""
        subprocess.run(["mount", "-o", f"remount,size={size_kb}k", str(self.path)], check=True, capture_output=True)
        self.size_kb = size_kb

    def free_kb(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize // 1024

    def umount(self) -> None:
        if self.mounted:
            # lazy: a broker killed a moment ago may still hold files open
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False
