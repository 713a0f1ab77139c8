"""A log dir that fails (KIP-112) on a single broker, on a real file system that fills up (a
small tmpfs): the whole dir goes offline, its partitions answer KAFKA_STORAGE_ERROR while
the other dir keeps serving; with its only dir gone the broker shuts down (exit code 1);
after space returns a restart recovers every acknowledged record, and nothing after them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.client_errors import ClientError
from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.broker.test_log_dirs import _consume
from tests.broker.test_metrics_http import scrape, value
from tests.disk_harness import Tmpfs
from tests.krait_harness import BrokerProcess, free_port

RECORD = 16 << 10


def _create(c: WireClient, topic: str, partitions: int) -> None:
    r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(name=topic, num_partitions=partitions, replication_factor=1,
                                                       assignments=[], configs=[])], timeout_ms=10000)
    assert r.topics[0].error_code == 0, r


def _produce(c: WireClient, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    """(error code, base offset) of one acks=all record."""
    r = c.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        dict(name=topic, partition_data=[dict(index=partition, records=build_batch([(None, value)]))])])
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _fetch_error(c: WireClient, topic: str, partition: int) -> int:
    r = c.request(ApiKey.FETCH, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[dict(topic=topic, partitions=[dict(
                      partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                      log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    return r.responses[0].partitions[0].error_code


def _end_offset(c: WireClient, topic: str, partition: int) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 4, replica_id=-1, isolation_level=0, topics=[dict(name=topic, partitions=[
        dict(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def _fill(c: WireClient, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """Produce to the partition until its disk is full; the acknowledged (offset, value)s."""
    acked = []
    for i in range(10_000):
        value = f"{i:08d}".encode() + b"x" * RECORD
        code, base = _produce(c, topic, partition, value)
        if code == ErrorCode.kafka_storage_error:
            return acked
        assert code == 0, ErrorCode(code)
        acked.append((base, value))
    raise AssertionError("the log dir never filled up")


def _check_recovered(bp: BrokerProcess, topic: str, acked: dict[int, list]) -> None:
    with WireClient("127.0.0.1", bp.port) as c:
        for p, records in acked.items():
            # the append that hit the full disk left nothing behind: the log ends after the last ack
            assert _end_offset(c, topic, p) == len(records), p
    for p, records in acked.items():
        assert _consume(bp.bootstrap, topic, len(records), partition=p) == records, p


def test_full_log_dir_goes_offline_while_the_other_keeps_serving(tmp_path):
    big = tmp_path / "big"
    with Tmpfs(tmp_path / "small", size_kb=2048) as small:
        http = free_port()
        bp = BrokerProcess(str(big), overrides={"log.dirs": f"{big},{small.path}",
                                                "krait.http.listener": f"127.0.0.1:{http}"})
        try:
            bp.start()
            topic = f"full-{uuid.uuid4().hex[:8]}"
            with WireClient("127.0.0.1", bp.port) as c:
                _create(c, topic, 4)
                on_small = sorted(int(n.rsplit("-", 1)[1]) for n in _partition_dirs(small.path, topic))
                on_big = sorted(set(range(4)) - set(on_small))
                assert on_small and on_big
                acked = {p: [] for p in range(4)}
                for p in on_big:
                    acked[p].append((0, b"before"))
                    assert _produce(c, topic, p, b"before") == (0, 0)
                started = time.monotonic()
                acked[on_small[0]] = _fill(c, topic, on_small[0])
                assert acked[on_small[0]], "nothing was acknowledged before the disk filled"
                # the whole dir is offline, not only the partition that hit the error
                for p in on_small:
                    assert _produce(c, topic, p, b"late")[0] == ErrorCode.kafka_storage_error
                    assert _fetch_error(c, topic, p) == ErrorCode.kafka_storage_error
                for p in on_big:
                    code, base = _produce(c, topic, p, b"after")
                    assert (code, base) == (0, 1)
                    acked[p].append((1, b"after"))
                    assert _fetch_error(c, topic, p) == 0
                dirs = {r.log_dir: r for r in c.request(ApiKey.DESCRIBE_LOG_DIRS, topics=None).results}
                assert dirs[str(small.path)].error_code == ErrorCode.kafka_storage_error
                assert not dirs[str(small.path)].topics
                assert dirs[str(big)].error_code == 0
                assert {p.partition_index for t in dirs[str(big)].topics for p in t.partitions} == set(on_big)
                md = c.request(ApiKey.METADATA, topics=[dict(name=topic)])
                for p in md.topics[0].partitions:
                    if p.partition_index in on_small:
                        assert (p.error_code, p.leader_id, list(p.offline_replicas)) == (
                            ErrorCode.leader_not_available, -1, [1])
                    else:
                        assert (p.error_code, p.leader_id, list(p.offline_replicas)) == (0, 1, [])
            print(f"filled and went offline in {time.monotonic() - started:.1f}s")
            metrics = scrape(http)
            assert value(metrics, "kafka_log_logmanager_offlinelogdirectorycount") == 1
            assert value(metrics, "kafka_server_replicamanager_offlinereplicacount") == len(on_small)
            assert bp.proc.poll() is None
            log = bp.log_path.read_text()
            assert "Traceback" not in log
            assert f"Stopping serving logs in dir {small.path}" in log
            assert bp.stop() == 0
            small.resize(16 << 10)
            bp.start()
            _check_recovered(bp, topic, acked)
        finally:
            bp.kill()


def test_broker_shuts_down_when_its_only_log_dir_fills_up(tmp_path):
    with Tmpfs(tmp_path / "only", size_kb=2048) as disk:
        bp = BrokerProcess(str(disk.path))
        try:
            bp.start()
            topic = f"only-{uuid.uuid4().hex[:8]}"
            with WireClient("127.0.0.1", bp.port) as c:
                _create(c, topic, 1)
                acked: list = []
                try:
                    acked = _fill(c, topic, 0)
                except ClientError:
                    pass  # the broker may close the connection as it goes down
            assert bp.proc.wait(30) == 1
            log = bp.log_path.read_text()
            assert f"Shutdown broker because all log dirs in {disk.path} have failed" in log
            assert "Traceback" not in log
            disk.resize(16 << 10)
            bp.start()
            if not acked:  # the answers were lost with the connection: count what is there
                with WireClient("127.0.0.1", bp.port) as c:
                    assert _end_offset(c, topic, 0) > 0
            else:
                _check_recovered(bp, topic, {0: acked})
        finally:
            bp.kill()


def _partition_dirs(log_dir: Path, topic: str) -> list[str]:
    return [n for n in (p.name for p in Path(log_dir).iterdir()) if n.startswith(topic + "-")]


def test_a_log_dir_that_cannot_be_opened_is_offline_from_the_start(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file where the log dir should be")
    bp = BrokerProcess(str(good), overrides={"log.dirs": f"{good},{bad}"})
    try:
        bp.start()
        topic = f"start-{uuid.uuid4().hex[:8]}"
        with WireClient("127.0.0.1", bp.port) as c:
            _create(c, topic, 2)
            assert [_produce(c, topic, p, b"v")[0] for p in (0, 1)] == [0, 0]
            dirs = {r.log_dir: r.error_code for r in c.request(ApiKey.DESCRIBE_LOG_DIRS, topics=None).results}
            assert dirs == {str(good): 0, str(bad): ErrorCode.kafka_storage_error}
        assert "Failed to create or validate data directory" in bp.log_text()
    finally:
        bp.kill()
    # with no usable log dir the broker does not start
    bp = BrokerProcess(str(bad), overrides={"log.dirs": str(bad)})
    with pytest.raises(RuntimeError, match="(?s)broker exited with 1:.*cannot start"):
        bp.start()
