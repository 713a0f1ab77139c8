"""ListTransactions (key 66), v0-1: the transactional ids this broker coordinates,
filtered by state, producer id and (v1) minimum duration; the admin client asks every
broker and merges the answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.LIST_TRANSACTIONS, versions=(0, 1))
def list_transactions(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    txns = broker.transactions
    result = txns.call(txns.coordinator.list_transactions, req)
    if broker.authorizer is None:
        return result
    # KafkaApis.handleListTransactionsRequest: only the ids the caller may DESCRIBE
    return access.then(result, lambda resp: access.replace(resp, transaction_states=tuple(
        s for s in resp.transaction_states
        if access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id))))
