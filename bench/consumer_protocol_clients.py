"""The processes of bench/consumer_protocol_bench.py: a group member and a steady producer,
each in its own process (as applications are), printing timestamped lines on stdout. Times
are time.monotonic() (CLOCK_MONOTONIC, comparable across processes).

    python bench/consumer_protocol_clients.py member BOOTSTRAP GROUP TOPIC PROTOCOL NAME [KEY=VALUE ...]
    python bench/consumer_protocol_clients.py producer BOOTSTRAP TOPIC PARTITIONS RECORDS_PER_SECOND

member (confluent-kafka Consumer, group.protocol=PROTOCOL, KEY=VALUE: more librdkafka
properties) reads commands on stdin, one a line:

    go          subscribe to TOPIC (the Consumer is created, and READY printed, before)
    busy S      the poll loop's next iteration takes S seconds (a slow record handler: the
                application does not poll meanwhile, librdkafka's threads run on)
    stop        close the consumer (LeaveGroup) and exit

and prints

    READY <t>                                     Consumer created, waiting for go
    S <t>                                         subscribe() called
    A <t> <p,p,...>                               partitions assigned (incrementally under
                                                  cooperative protocols; the whole set under eager ones)
    V <t> <p,p,...>                               partitions revoked (L: lost)
    B <t0> <t1>                                   a busy period
    R <t> <partition> <count> <first> <last>      one consume() call's records of one partition
    C <t>                                         closed

producer sends 100 B records round-robin over the partitions at a fixed rate until SIGTERM
(acks=all, linger.ms 5), printing ``T <t> <acknowledged>`` twice a second and, at exit,
``P <t> <acked> <errors> <p>:<acked>,...``.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, Producer

mono = time.monotonic


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def member(bootstrap: str, group: str, topic: str, protocol: str, name: str, extra: dict[str, str]) -> int:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": protocol,
            "auto.offset.reset": "earliest", **extra}
    c = Consumer(conf)
    cmds: queue.Queue[str] = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            cmds.put(line.strip())
        cmds.put("stop")  # stdin closed: the bench is gone

    threading.Thread(target=read_stdin, daemon=True).start()
    _out(f"READY {mono():.6f}")

    def parts(ps) -> str:
        return ",".join(str(p.partition) for p in ps) or "-"

    def on_assign(_c, ps):
        _out(f"A {mono():.6f} {parts(ps)}")

    def on_revoke(_c, ps):
        _out(f"V {mono():.6f} {parts(ps)}")

    def on_lost(_c, ps):
        _out(f"L {mono():.6f} {parts(ps)}")

    while (cmd := cmds.get()) != "go":
        if cmd == "stop":
            c.close()
            return 0
    _out(f"S {mono():.6f}")
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    busy = 0.0
    while True:
        try:
            cmd = cmds.get_nowait()
        except queue.Empty:
            cmd = ""
        if cmd == "stop":
            break
        if cmd.startswith("busy "):
            busy = float(cmd.split()[1])
        if busy:  # the slow handler of a record: no poll meanwhile
            t0 = mono()
            time.sleep(busy)
            _out(f"B {t0:.6f} {mono():.6f}")
            busy = 0.0
        msgs = c.consume(1000, 0.05)
        if not msgs:
            continue
        t = mono()
        by_part: dict[int, list[int]] = {}
        for m in msgs:
            if m.error() is None:
                by_part.setdefault(m.partition(), []).append(m.offset())
        lines = [f"R {t:.6f} {p} {len(offs)} {offs[0]} {offs[-1]}" for p, offs in by_part.items()]
        if lines:
            _out("\n".join(lines))
    c.close()
    _out(f"C {mono():.6f}")
    return 0


def producer(bootstrap: str, topic: str, partitions: int, rate: float) -> int:
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})
    acked = [0] * partitions
    errors = [0]

    def cb(err, msg):
        if err is None:
            acked[msg.partition()] += 1
        else:
            errors[0] += 1

    payload = b"x" * 100
    start = mono()
    next_report = start
    sent = 0
    while not stop:
        due = int((mono() - start) * rate)
        while sent < due:
            try:
                p.produce(topic, payload, partition=sent % partitions, on_delivery=cb)
            except BufferError:
                break
            sent += 1
        p.poll(0.01)
        if mono() >= next_report:
            _out(f"T {mono():.6f} {sum(acked)}")
            next_report += 0.5
    p.flush(30)
    _out(f"P {mono():.6f} {sum(acked)} {errors[0]} " + ",".join(f"{i}:{n}" for i, n in enumerate(acked)))
    return 0


def main() -> int:
    role, args = sys.argv[1], sys.argv[2:]
    if role == "member":
        return member(*args[:5], dict(a.split("=", 1) for a in args[5:]))
    if role == "producer":
        return producer(args[0], args[1], int(args[2]), float(args[3]))
    raise SystemExit(f"unknown role {role!r}: member or producer")


if __name__ == "__main__":
    sys.exit(main())
