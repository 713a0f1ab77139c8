"""DescribeConfigs (key 32), v1-4: a topic's, a broker's or a group's configs with their
sources and synonyms; the ConfigAdmin service answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make

from ..security import access
from ..security.operations import AclOperation
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_CONFIGS, versions=(1, 4))
def describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.DESCRIBE_CONFIGS, ctx.version)
    if broker.authorizer is None:
        return make(rtype, throttle_time=0, results=broker.configs.describe(req))
    # ConfigHelper: DESCRIBE_CONFIGS on each resource; the refused ones are answered last
    refused = []
    kept = []
    for r in req.resources:
        code = access.config_resource_denied(broker, ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type,
                                             r.resource_name)
        if code is None:
            kept.append(r)
        else:
            refused.append(dict(error_code=code, error_message=access.default_message(code),
                                resource_type=r.resource_type, resource_name=r.resource_name, configs=[]))
    results = broker.configs.describe(access.replace(req, resources=tuple(kept))) if kept else []
    return make(rtype, throttle_time=0, results=results + refused)
