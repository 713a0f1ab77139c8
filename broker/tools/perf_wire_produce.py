"""``krait perf produce --client wire``: the ingest ceiling, a producer that costs the client
almost nothing, to find what one broker process accepts per second.

A librdkafka producer spends about a core building batches at 1 M records/s, so on a
2-core machine it and the broker share the CPU and the figure says little about the
broker. This client builds one record batch per partition once (``--batch-records`` records
of ``--record-size`` bytes, uncompressed, no producer id), encodes one Produce v7 request per
partition once, and then only writes those frames and reads the answers: over
``--producers`` connections (threads: a blocking send or receive releases the GIL), each
keeping up to ``--max-in-flight`` requests outstanding, connection i writing to partition
i mod P. Every answer's error codes are checked; a non-zero one ends the run with an error.

The broker assigns offsets to each copy it receives (its own buffer), so the same frame can
be sent again and again. The records' timestamps are the time the frames were built.
"""

from __future__ import annotations

import argparse
import datetime
import threading
import time
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import KafkaError
from protocol.records import build_batch

from .perf_librdkafka import ensure_topic
from .perf_stats import MB, BrokerCpu, PerfError, broker_pid_for, cpu_seconds, make_payload
from .wire import WireClient, encode_request, parse_bootstrap

__all__ = ["run_produce_wire"]

PRODUCE_VERSION = 7  # the last non-flexible version: what every broker compared serves


def _frames(args: argparse.Namespace, partitions: int) -> list[bytes]:
    """One Produce request per partition (correlation id: partition + 1)."""
    payload = make_payload(args.record_size)
    batch = build_batch([(None, payload)] * args.batch_records, timestamp=int(time.time() * 1000))
    acks = -1 if args.acks == "all" else int(args.acks)
    return [encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, p + 1, "krait-perf", transactional_id=None, acks=acks,
                           timeout=datetime.timedelta(seconds=30),
                           topic_data=[dict(name=args.topic, partition_data=[dict(index=p, records=batch)])])
            for p in range(partitions)]


class _Conn(threading.Thread):
    """One connection: sends ``requests`` copies of partition ``partition``'s frame,
    ``window`` outstanding."""

    def __init__(self, host: str, port: int, frame: bytes, partition: int, requests: int, window: int,
                 deadline: float) -> None:
        super().__init__(daemon=True)
        self.addr = (host, port)
        self.frame = frame
        self.correlation_id = partition + 1
        self.requests = requests
        self.window = window
        self.deadline = deadline
        self.error: str | None = None
        self.acked = 0

    def run(self) -> None:
        try:
            timeout = max(1.0, self.deadline - time.monotonic())
            with WireClient(*self.addr, timeout, client_id="krait-perf", negotiate=False) as w:
                sent = 0
                while self.acked < self.requests:
                    while sent < self.requests and sent - self.acked < self.window:
                        w.send_frame(self.frame, ApiKey.PRODUCE, PRODUCE_VERSION, self.correlation_id)
                        sent += 1
                    for t in w.receive().responses:
                        for p in t.partition_responses:
                            if p.error_code:
                                raise PerfError(f"partition {p.index}: error {int(p.error_code)}")
                    self.acked += 1
                    if time.monotonic() > self.deadline:
                        raise PerfError(f"timed out after {self.acked} of {self.requests} requests")
        except (KafkaError, PerfError) as exc:
            self.error = str(exc)


def run_produce_wire(args: argparse.Namespace) -> dict[str, Any]:
    """Send about ``--num-records`` records (whole batches); the result dict."""
    partitions = ensure_topic(args.bootstrap_server, args.topic, args.partitions)
    host, port = parse_bootstrap(args.bootstrap_server)[0]
    frames = _frames(args, partitions)
    conns = max(1, args.producers)
    per_conn = -(-args.num_records // (args.batch_records * conns))  # requests per connection
    records = per_conn * conns * args.batch_records
    broker = BrokerCpu(args.broker_pid or broker_pid_for(args.bootstrap_server))
    deadline = time.monotonic() + args.timeout
    threads = [_Conn(host, port, frames[i % partitions], i % partitions, per_conn, args.max_in_flight, deadline)
               for i in range(conns)]
    cpu0, bcpu0 = cpu_seconds(), broker.seconds()
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    bcpu1 = broker.seconds()
    errors = [t.error for t in threads if t.error]
    if errors:
        raise PerfError(errors[0])
    nbytes = records * args.record_size
    bcpu = bcpu1 - bcpu0 if bcpu0 is not None and bcpu1 is not None else None
    return dict(
        mode="produce", client="wire", topic=args.topic, records=records, record_size=args.record_size,
        partitions=partitions, acks=args.acks, compression="none", connections=conns,
        batch_records=args.batch_records, max_in_flight=args.max_in_flight, seconds=wall,
        records_per_sec=records / wall, mb_per_sec=nbytes / MB / wall,
        request_bytes=len(frames[0]), client_cpu_pct=100 * cpu / wall,
        broker_cpu_seconds=bcpu, broker_cpu_pct=100 * bcpu / wall if bcpu is not None else None,
        broker_cpu_s_per_mrec=bcpu / records * 1e6 if bcpu is not None else None,
        broker_cpu_s_per_gib=bcpu / nbytes * 1024**3 if bcpu is not None else None,
        ack_latency_ms={})
