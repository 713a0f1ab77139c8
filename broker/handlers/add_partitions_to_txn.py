"""AddPartitionsToTxn (key 24), v0-4: a transactional producer adds partitions to its
transaction before producing to them (v0-3, from clients); brokers verify that a
partition is in a producer's transaction before its first transactional write there (v4,
``verify_only``, KIP-890). Served by the transaction coordinator."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 4))
def add_partitions_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    return txns.call(txns.coordinator.add_partitions_to_txn, req)
