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
import contextlib
import json
import math
import os
import random
import resource
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


def _cpu() -> float:
    """CPU seconds (user + system) of this process, every thread (librdkafka's included)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


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
    cpu0 = _cpu()
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
    cpu = _cpu() - cpu0
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
    cpu0 = _cpu()
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
    cpu = _cpu() - cpu0
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

# --------------------------------------------------------------------------------------
# A wire-level consumer (--client wire): Metadata v1, ListOffsets v1, Fetch v4 on one socket,
# counting records from the record-batch headers (no per-record work, no decompression).
# The confluent-kafka consumer builds a Python object per record and tops out near
# 0.8-0.9 M records/s on this machine: this one measures what the broker can serve.

def _wire_req(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    cid = b"krait-perf"
    hdr = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid
    return struct.pack(">i", len(hdr) + len(body)) + hdr + body


def _wire_str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Wire:
    def __init__(self, host: str, port: int, timeout: float):
        import socket

        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.buf = bytearray(1 << 20)

    def send(self, api_key: int, version: int, body: bytes):
        self.corr += 1
        self.sock.sendall(_wire_req(api_key, version, self.corr, body))

    def recv(self) -> memoryview:
        """The next response, after its correlation id."""
        head = self._read(4)
        (size,) = struct.unpack(">i", head)
        if size > len(self.buf):
            self.buf = bytearray(size)
        return self._read(size)[4:]

    def _read(self, n: int) -> memoryview:
        view = memoryview(self.buf)[:n] if n > 4 else memoryview(bytearray(n))
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k
        return view

    def call(self, api_key: int, version: int, body: bytes) -> bytes:
        self.send(api_key, version, body)
        return bytes(self.recv())

    def close(self):
        self.sock.close()


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf, pos: int = 0):
        self.buf, self.pos = buf, pos

    def i8(self):
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def i16(self):
        v = struct.unpack_from(">h", self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self):
        v = struct.unpack_from(">i", self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self):
        v = struct.unpack_from(">q", self.buf, self.pos)[0]
        self.pos += 8
        return v

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        v = bytes(self.buf[self.pos:self.pos + n]).decode()
        self.pos += n
        return v


def _wire_partitions(w: _Wire, topic: str) -> list[int]:
    r = _Reader(w.call(3, 1, struct.pack(">i", 1) + _wire_str(topic)))
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.i32()
    for _ in range(r.i32()):
        err, name, _internal = r.i16(), r.string(), r.i8()
        parts = []
        for _ in range(r.i32()):
            _e, idx, _leader = r.i16(), r.i32(), r.i32()
            for _list in range(2):  # replicas, isr
                k = r.i32()
                r.pos += 4 * k
            parts.append(idx)
        if name == topic:
            if err:
                raise PerfError(f"Metadata for {topic!r}: error {err}")
            return sorted(parts)
    raise PerfError(f"topic {topic!r} not in Metadata")


def _wire_earliest(w: _Wire, topic: str, parts: list[int]) -> dict[int, int]:
    body = struct.pack(">ii", -1, 1) + _wire_str(topic) + struct.pack(">i", len(parts)) + \
        b"".join(struct.pack(">iq", p, -2) for p in parts)
    r = _Reader(w.call(2, 1, body))
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err, _ts, off = r.i32(), r.i16(), r.i64(), r.i64()
            if err:
                raise PerfError(f"ListOffsets partition {p}: error {err}")
            out[p] = off
    return out


def run_consume_wire(args) -> dict:
    host, _, port = args.bootstrap_server.rpartition(":")
    w = _Wire(host or "127.0.0.1", int(port), args.timeout)
    topic = args.topic
    try:
        deadline = time.perf_counter() + args.timeout
        while True:
            try:
                parts = _wire_partitions(w, topic)
                break
            except PerfError:
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.2)
        offsets = _wire_earliest(w, topic, parts)
        tname = _wire_str(topic)
        n = args.num_records
        count = 0
        wire_bytes = 0
        unpack_batch = struct.Struct(">qi").unpack_from
        unpack_i32 = struct.Struct(">i").unpack_from
        cpu0 = _cpu()
        t_start = time.perf_counter()
        t_last = t_start
        idle_since = None
        while count < n:
            body = struct.pack(">iiiib", -1, args.fetch_wait_ms, 1, 52428800, 0) + struct.pack(">i", 1) + tname + \
                struct.pack(">i", len(parts)) + b"".join(struct.pack(">iqi", p, offsets[p], 4 * 1048576) for p in parts)
            w.send(1, 4, body)
            resp = w.recv()
            r = _Reader(resp, 4)  # throttle_time_ms
            got = 0
            for _ in range(r.i32()):
                r.string()
                for _ in range(r.i32()):
                    p, err = r.i32(), r.i16()
                    r.pos += 16  # high watermark, last stable offset
                    na = r.i32()
                    if na > 0:
                        r.pos += 16 * na
                    size = r.i32()
                    if err:
                        raise PerfError(f"Fetch {topic}-{p}: error {err}")
                    if size <= 0:
                        continue
                    pos, end = r.pos, r.pos + size
                    r.pos = end
                    while pos + 61 <= end:
                        base, blen = unpack_batch(resp, pos)
                        if pos + 12 + blen > end:
                            break  # partial batch at the end of the response
                        got += unpack_i32(resp, pos + 57)[0]
                        offsets[p] = base + unpack_i32(resp, pos + 23)[0] + 1
                        wire_bytes += 12 + blen
                        pos += 12 + blen
            now = time.perf_counter()
            if got:
                count += got
                t_last = now
                idle_since = None
            else:
                idle_since = idle_since or now
                if now - idle_since > args.idle_timeout or now > deadline:
                    break
    finally:
        w.close()
    cpu = _cpu() - cpu0
    elapsed = t_last - t_start
    res = {
        "mode": "consume",
        "client": "wire",
        "topic": topic,
        "partitions": len(parts),
        "records": count,
        "expected": n,
        "bytes": count * args.record_size,
        "wire_bytes": wire_bytes,
        "seconds": elapsed,
        "records_per_sec": count / elapsed if elapsed > 0 else 0.0,
        "mb_per_sec": count * args.record_size / MB / elapsed if elapsed > 0 else 0.0,
        "wire_mb_per_sec": wire_bytes / MB / elapsed if elapsed > 0 else 0.0,
        "client_cpu_pct": 100 * cpu / elapsed if elapsed > 0 else 0.0,
        "errors": 0,
        "first_error": None,
    }
    if count < n:
        res["error"] = f"consumed only {count} of {n} records (timeout {args.timeout}s / idle {args.idle_timeout}s)"
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
    mode = res.get("mode") if "seconds" in res or "e2e_latency_ms" in res else None
    lines = []
    if mode == "produce":
        lines.append(f"{res['records']} records sent in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s), "
                     f"client CPU {res['client_cpu_pct']:.0f}%")
        lines.append(_fmt_lat("ack latency", res["ack_latency_ms"]))
    elif mode == "consume":
        lines.append(f"{res['records']} records consumed in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s), "
                     f"client CPU {res['client_cpu_pct']:.0f}%")
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
        s.add_argument("--client", default="librdkafka", choices=["librdkafka", "wire"],
                       help="consume: librdkafka (confluent-kafka) or a wire-level Fetch loop that counts "
                            "records from batch headers (MB/s then assumes --record-size)")
        s.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.acks == "-1":
        args.acks = "all"
    try:
        if args.mode == "consume" and args.client == "wire":
            res = run_consume_wire(args)
        else:
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
