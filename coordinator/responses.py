"""Answering a kio request with the response type of the same API version.

The coordinator describes each response once, as version-agnostic keyword values;
:func:`response_for` finds the response class in the request's own version module
(``kio.schema.<api>.v<N>.response``) and lets :func:`protocol.build.make` keep only the fields
that version has (e.g. ``throttle_time`` is absent from JoinGroup v0-1, ``protocol_type``
from JoinGroup v0-6, ``members`` from LeaveGroup v0-2) and fill the rest from schema defaults.
"""

from __future__ import annotations

import datetime
import importlib
from functools import cache
from typing import Any

from protocol.build import make

__all__ = ["response_class", "response_for", "version_of", "ms"]

_MS = datetime.timedelta(milliseconds=1)


@cache
def response_class(request_type: type) -> type:
    """kio.schema.join_group.v5.request.JoinGroupRequest -> ...v5.response.JoinGroupResponse."""
    module_name = request_type.__module__
    if not module_name.endswith(".request") or not request_type.__name__.endswith("Request"):
        raise TypeError(f"{request_type!r} is not a kio request type")
    module = importlib.import_module(module_name[: -len(".request")] + ".response")
    return getattr(module, request_type.__name__[: -len("Request")] + "Response")


def response_for(req: Any, **fields: Any) -> Any:
    """Build the response to ``req`` (same API version) from plain values; fields the version
    lacks are dropped, nested dicts/lists become the version's nested dataclasses."""
    return make(response_class(type(req)), **fields)


def version_of(req: Any) -> int:
    return int(type(req).__version__)


def ms(value: datetime.timedelta | int) -> int:
    """kio carries *_ms fields as timedeltas; the coordinator works in integer milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value / _MS)
    return int(value)
