"""DescribeConfigs (key 32), v1-4: a topic's or a broker's configs with their sources and
synonyms; the ConfigAdmin service answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_CONFIGS, versions=(1, 4))
def describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return make(apis.response_type(ApiKey.DESCRIBE_CONFIGS, ctx.version), throttle_time=0, results=broker.configs.describe(req))
