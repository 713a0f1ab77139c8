"""AlterConfigs (key 33), v0-2: replace a topic's overrides or a broker's dynamic configs as
a whole; the ConfigAdmin service applies them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.ALTER_CONFIGS, versions=(0, 2))
def alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.ALTER_CONFIGS, ctx.version), throttle_time=0, responses=broker.configs.alter(req, incremental=False))
