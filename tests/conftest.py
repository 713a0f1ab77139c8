import pytest

from tests.krait_harness import BrokerProcess


@pytest.fixture(scope="session")
def broker():
    """One broker for the session's client tests (tests use distinct topic names)."""
    b = BrokerProcess().start()
    yield b
    b.stop()


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, for restart/kill tests."""
    b = BrokerProcess(str(tmp_path / "logs")).start()
    yield b
    b.kill()
