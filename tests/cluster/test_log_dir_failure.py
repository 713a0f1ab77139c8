"""A log dir failing under a cluster (KIP-112), on a real file system that fills up: broker 3
has two log dirs, one a small tmpfs. When it fills, broker 3 tells the controller (a log dir
event notification in ZooKeeper), leadership of its partitions there moves to healthy ISR
members within seconds and it leaves their ISRs, an idempotent acks=all producer keeps
being acknowledged, and every other partition keeps replicating, broker 3's healthy dir
included. After space returns and broker 3 restarts, it rejoins every ISR, no
acknowledged record is lost or duplicated, and the replicas are byte for byte identical."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from tests.cluster.cluster_harness import Cluster, wait_for
from tests.cluster.test_replication import consume_all
from tests.disk_harness import Tmpfs

TOPIC = "disk"
PARTITIONS = 6
VALUE = 8 << 10


class _Producer:
    """An idempotent acks=all producer sending to every partition from a thread, paced,
    until stopped; records every acknowledgement and error."""

    def __init__(self, bootstrap: str, per_second: float) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                           "topic.metadata.refresh.interval.ms": 1000})
        self.per_second = per_second
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> _Producer:
        self._thread.start()
        return self

    def _cb(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.sent:08d}".encode() + b"x" * VALUE
            self.p.produce(TOPIC, value, partition=self.sent % PARTITIONS, on_delivery=self._cb)
            self.sent += 1
            delay = started + self.sent / self.per_second - time.monotonic()
            self.p.poll(max(delay, 0))

    def acked_since(self, n: int) -> int:
        return len(self.acked) - n

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        self._thread.join()
        assert self.p.flush(timeout) == 0, "records left undelivered"


def _logs(dirs: list[Path], partition: int) -> bytes:
    """A replica's records: its segments' bytes in order (segment boundaries may differ)."""
    files = [f for d in dirs for f in (d / f"{TOPIC}-{partition}").glob("*.log")]
    return b"".join(f.read_bytes() for f in sorted(files, key=lambda f: f.name))


def test_full_log_dir_moves_leadership_and_heals_after_restart(tmp_path, zk_connect):
    big, small = tmp_path / "b3" / "big", tmp_path / "b3" / "small"
    with Tmpfs(small, size_kb=2048) as disk:
        cl = Cluster(tmp_path, zk_connect, **{"min.insync.replicas": "2"})
        b3 = cl.brokers[3]
        b3.overrides["log.dirs"] = f"{big},{small}"
        with cl:
            cl.create_topic(TOPIC, partitions=PARTITIONS, rf=3)
            on_small = sorted(int(d.name.rsplit("-", 1)[1]) for d in small.iterdir() if d.name.startswith(TOPIC + "-"))
            on_big = sorted(set(range(PARTITIONS)) - set(on_small))
            assert on_small and on_big
            led_by_3 = [p for p in on_small if cl.leader(TOPIC, p) == 3]
            prod = _Producer(cl.bootstrap, per_second=300).start()
            try:
                # broker 3 writes its replicas in the small dir until the disk is full
                wait_for(lambda: "Stopping serving logs in dir" in b3.log_text(), 90, what="the small dir to fail")
                failed_at = time.monotonic()

                def moved() -> bool:
                    states = {p: cl.state(TOPIC, p) for p in range(PARTITIONS)}
                    return all(states[p]["leader"] in (1, 2) and 3 not in states[p]["isr"] for p in on_small) and \
                        all(sorted(states[p]["isr"]) == [1, 2, 3] for p in on_big)

                wait_for(moved, 15, what="leadership off broker 3's failed dir, its other ISRs kept")
                moved_in = time.monotonic() - failed_at
                # the producer goes on being acknowledged on every partition, and broker 3
                # still serves and replicates its healthy dir
                n = len(prod.acked)
                wait_for(lambda: {p for p, _, _ in prod.acked[n:]} == set(range(PARTITIONS)), 30,
                         what="acks on every partition after the failure")
                md = cl.metadata(3, [TOPIC]).topics[0].partitions
                assert {p.partition_index for p in md if 3 in p.offline_replicas} == set(on_small)
                assert b3.proc.poll() is None
                assert all(sorted(cl.state(TOPIC, p)["isr"]) == [1, 2, 3] for p in on_big)
            finally:
                prod.stop()
            assert not prod.errors, prod.errors[:3]
            print(f"leadership of {led_by_3} moved in {moved_in:.1f}s; {len(prod.acked)} records acknowledged")
            log3 = b3.log_text()
            assert "Traceback" not in log3
            # space comes back; a restart recovers the dir and the replicas catch up
            assert b3.stop() == 0
            disk.resize(64 << 10)
            b3.start()
            for p in range(PARTITIONS):
                cl.wait_isr(TOPIC, p, 3, timeout=60)
            got = consume_all(cl.bootstrap, TOPIC, len(prod.acked))
            values = sorted(v for _, _, v in got)
            assert values == sorted(v for _, _, v in prod.acked), "every acked record exactly once"
        # the brokers are stopped: every replica holds the same bytes
        for p in range(PARTITIONS):
            replicas = [_logs([tmp_path / "broker-1"], p), _logs([tmp_path / "broker-2"], p), _logs([big, small], p)]
            assert replicas[0] == replicas[1] == replicas[2], p


def test_broker_whose_only_log_dir_fills_shuts_down_and_heals(tmp_path, zk_connect):
    """Its last log dir gone, a broker cannot go on: it hands its leadership over
    (controlled shutdown) and exits with code 1, as Kafka halts. Space freed, it restarts,
    recovers and rejoins."""
    with Tmpfs(tmp_path / "broker-3", size_kb=2048) as disk:
        with Cluster(tmp_path, zk_connect, **{"min.insync.replicas": "2"}) as cl:
            b3 = cl.brokers[3]
            cl.create_topic(TOPIC, partitions=PARTITIONS, rf=3)
            prod = _Producer(cl.bootstrap, per_second=300).start()
            try:
                assert wait_for(lambda: b3.proc.poll(), 90, what="broker 3 to exit") == 1
                log3 = b3.log_text()
                assert f"Shutdown broker because all log dirs in {disk.path} have failed" in log3
                assert "controlled shutdown" in log3 and "Traceback" not in log3
                wait_for(lambda: all(cl.state(TOPIC, p)["leader"] in (1, 2) and 3 not in cl.state(TOPIC, p)["isr"]
                                     for p in range(PARTITIONS)), 15, what="leadership off broker 3")
                n = len(prod.acked)
                wait_for(lambda: {p for p, _, _ in prod.acked[n:]} == set(range(PARTITIONS)), 30,
                         what="acks on every partition after broker 3 left")
            finally:
                prod.stop()
            assert not prod.errors, prod.errors[:3]
            disk.resize(64 << 10)
            b3.start()
            for p in range(PARTITIONS):
                cl.wait_isr(TOPIC, p, 3, timeout=60)
            got = consume_all(cl.bootstrap, TOPIC, len(prod.acked))
            assert sorted(v for _, _, v in got) == sorted(v for _, _, v in prod.acked)
