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

from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


@handles(ApiKey.INIT_PRODUCER_ID, versions=(0, 5))
def init_producer_id(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if req.transactional_id is not None:
        txns = broker.transactions
        return txns.call(txns.coordinator.init_producer_id, req)
    rtype = apis.response_type(ApiKey.INIT_PRODUCER_ID, ctx.version)
    try:
        pid = broker.producer_ids.next_producer_id()
    except KafkaError as exc:  # cluster mode: no id block while ZooKeeper is unreachable
        return make(rtype, throttle_time=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1)
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0)
