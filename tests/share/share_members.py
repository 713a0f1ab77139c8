"""Share-group members for the tests: the Java client's KafkaShareConsumer (ShareWorker.java)
or librdkafka's share consumer (rdkafka_share_worker.py), each its own process, printing
what it received and whether its acknowledgement was confirmed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.krait_harness import JavaProgram

SOURCE = Path(__file__).with_name("ShareWorker.java").read_text()
RDKAFKA_WORKER = Path(__file__).with_name("rdkafka_share_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def compile_worker(out_dir: Path) -> JavaProgram:
    """ShareWorker compiled against kafka-clients (skips the test without Java)."""
    return JavaProgram(SOURCE, "ShareWorker", out_dir)


class Member:
    """One KafkaShareConsumer process; ``records`` fills as it prints them (each with
    partition p, offset o, value v, delivery count d, acknowledgement a, and ok: whether
    the broker confirmed the acknowledgement)."""

    def __init__(self, program: JavaProgram | None, bootstrap: str, group: str, topic: str, mode: str = "explicit",
                 idle_exit_ms: int = 4000, earliest: bool = True) -> None:
        """``program`` None: librdkafka's share consumer instead of the Java client's."""
        tail = [bootstrap, group, topic, mode, str(idle_exit_ms), *(["earliest"] if earliest else [])]
        if program is None:
            args = [sys.executable, str(RDKAFKA_WORKER), *tail]
        else:
            args = ["java", "-cp", program.classpath, program.class_name, *tail]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.records: list[dict] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "READY":
                self.ready.set()
            elif line.startswith("{"):
                self.records.append(json.loads(line))

    def wait(self, timeout: float = 90) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"share consumer still running after {timeout} s; it printed "
                                 f"{len(self.records)} records") from None
        self.thread.join(5)
        assert self.proc.returncode == 0, self.proc.stderr.read()[-4000:] if self.proc.stderr else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
