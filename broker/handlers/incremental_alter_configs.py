"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT on a topic's or a
broker's configs; the ConfigAdmin service applies them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make

from . import handles
from .alter_configs import alter_authorized

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def incremental_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    rtype = apis.response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, ctx.version)
    if broker.authorizer is None:
        return make(rtype, throttle_time=0, responses=await broker.configs.alter(req, incremental=True))
    return make(rtype, throttle_time=0, responses=await alter_authorized(broker, ctx, req, incremental=True))
