"""Consumer groups with real clients against a real broker: assignment, rebalances on
join/leave/kill, resumption from committed offsets, restarts."""

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

WORKER = Path(__file__).with_name("consumer_worker.py")


class Worker:
    def __init__(self, bootstrap, group, topic, strategy, name):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, str(WORKER), bootstrap, group, topic, strategy, name],
                                     stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        self.assigned: list[int] = []
        self.msgs: list[tuple[int, int, str]] = []
        #: the close steps the worker reported ("closing", "closed")
        self.steps: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            ev = json.loads(line)
            with self.lock:
                if "assigned" in ev:
                    self.assigned = ev["assigned"]
                elif "msg" in ev:
                    self.msgs.append(tuple(ev["msg"]))
                else:
                    self.steps.extend(ev)

    def close(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            # where it hangs: its threads' stacks go to the test's captured stderr
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            self.proc.kill()
            raise AssertionError(f"{self.name} did not stop within 30 s of SIGINT; close steps seen: "
                                 f"{self.steps}") from None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _exact_cover(workers, partitions):
    got = sorted(p for w in workers for p in w.assigned)
    return got == list(range(partitions))


def _produce(bootstrap, topic, values, partitions):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(20) == 0


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_group_rebalances_join_leave_kill(broker, strategy):
    topic = f"grp-{strategy}-{uuid.uuid4().hex[:6]}"
    group = "g-" + topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(10)
    workers = [Worker(broker.bootstrap, group, topic, strategy, f"c{i}") for i in range(3)]
    try:
        _wait(lambda: _exact_cover(workers, 6) and all(w.assigned for w in workers), 60, "3 members to share 6 partitions")
        produced = [f"a{i}" for i in range(60)]
        _produce(broker.bootstrap, topic, produced, 6)
        consumed = lambda: {m[2] for w in workers for m in w.msgs}  # noqa: E731
        _wait(lambda: set(produced) <= consumed(), 30, "phase 1 records")

        workers.append(Worker(broker.bootstrap, group, topic, strategy, "c3"))
        _wait(lambda: _exact_cover(workers, 6) and all(w.assigned for w in workers), 60, "4th member to get partitions")

        leaving = workers.pop(0)
        leaving.close()
        _wait(lambda: _exact_cover(workers, 6), 60, "rebalance after a member left")

        killed = workers.pop(0)
        killed.kill()
        more = [f"b{i}" for i in range(60)]
        _produce(broker.bootstrap, topic, more, 6)
        # the killed member's partitions move once its session (6 s) expires
        _wait(lambda: _exact_cover(workers, 6), 60, "rebalance after a member was killed")
        everything = set(produced) | set(more)
        all_msgs = lambda: {m[2] for w in workers + [leaving, killed] for m in w.msgs}  # noqa: E731
        _wait(lambda: everything <= all_msgs(), 60, "all records after rebalances")
        # committed offsets: every partition resumes exactly where the last commit left it,
        # so no record was skipped; offsets within a partition never go backwards past a commit
        for w in workers:
            per_part = {}
            for p, off, _ in w.msgs:
                per_part.setdefault(p, []).append(off)
            for offs in per_part.values():
                assert offs == sorted(offs)
    finally:
        for w in workers:
            w.kill()


def test_committed_offsets_survive_restart(fresh_broker):
    bs = fresh_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("resume", 1, 1)])["resume"].result(10)
    _produce(bs, "resume", [f"v{i}" for i in range(50)], 1)

    def consume(n):
        c = Consumer({"bootstrap.servers": bs, "group.id": "resumers", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["resume"])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value().decode())
                c.commit(message=m, asynchronous=False)
        c.close()
        return out

    assert consume(20) == [f"v{i}" for i in range(20)]
    fresh_broker.restart(hard=False)
    assert consume(10) == [f"v{i}" for i in range(20, 30)]
    fresh_broker.restart(hard=True)
    assert consume(20) == [f"v{i}" for i in range(30, 50)]
    c = Consumer({"bootstrap.servers": bs, "group.id": "resumers"})
    committed = c.committed([TopicPartition("resume", 0)], timeout=10)
    c.close()
    assert committed[0].offset == 50


def test_kafka_python_group(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    topic = f"kpg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(10)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(40):
        prod.send(topic, value=b"%d" % i, partition=i % 4)
    prod.flush(10)
    prod.close()
    consumers = [KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="kpg-" + topic,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               consumer_timeout_ms=1000) for _ in range(2)]

    def assignments() -> list[list[int]]:
        return [sorted(tp.partition for tp in c.assignment()) for c in consumers]

    def settled() -> bool:
        # Both members hold partitions and no two hold the same one: while a member is
        # still rejoining, kafka-python reports its previous assignment.
        a = assignments()
        return all(a) and sorted(sum(a, [])) == [0, 1, 2, 3]

    def all_committed() -> bool:
        return all(c.committed(tp) == 10 for c in consumers for tp in c.assignment())

    seen = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(seen) < 40 or not settled() or not all_committed()):
        for c in consumers:
            for recs in c.poll(timeout_ms=200).values():
                seen.update(int(r.value) for r in recs)
            try:
                c.commit()
            except (CommitFailedError, RebalanceInProgressError):
                # Kafka answers a commit during a rebalance so; the next poll() rejoins
                pass
    assert settled(), assignments()
    assert all_committed()
    assert seen == set(range(40))
    for c in consumers:
        c.close()
    # a new member of the same group finds everything committed
    c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="kpg-" + topic,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    assert [r for r in c] == []
    c.close()


def test_aiokafka_group(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aiog-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)

    async def run():
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await prod.start()
        for i in range(20):
            await prod.send_and_wait(topic, b"%d" % i, partition=i % 2)
        await prod.stop()
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="g-" + topic,
                                      auto_offset_reset="earliest", enable_auto_commit=False) for _ in range(2)]
        for c in consumers:
            await c.start()
        seen = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(seen) < 20 or not all(c.assignment() for c in consumers)):
            for c in consumers:
                batch = await c.getmany(timeout_ms=200)
                for recs in batch.values():
                    seen.update(int(r.value) for r in recs)
                if batch:
                    await c.commit()
        parts = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        for c in consumers:
            await c.stop()
        return seen, parts

    seen, parts = asyncio.run(run())
    assert seen == set(range(20))
    assert sorted(sum(parts, [])) == [0, 1] and all(parts)
