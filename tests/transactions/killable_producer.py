"""A transactional producer run as its own process, so that a test can SIGKILL it inside an
open transaction (no EndTxn, no clean close).

    python killable_producer.py BOOTSTRAP TXN_ID TIMEOUT_MS TOPIC N

Begins a transaction, writes N records (``killed-0`` ...) to partition 0 of TOPIC, waits
for their acks, prints one JSON line {"produced": N} and then sleeps until killed.
"""

import json
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, txn_id, timeout_ms, topic, n = sys.argv[1:6]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": int(timeout_ms), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(int(n)):
        p.produce(topic, f"killed-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    print(json.dumps({"produced": int(n)}), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
