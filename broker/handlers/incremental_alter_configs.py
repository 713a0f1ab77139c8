"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT on a topic's or a
broker's configs; the ConfigAdmin service applies them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
def incremental_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.INCREMENTAL_ALTER_CONFIGS, ctx.version), throttle_time=0, responses=broker.configs.alter(req, incremental=True))
