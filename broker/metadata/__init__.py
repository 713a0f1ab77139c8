"""Where the cluster's metadata lives: topics, partition states, live brokers and the
controller, producer id blocks, log dir events, and the security store. Two stores give
the cluster layer (:mod:`broker.cluster.node`) the same membership and metadata
interface: the local store (:mod:`broker.metadata.local`, a one-broker cluster in a file
of the log dir, the embedded default) and the ZooKeeper store (``zookeeper.connect``:
:mod:`broker.cluster.membership` and :mod:`broker.cluster.zk_metadata`, in Kafka's
ZooKeeper-mode layout). Choosing one is the only place a broker asks which it runs on."""

from __future__ import annotations

from ..cluster.membership import ZkMembership
from ..config import BrokerConfig
from ..topics import TopicRegistry
from .local import LocalMembership


def open_membership(config: BrokerConfig, registry: TopicRegistry) -> ZkMembership | LocalMembership:
    """The membership (and, through ``open_metadata``, the metadata view) of this broker's
    cluster: ZooKeeper's when ``zookeeper.connect`` is set, else the local one-broker store."""
    if config["zookeeper.connect"]:
        session_ms = config["zookeeper.session.timeout.ms"]
        return ZkMembership(config["zookeeper.connect"], config.node_id, config.advertised_listeners,
                            session_timeout_ms=session_ms,
                            inter_broker_listener=config.inter_broker_listener().name,
                            connection_timeout_ms=config["zookeeper.connection.timeout.ms"] or session_ms)
    return LocalMembership(registry, config.node_id, config.advertised_listeners,
                           config.inter_broker_listener().name)
