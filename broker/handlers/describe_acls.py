"""DescribeAcls: Krait has no authorizer yet, so it answers as Kafka does without one:
SECURITY_DISABLED, which admin clients report as "no authorizer configured" rather than
"the broker is too old"."""

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


@handles(ApiKey.DESCRIBE_ACLS, versions=(1, 3))
def describe_acls(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.DESCRIBE_ACLS, ctx.version), throttle_time=0,
                error_code=ErrorCode.security_disabled, error_message="No Authorizer is configured on the broker",
                resources=[])
