"""The handlers' side of authorization: Kafka's AuthHelper for Krait's request handlers.

Every helper answers as if everything were allowed when ``broker.authorizer`` is None
(Kafka's default, ``authorizer.class.name`` empty), so a handler's only cost without an
authorizer is the ``is None`` check it makes before calling here. Checks are made once per
request and resource (a topic, a group, a transactional id), never per record or per
partition: :func:`authorized_names` de-duplicates the names first, as Kafka's
``filterByAuthorized`` does.

The caller is ``ctx.principal`` connecting from ``ctx.client_host``; the host is written as
Java's ``InetAddress.getHostAddress`` writes it (:func:`java_host`), since that is the
form Kafka compares ACL hosts with (``0:0:0:0:0:0:0:1``, not ``::1``).
"""

from __future__ import annotations

import dataclasses
import inspect
import ipaddress
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from coordinator.responses import response_for
from protocol.error_messages import MESSAGES
from protocol.errors import ErrorCode

from .acls import CLUSTER_NAME
from .operations import (
    NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    authorized_operations,
    to_bit_field,
)

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

__all__ = [
    "AclOperation", "ResourceType", "java_host", "authorize", "authorize_cluster", "authorized_names",
    "authorized_operations_bits", "cluster_operations_bits", "authorize_by_resource_type", "then",
    "replace", "default_message", "UNAUTHORIZED_CLUSTER_MESSAGE",
]

#: the message Kafka's ClusterAuthorizationException carries (``Request ... is not
#: authorized.``), without the request's Java toString
UNAUTHORIZED_CLUSTER_MESSAGE = "Request is not authorized."

_SUPPORTED_BITS = {t: to_bit_field(ops) for t, ops in SUPPORTED_OPERATIONS.items()}


@lru_cache(maxsize=4096)
def java_host(host: str) -> str:
    """The client's address as Kafka's ACL checks see it (InetAddress.getHostAddress): IPv4
    unchanged; IPv6 as eight groups of hex without leading zeros and without ``::``
    compression; an IPv4-mapped IPv6 address as its IPv4 address (Java makes it an
    Inet4Address); a scope id kept after ``%``."""
    if ":" not in host:
        return host
    addr, pct, scope = host.partition("%")
    try:
        ip = ipaddress.IPv6Address(addr)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(format(int(g, 16), "x") for g in ip.exploded.split(":"))
    return groups + pct + scope


def default_message(code: ErrorCode) -> str | None:
    """Kafka's Errors.message() for a code (``new ApiError(Errors.X)``)."""
    return MESSAGES.get(int(code))


def authorize(broker: Broker, ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    """AuthHelper.authorize: may the caller perform ``op`` on the LITERAL resource?"""
    auth = broker.authorizer
    if auth is None:
        return True
    return auth.authorize(ctx.principal, java_host(ctx.client_host), op, rtype, name)


def authorize_cluster(broker: Broker, ctx: RequestContext, op: AclOperation) -> bool:
    """``op`` on the CLUSTER resource (``kafka-cluster``)."""
    return authorize(broker, ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_names(broker: Broker, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                     names: Iterable[str | None]) -> set[str]:
    """AuthHelper.filterByAuthorized: the names (each checked once) the caller may perform
    ``op`` on. None names are never authorized."""
    auth = broker.authorizer
    if auth is None:
        return {n for n in names if n is not None}
    principal, host = ctx.principal, java_host(ctx.client_host)
    return {n for n in set(names) if n is not None and auth.authorize(principal, host, op, rtype, n)}


def authorized_operations_bits(broker: Broker, ctx: RequestContext, rtype: ResourceType, name: str,
                               requested: bool = True) -> int:
    """AuthHelper.authorizedOperations as a bit field (``*_authorized_operations``):
    NOT_REQUESTED unless asked; every supported operation without an authorizer."""
    if not requested:
        return NOT_REQUESTED
    auth = broker.authorizer
    if auth is None:
        return _SUPPORTED_BITS[rtype]
    return to_bit_field(auth.authorized_operations(ctx.principal, java_host(ctx.client_host), rtype, name))


def cluster_operations_bits(broker: Broker, ctx: RequestContext, requested: bool) -> int:
    """``cluster_authorized_operations`` of Metadata v8-10 and DescribeCluster: 0 without
    DESCRIBE on the cluster, else the cluster's allowed operations (AuthHelper)."""
    if not requested:
        return NOT_REQUESTED
    if not authorize_cluster(broker, ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations_bits(broker, ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_by_resource_type(broker: Broker, ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """Authorizer.authorizeByResourceType: ``op`` allowed on at least one resource of the type."""
    auth = broker.authorizer
    if auth is None:
        return True
    return auth.authorize_by_resource_type(ctx.principal, java_host(ctx.client_host), op, rtype)


def then(result: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to a handler's result, now or once the awaitable completes (group and
    transaction coordinator calls answer either way)."""
    if not inspect.isawaitable(result):
        return fn(result)

    async def later() -> Any:
        return fn(await result)

    return later()


def describe_groups_authorized(broker: Broker, ctx: RequestContext, req: Any, describe: Callable[..., Any],
                               call: Callable[..., Any]) -> Any:
    """The modern groups' describe APIs (ConsumerGroupDescribe, ShareGroupDescribe): DESCRIBE
    on each of ``req.group_ids``, Kafka's order (the groups denied first, with
    GROUP_AUTHORIZATION_FAILED), the allowed ones described by ``call(describe, req,
    authorized_operations=...)`` with the caller's operations on each."""
    if broker.authorizer is None:
        return call(describe, req, authorized_operations=lambda _group: authorized_operations(ResourceType.GROUP))
    allowed = authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_ids)
    denied = [dict(group_id=g, error_code=ErrorCode.group_authorization_failed, error_message=None, group_state="",
                   group_epoch=0, assignment_epoch=0, assignor_name="", members=[])
              for g in req.group_ids if g not in allowed]
    result = call(describe, replace(req, group_ids=tuple(g for g in req.group_ids if g in allowed)),
                  authorized_operations=lambda group: authorized_operations_bits(broker, ctx, ResourceType.GROUP, group))

    return then(result, lambda resp: response_for(req, groups=denied + list(resp.groups)))


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of a frozen kio message with some fields changed."""
    return dataclasses.replace(obj, **changes)


#: ConfigResource.Type ids (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_CLIENT_METRICS, _CONFIG_GROUP, _CONFIG_BROKER_LOGGER = 2, 4, 16, 32, 8


def config_resource_denied(broker: Broker, ctx: RequestContext, op: AclOperation, resource_type: int,
                           name: str) -> ErrorCode | None:
    """The error for a config resource the caller may not ``op`` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS), None when allowed (ConfigHelper / KafkaApis): broker, broker logger and
    client metrics resources are checked on the cluster, topics and groups by name. Other
    types are left to the config service to refuse."""
    if resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
        return None if authorize_cluster(broker, ctx, op) else ErrorCode.cluster_authorization_failed
    if resource_type == _CONFIG_TOPIC:
        return None if authorize(broker, ctx, op, ResourceType.TOPIC, name) else ErrorCode.topic_authorization_failed
    if resource_type == _CONFIG_GROUP:
        return None if authorize(broker, ctx, op, ResourceType.GROUP, name) else ErrorCode.group_authorization_failed
    return None
