"""SaslHandshake (key 17), v0-1. On a SASL listener the connection's authenticator answers it
(broker/security/authenticator.py), before authentication and to re-authenticate; a request
that reaches this handler came in on a listener without SASL, which Kafka answers with
ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.SASL_HANDSHAKE, versions=(0, 1))
def sasl_handshake(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.SASL_HANDSHAKE, ctx.version), error_code=ErrorCode.illegal_sasl_state,
                mechanisms=())
