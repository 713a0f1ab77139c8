"""A share-group member on librdkafka's share consumer (confluent_kafka.ShareConsumer), the
same contract as ShareWorker.java: arguments ``bootstrap group topic mode idleExitMs
[earliest]``; prints READY, then after each poll's commit_sync one JSON line per record
{"p", "o", "v", "d", "a", "ok"}; in explicit mode "rel:" values are released, "rej:"
rejected, "relN:" released until delivery N; exits once idleExitMs pass without a record
(10 s more before the first)."""

import json
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer


def ack_for(value: str, delivery: int) -> str:
    if value.startswith("rel:"):
        return "RELEASE"
    if value.startswith("rej:"):
        return "REJECT"
    if value.startswith("rel") and value.find(":") > 3:
        return "RELEASE" if delivery < int(value[3:value.find(":")]) else "ACCEPT"
    return "ACCEPT"


def main() -> None:
    bootstrap, group, topic, mode, idle_exit = sys.argv[1:6]
    earliest = len(sys.argv) > 6 and sys.argv[6] == "earliest"
    if earliest:
        # librdkafka's ConfigResource has no GROUP type (its GROUP is the ACL resource's 3,
        # not the config resource's 32): Krait's admin client sets the group config
        from broker.tools.admin_client import RESOURCE_GROUP, AdminClient

        with AdminClient(bootstrap) as admin:
            admin.incremental_alter_configs(RESOURCE_GROUP, group, {"share.auto.offset.reset": "earliest"})
    explicit = mode == "explicit"
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": mode, "log_level": 3})
    c.subscribe([topic])
    print("READY", flush=True)
    last, got = time.monotonic(), False
    limit = int(idle_exit) / 1000
    while True:
        batch = [m for m in c.poll(0.2) if m.error() is None]
        lines = []
        for m in batch:
            value = (m.value() or b"").decode()
            delivery = m.delivery_count() if hasattr(m, "delivery_count") else -1
            ack = ack_for(value, delivery) if explicit else "ACCEPT"
            if explicit:
                c.acknowledge(m, getattr(AcknowledgeType, ack))
            lines.append(dict(p=m.partition(), o=m.offset(), v=value, d=delivery, a=ack))
        if batch:
            ok = {tp.partition: err is None for tp, err in c.commit_sync().items()}
            for line in lines:
                line["ok"] = ok.get(line["p"], False)
                print(json.dumps(line), flush=True)
            last, got = time.monotonic(), True
        elif limit > 0 and time.monotonic() - last > (limit if got else limit + 10):
            break
    c.close()


if __name__ == "__main__":
    main()
