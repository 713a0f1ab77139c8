"""FindCoordinator (key 10), v0-6: the coordinator of a group (key type 0) or of a
transactional id (key type 1): the leader of the key's partition of ``__consumer_offsets``
or ``__transaction_state`` (on a single node, that node). Either topic is created on first use, as Kafka does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError
from txn_coordinator import TRANSACTION_STATE_TOPIC

from ..group_driver import OFFSETS_TOPIC
from ..security import access
from ..security.operations import AclOperation, ResourceType
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


GROUP_KEY, TRANSACTION_KEY = 0, 1


def _not_available(key: str, message: str | None) -> dict:
    return dict(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.coordinator_not_available,
                error_message=message)


def _denied(broker: Broker, ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """KafkaApis.getCoordinator: DESCRIBE on the group or the transactional id."""
    if key_type == GROUP_KEY:
        if not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return ErrorCode.group_authorization_failed
    elif not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed
    return None


@handles(ApiKey.FIND_COORDINATOR, versions=(0, 6))
def find_coordinator(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    listener = ctx.conn.listener_name
    rtype = apis.response_type(ApiKey.FIND_COORDINATOR, ctx.version)
    key_type = getattr(req, "key_type", GROUP_KEY)

    def entry(key: str) -> dict:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            return dict(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.invalid_request,
                        error_message=f"Unknown coordinator key type {key_type}")
        if broker.authorizer is not None:
            denied = _denied(broker, ctx, key_type, key)
            if denied is not None:
                return dict(key=key, node_id=-1, host="", port=-1, error_code=denied,
                            error_message=access.default_message(denied) if ctx.version < 4 else None)
        if not key:
            code = ErrorCode.invalid_group_id if key_type == GROUP_KEY else ErrorCode.invalid_request
            return dict(key=key, node_id=-1, host="", port=-1, error_code=code,
                        error_message="The group id is empty" if key_type == GROUP_KEY
                        else "The transactional id is empty")
        try:
            if key_type == GROUP_KEY:
                topic, p = OFFSETS_TOPIC, broker.groups.ready().coordinator.partition_for(key)
            else:
                topic, p = TRANSACTION_STATE_TOPIC, broker.transactions.ready().coordinator.partition_for(key)
        except KafkaError as exc:  # the internal topic cannot be created now
            return _not_available(key, exc.message)
        error, leader, *_ = broker.partition_metadata(topic, p)
        endpoint = {bid: (host, port) for bid, host, port in broker.live_brokers(listener)}.get(leader)
        if error != ErrorCode.none or endpoint is None:
            return _not_available(key, f"The coordinator's partition {topic}-{p} has no leader")
        return dict(key=key, node_id=leader, host=endpoint[0], port=endpoint[1], error_code=ErrorCode.none,
                    error_message=None)

    if ctx.version >= 4:
        return make(rtype, throttle_time=0, coordinators=[entry(k) for k in req.coordinator_keys])
    e = entry(req.key)
    del e["key"]
    return make(rtype, throttle_time=0, **e)
