"""DescribeTransactions (key 65), v0: state, producer id and epoch, timeout, start time
and partitions of transactional ids this broker coordinates (NOT_COORDINATOR for others:
the admin client asks each id's coordinator)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0))
def describe_transactions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    return txns.call(txns.coordinator.describe_transactions, req)
