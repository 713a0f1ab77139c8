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

RECORDS_PER_BATCH = 150  # 150 x ~107 bytes = ~16 KiB, a producer's default batch.size
VALUE = bytes(range(100))


def write_topic(log_dir: str, topic: str, partitions: int, records: int, compression: int = 0) -> int:
    """Write ``records`` records; one batch is built once and its baseOffset patched per
    append (outside the CRC), so writing is I/O speed, not Python record encoding."""
    per_part = records // partitions
    template = bytearray(build_batch([(None, VALUE)] * RECORDS_PER_BATCH, timestamp=1_700_000_000_000,
                                     compression=compression))
    written = 0
    for p in range(partitions):
        w = PartitionWriter(log_dir, topic, p, segment_bytes=256 << 20)
        n = 0
        while n < per_part:
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


def broker_hook(log_dir: str, records: int, runs: int) -> str:
    """(b): consume the same records through `krait serve` with confluent-kafka."""
    try:
        import confluent_kafka  # noqa: F401

        import broker  # noqa: F401
    except ImportError as exc:
        return f"skipped ({exc})"
    krait = os.path.join(os.path.dirname(sys.executable), "krait")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([krait, "serve", "--log-dirs", log_dir, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 15
        while time.time() < deadline:
            if proc.poll() is not None:
                return f"skipped (krait serve exited: {proc.stderr.read().decode(errors='replace')[-300:]!r})"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            return "skipped (krait serve did not listen within 15 s)"
        from confluent_kafka import Consumer, TopicPartition

        def consume() -> int:
            c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"bench-{time.time()}",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest"})
            md = c.list_topics("bench", timeout=10)
            c.assign([TopicPartition("bench", p, 0) for p in md.topics["bench"].partitions])
            got = 0
            idle = time.time()
            while got < records and time.time() - idle < 10:
                msgs = c.consume(10000, timeout=1.0)
                if msgs:
                    idle = time.time()
                    got += sum(1 for m in msgs if m.error() is None)
            c.close()
            return got

        rates = []
        for _ in range(runs):
            t = time.perf_counter()
            got = consume()
            rates.append(got / (time.perf_counter() - t))
            if got < records:
                return f"incomplete: consumed {got} of {records} records"
        return f"{statistics.median(rates) / 1e6:.2f} M records/s"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compression", type=int, default=0, help="codec id for the batches (0 = none)")
    ap.add_argument("--keep", help="write the log dir here and keep it")
    ap.add_argument("--skip-broker", action="store_true")
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
        scan = [timed(lambda: df.write.format("noop").mode("overwrite").save()) for _ in range(args.runs)]
        scan_rate = n / statistics.median(scan)

        ceiling_df = spark.read.format("arrow-ceiling").option("tasks", str(tasks)) \
            .option("rows_per_task", str(n // tasks)).option("batch_rows", "150000").load()
        ceil = [timed(lambda: ceiling_df.write.format("noop").mode("overwrite").save()) for _ in range(args.runs)]
        ceil_rate = (n // tasks * tasks) / statistics.median(ceil)
        spark.stop()

        print(f"kafka-segments full scan, local[2], {tasks} tasks: {scan_rate / 1e6:.2f} M records/s "
              f"(runs: {', '.join(f'{x:.2f}s' for x in scan)})")
        print(f"(a) Arrow ceiling (prebuilt batches): {ceil_rate / 1e6:.2f} M records/s "
              f"(runs: {', '.join(f'{x:.2f}s' for x in ceil)}); ratio {scan_rate / ceil_rate:.2f}")
        if args.skip_broker:
            print("(b) broker + confluent-kafka: skipped (--skip-broker)")
        else:
            res = broker_hook(log_dir, n, args.runs)
            try:
                ratio = f"; ratio {scan_rate / (float(res.split()[0]) * 1e6):.2f}"
            except ValueError:
                ratio = ""
            print(f"(b) broker + confluent-kafka consume: {res}{ratio}")
    finally:
        if not args.keep:
            shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
