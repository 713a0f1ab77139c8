import pytest

from broker.handlers import load_all
from tests.krait_harness import BrokerProcess

# The served API versions are declared by the broker's handler modules: load them so that
# protocol.apis.SUPPORTED is filled for tests that iterate the served versions.
load_all()


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
