"""A consumer-group member run as its own process, so tests can SIGKILL it (no LeaveGroup).

Prints JSON lines: {"assigned": [...]} on every assignment change,
{"msg": [partition, offset, value]} per record (after committing it synchronously), and
{"closing": true} / {"closed": true} around close().
"""

import faulthandler
import json
import signal
import sys

from confluent_kafka import Consumer


def main() -> None:
    # SIGUSR1 prints every thread's stack (the test asks for it when the worker does not stop)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # SIGINT must raise KeyboardInterrupt even when this process was started with SIGINT
    # ignored: Python keeps an inherited SIG_IGN and then installs no handler, and the
    # parallel suite's worker processes run with SIGINT ignored, so a stop request was lost
    # and the member kept polling (seen in CI: still in poll() 60 s after SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bootstrap, group, topic, strategy, name = sys.argv[1:6]
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500, "max.poll.interval.ms": 60000,
    })
    assigned: set[int] = set()

    def report() -> None:
        print(json.dumps({"assigned": sorted(assigned)}), flush=True)

    def on_assign(consumer, parts):
        if strategy == "cooperative-sticky":
            assigned.update(p.partition for p in parts)
        else:
            assigned.clear()
            assigned.update(p.partition for p in parts)
        report()

    def on_revoke(consumer, parts):
        if strategy == "cooperative-sticky":
            assigned.difference_update(p.partition for p in parts)
        else:
            assigned.clear()
        report()

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                if sys.stdin.closed:
                    break
                continue
            c.commit(message=m, asynchronous=False)
            print(json.dumps({"msg": [m.partition(), m.offset(), m.value().decode()]}), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        print(json.dumps({"closing": True}), flush=True)
        c.close()  # sends LeaveGroup
        print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    main()
