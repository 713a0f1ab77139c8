"""ApiVersions: the ranges in protocol.apis.SUPPORTED. The answer never changes, so its
body is built once per version and reused."""

from __future__ import annotations

import struct
from functools import cache
from typing import TYPE_CHECKING

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker


def _api_keys() -> list[dict]:
    # in key order, as Kafka lists them; APIs registered with advertised=False are served but
    # not listed: ShareGroupHeartbeat/ShareGroupDescribe until ShareFetch exists (share groups,
    # issue 25), since a 4.2 client that sees ShareGroupHeartbeat would use share groups
    return [dict(api_key=r.api_key, min_version=r.min_version, max_version=r.max_version)
            for _, r in sorted(apis.SUPPORTED.items()) if r.advertised]


@cache
def _body(version: int) -> bytes:
    resp = make(apis.response_type(ApiKey.API_VERSIONS, version), error_code=ErrorCode.none,
                api_keys=_api_keys(), throttle_time=0)
    return framing.encode_body(resp)


@handles(ApiKey.API_VERSIONS, versions=(0, 4))
def api_versions(broker: Broker, ctx, req) -> list[bytes]:
    body = _body(ctx.version)
    return [struct.pack(">ii", len(body) + 4, ctx.header.correlation_id), body]


def unsupported_version_response(correlation_id: int) -> list[bytes]:
    """What Kafka sends for an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and our ranges, so the client can downgrade."""
    resp = make(apis.response_type(ApiKey.API_VERSIONS, 0), error_code=ErrorCode.unsupported_version,
                api_keys=_api_keys())
    body = framing.encode_body(resp)
    return [struct.pack(">ii", len(body) + 4, correlation_id), body]
