"""InitializeShareGroupState (key 83), v0-0: the share coordinator's state API (KIP-932), sent between
brokers: a share group's new share-partitions (by its group coordinator) or reset start offsets. The share coordinator on __share_group_state answers once its records are
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


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE, versions=(0, 0))
async def initialize_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await serve_state_request(broker, ctx, ApiKey.INITIALIZE_SHARE_GROUP_STATE, req)
