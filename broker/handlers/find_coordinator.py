"""FindCoordinator (key 10), v0-6: a single broker coordinates every group; in cluster
mode a group's coordinator is the leader of its __consumer_offsets partition. Transactions are
not supported yet: a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
and a message saying so (COORDINATOR_NOT_AVAILABLE would be retried until the client's
timeout)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode, KafkaError

from ..group_driver import OFFSETS_TOPIC
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


GROUP_KEY, TRANSACTION_KEY = 0, 1
TRANSACTIONS_UNSUPPORTED = "Transactions are not supported by this Krait broker (transactional.id refused)"


@handles(ApiKey.FIND_COORDINATOR, versions=(0, 6))
def find_coordinator(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    lst = broker.config.advertised_listeners[0]
    rtype = apis.response_type(ApiKey.FIND_COORDINATOR, ctx.version)
    key_type = getattr(req, "key_type", GROUP_KEY)

    def entry(key: str) -> dict:
        if key_type != GROUP_KEY:
            # COORDINATOR_NOT_AVAILABLE would be retried until the client's own timeout;
            # TRANSACTIONAL_ID_AUTHORIZATION_FAILED is the one answer librdkafka and the
            # Java client treat as fatal at once, and they print the message with it.
            return dict(key=key, node_id=-1, host="", port=-1,
                        error_code=ErrorCode.transactional_id_authorization_failed,
                        error_message=TRANSACTIONS_UNSUPPORTED)
        if not key:
            return dict(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.invalid_group_id,
                        error_message="The group id is empty")
        try:
            groups = broker.groups.ready()
        except KafkaError as exc:  # __consumer_offsets cannot be created now (cluster mode)
            return dict(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.coordinator_not_available,
                        error_message=exc.message)
        if broker.cluster is not None:
            # the coordinator is the leader of the group's __consumer_offsets partition
            p = groups.coordinator.partition_for(key)
            error, leader, *_ = broker.partition_metadata(OFFSETS_TOPIC, p)
            endpoint = {bid: (host, port) for bid, host, port in broker.live_brokers()}.get(leader)
            if error != ErrorCode.none or endpoint is None:
                return dict(key=key, node_id=-1, host="", port=-1, error_code=ErrorCode.coordinator_not_available,
                            error_message=f"The coordinator's partition {OFFSETS_TOPIC}-{p} has no leader")
            return dict(key=key, node_id=leader, host=endpoint[0], port=endpoint[1], error_code=ErrorCode.none,
                        error_message=None)
        return dict(key=key, node_id=broker.node_id, host=lst.host, port=lst.port, error_code=ErrorCode.none,
                    error_message=None)

    if ctx.version >= 4:
        return make(rtype, throttle_time=0, coordinators=[entry(k) for k in req.coordinator_keys])
    e = entry(req.key)
    del e["key"]
    return make(rtype, throttle_time=0, **e)
