"""ConsumerGroupDescribe (key 69), v0 (the versions of the JSON specs Krait follows):
consumer-protocol groups (KIP-848) with their epochs, assignor and members, each with its
current and target assignment; a classic group answers GROUP_ID_NOT_FOUND, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..security import access
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 0))
def consumer_group_describe(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    groups = broker.groups.ready()
    return access.describe_groups_authorized(broker, ctx, req, groups.coordinator.consumer_group_describe, groups.call)
