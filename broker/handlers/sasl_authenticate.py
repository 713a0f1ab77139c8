"""SaslAuthenticate (key 36), v0-2. The SASL listener's authenticator answers it during the
exchange (broker/security/authenticator.py); one that reaches this handler came after the
exchange ended or on a listener without SASL: ILLEGAL_SASL_STATE, as Kafka answers."""

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


@handles(ApiKey.SASL_AUTHENTICATE, versions=(0, 2))
def sasl_authenticate(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.SASL_AUTHENTICATE, ctx.version), error_code=ErrorCode.illegal_sasl_state,
                error_message="SaslAuthenticate request received after successful authentication",
                auth_bytes=b"")
