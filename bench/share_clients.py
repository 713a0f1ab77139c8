"""A share-group member (KIP-932, librdkafka's share consumer: confluent_kafka.ShareConsumer)
in its own process, speaking the line protocol of bench/consumer_protocol_clients.py so the
benches and tests that drive those members drive this one the same way. The producer role
is consumer_protocol_clients.py's own.

    python bench/share_clients.py member BOOTSTRAP GROUP TOPIC NAME [KEY=VALUE ...]
    python bench/share_clients.py producer BOOTSTRAP TOPIC PARTITIONS RECORDS_PER_SECOND
    python bench/share_clients.py drain BOOTSTRAP GROUP TOPIC KIND NAME

drain (bench/share_bench.py's throughput member; KIND share, consumer or classic) subscribes
at once and counts records as fast as it can: a share member acknowledges implicitly (each
poll() accepts the previous one's records, carried on the next ShareFetch; commit_sync()
only at stop), a consumer-group member auto-commits. Every 0.2 s and at stop it prints
``N <t> <count> <first record's t> <last record's t>`` (0 before the first record); ``stop``
on stdin ends it.

member (share.acknowledgement.mode implicit unless KEY=VALUE says otherwise: every record a
poll() returned is accepted by the commit_sync() that follows) reads commands on stdin:

    go          subscribe to TOPIC (the ShareConsumer is created, and READY printed, before)
    hold S      the next poll() that returns records prints them, then S seconds pass before
                its commit_sync(): the records are acquired, printed and not acknowledged
                (``H <t>`` is printed when the hold starts: a test freezes the process then)
    busy S      the next loop iteration sleeps S seconds before polling
    stop        close the share consumer and exit

and prints, besides READY/S/B/C as consumer_protocol_clients.py does,

    R <t> <partition> <count> <first> <last> <delivery>   records of one poll() with contiguous
                                                          offsets and one delivery count
    H <t>                                                 the hold starts (records printed, not
                                                          acknowledged yet)
    K <t> <ok partitions> <failed partitions>             the commit_sync() of the records printed
                                                          since the previous K ("-": none)
"""

from __future__ import annotations

import queue
import sys
import threading
import time

from consumer_protocol_clients import _out, producer

mono = time.monotonic


def runs(offsets: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """(offset, delivery) pairs of one partition → (count, first, last, delivery) runs of
    contiguous offsets with the same delivery count, in offset order."""
    out: list[tuple[int, int, int, int]] = []
    for o, d in sorted(offsets):
        if out and out[-1][2] == o - 1 and out[-1][3] == d:
            n, first, _last, _d = out[-1]
            out[-1] = (n + 1, first, o, d)
        else:
            out.append((1, o, o, d))
    return out


def member(bootstrap: str, group: str, topic: str, name: str, extra: dict[str, str]) -> int:
    from confluent_kafka import ShareConsumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "share.acknowledgement.mode": "implicit", "log_level": 3, **extra}
    c = ShareConsumer(conf)
    cmds: queue.Queue[str] = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            cmds.put(line.strip())
        cmds.put("stop")  # stdin closed: the bench is gone

    threading.Thread(target=read_stdin, daemon=True).start()
    _out(f"READY {mono():.6f}")
    while (cmd := cmds.get()) != "go":
        if cmd == "stop":
            c.close()
            return 0
    _out(f"S {mono():.6f}")
    c.subscribe([topic])
    hold = busy = 0.0
    while True:
        try:
            cmd = cmds.get_nowait()
        except queue.Empty:
            cmd = ""
        if cmd == "stop":
            break
        if cmd.startswith("hold "):
            hold = float(cmd.split()[1])
        if cmd.startswith("busy "):
            busy = float(cmd.split()[1])
        if busy:
            t0 = mono()
            time.sleep(busy)
            _out(f"B {t0:.6f} {mono():.6f}")
            busy = 0.0
        msgs = c.poll(0.05)
        by_part: dict[int, list[tuple[int, int]]] = {}
        for m in msgs:
            if m.error() is None:
                by_part.setdefault(m.partition(), []).append((m.offset(), m.delivery_count()))
        if not by_part:
            continue
        t = mono()
        _out("\n".join(f"R {t:.6f} {p} {n} {first} {last} {d}"
                       for p, offs in by_part.items() for n, first, last, d in runs(offs)))
        if hold:
            _out(f"H {mono():.6f}")
            time.sleep(hold)
            hold = 0.0
        res = c.commit_sync()
        ok = sorted(tp.partition for tp, err in res.items() if err is None)
        bad = sorted(tp.partition for tp, err in res.items() if err is not None)
        _out(f"K {mono():.6f} {','.join(map(str, ok)) or '-'} {','.join(map(str, bad)) or '-'}")
    c.close()
    _out(f"C {mono():.6f}")
    return 0


def drain(bootstrap: str, group: str, topic: str, kind: str, name: str) -> int:
    from confluent_kafka import Consumer, ShareConsumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "log_level": 3}
    if kind == "share":
        c = ShareConsumer({**conf, "share.acknowledgement.mode": "implicit"})

        def fetch():
            return c.poll(0.1)
    else:
        c = Consumer({**conf, "group.protocol": kind, "auto.offset.reset": "earliest"})

        def fetch():
            return c.consume(1000, 0.1)
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()  # "stop", or stdin closed: the bench is gone

    threading.Thread(target=read_stdin, daemon=True).start()
    c.subscribe([topic])
    _out(f"READY {mono():.6f}")
    n, first, last, report = 0, 0.0, 0.0, mono()
    while not stop.is_set():
        got = 0
        for m in fetch():
            if m.error() is None:
                got += 1
        if got:
            last = mono()
            first = first or last
            n += got
        if mono() >= report:
            _out(f"N {mono():.6f} {n} {first:.6f} {last:.6f}")
            report += 0.2
    if kind == "share":
        c.commit_sync()
    c.close()
    _out(f"N {mono():.6f} {n} {first:.6f} {last:.6f}")
    return 0


def main() -> int:
    role, args = sys.argv[1], sys.argv[2:]
    if role == "member":
        return member(*args[:4], dict(a.split("=", 1) for a in args[4:]))
    if role == "producer":
        return producer(args[0], args[1], int(args[2]), float(args[3]))
    if role == "drain":
        return drain(*args[:5])
    raise SystemExit(f"unknown role {role!r}: member, producer or drain")


if __name__ == "__main__":
    sys.exit(main())
