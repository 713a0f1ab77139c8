"""Full-scan throughput of the kafka-segments Spark data source.

    .venv/bin/python bench/spark_scan_bench.py [--records 10000000] [--runs 3]

Writes a topic of 100-byte records (null keys, ~16 KiB uncompressed batches like a
producer's default batch.size) in Kafka's layout, then on local[2] measures, median of
``--runs``:

* the data source: ``spark.read.format("kafka-segments") ... .write.format("noop")``
  (every column of every row materialised in the JVM);
* (a) the Arrow ceiling: a Python data source yielding prebuilt Arrow batches of the
  same schema, row count and partitioning, i.e. what Spark itself costs;
* (b) consuming the same records through a running broker with confluent-kafka, if
  ``krait serve`` is available (else reported as skipped).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyarrow as pa  # noqa: E402

from protocol.records import build_batch  # noqa: E402
from spark_jobs.synth import PartitionWriter  # noqa: E402
from tests.krait_harness import spawn  # noqa: E402

RECORDS_PER_BATCH = 150  # 150 x ~107 bytes = ~16 KiB, a producer's default batch.size
VALUE = bytes(range(100))


def write_topic(log_dir: str, topic: str, partitions: int, records: int, compression: int = 0,
                distinct: int = 0, segment_bytes: int = 256 << 20) -> int:
    """Write ``records`` records; batches are built once and their baseOffset patched per
    append (outside the CRC), so writing is I/O speed, not Python record encoding.

    ``distinct=0``: every value is the same 100 bytes. ``distinct=K``: K batches of random
    100-byte values (seeded) are cycled, so there are K x 150 distinct values: enough to
    defeat a columnar format's dictionary encoding, as real payloads do."""
    import random

    per_part = records // partitions
    rng = random.Random(7)
    values = [[VALUE] * RECORDS_PER_BATCH] if not distinct else \
        [[rng.randbytes(len(VALUE)) for _ in range(RECORDS_PER_BATCH)] for _ in range(distinct)]
    templates = [bytearray(build_batch([(None, v) for v in vs], timestamp=1_700_000_000_000,
                                       compression=compression)) for vs in values]
    written = 0
    for p in range(partitions):
        w = PartitionWriter(log_dir, topic, p, segment_bytes=segment_bytes)
        n = 0
        while n < per_part:
            template = templates[(n // RECORDS_PER_BATCH) % len(templates)]
            template[0:8] = w.next_offset.to_bytes(8, "big")
            w.append_raw(bytes(template))
            n += RECORDS_PER_BATCH
        w.close()
        written += n
    return written


def make_ceiling_source():
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_jobs.datasource import SCHEMA, arrow_schema

    class CeilingReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.tasks = int(options["tasks"])
            self.rows_per_task = int(options["rows_per_task"])
            self.batch_rows = int(options["batch_rows"])

        def partitions(self) -> list:
            return [InputPartition(i) for i in range(self.tasks)]

        def read(self, partition: InputPartition):
            import numpy as np

            schema = arrow_schema(SCHEMA)
            n = self.batch_rows
            value = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 100),
                                                           pa.py_buffer(VALUE * n)])
            cols = [
                pa.nulls(n, pa.binary()), value, pa.array(["bench"] * n), pa.array(np.zeros(n, dtype=np.int32)),
                pa.array(np.arange(n, dtype=np.int64)),
                pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, dtype=np.int32)),
            ]
            batch = pa.RecordBatch.from_arrays(cols, schema=schema)
            left = self.rows_per_task
            while left > 0:
                yield batch if left >= n else batch.slice(0, left)
                left -= n

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrow-ceiling"

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return CeilingReader(self.options)

    return CeilingSource


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def start_broker(log_dir: str) -> tuple[subprocess.Popen, str] | str:
    """`krait serve` on a free port, or the reason it is unavailable."""
    try:
        import confluent_kafka  # noqa: F401

        import broker  # noqa: F401
    except ImportError as exc:
        return f"skipped ({exc})"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    krait = os.path.join(os.path.dirname(sys.executable), "krait")
    proc = spawn([krait, "serve", "--override", f"log.dirs={log_dir}",
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--override", "krait.http.listener=", "--override", "krait.schema.registry.listener="],
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            return f"skipped (krait serve exited: {proc.stderr.read().decode(errors='replace')[-300:]!r})"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    return "skipped (krait serve did not listen within 20 s)"


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Produce ``records`` 100-byte values (null keys, no compression); returns seconds."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000})
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=VALUE, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    return time.perf_counter() - t


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> tuple[int, float]:
    """Read every record from offset 0 with confluent-kafka; returns (records, seconds)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t = time.perf_counter()
    idle = time.time()
    while got < records and time.time() - idle < 15:
        msgs = c.consume(100000, timeout=1.0)
        if msgs:
            idle = time.time()
            got += len(msgs)
    dt = time.perf_counter() - t
    c.close()
    return got, dt


def broker_compare(args: argparse.Namespace, synthetic_rate: float) -> None:
    """(b): the same records produced through `krait serve`; Spark scans the broker's own
    log dir and confluent-kafka consumes them from the broker, runs interleaved."""
    log_dir = tempfile.mkdtemp(prefix="krait-scan-bench-broker-")
    started = start_broker(log_dir)
    if isinstance(started, str):
        print(f"(b) broker + confluent-kafka: {started}")
        shutil.rmtree(log_dir, ignore_errors=True)
        return
    proc, bootstrap = started
    try:
        n = args.broker_records or args.records
        secs = produce(bootstrap, "bench", args.partitions, n)
        print(f"(b) produced {n:,} records through the broker in {secs:.1f} s ({n / secs / 1e6:.2f} M/s)")
        from pyspark.sql import SparkSession

        from spark_jobs.datasource import register

        spark = (SparkSession.builder.master("local[2]").appName("spark_scan_bench")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        # the broker keeps running: read up to the last whole batch (its HW checkpoint lags)
        df = spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", "bench") \
            .option("highWatermark", "ignore").option("minPartitions", "4").load()
        assert df.count() == n, "the broker's log holds a different number of records"
        scans, cons = [], []
        for _ in range(args.runs):
            scans.append(timed(lambda: df.write.format("noop").mode("overwrite").save()))
            got, dt = consume(bootstrap, "bench", args.partitions, n)
            if got < n:
                print(f"(b) consumer got only {got:,} of {n:,} records")
                return
            cons.append(dt)
        spark.stop()
        scan_rate = n / statistics.median(scans)
        cons_rate = n / statistics.median(cons)
        print(f"(b) kafka-segments scan of the broker's log dir: {scan_rate / 1e6:.2f} M records/s "
              f"(runs: {', '.join(f'{x:.2f}s' for x in scans)})")
        print(f"(b) confluent-kafka consume through the broker: {cons_rate / 1e6:.2f} M records/s "
              f"(runs: {', '.join(f'{x:.2f}s' for x in cons)}); ratio scan/consume {scan_rate / cons_rate:.2f}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(log_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compression", type=int, default=0, help="codec id for the batches (0 = none)")
    ap.add_argument("--keep", help="write the log dir here and keep it")
    ap.add_argument("--skip-broker", action="store_true")
    ap.add_argument("--broker-records", type=int, help="records for (b) (default: --records)")
    args = ap.parse_args()

    log_dir = args.keep or tempfile.mkdtemp(prefix="krait-scan-bench-")
    os.makedirs(log_dir, exist_ok=True)
    try:
        t = time.perf_counter()
        n = write_topic(log_dir, "bench", args.partitions, args.records, args.compression)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(log_dir) for f in fs if f.endswith(".log"))
        print(f"wrote {n:,} records ({size / 1e6:.0f} MB of .log) in {time.perf_counter() - t:.1f} s")

        from pyspark.sql import SparkSession

        from spark_jobs.datasource import register

        spark = (SparkSession.builder.master("local[2]").appName("spark_scan_bench")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        spark.dataSource.register(make_ceiling_source())

        df = spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", "bench") \
            .option("minPartitions", "4").load()
        tasks = df.rdd.getNumPartitions()
        assert df.count() == n, "scan count mismatch"
        ceiling_df = spark.read.format("arrow-ceiling").option("tasks", str(tasks)) \
            .option("rows_per_task", str(n // tasks)).option("batch_rows", "40000").load()
        n_ceil = n // tasks * tasks
        # interleaved, so both see the same machine load; noop = every column of every row
        # materialised in the JVM, count = rows only (Spark still receives every column)
        times: dict[str, list[float]] = {"scan": [], "ceil": [], "scan_count": [], "ceil_count": []}
        for _ in range(args.runs):
            times["scan"].append(timed(lambda: df.write.format("noop").mode("overwrite").save()))
            times["ceil"].append(timed(lambda: ceiling_df.write.format("noop").mode("overwrite").save()))
            times["scan_count"].append(timed(df.count))
            times["ceil_count"].append(timed(ceiling_df.count))
        spark.stop()
        med = {k: statistics.median(v) for k, v in times.items()}
        scan_rate, ceil_rate = n / med["scan"], n_ceil / med["ceil"]

        def runs(k: str) -> str:
            return ", ".join(f"{x:.2f}s" for x in times[k])

        print(f"load average during the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
        print(f"kafka-segments full scan (noop write), local[2], {tasks} tasks: {scan_rate / 1e6:.2f} M records/s "
              f"(runs: {runs('scan')})")
        print(f"(a) Arrow ceiling (prebuilt batches), same: {ceil_rate / 1e6:.2f} M records/s (runs: {runs('ceil')}); "
              f"ratio {scan_rate / ceil_rate:.2f}")
        print(f"kafka-segments count(): {n / med['scan_count'] / 1e6:.2f} M records/s (runs: {runs('scan_count')}); "
              f"Arrow ceiling count(): {n_ceil / med['ceil_count'] / 1e6:.2f} M records/s "
              f"(runs: {runs('ceil_count')}); ratio {med['ceil_count'] / med['scan_count'] * n / n_ceil:.2f}")
        if args.skip_broker:
            print("(b) broker + confluent-kafka: skipped (--skip-broker)")
        else:
            broker_compare(args, scan_rate)
    finally:
        if not args.keep:
            shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
