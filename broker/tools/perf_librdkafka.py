"""``krait perf`` over librdkafka (confluent-kafka): producer throughput and ack latency,
consumer throughput, and end-to-end latency at a fixed rate.

confluent-kafka is driven so that the client is not the slow part: one precomputed
payload, ``produce()`` in a tight loop with large batches, a delivery callback on only
every K-th record (a Python call per record would cost ~3 us and make the client the
bottleneck), and consumers that assign partitions instead of waiting for a rebalance.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import threading
import time
from typing import Any

from .perf_stats import MB, PerfError, confluent, cpu_seconds, make_payload, parse_props, percentiles

__all__ = ["ensure_topic", "run_consume", "run_e2e", "run_produce", "topic_partitions"]

E2E_MAGIC = b"KRAITE2E"
_E2E_HEADER = struct.Struct(">8sq")


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 extra: dict[str, str] | None = None) -> int:
    """Create ``topic`` with ``partitions`` partitions if missing; return its partition count."""
    ck = confluent()
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
    ck = confluent()
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


def producer_config(args: argparse.Namespace, *, linger_ms: float) -> dict[str, Any]:
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
    conf.update(parse_props(args.producer_prop))
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


def run_produce(args: argparse.Namespace) -> dict[str, Any]:
    ck = confluent()
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
    cpu0 = cpu_seconds()
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
    cpu = cpu_seconds() - cpu0
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
        "client_cpu_pct": 100 * cpu / elapsed if elapsed > 0 else 0.0,
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


def consumer_config(args: argparse.Namespace, group: str | None) -> dict[str, Any]:
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
    conf.update(parse_props(args.consumer_prop))
    return conf


def run_consume(args: argparse.Namespace) -> dict[str, Any]:
    ck = confluent()
    nparts = topic_partitions(args.bootstrap_server, args.topic, timeout=args.timeout)
    consumer = ck.Consumer(consumer_config(args, args.group))
    tps = [ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING) for p in range(nparts)]
    if args.group:
        consumer.subscribe([args.topic])
    else:
        # librdkafka insists on a group.id and looks up its coordinator in the background;
        # do that (and, on a fresh broker, the creation of __consumer_offsets) before the
        # clock starts, with OffsetFetch. A broker without groups just skips this.
        with contextlib.suppress(ck.KafkaException, RuntimeError):
            consumer.committed(tps, timeout=min(10.0, args.timeout))
        consumer.assign(tps)
    n = args.num_records
    count = 0
    nbytes = 0
    # Warm-up: the first record (connections, ListOffsets, first fetch) is not timed.
    warm_deadline = time.perf_counter() + args.timeout
    while n > 0 and time.perf_counter() < warm_deadline:
        msgs = [m for m in consumer.consume(num_messages=1, timeout=0.5) if m.error() is None]
        if msgs:
            count, nbytes = 1, len(msgs[0].value() or b"")
            break
    cpu0 = cpu_seconds()
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
    cpu = cpu_seconds() - cpu0
    elapsed = t_last - t_start
    timed = max(0, count - 1)  # the warm-up record is not timed
    res = {
        "mode": "consume",
        "topic": args.topic,
        "partitions": nparts,
        "records": count,
        "expected": n,
        "bytes": nbytes,
        "seconds": elapsed,
        "records_per_sec": timed / elapsed if elapsed > 0 else 0.0,
        "mb_per_sec": nbytes * timed / max(1, count) / MB / elapsed if elapsed > 0 else 0.0,
        "client_cpu_pct": 100 * cpu / elapsed if elapsed > 0 else 0.0,
        "errors": errors,
        "first_error": first_error,
    }
    if count < n:
        res["error"] = f"consumed only {count} of {n} records (timeout {args.timeout}s / idle {args.idle_timeout}s)"
    elif errors:
        res["error"] = f"{errors} consume errors (first: {first_error})"
    return res


def run_e2e(args: argparse.Namespace) -> dict[str, Any]:
    """Fixed-rate producer + tailing consumer thread; latency = consume time - produce() time."""
    ck = confluent()
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


