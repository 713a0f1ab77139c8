"""InitProducerId (key 22), v0-5, for idempotent producers: a fresh producer id (allocated from blocks
persisted in the metadata document) and epoch 0. Transactions are not supported yet:
a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients
report as a fatal, clearly-named error instead of retrying forever."""

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
    rtype = apis.response_type(ApiKey.INIT_PRODUCER_ID, ctx.version)
    if req.transactional_id is not None:
        return make(rtype, throttle_time=0, error_code=ErrorCode.transactional_id_authorization_failed,
                    producer_id=-1, producer_epoch=-1)  # InitProducerId has no error message field
    try:
        pid = broker.producer_ids.next_producer_id()
    except KafkaError as exc:  # cluster mode: no id block while ZooKeeper is unreachable
        return make(rtype, throttle_time=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1)
    return make(rtype, throttle_time=0, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0)
