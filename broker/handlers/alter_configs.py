"""AlterConfigs (key 33), v0-2: replace a topic's overrides or a broker's dynamic configs as
a whole; the ConfigAdmin service applies them."""

from __future__ import annotations

from collections import Counter
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


@handles(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.ALTER_CONFIGS, ctx.version)
    if broker.authorizer is None:
        return make(rtype, throttle_time=0, responses=await broker.configs.alter(req, incremental=False))
    return make(rtype, throttle_time=0, responses=await alter_authorized(broker, ctx, req, incremental=False))


async def alter_authorized(broker: Broker, ctx: RequestContext, req: Any, incremental: bool) -> list[dict]:
    """ALTER_CONFIGS on each resource (the cluster for broker resources, else the topic or
    group): refused ones answer the authorization error without a message and are not
    applied; a resource named twice is INVALID_REQUEST whoever asks (Kafka checks that
    first)."""
    counts = Counter((r.resource_type, r.resource_name) for r in req.resources)
    refused: dict[int, Any] = {}
    for i, r in enumerate(req.resources):
        if counts[(r.resource_type, r.resource_name)] == 1:
            code = access.config_resource_denied(broker, ctx, AclOperation.ALTER_CONFIGS, r.resource_type,
                                                 r.resource_name)
            if code is not None:
                refused[i] = dict(error_code=code, error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name)
    if not refused:
        return await broker.configs.alter(req, incremental=incremental)
    kept = tuple(r for i, r in enumerate(req.resources) if i not in refused)
    done = iter(await broker.configs.alter(access.replace(req, resources=kept), incremental=incremental) if kept else ())
    return [refused[i] if i in refused else next(done) for i in range(len(req.resources))]
