import uuid

import pytest

from tests.cluster.zk_harness import ZooKeeperProcess, zookeeper_missing


@pytest.fixture(scope="session")
def zookeeper():
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    zk = ZooKeeperProcess().start()
    yield zk
    zk.stop()


@pytest.fixture
def zk_connect(zookeeper):
    """A chroot of the test's own, so that tests share one ZooKeeper without sharing state."""
    return f"{zookeeper.connect}/krait-{uuid.uuid4().hex[:8]}"
