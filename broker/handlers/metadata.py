"""Metadata: brokers, cluster id, controller, and every requested topic's partitions
(this broker leads them all, leader epoch 0). Unknown topics are auto-created when both
the request and auto.create.topics.enable allow it."""

from __future__ import annotations

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..topics import topic_name_error
from . import handles

LEADER_EPOCH = 0


def brokers(broker) -> list[dict]:
    return [dict(node_id=broker.node_id, host=lst.host, port=lst.port, rack=None)
            for lst in broker.config.advertised_listeners[:1]]


def _topic_entry(broker, info) -> dict:
    node = broker.node_id
    return dict(
        error_code=ErrorCode.none, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
        partitions=[dict(error_code=ErrorCode.none, partition_index=p, leader_id=node, leader_epoch=LEADER_EPOCH,
                         replica_nodes=(node,), isr_nodes=(node,), offline_replicas=())
                    for p in range(info.partitions)],
    )


@handles(ApiKey.METADATA)
def metadata(broker, ctx, req):
    version = ctx.version
    rtype = apis.response_type(ApiKey.METADATA, version)
    reg = broker.registry
    if req.topics is None or (version == 0 and not req.topics):
        cached = broker.metadata_cache.get(version)
        if cached is not None and cached[0] == reg.version:
            return cached[1]
        topics = [_topic_entry(broker, info) for info in reg.topics.values()]
        resp = make(rtype, throttle_time=0, brokers=brokers(broker), cluster_id=reg.cluster_id,
                    controller_id=broker.node_id, topics=topics)
        broker.metadata_cache[version] = (reg.version, resp)
        return resp
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    topics = []
    for t in req.topics:
        name = t.name
        info = None
        if name is None and getattr(t, "topic_id", None) is not None:
            info = reg.by_id.get(t.topic_id)
            if info is None:
                topics.append(dict(error_code=ErrorCode.unknown_topic_id, name=None, topic_id=t.topic_id))
                continue
        else:
            info = reg.get(name)
        if info is None:
            if topic_name_error(name):
                topics.append(dict(error_code=ErrorCode.invalid_topic_exception, name=name, partitions=[]))
                continue
            if allow_auto:
                info = broker.auto_create(name)
            if info is None:
                topics.append(dict(error_code=ErrorCode.unknown_topic_or_partition, name=name, partitions=[]))
                continue
        topics.append(_topic_entry(broker, info))
    return make(rtype, throttle_time=0, brokers=brokers(broker), cluster_id=reg.cluster_id,
                controller_id=broker.node_id, topics=topics)
