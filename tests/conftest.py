"""Session-wide fixtures, and how `make test` spreads the tests over pytest-xdist workers:
each worker is a pytest process of its own with its own broker, ZooKeeper, ports
(tests.krait_harness.free_port) and temp dirs. The scheduler below hands out work units: a
test on its own, or every test of a module whose fixtures outlive a test (a module's broker
or cluster starts once, in one worker), or a serial group (SERIAL_GROUPS)."""

from __future__ import annotations

import functools
import gc
import re
from pathlib import Path

import pytest

from broker.handlers import load_all
from tests.krait_harness import BrokerProcess

TESTS = Path(__file__).resolve().parent

#: test paths that run in one worker, one test after another: the chaos runs take the whole
#: machine (network namespaces, loop devices, three brokers, ZooKeeper and seven clients
#: each); the Spark tests share one local Spark session (a JVM of a gigabyte) and the
#: spark-submit runs started with the first of them; the benchmarks' smoke runs load every
#: core flat out, and their short measuring windows fail when several overlap
SERIAL_GROUPS = {"tests/chaos/test_chaos.py": "chaos", "tests/spark/": "spark", "tests/bench/": "bench"}

#: handed out first, longest first (the last unit to finish sets the wall time); then the
#: modules that are one unit each, then the single tests, which fill the workers up at the end
FIRST = ("tests/chaos/test_chaos.py", "tests/spark/", "tests/bench/", "tests/test_architecture.py",
         "tests/tables/test_cluster_tables.py", "tests/cluster/")

_SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](?:package|module|class)["']""")


@functools.cache
def _has_shared_fixtures(module: str) -> bool:
    """Does the test module (nodeid path) declare a fixture that outlives a test? Read from
    its source: xdist's controller schedules by node id, before any worker has collected."""
    try:
        return bool(_SHARED_SCOPE.search((TESTS.parent / module).read_text(errors="replace")))
    except OSError:
        return False


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: its serial group, its module, or the test itself."""
    module = nodeid.split("::", 1)[0]
    for prefix, group in SERIAL_GROUPS.items():
        if module.startswith(prefix):
            return group
    return module if _has_shared_fixtures(module) else nodeid


def _order(nodeid: str) -> tuple[int, bool]:
    first = next((i for i, prefix in enumerate(FIRST) if nodeid.startswith(prefix)), len(FIRST))
    return first, work_unit(nodeid) == nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which a plain run may lack
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # Not --dist loadgroup: pytest >= 9.2 ignores the node id suffix by which xdist 3.8
    # groups the tests (pytest-xdist issue 1386), and a mark cannot say "this module's tests".
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # hand the units out in collection order (FIRST)

    class KraitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _reschedule(self, node) -> None:
            # A worker runs a test once it knows the next one: keep two queued, no more, so
            # that nothing waits behind a chaos run another worker could have taken.
            if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) >= 2:
                return
            super()._reschedule(node)

    return KraitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller sees its order
        # the same stable sort in every worker keeps the collections equal, as xdist checks
        items.sort(key=lambda it: _order(it.nodeid))


def pytest_collection_finish(session: pytest.Session) -> None:
    # The collected tests and imported modules (some 200,000 objects) live to the end: out of
    # the cyclic collector's way, a full collection costs milliseconds, not a stall of a second
    # on a loaded machine in the middle of a test with a deadline (the hypothesis fuzz tests)
    gc.collect()
    gc.freeze()


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
