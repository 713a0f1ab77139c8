"""Group membership APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups. The work is the pure GroupCoordinator's; these
handlers only route requests to it through the CoordinatorDriver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security.operations import ResourceType, authorized_operations
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


GROUP_KEY, TRANSACTION_KEY = 0, 1
TRANSACTIONS_UNSUPPORTED = "Transactions are not supported by this Krait broker (transactional.id refused)"


def _driver(broker: Broker):
    driver = broker.coordinator_driver
    driver.ensure_topic()
    return driver


@handles(ApiKey.FIND_COORDINATOR)
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
        _driver(broker)
        return dict(key=key, node_id=broker.node_id, host=lst.host, port=lst.port, error_code=ErrorCode.none,
                    error_message=None)

    if ctx.version >= 4:
        return make(rtype, throttle_time=0, coordinators=[entry(k) for k in req.coordinator_keys])
    e = entry(req.key)
    del e["key"]
    return make(rtype, throttle_time=0, **e)


@handles(ApiKey.JOIN_GROUP)
def join_group(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    d = _driver(broker)
    return d.call(d.coordinator.join_group, req, client_id=ctx.client_id, client_host="/" + ctx.client_host)


@handles(ApiKey.DESCRIBE_GROUPS)
def describe_groups(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    d = _driver(broker)
    return d.call(d.coordinator.describe_groups, req,
                  authorized_operations=lambda _group: authorized_operations(ResourceType.GROUP))


def route(method: str):
    def handler(broker: Broker, ctx: RequestContext, req: Any) -> Any:
        d = _driver(broker)
        return d.call(getattr(d.coordinator, method), req)

    handler.__name__ = method
    return handler


# APIs the coordinator answers with no broker-side work of their own
for _api, _method in {
    ApiKey.SYNC_GROUP: "sync_group",
    ApiKey.HEARTBEAT: "heartbeat",
    ApiKey.LEAVE_GROUP: "leave_group",
    ApiKey.LIST_GROUPS: "list_groups",
    ApiKey.DELETE_GROUPS: "delete_groups",
}.items():
    handles(_api)(route(_method))
