import pytest

from tests.krait_harness import BrokerProcess

from .members import FAST_CONSUMER_GROUPS


@pytest.fixture(scope="session")
def kb(tmp_path_factory):
    """A broker with the KIP-848 group timeouts lowered (session 6 s, heartbeat 0.5 s),
    shared by the consumer-protocol tests (they use distinct topic and group names)."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("kip848") / "logs"), FAST_CONSUMER_GROUPS).start()
    yield b
    b.kill()


@pytest.fixture
def members():
    """Members started by the test (tests.groups.members.Member), killed at its end."""
    from .members import stop_all

    started = []
    yield started
    stop_all(started)
