"""`krait perf`: producer / consumer / end-to-end performance tests over librdkafka.

The equivalents of Kafka's ``kafka-producer-perf-test.sh`` and
``kafka-consumer-perf-test.sh``, driving confluent-kafka (librdkafka) so that the client
is not the slow part::

    krait perf produce --bootstrap-server 127.0.0.1:9092 --topic t --num-records 1000000 \\
        --record-size 100 --partitions 1 --acks 1 --compression none [--throughput -1] [--json]
    krait perf consume --bootstrap-server 127.0.0.1:9092 --topic t --num-records 1000000 [--json]
    krait perf e2e     --bootstrap-server 127.0.0.1:9092 --topic t --num-records 100000 \\
        --throughput 10000 [--json]

* ``produce`` precomputes one payload, calls ``produce()`` in a tight loop with large
  batches (``linger.ms`` 5, ``batch.size`` 1 MB) and only polls when the local queue is
  full. Ack latency is taken from delivery reports, timed from the ``produce()`` call.
  Only every K-th record carries a delivery callback (``--latency-sample K``, default: about
  20,000 samples): a Python call per record would cost the client ~3 us/record and make it
  the bottleneck. Delivery errors are counted from the sampled reports and from what
  ``flush()`` leaves undelivered.
* ``consume`` assigns every partition of the topic from the beginning (no group
  rebalance, like ``--from-beginning``) and reads ``--num-records`` records.
* ``e2e`` produces at a fixed rate with a timestamp embedded in each payload and a
  consumer thread in the same process (tailing the end of the topic) measures
  produce-call-to-consume latency.

MB here is 2**20 bytes of record values, as in Kafka's tools. Unlimited throughput is
``--throughput -1``. ``--json`` prints one JSON object (for bench/compare.py).
The topic is created with ``--partitions`` partitions if it does not exist.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import struct
import sys
import threading
import time

MB = 1024 * 1024
E2E_MAGIC = b"KRAITE2E"
_E2E_HEADER = struct.Struct(">8sq")


class PerfError(Exception):
    pass


def _ck():
    try:
        import confluent_kafka
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PerfError("krait perf needs confluent-kafka: pip install 'krait[bench]'") from exc
    return confluent_kafka


def percentiles(samples: list[float]) -> dict[str, float | None]:
    """avg/p50/p99/p99.9/max of samples (nearest rank), None when there are none."""
    if not samples:
        return {"count": 0, "avg": None, "p50": None, "p99": None, "p999": None, "max": None}
    s = sorted(samples)
    n = len(s)

    def rank(q: float) -> float:
        return s[min(n - 1, max(0, math.ceil(q * n) - 1))]

    return {"count": n, "avg": sum(s) / n, "p50": rank(0.50), "p99": rank(0.99),
            "p999": rank(0.999), "max": s[-1]}


def make_payload(size: int, seed: int = 42) -> bytes:
    """Random upper-case letters, like kafka-producer-perf-test (compressible, not trivially)."""
    rnd = random.Random(seed)
    return bytes(rnd.randrange(65, 91) for _ in range(size))


def _parse_props(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise PerfError(f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 extra: dict | None = None) -> int:
    """Create ``topic`` with ``partitions`` partitions if missing; return its partition count."""
    ck = _ck()
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    md = admin.list_topics(timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        futs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                   operation_timeout=timeout, request_timeout=timeout)
        try:
            futs[topic].result(timeout=timeout)
        except ck.KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if getattr(err, "code", lambda: None)() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                raise PerfError(f"cannot create topic {topic!r}: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic=topic, timeout=timeout)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) >= 1 and \
                (len(t.partitions) >= partitions or time.monotonic() > deadline):
            return len(t.partitions)
        if time.monotonic() > deadline:
            raise PerfError(f"topic {topic!r} not visible in metadata after {timeout}s: "
                            f"{t.error if t is not None else 'missing'}")
        time.sleep(0.1)


def topic_partitions(bootstrap: str, topic: str, timeout: float = 30.0) -> int:
    ck = _ck()
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "krait-perf-md"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            md = c.list_topics(topic=topic, timeout=timeout)
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions:
                return len(t.partitions)
            if time.monotonic() > deadline:
                raise PerfError(f"topic {topic!r} not found: {t.error if t is not None else 'missing'}")
            time.sleep(0.2)
    finally:
        c.close()


def producer_config(args, *, linger_ms: float) -> dict:
    conf = {
        "bootstrap.servers": args.bootstrap_server,
        "acks": str(args.acks),
        "compression.type": args.compression,
        "linger.ms": linger_ms,
        "batch.size": 1000000,  # librdkafka caps a MessageSet at message.max.bytes (1e6)
        "batch.num.messages": 1000000,
        "queue.buffering.max.messages": 2000000,
        "queue.buffering.max.kbytes": 2097151,
        "enable.idempotence": False,
        "socket.nagle.disable": True,
        "message.timeout.ms": int(args.timeout * 1000),
    }
    conf.update(_parse_props(args.producer_prop))
    return conf


class _Latency:
    """Delivery-report sink: ack latency in ms and the error count."""

    __slots__ = ("samples", "errors", "first_error", "delivered")

    def __init__(self):
        self.samples: list[float] = []
        self.errors = 0
        self.delivered = 0
        self.first_error = None

    def callback(self, t0_ns: int):
        samples = self.samples

        def cb(err, _msg, _t0=t0_ns):
            if err is not None:
                self.errors += 1
                if self.first_error is None:
                    self.first_error = str(err)
            else:
                samples.append((time.perf_counter_ns() - _t0) / 1e6)
        return cb


def run_produce(args) -> dict:
    ck = _ck()
    ensure_topic(args.bootstrap_server, args.topic, args.partitions, timeout=args.timeout)
    payload = make_payload(args.record_size)
    n = args.num_records
    lat = _Latency()
    every = args.latency_sample if args.latency_sample > 0 else max(1, n // 20000)
    producer = ck.Producer(producer_config(args, linger_ms=args.linger_ms))
    produce = producer.produce
    poll = producer.poll
    topic = args.topic
    now_ns = time.perf_counter_ns
    mkcb = lat.callback
    # Warm-up: metadata and connection before the clock starts.
    producer.produce(topic, payload, on_delivery=lat.callback(now_ns()))
    producer.flush(args.timeout)
    lat.samples.clear()
    rate = args.throughput
    t_start = time.perf_counter()
    i = 0
    while i < n:
        if rate > 0:
            # Pace in slices of ~1 ms: produce what is due, then sleep until the next one.
            due = min(n, int((time.perf_counter() - t_start) * rate) + 1)
            if due <= i:
                time.sleep(max(0.0, (i + 1) / rate - (time.perf_counter() - t_start)))
                continue
        else:
            due = n
        while i < due:
            try:
                if i % every == 0:
                    produce(topic, payload, on_delivery=mkcb(now_ns()))
                else:
                    produce(topic, payload)
                i += 1
            except BufferError:
                poll(0.001)
        if rate > 0:
            poll(0)
    t_sent = time.perf_counter()
    remaining = producer.flush(args.timeout)
    t_end = time.perf_counter()
    elapsed = t_end - t_start
    delivered = n - remaining - lat.errors
    res = {
        "mode": "produce",
        "topic": topic,
        "records": n,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "acks": str(args.acks),
        "compression": args.compression,
        "seconds": elapsed,
        "send_seconds": t_sent - t_start,
        "records_per_sec": delivered / elapsed if elapsed > 0 else 0.0,
        "mb_per_sec": delivered * args.record_size / MB / elapsed if elapsed > 0 else 0.0,
        "undelivered": remaining,
        "errors": lat.errors,
        "first_error": lat.first_error,
        "latency_sample_every": every,
        "ack_latency_ms": percentiles(lat.samples),
    }
    if remaining or lat.errors:
        res["error"] = f"{remaining} records not delivered within {args.timeout}s, {lat.errors} " \
                       f"delivery errors (first: {lat.first_error})"
    return res


def consumer_config(args, group: str | None) -> dict:
    conf = {
        "bootstrap.servers": args.bootstrap_server,
        "group.id": group or f"krait-perf-{os.getpid()}-{time.time_ns()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": args.fetch_wait_ms,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 1048576 * 4,
        "queued.min.messages": 1000000,
        "queued.max.messages.kbytes": 1048576,
        "socket.nagle.disable": True,
        "check.crcs": False,
        # Some brokers ignore fetch.max.bytes (one peer answers 100+ MB fetches).
        "receive.message.max.bytes": 1000000000,
    }
    conf.update(_parse_props(args.consumer_prop))
    return conf


def run_consume(args) -> dict:
    ck = _ck()
    nparts = topic_partitions(args.bootstrap_server, args.topic, timeout=args.timeout)
    consumer = ck.Consumer(consumer_config(args, args.group))
    if args.group:
        consumer.subscribe([args.topic])
    else:
        consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in range(nparts)])
    n = args.num_records
    count = 0
    nbytes = 0
    errors = 0
    first_error = None
    value = ck.Message.value
    err_of = ck.Message.error
    t_start = time.perf_counter()
    t_last = t_start
    deadline = t_start + args.timeout
    idle_deadline = None
    try:
        while count < n:
            now = time.perf_counter()
            if now > deadline:
                break
            msgs = consumer.consume(num_messages=min(100000, n - count), timeout=0.2)
            if not msgs:
                if idle_deadline is None:
                    idle_deadline = time.perf_counter() + args.idle_timeout
                elif time.perf_counter() > idle_deadline:
                    break
                continue
            idle_deadline = None
            t_last = time.perf_counter()
            if any(map(err_of, msgs)):
                good = []
                for m in msgs:
                    e = m.error()
                    if e is None:
                        good.append(m)
                    elif e.code() != ck.KafkaError._PARTITION_EOF:
                        errors += 1
                        first_error = first_error or str(e)
                msgs = good
            count += len(msgs)
            nbytes += sum(map(len, map(value, msgs)))
    finally:
        consumer.close()
    elapsed = t_last - t_start
    res = {
        "mode": "consume",
        "topic": args.topic,
        "partitions": nparts,
        "records": count,
        "expected": n,
        "bytes": nbytes,
        "seconds": elapsed,
        "records_per_sec": count / elapsed if elapsed > 0 else 0.0,
        "mb_per_sec": nbytes / MB / elapsed if elapsed > 0 else 0.0,
        "errors": errors,
        "first_error": first_error,
    }
    if count < n:
        res["error"] = f"consumed only {count} of {n} records (timeout {args.timeout}s / idle {args.idle_timeout}s)"
    elif errors:
        res["error"] = f"{errors} consume errors (first: {first_error})"
    return res


def run_e2e(args) -> dict:
    """Fixed-rate producer + tailing consumer thread; latency = consume time - produce() time."""
    ck = _ck()
    rate = args.throughput if args.throughput > 0 else 10000
    nparts = ensure_topic(args.bootstrap_server, args.topic, args.partitions, timeout=args.timeout)
    size = max(args.record_size, _E2E_HEADER.size)
    filler = make_payload(size - _E2E_HEADER.size)
    consumer = ck.Consumer(consumer_config(args, None))
    consumer.assign([ck.TopicPartition(args.topic, p, ck.OFFSET_END) for p in range(nparts)])
    e2e: list[float] = []
    seen = {"marker": 0, "other": 0}
    stop = threading.Event()
    cerr: list[str] = []

    def consume_loop():
        unpack = _E2E_HEADER.unpack_from
        now_ns = time.perf_counter_ns
        try:
            while not stop.is_set():
                # poll() per record: consume(n) would wait for n records or its timeout.
                m = consumer.poll(0.05)
                if m is None:
                    continue
                t = now_ns()
                if m.error() is not None:
                    if m.error().code() != ck.KafkaError._PARTITION_EOF:
                        cerr.append(str(m.error()))
                    continue
                v = m.value()
                if v is None or len(v) < _E2E_HEADER.size:
                    seen["other"] += 1
                    continue
                magic, ts = unpack(v)
                if magic != E2E_MAGIC:
                    seen["other"] += 1
                elif ts < 0:
                    seen["marker"] += 1
                else:
                    e2e.append((t - ts) / 1e6)
        except Exception as exc:  # surfaced in the result
            cerr.append(repr(exc))

    th = threading.Thread(target=consume_loop, name="e2e-consumer", daemon=True)
    th.start()
    producer = ck.Producer(producer_config(args, linger_ms=args.e2e_linger_ms))
    lat = _Latency()
    # Warm-up: markers until the consumer sees one (connections, metadata, assignment).
    warm_deadline = time.monotonic() + args.timeout
    while seen["marker"] == 0 and time.monotonic() < warm_deadline and th.is_alive():
        for _ in range(nparts):
            producer.produce(args.topic, _E2E_HEADER.pack(E2E_MAGIC, -1) + filler)
        producer.flush(5)
        time.sleep(0.2)
    if seen["marker"] == 0:
        stop.set()
        th.join(5)
        consumer.close()
        return {"mode": "e2e", "error": f"consumer did not see warm-up records within {args.timeout}s "
                                        f"({'; '.join(cerr[:3])})"}
    time.sleep(0.3)
    produce = producer.produce
    poll = producer.poll
    pack = _E2E_HEADER.pack
    now_ns = time.perf_counter_ns
    n = args.num_records
    t_start = time.perf_counter()
    i = 0
    while i < n:
        due = min(n, int((time.perf_counter() - t_start) * rate) + 1)
        if due <= i:
            time.sleep(max(0.0, (i + 1) / rate - (time.perf_counter() - t_start)))
            continue
        while i < due:
            t0 = now_ns()
            try:
                produce(args.topic, pack(E2E_MAGIC, t0) + filler, on_delivery=lat.callback(t0))
                i += 1
            except BufferError:
                poll(0.001)
        poll(0)
    t_sent = time.perf_counter()
    remaining = producer.flush(args.timeout)
    deadline = time.monotonic() + min(args.timeout, 30)
    while len(e2e) < n - remaining - lat.errors and time.monotonic() < deadline and th.is_alive():
        time.sleep(0.05)
    stop.set()
    th.join(10)
    consumer.close()
    elapsed = t_sent - t_start
    res = {
        "mode": "e2e",
        "topic": args.topic,
        "records": n,
        "received": len(e2e),
        "record_size": size,
        "target_rate": rate,
        "records_per_sec": n / elapsed if elapsed > 0 else 0.0,
        "seconds": elapsed,
        "errors": lat.errors + len(cerr),
        "first_error": lat.first_error or (cerr[0] if cerr else None),
        "ack_latency_ms": percentiles(lat.samples),
        "e2e_latency_ms": percentiles(e2e),
    }
    if len(e2e) < n:
        res["error"] = f"received {len(e2e)} of {n} records ({remaining} undelivered, {lat.errors} errors; " \
                       f"{res['first_error']})"
    return res


def _fmt_lat(name: str, p: dict) -> str:
    if not p or not p.get("count"):
        return f"{name}: no samples"
    return (f"{name} ms: avg {p['avg']:.2f}, p50 {p['p50']:.2f}, p99 {p['p99']:.2f}, "
            f"p99.9 {p['p999']:.2f}, max {p['max']:.2f} ({p['count']} samples)")


def format_result(res: dict) -> str:
    mode = res.get("mode")
    lines = []
    if mode == "produce":
        lines.append(f"{res['records']} records sent in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s)")
        lines.append(_fmt_lat("ack latency", res["ack_latency_ms"]))
    elif mode == "consume":
        lines.append(f"{res['records']} records consumed in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s)")
    elif mode == "e2e" and "e2e_latency_ms" in res:
        lines.append(f"{res['records']} records at {res['records_per_sec']:.1f} records/s "
                     f"(target {res['target_rate']}), {res['received']} received")
        lines.append(_fmt_lat("ack latency", res["ack_latency_ms"]))
        lines.append(_fmt_lat("end-to-end latency", res["e2e_latency_ms"]))
    if res.get("error"):
        lines.append(f"ERROR: {res['error']}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="krait perf", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for mode, help_ in (("produce", "producer throughput and ack latency"),
                        ("consume", "consumer throughput"),
                        ("e2e", "end-to-end latency at a fixed rate")):
        s = sub.add_parser(mode, help=help_)
        s.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        s.add_argument("--topic", required=True)
        s.add_argument("--num-records", type=int, required=True)
        s.add_argument("--record-size", type=int, default=100, help="bytes per record value")
        s.add_argument("--partitions", type=int, default=1, help="partitions if the topic is created")
        s.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"])
        s.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
        s.add_argument("--throughput", type=float, default=-1,
                       help="records/s to aim for (-1: unlimited; e2e default 10000)")
        s.add_argument("--linger-ms", type=float, default=5.0)
        s.add_argument("--e2e-linger-ms", type=float, default=1.0, help="linger.ms in e2e mode")
        s.add_argument("--fetch-wait-ms", type=int, default=100, help="consumer fetch.wait.max.ms")
        s.add_argument("--latency-sample", type=int, default=0,
                       help="time the ack of every K-th record (default 0: about 20,000 samples; "
                            "a Python delivery callback per record would make the client the bottleneck)")
        s.add_argument("--group", default=None, help="consume with subscribe() in this group "
                                                     "(default: assign all partitions, no group)")
        s.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
        s.add_argument("--idle-timeout", type=float, default=10.0,
                       help="consume: stop when nothing arrives for this long")
        s.add_argument("--producer-prop", action="append", default=[], metavar="KEY=VALUE",
                       help="extra librdkafka producer property (repeatable)")
        s.add_argument("--consumer-prop", action="append", default=[], metavar="KEY=VALUE",
                       help="extra librdkafka consumer property (repeatable)")
        s.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.acks == "-1":
        args.acks = "all"
    try:
        res = {"produce": run_produce, "consume": run_consume, "e2e": run_e2e}[args.mode](args)
    except PerfError as exc:
        res = {"mode": args.mode, "error": str(exc)}
    except Exception as exc:  # a broker failure must show up as a result, not a traceback
        res = {"mode": args.mode, "error": f"{type(exc).__name__}: {exc}"}
    if args.json:
        print(json.dumps(res), flush=True)
    else:
        print(format_result(res), flush=True)
    return 1 if res.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
