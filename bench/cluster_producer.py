"""The failover benchmark's producer, in its own process so that brokers can be killed under
it: sends to one partition at a fixed rate, acks=all and idempotence (librdkafka's
defaults otherwise), until SIGTERM, and prints one line per delivery report with the
time it was seen (time.monotonic(), CLOCK_MONOTONIC, comparable across processes):

    A <t> <offset>        acknowledged
    E <t> <error>         delivery error

    python bench/cluster_producer.py BOOTSTRAP TOPIC PARTITION RECORDS_PER_SECOND [KEY=VALUE ...]

(KEY=VALUE: more librdkafka properties, e.g. retry.backoff.max.ms=100.)
"""

from __future__ import annotations

import signal
import sys
import time

from confluent_kafka import Producer


def main() -> int:
    bootstrap, topic, partition, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    extra = dict(arg.split("=", 1) for arg in sys.argv[5:])
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1,
                  "message.timeout.ms": 300000, **extra})
    out = sys.stdout
    mono = time.monotonic

    def cb(err, msg):
        if err is None:
            out.write(f"A {mono():.6f} {msg.offset()}\n")
        else:
            out.write(f"E {mono():.6f} {err}\n")
        out.flush()

    payload = b"x" * 100
    start = mono()
    i = 0
    while not stop:
        p.produce(topic, payload, partition=partition, on_delivery=cb)
        i += 1
        # poll at least every millisecond, so that a report is seen when it arrives
        while not stop:
            delay = start + i / rate - mono()
            if delay <= 0:
                break
            p.poll(min(delay, 0.001))
        p.poll(0)
    p.flush(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
