"""Kafka's ZooKeeper-mode layout (kafka.zk.ZkData): the paths and the JSON of each node,
byte-compatible so that an operator's zkCli.sh / zookeeper-shell.sh view looks like a
Kafka cluster's. Pure functions: no ZooKeeper client here."""

from __future__ import annotations

import json
import time

from ..config import Listener

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
#: KafkaController.InitialControllerEpoch: the first elected controller gets epoch 1
INITIAL_CONTROLLER_EPOCH = 0
#: the persistent paths Kafka creates at start-up (KafkaZkClient.createTopLevelPaths)
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
                    "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
                    "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
                    "/config/brokers", "/config/ips")


def _json(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def encode_broker(advertised: list[Listener], rack: str | None = None, now_ms: int | None = None) -> bytes:
    """BrokerIdZNode v5: top-level host/port of the first PLAINTEXT endpoint (for old
    clients), every endpoint, the listener -> security protocol map, no JMX."""
    plain = next((lst for lst in advertised if lst.name == "PLAINTEXT"), None)
    doc: dict = {
        "features": {},
        "listener_security_protocol_map": {lst.name: lst.name for lst in advertised},
        "endpoints": [str(lst) for lst in advertised],
        "jmx_port": -1,
        "port": plain.port if plain else -1,
        "host": plain.host if plain else None,
        "version": 5,
        "timestamp": str(now_ms if now_ms is not None else int(time.time() * 1000)),
    }
    if rack is not None:
        doc["rack"] = rack
    return _json(doc)


def decode_broker(data: bytes) -> dict:
    return json.loads(data)


def endpoint_for(registration: dict, listener: str) -> tuple[str, int] | None:
    """(host, port) of a registration's endpoint for ``listener`` (clients are answered
    with the endpoints of the listener they connected to, as Kafka does)."""
    for ep in registration.get("endpoints", []):
        name, _, rest = ep.partition("://")
        if name == listener:
            host, _, port = rest.rpartition(":")
            return host.strip("[]"), int(port)
    return None


def encode_controller(broker_id: int, now_ms: int | None = None) -> bytes:
    return _json({"version": 2, "brokerid": broker_id,
                  "timestamp": str(now_ms if now_ms is not None else int(time.time() * 1000)),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])
