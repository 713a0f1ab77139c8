"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, routed to the group
coordinator (which persists them in __consumer_offsets)."""

from __future__ import annotations

from protocol.apis import ApiKey

from . import handles
from .groups import _driver


@handles(ApiKey.OFFSET_COMMIT)
def offset_commit(broker, ctx, req):
    d = _driver(broker)
    return d.call(d.coordinator.offset_commit, req)


@handles(ApiKey.OFFSET_FETCH)
def offset_fetch(broker, ctx, req):
    d = _driver(broker)
    return d.call(d.coordinator.offset_fetch, req)


@handles(ApiKey.OFFSET_DELETE)
def offset_delete(broker, ctx, req):
    d = _driver(broker)
    return d.call(d.coordinator.offset_delete, req)
