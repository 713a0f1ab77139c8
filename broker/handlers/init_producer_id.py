"""InitProducerId (key 22), v0-5. Without a transactional id: a fresh producer id
(allocated from blocks persisted in the metadata document, or in ZooKeeper in cluster mode)
and epoch 0, for idempotent producers. With one: the transaction coordinator's answer
(epoch bump, fencing of the previous producer, abort of its ongoing transaction)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
def init_producer_id(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if broker.authorizer is not None:
        denied = _denied(broker, ctx, req)
        if denied is not None:
            return make(apis.response_type(ApiKey.INIT_PRODUCER_ID, ctx.version), throttle_time=0,
                        error_code=denied, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is not None:
        txns = broker.transactions
        return txns.call(txns.coordinator.init_producer_id, req)
    rtype = apis.response_type(ApiKey.INIT_PRODUCER_ID, ctx.version)
    try:
        pid = broker.producer_ids.next_producer_id()
    except KafkaError as exc:  # cluster mode: no id block while ZooKeeper is unreachable
        return make(rtype, throttle_time=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1)
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0)


def _denied(broker: Broker, ctx: RequestContext, req: Any) -> ErrorCode | None:
    """KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; without one,
    IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    if req.transactional_id is not None:
        if not access.authorize(broker, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            return ErrorCode.transactional_id_authorization_failed
    elif not access.authorize_cluster(broker, ctx, AclOperation.IDEMPOTENT_WRITE) and \
            not access.authorize_by_resource_type(broker, ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return ErrorCode.cluster_authorization_failed
    return None
