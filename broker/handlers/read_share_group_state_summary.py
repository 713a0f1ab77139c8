"""ReadShareGroupStateSummary (key 87), v0-1: the share coordinator's state API (KIP-932), sent between
brokers: start offsets and delivery-complete counts for DescribeShareGroupOffsets (v1 adds DeliveryCompleteCount). The share coordinator on __share_group_state answers once its records are
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


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, versions=(0, 1))
async def read_share_group_state_summary(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return await serve_state_request(broker, ctx, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, req)
