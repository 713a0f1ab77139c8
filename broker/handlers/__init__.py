"""One module per Kafka API family. Each handler is registered with :func:`handles` and
called as ``handler(broker, ctx, request)``; it returns a kio response object, a list of
already-framed chunks (fast paths), None (no response: Produce acks=0), or an awaitable
of one of those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

HANDLERS: dict[int, Callable[..., Any]] = {}


def handles(*api_keys: int) -> Callable:
    def register(fn: Callable) -> Callable:
        for key in api_keys:
            HANDLERS[key] = fn
        return fn

    return register


def load_all() -> None:
    """Import every handler module so that they register themselves."""
    from . import (  # noqa: F401
        alter_replica_log_dirs,
        api_versions,
        cluster,
        configs,
        create_acls,
        delete_acls,
        describe_acls,
        describe_log_dirs,
        describe_producers,
        describe_topic_partitions,
        elect_leaders,
        fetch,
        groups,
        list_offsets,
        metadata,
        offsets,
        produce,
        producer_ids,
        records,
        topics,
    )
