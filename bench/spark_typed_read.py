"""Typed reads (``valueFormat=avro``) of the kafka-segments Spark source against a raw read
of the same topic.

    .venv/bin/python bench/spark_typed_read.py [--records 1000000] [--runs 5] [--versions 1]

Starts a Krait broker with its Schema Registry (``krait.schema.registry.listener``),
produces ``--records`` Avro values of a small record schema (two longs, an int, three
strings) with confluent-kafka's AvroSerializer (``--versions 2``: half of them with a
second schema version that adds two fields with defaults, so the typed read resolves
every v1 record against v2), then in one local[2] Spark session times, median of
``--runs`` after a warm-up run of each, interleaved:

* raw: ``groupBy("partition").count()`` over the raw read (the value column is binary);
* typed: ``groupBy("value.region").count()`` with ``valueFormat=avro`` (every value
  decoded into a struct).

Prints records/s for both and the typed/raw time ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.krait_harness import BrokerProcess, free_port  # noqa: E402

V1 = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "region", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "price_cents", "type": "long"},
    {"name": "status", "type": "string"},
]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "web"},
                       {"name": "coupon", "type": ["null", "string"], "default": None}]}
REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south")
STATUSES = ("new", "paid", "shipped", "delivered", "returned")


def produce(bootstrap: str, registry_url: str, topic: str, partitions: int, records: int, versions: int) -> float:
    """Produce the Avro records through the broker; returns seconds."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    client = SchemaRegistryClient({"url": registry_url})
    ser = [AvroSerializer(client, json.dumps(V1))]
    if versions == 2:
        ser.append(AvroSerializer(client, json.dumps(V2)))
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536, "acks": 1,
                  "queue.buffering.max.messages": 1_000_000})
    rng = random.Random(1)
    t = time.perf_counter()
    for i in range(records):
        rec = {"id": i, "customer": f"customer-{rng.randrange(100_000)}", "region": rng.choice(REGIONS),
               "qty": rng.randint(1, 20), "price_cents": rng.randrange(100, 1_000_000), "status": rng.choice(STATUSES)}
        v = i % versions
        if v == 1:
            rec.update(channel=rng.choice(("web", "app", "store")), coupon=None if i % 3 else f"C{i % 97}")
        value = ser[v](rec, ctx)
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0, "records left unsent"
    return time.perf_counter() - t


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--versions", type=int, choices=(1, 2), default=1,
                    help="schema versions among the records (2: every other record is v1, read with v2)")
    args = ap.parse_args()

    log_dir = tempfile.mkdtemp(prefix="krait-typed-bench-")
    port = free_port()
    broker = BrokerProcess(log_dir, {"krait.schema.registry.listener": f"127.0.0.1:{port}"}).start()
    url = f"http://127.0.0.1:{port}"
    try:
        secs = produce(broker.bootstrap, url, "orders", args.partitions, args.records, args.versions)
        print(f"produced {args.records:,} Avro records ({args.versions} schema version(s)) through the broker in "
              f"{secs:.1f} s ({args.records / secs:,.0f}/s)")
        from pyspark.sql import SparkSession

        from spark_jobs.datasource import register

        spark = (SparkSession.builder.master("local[2]").appName("spark_typed_read")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
                 .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)

        def load(**opts: str):
            r = spark.read.format("kafka-segments").option("log.dirs", log_dir).option("subscribe", "orders") \
                .option("highWatermark", "ignore")  # the broker keeps running: its HW checkpoint lags
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        raw = load()
        typed = load(valueFormat="avro", **{"schema.registry.url": url})
        n = raw.count()
        assert n == args.records, f"the log holds {n:,} records, not {args.records:,}"
        assert typed.where("valueError IS NOT NULL").count() == 0, "records failed to decode"
        raw_q = lambda: raw.groupBy("partition").count().collect()  # noqa: E731
        typed_q = lambda: typed.groupBy("value.region").count().collect()  # noqa: E731
        got = {r["region"]: r["count"] for r in typed_q()}
        assert sum(got.values()) == n and set(got) == set(REGIONS), got
        raw_q()  # warm-up of each
        times: dict[str, list[float]] = {"raw": [], "typed": []}
        for _ in range(args.runs):
            times["raw"].append(timed(raw_q))
            times["typed"].append(timed(typed_q))
        spark.stop()
        med = {k: statistics.median(v) for k, v in times.items()}

        def runs(k: str) -> str:
            return ", ".join(f"{x:.2f}s" for x in times[k])

        print(f"load average after the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
        print(f"raw read, groupBy(partition).count(), local[2]: {med['raw']:.2f} s median, "
              f"{n / med['raw'] / 1e6:.2f} M records/s (runs: {runs('raw')})")
        print(f"typed read (valueFormat=avro), groupBy(value.region).count(): {med['typed']:.2f} s median, "
              f"{n / med['typed'] / 1e6:.2f} M records/s (runs: {runs('typed')})")
        print(f"typed / raw time: {med['typed'] / med['raw']:.2f}x")
    finally:
        broker.kill()
        shutil.rmtree(log_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
