"""What bench/compare.py runs against each broker: the workloads and their sizes.

Owns `Sizes` (full, scaled or --quick), the workload names, the throughput and latency
runs through `krait perf` (one client process at a time), the idle-connections and
partitions workloads, and `Outcome`, one workload's values or the reason it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import subprocess
import time
from dataclasses import dataclass, field

# peers first: it puts the checkout on sys.path for the imports below
from peers import BENCH_CLIENT, PY, ROOT, BrokerDied, Running, metadata_once, partition_counts, wire

from broker.tools.wire import encode_request
from protocol.apis import ApiKey
from protocol.errors import KafkaError


@dataclass
class Sizes:
    n100: int = 3_000_000
    n1k: int = 600_000
    n8: int = 3_000_000
    e2e_seconds: float = 15.0
    e2e_rate: int = 10_000
    idle_conns: int = 1000
    partitions: int = 5000
    partition_layout: str = "1x5000"
    metadata_requests: int = 200
    #: ingest-ceiling: records of 100 B sent by the wire producer, in batches of 1,000
    ingest: int = 10_000_000
    ingest_connections: int = 4
    #: also run the Java client (produce/consume 100 B and 1 KiB)
    java: bool = True
    timeout: float = 300.0

    @classmethod
    def make(cls, scale: float, quick: bool, layout: str | None) -> Sizes:
        if quick:
            # no Java rows: a JVM per run would double the smoke test (tests/broker/test_perf_java.py
            # covers the Java client)
            s = cls(n100=20_000, n1k=5_000, n8=20_000, e2e_seconds=0.5, idle_conns=20, partitions=50,
                    partition_layout="1x50", metadata_requests=20, ingest=40_000, java=False, timeout=60.0)
        else:
            s = cls()
            s.n100 = max(1000, int(s.n100 * scale))
            s.n1k = max(1000, int(s.n1k * scale))
            s.n8 = max(1000, int(s.n8 * scale))
            s.ingest = max(10_000, int(s.ingest * scale))
            s.e2e_seconds = max(1.0, s.e2e_seconds * scale)
        if layout:
            s.partition_layout = layout
        return s


class WorkloadFailed(Exception):
    pass


WORKLOADS = ["produce-100B", "consume-100B", "produce-1KiB", "consume-1KiB", "produce-8p-lz4-all",
             "consume-8p-lz4", "e2e-10k", "ingest-ceiling", "idle-conns", "partitions"]
THROUGHPUT = WORKLOADS[:8]


@dataclass
class Outcome:
    values: dict = field(default_factory=dict)  # metric -> value
    error: str | None = None


def run_workload(w: str, b: Running, sizes: Sizes, produced: dict) -> dict:
    """Workload w on the running broker b -> its values; produced carries record counts from
    a produce workload to the consume workload after it. Every client run is measured
    with the broker's CPU-seconds over it (``cpu_s_per_mrec``, ``cpu_s_per_gib``, prefixed
    ``wire_`` / ``java_`` for those clients)."""
    t = sizes.timeout
    bs = b.bootstrap
    if w == "produce-100B":
        r = _produce(b, "bench-100B", sizes.n100, 100, 1, "1", "none", t)
        produced["100B"] = sizes.n100
        if sizes.java:
            r.update(_java(b, "produce", "bench-100B-java", sizes.n100, 100, t))
        return r
    if w == "consume-100B":
        r = _consume(b, "bench-100B", produced.get("100B", sizes.n100), 100, t)
        if sizes.java:
            r.update(_java(b, "consume", "bench-100B", produced.get("100B", sizes.n100), 100, t))
        return r
    if w == "produce-1KiB":
        r = _produce(b, "bench-1KiB", sizes.n1k, 1024, 1, "1", "none", t)
        produced["1KiB"] = sizes.n1k
        if sizes.java:
            r.update(_java(b, "produce", "bench-1KiB-java", sizes.n1k, 1024, t))
        return r
    if w == "consume-1KiB":
        r = _consume(b, "bench-1KiB", produced.get("1KiB", sizes.n1k), 1024, t)
        if sizes.java:
            r.update(_java(b, "consume", "bench-1KiB", produced.get("1KiB", sizes.n1k), 1024, t))
        return r
    if w == "produce-8p-lz4-all":
        r = _produce(b, "bench-8p-lz4", sizes.n8, 100, 8, "all", "lz4", t)
        produced["8p"] = sizes.n8
        return r
    if w == "consume-8p-lz4":
        return _consume(b, "bench-8p-lz4", produced.get("8p", sizes.n8), 100, t)
    if w == "e2e-10k":
        n = int(sizes.e2e_rate * sizes.e2e_seconds)
        r = run_perf("e2e", bs, "bench-e2e", n, 100, 1, "1", "none", t, ["--throughput", str(sizes.e2e_rate)])
        e = r["e2e_latency_ms"]
        return {"e2e_p50": e["p50"], "e2e_p99": e["p99"], "e2e_p999": e["p999"],
                "ack_p99": r["ack_latency_ms"]["p99"], "records_per_sec": r["records_per_sec"],
                "seconds": r["seconds"]}
    if w == "ingest-ceiling":
        c = sizes.ingest_connections
        r, cpu = _measured(b, "produce", "bench-ingest", sizes.ingest, 100, c, "1", "none", t,
                           ["--client", "wire", "--producers", str(c), "--broker-pid", str(b.proc.pid)])
        return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"], "seconds": r["seconds"],
                "client_cpu_pct": r.get("client_cpu_pct"), "broker_cpu_pct": r.get("broker_cpu_pct") or 0.0,
                **_cost("", cpu, r["records"], 100)}
    if w == "idle-conns":
        return idle_conns_workload(b, sizes)
    if w == "partitions":
        return partitions_workload(b, sizes)
    raise ValueError(f"unknown workload {w}")


def _cost(prefix: str, cpu: float, records: int, size: int) -> dict:
    """The broker's CPU-seconds per million records and per GiB of record values."""
    return {f"{prefix}cpu_s_per_mrec": cpu / records * 1e6 if records else None,
            f"{prefix}cpu_s_per_gib": cpu / (records * size) * 2**30 if records else None}


def _measured(b: Running, mode: str, topic: str, n: int, size: int, parts: int, acks: str, comp: str,
              timeout: float, extra: list[str] | None = None) -> tuple[dict, float]:
    """One client run and the broker's CPU-seconds over it."""
    cpu0, t0 = b.cpu_s(), time.perf_counter()
    r = run_perf(mode, b.bootstrap, topic, n, size, parts, acks, comp, timeout, extra)
    cpu = b.cpu_s() - cpu0
    # broker CPU % over the client's whole run (start-up included): 100 % = one core
    r["broker_cpu_pct_run"] = 100 * cpu / (time.perf_counter() - t0)
    return r, cpu


def _produce(b: Running, topic: str, n: int, size: int, parts: int, acks: str, comp: str, t: float) -> dict:
    r, cpu = _measured(b, "produce", topic, n, size, parts, acks, comp, t)
    return {**_produce_metrics(r), **_cost("", cpu, r["records"], size), "broker_cpu_pct": r["broker_cpu_pct_run"]}


def _consume(b: Running, topic: str, n: int, size: int, t: float) -> dict:
    """librdkafka consumer, then the wire-level one (what the broker can serve)."""
    lr, cpu = _measured(b, "consume", topic, n, size, 1, "1", "none", t)
    r = {**_consume_metrics(lr), **_cost("", cpu, lr["records"], size), "broker_cpu_pct": lr["broker_cpu_pct_run"]}
    try:
        wr, cpu = _measured(b, "consume", topic, n, size, 1, "1", "none", t, ["--client", "wire"])
        r.update({"wire_records_per_sec": wr["records_per_sec"], "wire_mb_per_sec": wr["mb_per_sec"],
                  "wire_client_cpu_pct": wr.get("client_cpu_pct"), **_cost("wire_", cpu, wr["records"], size)})
    except WorkloadFailed as exc:
        r["wire_error"] = str(exc)
    return r


def _java(b: Running, mode: str, topic: str, n: int, size: int, t: float) -> dict:
    """The same run with the Java client (``krait perf --client java``); its failure is a
    ``java_error``, not the workload's."""
    try:
        r, cpu = _measured(b, mode, topic, n, size, 1, "1", "none", t,
                           ["--client", "java", "--broker-pid", str(b.proc.pid)])
    except WorkloadFailed as exc:
        return {"java_error": str(exc)}
    return {"java_records_per_sec": r["records_per_sec"], "java_mb_per_sec": r["mb_per_sec"],
            "java_client_cpu_pct": r.get("client_cpu_pct"), **_cost("java_", cpu, r["records"], size)}


def run_perf(mode: str, bootstrap: str, topic: str, n: int, size: int, parts: int, acks: str, comp: str,
             timeout: float, extra: list[str] | None = None) -> dict:
    cmd = [PY, "-m", "broker.tools.perf", mode, "--bootstrap-server", bootstrap, "--topic", topic,
           "--num-records", str(n), "--record-size", str(size), "--partitions", str(parts), "--acks", acks,
           "--compression", comp, "--timeout", str(timeout), "--json", *(extra or [])]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired as exc:
        raise WorkloadFailed(f"client timed out after {timeout + 60:.0f}s") from exc
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (out.stderr or out.stdout)[-400:].replace("\n", " | ")
        raise WorkloadFailed(f"perf client exited {out.returncode} without a result: {tail}")
    res = json.loads(lines[-1])
    if res.get("error"):
        raise WorkloadFailed(res["error"])
    return res


def _produce_metrics(r: dict) -> dict:
    lat = r.get("ack_latency_ms") or {}
    return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"],
            "ack_p50": lat.get("p50"), "ack_p99": lat.get("p99"), "seconds": r["seconds"],
            "client_cpu_pct": r.get("client_cpu_pct")}


def _consume_metrics(r: dict) -> dict:
    return {"records_per_sec": r["records_per_sec"], "mb_per_sec": r["mb_per_sec"], "seconds": r["seconds"],
            "client_cpu_pct": r.get("client_cpu_pct")}


async def _idle_connections(port: int, n: int, hold: float) -> tuple[list, int, str | None]:
    sem = asyncio.Semaphore(64)
    conns: list = []
    first_err: list[str] = []

    async def read_frame(reader):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)

    async def one(i: int):
        async with sem:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                conns.append(writer)
                writer.write(encode_request(ApiKey.API_VERSIONS, 0, 2 * i + 1, BENCH_CLIENT)
                             + encode_request(ApiKey.METADATA, 1, 2 * i + 2, BENCH_CLIENT, topics=None))
                await asyncio.wait_for(read_frame(reader), 10)
                await asyncio.wait_for(read_frame(reader), 10)
                return True
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                if not first_err:
                    first_err.append(repr(exc))
                return False

    oks = await asyncio.gather(*(one(i) for i in range(n)))
    await asyncio.sleep(hold)
    return conns, sum(oks), first_err[0] if first_err else None


def idle_conns_workload(b: Running, sizes: Sizes) -> dict:
    with contextlib.suppress(OSError, KafkaError):
        metadata_once(b.port)
    time.sleep(1.0)
    before = b.rss_mb()

    async def run():
        conns, ok, err = await _idle_connections(b.port, sizes.idle_conns, hold=2.0)
        b.check_alive()
        after = b.rss_mb()
        for w in conns:
            w.close()
        await asyncio.sleep(0.2)
        return ok, err, after

    ok, err, after = asyncio.run(run())
    if ok < sizes.idle_conns:
        raise WorkloadFailed(f"only {ok}/{sizes.idle_conns} connections answered ApiVersions+Metadata ({err})")
    return {"rss_before_mb": before, "rss_after_mb": after, "rss_growth_mb": after - before, "connections": ok}


def partitions_workload(b: Running, sizes: Sizes) -> dict:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    ntopics, per = (int(x) for x in sizes.partition_layout.lower().split("x"))
    names = [f"parts-{i}" for i in range(ntopics)] if ntopics > 1 else ["parts"]
    want = {t: per for t in names}
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "socket.timeout.ms": 120000})
    t0 = time.perf_counter()
    futs = admin.create_topics([NewTopic(t, num_partitions=per, replication_factor=1) for t in names],
                               operation_timeout=120, request_timeout=180)
    for t, f in futs.items():
        try:
            f.result(timeout=240)
        except KafkaException as exc:
            raise WorkloadFailed(f"CreateTopics {t} x {per} partitions: {exc}") from exc
    b.wait_ready(t0, timeout=120, want=want)
    create_s = time.perf_counter() - t0
    del admin, futs  # no client left to reconnect while the broker restarts
    time.sleep(1.0)
    rss = b.rss_mb()
    lat = []
    with wire(b.port, 30) as c:
        md = partition_counts(c.request(ApiKey.METADATA, 1, topics=None))  # warm-up
        got = sum(md.get(t, 0) for t in names)
        if got != ntopics * per:
            raise WorkloadFailed(f"Metadata lists {got} of {ntopics * per} partitions")
        for _ in range(sizes.metadata_requests):
            t1 = time.perf_counter()
            c.send(ApiKey.METADATA, 1, topics=None)
            c.receive_frame()  # the broker's time, not the decoding's
            lat.append((time.perf_counter() - t1) * 1000)
    lat.sort()
    res = {"create_s": create_s, "rss_mb": rss,
           "metadata_p50_ms": lat[len(lat) // 2],
           "metadata_p99_ms": lat[min(len(lat) - 1, max(0, -(-99 * len(lat) // 100) - 1))]}
    stop_s, clean = b.stop(timeout=120)
    res["shutdown_s"] = stop_s
    if not clean:
        res["startup_error"] = f"no clean shutdown within 120 s of SIGTERM (killed after {stop_s:.1f}s)"
        return res
    t0 = b.spawn()
    try:
        b.wait_ready(t0, timeout=120)
        res["first_answer_s"] = time.perf_counter() - t0
        if not b.kind.persistent:
            res["startup_error"] = "in-memory storage: topics are not kept across a restart"
            return res
        res["startup_s"] = b.wait_ready(t0, timeout=120, want=want)
    except (TimeoutError, BrokerDied) as exc:
        res["startup_error"] = str(exc)
    return res

