"""ListTransactions (key 66), v0-1: the transactional ids this broker coordinates,
filtered by state, producer id and (v1) minimum duration; the admin client asks every
broker and merges the answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_TRANSACTIONS, versions=(0, 1))
def list_transactions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    return txns.call(txns.coordinator.list_transactions, req)
