"""AddOffsetsToTxn (key 25), v0-4: adds the group's ``__consumer_offsets`` partition to
the transaction, before TxnOffsetCommit sends the consumed offsets with it. Served by the
transaction coordinator."""

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


@handles(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4))
def add_offsets_to_txn(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None:
        # KafkaApis.handleAddOffsetsToTxnRequest: WRITE on the transactional id, READ on the group
        if not access.authorize(broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return response_for(req, error_code=ErrorCode.transactional_id_authorization_failed)
        if not access.authorize(broker, ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            return response_for(req, error_code=ErrorCode.group_authorization_failed)
    txns = broker.transactions
    return txns.call(txns.coordinator.add_offsets_to_txn, req)
