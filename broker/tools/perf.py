"""`krait perf`: producer / consumer / end-to-end performance tests over librdkafka (the
command: its options, the result lines; the modes run in :mod:`.perf_librdkafka` and, for
``consume --client wire``, :mod:`.perf_wire`).

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
* ``consume --client wire`` reads with a Fetch loop on the wire client and counts records
  from batch headers: what the broker can serve, past what a client library can take.
* ``produce --client wire`` (:mod:`.perf_wire_produce`) sends pre-built batches over
  ``--producers`` connections: what the broker can accept, the ingest ceiling.
* ``produce|consume --client java`` runs the Java kafka-clients library (:mod:`.perf_java`,
  compiled with javac on first use), in ``--producers`` / ``--consumers`` processes, and
  reports the broker's CPU next to the client's (``--broker-pid``, or the local process
  listening on the bootstrap port).

Every row names its client (``client`` in ``--json``).

MB here is 2**20 bytes of record values, as in Kafka's tools. Unlimited throughput is
``--throughput -1``. ``--json`` prints one JSON object (for bench/compare.py).
The topic is created with ``--partitions`` partitions if it does not exist.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

from .perf_java import run_java
from .perf_librdkafka import run_consume, run_e2e, run_produce
from .perf_stats import PerfError
from .perf_wire import run_consume_wire
from .perf_wire_produce import run_produce_wire

__all__ = ["build_parser", "format_result", "main"]


def _fmt_lat(name: str, p: dict[str, Any]) -> str:
    if not p or not p.get("count"):
        return f"{name}: no samples"
    return (f"{name} ms: avg {p['avg']:.2f}, p50 {p['p50']:.2f}, p99 {p['p99']:.2f}, "
            f"p99.9 {p['p999']:.2f}, max {p['max']:.2f} ({p['count']} samples)")


def _fmt_cpu(res: dict[str, Any]) -> str:
    procs = res.get("processes", 1)
    out = f"client CPU {res['client_cpu_pct']:.0f}%" + (f" ({procs} processes)" if procs > 1 else "")
    if res.get("broker_cpu_pct") is not None:
        out += f", broker CPU {res['broker_cpu_pct']:.0f}%"
        if res.get("broker_cpu_s_per_mrec") is not None:
            out += f" ({res['broker_cpu_s_per_mrec']:.2f} CPU-s per M records)"
    return out


def format_result(res: dict[str, Any]) -> str:
    """The human-readable lines of a result; the first names the client."""
    mode = res.get("mode") if "seconds" in res or "e2e_latency_ms" in res else None
    client = f"[{res.get('client', 'librdkafka')}] "
    lines = []
    if mode == "produce":
        lines.append(f"{client}{res['records']} records sent in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s), {_fmt_cpu(res)}")
        if res.get("ack_latency_ms"):  # the wire producer does not time acks
            lines.append(_fmt_lat("ack latency", res["ack_latency_ms"]))
    elif mode == "consume":
        lines.append(f"{client}{res['records']} records consumed in {res['seconds']:.3f} s, "
                     f"{res['records_per_sec']:.1f} records/s ({res['mb_per_sec']:.2f} MB/s), {_fmt_cpu(res)}")
    elif mode == "e2e" and "e2e_latency_ms" in res:
        lines.append(f"{client}{res['records']} records at {res['records_per_sec']:.1f} records/s "
                     f"(target {res['target_rate']}), {res['received']} received")
        lines.append(_fmt_lat("ack latency", res["ack_latency_ms"]))
        lines.append(_fmt_lat("end-to-end latency", res["e2e_latency_ms"]))
    if res.get("error"):
        lines.append(f"{client}ERROR: {res['error']}")
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
        s.add_argument("--client", default="librdkafka", choices=["librdkafka", "wire", "java"],
                       help="librdkafka (confluent-kafka); java (the Java kafka-clients library, produce and "
                            "consume); wire (consume: a Fetch loop that counts records from batch headers, "
                            "MB/s then assumes --record-size; produce: pre-built batches sent over "
                            "--producers connections, the ingest ceiling)")
        s.add_argument("--consumers", type=int, default=1,
                       help="--client java consume: consumer processes (partitions shared out p %% N)")
        s.add_argument("--producers", type=int, default=1,
                       help="--client java produce: producer processes (records and --throughput split); "
                            "--client wire produce: connections")
        s.add_argument("--batch-records", type=int, default=1000,
                       help="--client wire produce: records per pre-built batch (one batch per request)")
        s.add_argument("--max-in-flight", type=int, default=5,
                       help="--client wire produce: requests outstanding per connection")
        s.add_argument("--broker-pid", type=int, default=None,
                       help="--client java|wire: broker process for its CPU (default: the local listener on the "
                            "bootstrap port, if any)")
        s.add_argument("--java-opt", action="append", default=[], metavar="OPT",
                       help="--client java: extra JVM option (repeatable)")
        s.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    """``krait perf ...``: run one mode and print its result; the exit code."""
    args = build_parser().parse_args(argv)
    if args.acks == "-1":
        args.acks = "all"
    # Everything loaded so far lives until exit: keep the collector from rescanning it
    # during the runs (kio's many objects cost the librdkafka consumer ~10% otherwise).
    gc.freeze()
    try:
        if args.client == "java":
            res = run_java(args)
        elif args.mode == "consume" and args.client == "wire":
            res = run_consume_wire(args)
        elif args.mode == "produce" and args.client == "wire":
            res = run_produce_wire(args)
        else:
            res = {"produce": run_produce, "consume": run_consume, "e2e": run_e2e}[args.mode](args)
    except PerfError as exc:
        res = {"mode": args.mode, "error": str(exc)}
    except Exception as exc:  # a broker failure must show up as a result, not a traceback
        res = {"mode": args.mode, "error": f"{type(exc).__name__}: {exc}"}
    res.setdefault("client", args.client if args.client != "wire" or args.mode != "e2e" else "librdkafka")
    if args.json:
        print(json.dumps(res), flush=True)
    else:
        print(format_result(res), flush=True)
    return 1 if res.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
