"""A Krait cluster for tests: N real brokers as subprocesses on one real ZooKeeper (its own
chroot), with the timeouts lowered as Kafka's own integration tests lower them, and
helpers to read the cluster's state the way an operator would (Metadata, ZooKeeper)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from kazoo.client import KazooClient

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.krait_harness import BrokerProcess

#: lowered from Kafka's defaults so that failures are detected within seconds
FAST = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "6000",
    "replica.fetch.backoff.ms": "200",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


def wait_for(cond, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as exc:  # a broker restarting refuses connections for a moment
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not met in {timeout}s (last: {last!r})")


class Cluster:
    def __init__(self, tmp_path: Path, zk_connect: str, n: int = 3, **overrides: str) -> None:
        self.zk_connect = zk_connect
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            self.brokers[i] = BrokerProcess(str(tmp_path / f"broker-{i}"), {
                "zookeeper.connect": zk_connect, "node.id": str(i), **FAST, **overrides})
        self._zk: KazooClient | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.start()
        wait_for(lambda: len(self.live_ids()) == len(self.brokers), what="all brokers registered")
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            try:
                b.stop()
            except Exception:
                b.kill()
        self.close_zk()

    def close_zk(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc and b.proc.poll() is None)

    def freeze(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].proc.pid, signal.SIGSTOP)

    def thaw(self, broker_id: int) -> None:
        os.kill(self.brokers[broker_id].proc.pid, signal.SIGCONT)

    # --- ZooKeeper's view ---------------------------------------------------------------------
    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            self._zk = KazooClient(hosts=self.zk_connect)
            self._zk.start(10)
        return self._zk

    def live_ids(self) -> list[int]:
        try:
            return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))
        except Exception:
            return []

    def state(self, topic: str, partition: int) -> dict:
        return json.loads(self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])

    def assignment(self, topic: str) -> dict[int, list[int]]:
        doc = json.loads(self.zk.get(f"/brokers/topics/{topic}")[0])
        return {int(p): r for p, r in doc["partitions"].items()}

    def leader(self, topic: str, partition: int) -> int:
        return self.state(topic, partition)["leader"]

    def wait_isr(self, topic: str, partition: int, size: int, timeout: float = 30.0) -> dict:
        return wait_for(lambda: (s := self.state(topic, partition)) and len(s["isr"]) == size and s["leader"] >= 0
                        and s, timeout, what=f"{topic}-{partition} ISR of {size}")

    # --- clients --------------------------------------------------------------------------------
    def metadata(self, broker_id: int, topics: list[str] | None = None):
        b = self.brokers[broker_id]
        with WireClient("127.0.0.1", b.port) as c:
            return c.request(ApiKey.METADATA, topics=None if topics is None else [dict(name=t) for t in topics])

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: dict[str, str] | None = None,
                     via: int = 1) -> None:
        b = self.brokers[via]
        with WireClient("127.0.0.1", b.port) as c:
            r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(
                name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
                configs=[dict(name=k, value=v) for k, v in (configs or {}).items()])], timeout=30000,
                validate_only=False)
        assert r.topics[0].error_code == 0, r.topics[0].error_message
        for p in range(partitions):
            self.wait_isr(name, p, rf)
