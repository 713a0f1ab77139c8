"""One module per Kafka API, named for it: the module is kio's (and Kafka's JSON specs')
snake_case name of the API, so `produce.py` is Produce (key 0), `list_offsets.py` is
ListOffsets (key 2), `offset_for_leader_epoch.py` is OffsetForLeaderEpoch (key 23), and
so on (kio.schema.index.api_key_map is the table). Each module opens with the versions it
serves and what it does, and registers its handler with :func:`handles`, declaring those
versions; ApiVersions is derived from these declarations (protocol.apis.SUPPORTED), so
they are the one source of truth.

A handler is called as ``handler(broker, ctx, request)`` and returns a kio response
object, a list of already-framed chunks (fast paths), None (no response: Produce acks=0),
or an awaitable of one of those. Handlers decode -> call a service (ReplicaManager,
TopicAdmin, ConfigAdmin, the group coordinator) -> encode.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from protocol import apis

HANDLERS: dict[int, Callable[..., Any]] = {}


def handles(
    api_key: int, *, versions: tuple[int, int], advertised_from: int | None = None, advertised: bool = True
) -> Callable:
    """Register the decorated function as the handler of ``api_key`` for ``versions``
    (inclusive). ``advertised_from`` advertises older versions that are answered with an
    error rather than served (Kafka advertises Produce from v0: older librdkafka turns
    compression off otherwise). ``advertised=False`` serves the API without listing it in
    ApiVersions (clients that do not know it is there do not use it)."""
    lo, hi = versions

    def register(fn: Callable) -> Callable:
        HANDLERS[api_key] = fn
        apis.register(apis.ApiRange(api_key, lo if advertised_from is None else advertised_from, hi,
                                    min_served=None if advertised_from is None else lo, advertised=advertised))
        return fn

    return register


def load_all() -> None:
    """Import every handler module so that they register themselves: every module of this
    package is one API, so none can be left out of the registry."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
