"""Cluster mode, first step: brokers with zookeeper.connect register in ZooKeeper and
elect one controller, in Kafka's ZooKeeper layout; a real ZooKeeper and real brokers as
subprocesses, ZooKeeper read back with kazoo as an operator's zookeeper-shell would."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.krait_harness import BrokerProcess


def _broker(tmp_path, zk_connect: str, node_id: int, **extra: str) -> BrokerProcess:
    return BrokerProcess(str(tmp_path / f"b{node_id}"), {
        "zookeeper.connect": zk_connect, "node.id": str(node_id), "zookeeper.session.timeout.ms": "6000", **extra})


@pytest.fixture
def zk(zookeeper, zk_connect):
    root = KazooClient(hosts=zookeeper.connect)
    root.start(10)
    root.ensure_path(zk_connect.partition("/")[2] and "/" + zk_connect.partition("/")[2])
    root.stop()
    root.close()
    client = KazooClient(hosts=zk_connect)
    client.start(10)
    yield client
    client.stop()
    client.close()


def _wait(cond, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_brokers_register_and_elect_one_controller(tmp_path, zk_connect, zk):
    b1 = _broker(tmp_path, zk_connect, 1).start()
    b2 = _broker(tmp_path, zk_connect, 2).start()
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        reg = json.loads(zk.get("/brokers/ids/2")[0])
        assert reg["version"] == 5 and reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b2.port}"]
        assert (reg["host"], reg["port"]) == ("127.0.0.1", b2.port)
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert zk.get("/brokers/ids/2")[1].ephemeralOwner != 0
        controller = json.loads(zk.get("/controller")[0])
        assert controller["version"] == 2 and controller["brokerid"] == 1  # the first to start
        assert zk.get("/controller_epoch")[0] == b"1"
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        for b in (b1, b2):
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            meta = admin.describe_cluster().result(10)
            assert meta.cluster_id == cluster_id and meta.controller.id == 1
        for path in ("/brokers/topics", "/config/topics", "/admin/delete_topics"):
            assert zk.exists(path)
    finally:
        b2.stop()
        b1.stop()
    # a clean stop closes the session: the registrations and the controller go at once
    assert zk.get_children("/brokers/ids") == [] and not zk.exists("/controller")


def test_controller_fails_over_with_a_higher_epoch(tmp_path, zk_connect, zk):
    b1 = _broker(tmp_path, zk_connect, 1).start()
    b2 = _broker(tmp_path, zk_connect, 2).start()
    try:
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 1
        b1.kill()  # SIGKILL: the session ends only when ZooKeeper times it out
        _wait(lambda: zk.exists("/controller") and json.loads(zk.get("/controller")[0])["brokerid"] == 2, 40)
        assert zk.get("/controller_epoch")[0] == b"2"
        assert zk.get_children("/brokers/ids") == ["2"]
        admin = AdminClient({"bootstrap.servers": b2.bootstrap})
        _wait(lambda: admin.describe_cluster().result(10).controller.id == 2)
        b1.start()  # rejoins as a plain broker: the controller stays
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 2 and zk.get("/controller_epoch")[0] == b"2"
    finally:
        b1.stop()
        b2.stop()


def test_duplicate_broker_id_refuses_to_start(tmp_path, zk_connect):
    b1 = _broker(tmp_path, zk_connect, 1).start()
    try:
        dup = _broker(tmp_path, zk_connect, 1, **{"log.dirs": str(tmp_path / "dup")})
        dup.log_dir = str(tmp_path / "dup")
        with pytest.raises(RuntimeError, match="broker.id 1 is taken"):
            dup.start()
    finally:
        b1.stop()


def test_wrong_cluster_is_refused(tmp_path, zookeeper, zk_connect):
    b = _broker(tmp_path, zk_connect, 1).start()
    b.stop()
    # the same log dir pointed at another cluster (another chroot: a fresh cluster id)
    other = BrokerProcess(b.log_dir, {"zookeeper.connect": f"{zookeeper.connect}/elsewhere-{time.time_ns()}",
                                      "node.id": "1"})
    with pytest.raises(RuntimeError, match="doesn't match stored clusterId"):
        other.start()


def test_unreachable_zookeeper_stops_start_up_with_a_clear_message(tmp_path):
    from tests.krait_harness import free_port

    b = BrokerProcess(str(tmp_path / "b"), {"zookeeper.connect": f"127.0.0.1:{free_port()}",
                                            "zookeeper.connection.timeout.ms": "2000"})
    with pytest.raises(RuntimeError, match="ZooKeeper"):
        b.start()


def test_zookeeper_restart_brokers_reconnect_and_keep_serving(tmp_path):
    """ZooKeeper down for longer than the session timeout, then back on its data: the
    broker resumes its session (ZooKeeper restarts session timers) or, if it reconnected
    too late, registers again; it ends up registered and the controller, and clients are
    served meanwhile."""
    from confluent_kafka import Producer

    from tests.cluster.zk_harness import ZooKeeperProcess

    zkp = ZooKeeperProcess().start()
    b = _broker(tmp_path, zkp.connect, 1).start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("during-zk-outage", b"v")  # auto-created while ZooKeeper is up
        assert p.flush(15) == 0
        zkp.stop(keep_data=True)
        p.produce("during-zk-outage", b"v")
        assert p.flush(15) == 0  # the data path does not need ZooKeeper
        time.sleep(8)  # past zookeeper.session.timeout.ms (6 s)
        zkp.start()
        client = KazooClient(hosts=zkp.connect)
        client.start(10)
        try:
            _wait(lambda: client.exists("/brokers/ids/1") and client.exists("/controller"), 40)
            # Past the session timeout a dead session's nodes are gone. Depending on how soon
            # kazoo's backoff reconnects, the old session resumed or expired (then the broker
            # registers again): either way the broker must end up registered and elected.
            time.sleep(8)
            _wait(lambda: client.exists("/brokers/ids/1") and client.exists("/controller"), 40)
            assert json.loads(client.get("/controller")[0])["brokerid"] == 1
        finally:
            client.stop()
            client.close()
        assert b.proc.poll() is None
    finally:
        b.stop()
        zkp.stop()


def test_frozen_broker_loses_its_session_then_registers_again(tmp_path, zk_connect, zk):
    """SIGSTOP past the session timeout: ZooKeeper expires the session, the registration
    and the controller role go (the other broker takes it, epoch 2); after SIGCONT the
    broker sees its session expired, registers again, and stays a plain broker."""
    import os
    import signal

    b1 = _broker(tmp_path, zk_connect, 1).start()
    b2 = _broker(tmp_path, zk_connect, 2).start()
    try:
        os.kill(b1.proc.pid, signal.SIGSTOP)
        try:
            _wait(lambda: zk.get_children("/brokers/ids") == ["2"], 40)
            _wait(lambda: zk.exists("/controller") and json.loads(zk.get("/controller")[0])["brokerid"] == 2, 20)
        finally:
            os.kill(b1.proc.pid, signal.SIGCONT)
        _wait(lambda: sorted(zk.get_children("/brokers/ids")) == ["1", "2"], 40)
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 2 and zk.get("/controller_epoch")[0] == b"2"
        admin = AdminClient({"bootstrap.servers": b1.bootstrap})
        _wait(lambda: admin.describe_cluster().result(10).controller.id == 2)
    finally:
        b1.stop()
        b2.stop()


def test_registration_retried_until_it_gets_through(tmp_path, zk_connect, zk):
    """A broker back from an expired session that cannot register at once (here another
    session holds /brokers/ids/1 longer than the broker waits for an old session to end)
    keeps trying: it used to give up after one attempt and stay unregistered while its
    connection was fine, silently out of every ISR (found by the chaos harness's review)."""
    import os
    import signal

    b1 = _broker(tmp_path, zk_connect, 1).start()
    b2 = _broker(tmp_path, zk_connect, 2).start()
    squatter = KazooClient(hosts=zk_connect)
    squatter.start(10)
    try:
        os.kill(b1.proc.pid, signal.SIGSTOP)
        try:
            _wait(lambda: zk.get_children("/brokers/ids") == ["2"], 40)
            squatter.create("/brokers/ids/1", b"{}", ephemeral=True)
        finally:
            os.kill(b1.proc.pid, signal.SIGCONT)
        # the broker waits one session timeout (6 s) + 2 s for the node, then fails that attempt
        _wait(lambda: "re-registering in ZooKeeper failed" in b1.log_text(), 30)
        squatter.stop()
        squatter.close()
        _wait(lambda: zk.exists("/brokers/ids/1") and json.loads(zk.get("/brokers/ids/1")[0]).get("endpoints"), 20)
        assert "Traceback" not in b1.log_text()
    finally:
        squatter.stop()
        squatter.close()
        b1.stop()
        b2.stop()
