"""Fixtures of the table tests: a throwaway PostgreSQL (the shared catalog a cluster's
brokers commit to) and a real ZooKeeper, each started once per test process on first use
and removed, processes and dirs, at its end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.zk_harness import ZooKeeperProcess, zookeeper_missing
from tests.postgres_harness import PostgresProcess, postgres_missing


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresProcess]:
    reason = postgres_missing()
    if reason:
        pytest.skip(reason)
    pg = PostgresProcess().start()  # removes what it made if it fails to start
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresProcess) -> str:
    """The SQLAlchemy URL of a new, empty database of the test's own."""
    return postgres_server.create_database()


@pytest.fixture(scope="session")
def table_zookeeper() -> Iterator[ZooKeeperProcess]:
    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    zk = ZooKeeperProcess().start()
    try:
        yield zk
    finally:
        zk.stop()
