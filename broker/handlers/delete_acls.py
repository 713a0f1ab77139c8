"""DeleteAcls: without an authorizer (Krait has none yet) every filter fails with
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


@handles(ApiKey.DELETE_ACLS, versions=(1, 3))
def delete_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = [dict(error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER, matching_acls=[])
               for _ in req.filters]
    return make(apis.response_type(ApiKey.DELETE_ACLS, ctx.version), throttle_time=0, filter_results=results)
