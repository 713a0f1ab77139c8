"""Metadata: brokers, cluster id, controller, and every requested topic's partitions
(single node: this broker leads them all at epoch 0; cluster mode: leader, epoch,
replicas and ISR from ZooKeeper, LEADER_NOT_AVAILABLE while a partition has no live
leader). Unknown topics are auto-created when both
the request and auto.create.topics.enable allow it."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..security.operations import ResourceType, authorized_operations
from ..topics import topic_name_error
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext




def brokers(broker: Broker) -> list[dict]:
    return [dict(node_id=bid, host=host, port=port, rack=None) for bid, host, port in broker.live_brokers()]


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
    key = (version, broker.cluster_version(), _include_topic_ops(req), _include_cluster_ops(req),
           None if all_topics else tuple((t.name, getattr(t, "topic_id", None)) for t in req.topics))
    cache = broker.metadata_cache
    if cache.get("registry_version") != reg.version:
        cache.clear()
        cache["registry_version"] = reg.version
    body = cache.get(key)
    if body is None:
        resp, cacheable = _build(broker, req, version, all_topics)
        body = framing.encode_body(resp)
        # a reply with errors (unknown topics) may change without the registry changing
        if cacheable and reg.version == cache["registry_version"]:
            if len(cache) > 256:
                cache.clear()
                cache["registry_version"] = reg.version
            cache[key] = body
    header = framing.response_header_bytes(ApiKey.METADATA, version, ctx.header.correlation_id)
    return [struct.pack(">i", len(header) + len(body)), header, body]


def _include_topic_ops(req) -> bool:
    return bool(getattr(req, "include_topic_authorized_operations", False))


def _include_cluster_ops(req) -> bool:
    # v8-10 only; from v11 clients ask DescribeCluster instead
    return bool(getattr(req, "include_cluster_authorized_operations", False))


def _build(broker: Broker, req, version: int, all_topics: bool):
    rtype = apis.response_type(ApiKey.METADATA, version)
    reg = broker.registry
    ops = authorized_operations(ResourceType.TOPIC, _include_topic_ops(req))
    # make() drops the field for versions that lack it (v11+)
    extra = dict(cluster_authorized_operations=authorized_operations(ResourceType.CLUSTER, _include_cluster_ops(req)))
    if all_topics:
        topics = [_topic_entry(broker, info, ops) for info in reg.topics.values()]
        return make(rtype, throttle_time=0, brokers=brokers(broker), cluster_id=reg.cluster_id,
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
                topics.append(dict(error_code=ErrorCode.unknown_topic_or_partition, name=name, partitions=[]))
                continue
        topics.append(_topic_entry(broker, info, ops))
    return make(rtype, throttle_time=0, brokers=brokers(broker), cluster_id=reg.cluster_id,
                controller_id=broker.controller_id(), topics=topics, **extra), cacheable
