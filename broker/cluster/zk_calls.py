"""Calling ZooKeeper from the event loop: kazoo's calls block their thread until ZooKeeper
answers, and a request made while the connection is down waits in kazoo's queue until it
comes back, which may be never. So a handler never calls kazoo itself: ``off_loop`` runs
the call in the default executor, refuses at once while the connection is down, bounds
the wait, and turns what ZooKeeper fails with into the Kafka error the request answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, RolledBackError, RuntimeInconsistency
from kazoo.handlers.threading import KazooTimeoutError

from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("krait.cluster")

T = TypeVar("T")

#: what ZooKeeper (or kazoo) fails with: connection loss, an expired or closed session, a
#: timeout, and the node races a read-modify-write lost more often than it retries
ZK_FAILURES = (KazooException, KazooTimeoutError)

UNREACHABLE = "ZooKeeper is not reachable; retry later"


def connected(client: KazooClient) -> bool:
    return client.state == KazooState.CONNECTED


def session_timeout(client: KazooClient) -> float:
    """Seconds: after this long without an answer the session is gone anyway."""
    return client._session_timeout / 1000


async def off_loop(client: KazooClient, error: ErrorCode, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` (which calls ZooKeeper) on the default executor. Kafka errors it
    raises (a topic that exists, ...) pass through; ZooKeeper's failures, or no answer
    within the session timeout, raise KafkaError(``error``). A call given up on may still
    complete when ZooKeeper answers, as a Kafka request that timed out may."""
    if not connected(client):
        raise KafkaError(error, UNREACHABLE)
    timeout = session_timeout(client)
    call = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.wait_for(call, timeout)
    except TimeoutError:
        log.warning("ZooKeeper did not answer %s within %.0fs", getattr(fn, "__name__", "a call"), timeout)
        raise KafkaError(error, f"ZooKeeper did not answer within {timeout:.0f}s; retry later") from None
    except ZK_FAILURES as exc:
        log.warning("ZooKeeper failed %s: %s", getattr(fn, "__name__", "a call"), describe(exc))
        raise KafkaError(error, f"ZooKeeper failed ({describe(exc)}); retry later") from None


def describe(exc: BaseException) -> str:
    """One line for a log or an error message (kazoo's exceptions often have no text)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def multi_failure(results: list) -> Exception | None:
    """The operation that failed a multi (the others report RolledBack/RuntimeInconsistency)."""
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency):
            return r
    return None
