"""AddOffsetsToTxn (key 25), v0-4: adds the group's ``__consumer_offsets`` partition to
the transaction, before TxnOffsetCommit sends the consumed offsets with it. Served by the
transaction coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4))
def add_offsets_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    return txns.call(txns.coordinator.add_offsets_to_txn, req)
