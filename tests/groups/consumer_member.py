"""One consumer-group member (confluent-kafka) run as its own process, so that tests can
SIGKILL or SIGSTOP it. Usage::

    consumer_member.py BOOTSTRAP GROUP NAME PROTOCOL (--topics a,b | --regex '^re-.*') [options]

PROTOCOL is ``consumer`` (KIP-848) or ``classic``. It prints one JSON line per event, each
with ``t``, the time.monotonic() of the event (one clock for every process of the machine):

* ``{"ev": "assigned", "parts": [[topic, partition], ...]}`` whenever its assignment changed;
* ``{"ev": "recs", "recs": [[topic, partition, offset, value], ...], "committed": bool}`` for
  each batch it consumed, after committing the batch synchronously (``committed`` says
  whether that commit succeeded: a record printed with ``committed: true`` must never be
  delivered again to any member);
* ``{"ev": "error", "error": str}`` for consumer errors;
* ``{"ev": "ready"}`` with ``--wait-stdin``, when it waits for a line before subscribing (so
  that a test can make it join at a moment of its choosing, without its start-up time).

SIGTERM closes the consumer (it leaves the group) and exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(ev: str, **fields) -> None:
    print(json.dumps({"t": time.monotonic(), "ev": ev, **fields}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("name")
    ap.add_argument("protocol", choices=("consumer", "classic"))
    ap.add_argument("--topics")
    ap.add_argument("--regex")
    ap.add_argument("--session-ms", type=int, default=6000, help="classic only")
    ap.add_argument("--max-poll-ms", type=int, default=60000)
    ap.add_argument("--strategy", default="range", help="classic only")
    ap.add_argument("--wait-stdin", action="store_true",
                    help="print a 'ready' event and subscribe only once a line arrives on standard input")
    args = ap.parse_args()

    conf = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
        "group.protocol": args.protocol, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "max.poll.interval.ms": args.max_poll_ms, "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 100, "reconnect.backoff.max.ms": 1000,
    }
    if args.protocol == "classic":
        conf.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": args.strategy})
    c = Consumer(conf)
    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    if args.wait_stdin:
        emit("ready")
        sys.stdin.readline()
    c.subscribe([args.regex] if args.regex else args.topics.split(","))
    last: list | None = None
    try:
        while not stop:
            msgs = c.consume(num_messages=500, timeout=0.1)
            try:
                now = sorted([tp.topic, tp.partition] for tp in c.assignment())
            except KafkaException:
                now = last
            if now != last:
                emit("assigned", parts=now)
                last = now
            recs, nxt = [], {}
            for m in msgs:
                if m.error():
                    emit("error", error=str(m.error()))
                    continue
                recs.append([m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()])
                nxt[(m.topic(), m.partition())] = m.offset() + 1
            if not recs:
                continue
            try:
                c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nxt.items()], asynchronous=False)
                ok = True
            except KafkaException as exc:
                ok = False
                emit("error", error=f"commit: {exc}")
            emit("recs", recs=recs, committed=ok)
    finally:
        c.close()
        emit("closed")


if __name__ == "__main__":
    sys.exit(main())
