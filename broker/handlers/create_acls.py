"""CreateAcls: without an authorizer (Krait has none yet) every creation fails with
SECURITY_DISABLED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import NO_AUTHORIZER
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.CREATE_ACLS, versions=(1, 3))
def create_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = [dict(error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER) for _ in req.creations]
    return make(apis.response_type(ApiKey.CREATE_ACLS, ctx.version), throttle_time=0, results=results)
