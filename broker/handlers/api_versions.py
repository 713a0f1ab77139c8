"""ApiVersions: the ranges in protocol.apis.SUPPORTED, and (v3+) the features Krait serves
at a fixed level: ``share.version`` 1, as a Kafka 4.2 cluster with share groups enabled
reports it (KIP-932 gates share groups on it). The answer never changes, so its body is
built once per version and reused."""

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


#: (feature, supported min, supported max, finalized level); only features whose level
#: changes what a client may do are listed (Kafka lists metadata.version and others too)
FEATURES = (("share.version", 0, 1, 1),)
#: Kafka's epoch of the finalized features (a metadata offset); they never change here
FINALIZED_FEATURES_EPOCH = 1


def _api_keys() -> list[dict]:
    # in key order, as Kafka lists them; APIs registered with advertised=False are served but
    # not listed (an API a client must not discover before it works end to end)
    return [dict(api_key=r.api_key, min_version=r.min_version, max_version=r.max_version)
            for _, r in sorted(apis.SUPPORTED.items()) if r.advertised]


@cache
def _body(version: int) -> bytes:
    resp = make(apis.response_type(ApiKey.API_VERSIONS, version), error_code=ErrorCode.none,
                api_keys=_api_keys(), throttle_time=0,
                supported_features=[dict(name=n, min_version=lo, max_version=hi) for n, lo, hi, _ in FEATURES],
                finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
                finalized_features=[dict(name=n, min_version_level=level, max_version_level=level)
                                    for n, _lo, _hi, level in FEATURES])
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
