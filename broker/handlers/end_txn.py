"""EndTxn (key 26), v0-4: commit or abort. Answered once PrepareCommit/PrepareAbort is in
``__transaction_state`` (replicated, in cluster mode); the markers follow. v5 belongs to
transaction protocol v2 (KIP-890 part 2), which Krait does not advertise, so clients use
v1 of the protocol and never send it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.END_TXN, versions=(0, 4))
def end_txn(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None and not access.authorize(
            broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return response_for(req, error_code=ErrorCode.transactional_id_authorization_failed)
    txns = broker.transactions
    return txns.call(txns.coordinator.end_txn, req)
