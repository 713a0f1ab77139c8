"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, answered by the group
coordinator (which persists them in __consumer_offsets)."""

from __future__ import annotations

from protocol.apis import ApiKey

from . import handles
from .groups import route

handles(ApiKey.OFFSET_COMMIT)(route("offset_commit"))
handles(ApiKey.OFFSET_FETCH)(route("offset_fetch"))
handles(ApiKey.OFFSET_DELETE)(route("offset_delete"))
