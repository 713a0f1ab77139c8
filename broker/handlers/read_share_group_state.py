"""ReadShareGroupState (key 84), v0-0: the share coordinator's state API (KIP-932), sent between
brokers: a share-partition's state, for its leader starting to serve it (a higher leader epoch fences older leaders). The share coordinator on __share_group_state answers once its records are
replicated (broker/share/coordinator_driver.py); CLUSTER_ACTION on the cluster, as Kafka
checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..share.coordinator_driver import serve_state_request
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.READ_SHARE_GROUP_STATE, versions=(0, 0))
async def read_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await serve_state_request(broker, ctx, ApiKey.READ_SHARE_GROUP_STATE, req)
