"""A producer in its own process (so that tests can kill brokers under it): sends
``count`` values "0".."count-1" to one topic with acks=all and idempotence, paced, and
prints one line per acknowledged record: "<partition> <offset> <value>"; delivery errors
go to stderr as "ERROR <value> <error>"."""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic, count, per_second = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
                  "message.timeout.ms": 120000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000})

    def cb(err, msg):
        if err is not None:
            print(f"ERROR {msg.value().decode()} {err}", file=sys.stderr, flush=True)
        else:
            print(f"{msg.partition()} {msg.offset()} {msg.value().decode()}", flush=True)

    start = time.monotonic()
    for i in range(count):
        p.produce(topic, str(i).encode(), on_delivery=cb, partition=0)
        p.poll(0)
        delay = start + (i + 1) / per_second - time.monotonic()
        if delay > 0:
            p.poll(delay)
    left = p.flush(180)
    print(f"DONE {left}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
