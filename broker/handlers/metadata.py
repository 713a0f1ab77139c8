"""Metadata: brokers, cluster id, controller, and every requested topic's partitions
(single node: this broker leads them all at epoch 0; cluster mode: leader, epoch,
replicas and ISR from ZooKeeper, LEADER_NOT_AVAILABLE while a partition has no live
leader). Unknown topics are auto-created when both
the request and auto.create.topics.enable allow it. With an authorizer the answer depends
on the caller (see :func:`_build_authorized`) and is cached per principal and host."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security import access
from ..security.operations import AclOperation, ResourceType, authorized_operations
from ..topics import topic_name_error
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext




def brokers(broker: Broker, ctx: RequestContext) -> list[dict]:
    """The live brokers' endpoints on the listener the client came in on (as Kafka answers)."""
    return [dict(node_id=bid, host=host, port=port, rack=None)
            for bid, host, port in broker.live_brokers(ctx.conn.listener_name)]


def partition_entry(broker: Broker, topic: str, p: int) -> dict:
    error, leader, epoch, replicas, isr, offline = broker.partition_metadata(topic, p)
    return dict(error_code=error, partition_index=p, leader_id=leader, leader_epoch=epoch,
                replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)


def _topic_entry(broker: Broker, info, ops: int) -> dict:
    return dict(
        error_code=ErrorCode.none, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
        topic_authorized_operations=ops,
        partitions=[partition_entry(broker, info.name, p) for p in range(info.partitions)],
    )


@handles(ApiKey.METADATA, versions=(0, 12))
def metadata(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Metadata bodies are cached, encoded, per (version, requested topics) until the topic
    registry changes: clients ask the same question every few seconds, and encoding
    thousands of partitions costs tens of milliseconds."""
    version = ctx.version
    reg = broker.registry
    all_topics = req.topics is None or (version == 0 and not req.topics)
    key = (version, broker.cluster_version(), ctx.conn.listener_name, _include_topic_ops(req), _include_cluster_ops(req),
           None if all_topics else tuple((t.name, getattr(t, "topic_id", None)) for t in req.topics))
    if broker.authorizer is not None:
        # the answer depends on who asks, and from where (host ACLs); the cache is cleared
        # whenever the ACLs change (Broker._security_changed)
        key += (ctx.principal, ctx.client_host)
    cache = broker.metadata_cache
    if cache.get("registry_version") != reg.version:
        cache.clear()
        cache["registry_version"] = reg.version
    body = cache.get(key)
    if body is None:
        if broker.authorizer is None:
            resp, cacheable = _build(broker, ctx, req, version, all_topics)
        else:
            resp, cacheable = _build_authorized(broker, ctx, req, version, all_topics)
        body = framing.encode_body(resp)
        # a reply with errors (unknown topics) may change without the registry changing
        if cacheable and reg.version == cache["registry_version"]:
            if len(cache) > 256:
                cache.clear()
                cache["registry_version"] = reg.version
            cache[key] = body
    header = framing.response_header_bytes(ApiKey.METADATA, version, ctx.header.correlation_id)
    return [struct.pack(">i", len(header) + len(body)), header, body]


def _missing(broker: Broker, name: str) -> ErrorCode:
    """A topic not in the registry: LEADER_NOT_AVAILABLE while its auto-creation runs (in
    cluster mode, in the background), as Kafka answers for a topic it is creating."""
    return ErrorCode.leader_not_available if broker.topics.being_created(name) else ErrorCode.unknown_topic_or_partition


def _include_topic_ops(req) -> bool:
    return bool(getattr(req, "include_topic_authorized_operations", False))


def _include_cluster_ops(req) -> bool:
    # v8-10 only; from v11 clients ask DescribeCluster instead
    return bool(getattr(req, "include_cluster_authorized_operations", False))


def _build(broker: Broker, ctx: RequestContext, req, version: int, all_topics: bool):
    rtype = apis.response_type(ApiKey.METADATA, version)
    reg = broker.registry
    ops = authorized_operations(ResourceType.TOPIC, _include_topic_ops(req))
    # make() drops the field for versions that lack it (v11+)
    extra = dict(cluster_authorized_operations=authorized_operations(ResourceType.CLUSTER, _include_cluster_ops(req)))
    if all_topics:
        topics = [_topic_entry(broker, info, ops) for info in reg.topics.values()]
        return make(rtype, throttle_time=0, brokers=brokers(broker, ctx), cluster_id=reg.cluster_id,
                    controller_id=broker.controller_id(), topics=topics, **extra), True
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    topics = []
    cacheable = True
    for t in req.topics:
        name = t.name
        info = None
        if name is None and getattr(t, "topic_id", None) is not None:
            info = reg.by_id.get(t.topic_id)
            if info is None:
                topics.append(dict(error_code=ErrorCode.unknown_topic_id, name=None, topic_id=t.topic_id))
                cacheable = False
                continue
        else:
            info = reg.get(name)
        if info is None:
            cacheable = False
            if topic_name_error(name):
                topics.append(dict(error_code=ErrorCode.invalid_topic_exception, name=name, partitions=[]))
                continue
            if allow_auto:
                info = broker.topics.auto_create(name)
            if info is None:
                topics.append(dict(error_code=_missing(broker, name), name=name, partitions=[]))
                continue
        topics.append(_topic_entry(broker, info, ops))
    return make(rtype, throttle_time=0, brokers=brokers(broker, ctx), cluster_id=reg.cluster_id,
                controller_id=broker.controller_id(), topics=topics, **extra), cacheable


def _build_authorized(broker: Broker, ctx: RequestContext, req, version: int, all_topics: bool):
    """KafkaApis.handleTopicMetadataRequest with an authorizer: topics the caller may not
    DESCRIBE are left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED
    (no id, no partitions, whether they exist or not) when named; a missing topic is
    auto-created only with CREATE on the cluster or the topic (else
    TOPIC_AUTHORIZATION_FAILED); the operation bit fields are the caller's."""
    rtype = apis.response_type(ApiKey.METADATA, version)
    reg = broker.registry
    include_ops = _include_topic_ops(req)
    # v8-10 only; make() drops the field for the other versions
    extra = dict(cluster_authorized_operations=access.cluster_operations_bits(broker, ctx, _include_cluster_ops(req)))

    def entry(info) -> dict:
        return _topic_entry(broker, info, access.authorized_operations_bits(broker, ctx, ResourceType.TOPIC, info.name,
                                                                            include_ops))

    def denied(name, topic_id=None) -> dict:
        return dict(error_code=ErrorCode.topic_authorization_failed, name=name, topic_id=topic_id, is_internal=False,
                    partitions=[])

    if all_topics:
        allowed = access.authorized_names(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, reg.topics)
        topics = [entry(info) for name, info in reg.topics.items() if name in allowed]
        return make(rtype, throttle_time=0, brokers=brokers(broker, ctx), cluster_id=reg.cluster_id,
                    controller_id=broker.controller_id(), topics=topics, **extra), True
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    may_create_all = None
    topics = []
    cacheable = True
    for t in req.topics:
        name = t.name
        by_id = name is None and getattr(t, "topic_id", None) is not None
        if by_id:
            info = reg.by_id.get(t.topic_id)
            if info is None:
                topics.append(dict(error_code=ErrorCode.unknown_topic_id, name=None, topic_id=t.topic_id))
                cacheable = False
                continue
            name = info.name
        else:
            info = reg.get(name)
        if not access.authorize(broker, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            # topic ids are not secret, names are
            topics.append(denied(None, t.topic_id) if by_id else denied(name))
            continue
        if info is None:
            cacheable = False
            if topic_name_error(name):
                topics.append(dict(error_code=ErrorCode.invalid_topic_exception, name=name, partitions=[],
                                   topic_authorized_operations=access.authorized_operations_bits(
                                       broker, ctx, ResourceType.TOPIC, name, include_ops)))
                continue
            if allow_auto and broker.config["auto.create.topics.enable"]:
                if may_create_all is None:
                    may_create_all = access.authorize_cluster(broker, ctx, AclOperation.CREATE)
                if not may_create_all and not access.authorize(broker, ctx, AclOperation.CREATE,
                                                               ResourceType.TOPIC, name):
                    topics.append(denied(name))
                    continue
            if allow_auto:
                info = broker.topics.auto_create(name)
            if info is None:
                topics.append(dict(error_code=_missing(broker, name), name=name, partitions=[],
                                   topic_authorized_operations=access.authorized_operations_bits(
                                       broker, ctx, ResourceType.TOPIC, name, include_ops)))
                continue
        topics.append(entry(info))
    return make(rtype, throttle_time=0, brokers=brokers(broker, ctx), cluster_id=reg.cluster_id,
                controller_id=broker.controller_id(), topics=topics, **extra), cacheable
