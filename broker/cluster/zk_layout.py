"""Kafka's ZooKeeper-mode layout (kafka.zk.ZkData): the paths and the JSON of each node,
byte-compatible so that an operator's zkCli.sh / zookeeper-shell.sh view looks like a
Kafka cluster's, and a Kafka tool reading them finds the key names and value types it
expects (Kafka encodes with Jackson: compact, UTF-8, key order irrelevant). Owns: broker
registration, controller, cluster id, topic znode (TopicZNode v3), partition state
(TopicPartitionStateZNode v1), topic config (ConfigEntityZNode), config change
notification (ConfigEntityChangeNotificationSequenceZNode v2), /admin/reassign_partitions,
the producer id block (ProducerIdBlockZNode) and the log dir event notification
(LogDirEventNotificationSequenceZNode), plus Kafka's Uuid text form. Pure
functions: no ZooKeeper client here."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError

from ..endpoints import Listener
from .election import PartitionState

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
#: ConfigEntityChangeNotificationSequenceZNode.SequenceNumberPrefix (a sequential znode)
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
#: Krait's field in a broker registration: the URL of its Schema Registry
SCHEMA_REGISTRY_URL = "krait_schema_registry_url"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
#: LogDirEventNotificationZNode: a broker whose log dir failed adds a sequential child
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
#: LogDirEventNotificationSequenceZNode.SequenceNumberPrefix
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: LogDirEventNotificationSequenceZNode.LogDirFailureEvent (the only event there is)
LOG_DIR_FAILURE_EVENT = 1
#: ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PRODUCER_ID_BLOCK_SIZE = 1000
#: KafkaController.InitialControllerEpoch: the first elected controller gets epoch 1
INITIAL_CONTROLLER_EPOCH = 0
#: the persistent paths Kafka creates at start-up (KafkaZkClient.createTopLevelPaths)
PERSISTENT_PATHS = ("/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
                    "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
                    "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
                    "/config/brokers", "/config/ips")


# A \u00XX escape in json.dumps output: preceded by an even number of backslashes (a
# literal backslash is written as two).
_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")


def _json(obj: dict) -> bytes:
    """Jackson's default output: no spaces, UTF-8 (not \\u escapes) for non-ASCII, and
    upper-case hex in the \\u00XX escapes of control characters."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if "\\u00" in text:
        text = _ESCAPE.sub(lambda m: f"{m.group(1)}\\u00{m.group(2).upper()}", text)
    return text.encode()


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def encode_broker(advertised: list[Listener], rack: str | None = None, now_ms: int | None = None,
                  extra: dict | None = None) -> bytes:
    """BrokerIdZNode v5: top-level host/port of the first PLAINTEXT endpoint (for old
    clients), every endpoint, the listener -> security protocol map, no JMX. ``extra``:
    Krait's own fields (the Schema Registry's URL), which Kafka's parser ignores."""
    plain = next((lst for lst in advertised if lst.name == "PLAINTEXT"), None)
    doc: dict = {
        "features": {},
        "listener_security_protocol_map": {lst.name: lst.security_protocol for lst in advertised},
        "endpoints": [str(lst) for lst in advertised],
        "jmx_port": -1,
        "port": plain.port if plain else -1,
        "host": plain.host if plain else None,
        "version": 5,
        "timestamp": str(now_ms if now_ms is not None else int(time.time() * 1000)),
    }
    if rack is not None:
        doc["rack"] = rack
    doc.update(extra or {})
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


def all_endpoints(registration: dict) -> dict[str, tuple[str, int]]:
    """listener name -> (host, port) of every endpoint of a registration."""
    out = {}
    for ep in registration.get("endpoints", []):
        name, _, rest = ep.partition("://")
        host, _, port = rest.rpartition(":")
        out[name] = (host.strip("[]"), int(port))
    return out


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


# --- Kafka's Uuid (org.apache.kafka.common.Uuid) ----------------------------------------------
#: Uuid.ZERO_UUID: "no topic id" (a topic znode written before Kafka 2.8 has none)
ZERO_UUID = uuid.UUID(int=0)
#: Uuid.RESERVED: ZERO_UUID and ONE_UUID (= METADATA_TOPIC_ID)
_RESERVED_UUIDS = (ZERO_UUID, uuid.UUID(int=1))


def encode_uuid(value: uuid.UUID) -> str:
    """Uuid.toString: the 16 bytes (most significant first) in URL-safe base64 without
    padding, 22 characters."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def decode_uuid(text: str) -> uuid.UUID:
    """Uuid.fromString, with its checks."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the expected "
                         "16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)


def random_topic_id() -> uuid.UUID:
    """Uuid.randomUuid: a random (v4) id that is not reserved and whose text form does not
    start with "-" (it would read as an option on a command line)."""
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED_UUIDS and not encode_uuid(value).startswith("-"):
            return value


# --- topics: /brokers/topics/<t> (TopicZNode) --------------------------------------------------
def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


Replicas = dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class TopicAssignment:
    """A decoded topic znode: Kafka's TopicIdReplicaAssignment. ``partitions`` holds each
    partition's full replica list (during a reassignment: target and original replicas),
    ``adding`` / ``removing`` only the partitions being reassigned."""

    topic_id: uuid.UUID | None
    partitions: Replicas
    adding: Replicas = field(default_factory=dict)
    removing: Replicas = field(default_factory=dict)

    def with_partition(self, partition: int, replicas: tuple[int, ...], adding: tuple[int, ...] = (),
                       removing: tuple[int, ...] = ()) -> TopicAssignment:
        """One partition's replicas and adding/removing replicas replaced (a reassignment
        starting, or ending with empty adding/removing)."""
        def put(current: Replicas, value: tuple[int, ...]) -> Replicas:
            out = {p: rs for p, rs in current.items() if p != partition}
            return {**out, partition: tuple(value)} if value else out

        return TopicAssignment(self.topic_id, {**self.partitions, partition: tuple(replicas)},
                               put(self.adding, adding), put(self.removing, removing))


def _replica_map(replicas: dict) -> dict[str, list[int]]:
    return {str(p): [int(r) for r in rs] for p, rs in sorted(replicas.items()) if rs}


def encode_topic(topic_id: uuid.UUID | None, partitions: Replicas, adding: Replicas | None = None,
                 removing: Replicas | None = None) -> bytes:
    """TopicZNode.encode, version 3: {"version":3,"partitions":{"0":[1,2]},
    "adding_replicas":{},"removing_replicas":{},"topic_id":"<Uuid>"}. Partition ids are
    strings, replicas ints; adding/removing are always there, holding only the partitions
    with a non-empty list; topic_id only when the topic has one."""
    doc: dict = {"version": 3, "partitions": {str(p): [int(r) for r in rs] for p, rs in sorted(partitions.items())},
                 "adding_replicas": _replica_map(adding or {}), "removing_replicas": _replica_map(removing or {})}
    if topic_id is not None:
        doc["topic_id"] = encode_uuid(topic_id)
    return _json(doc)


def decode_topic(data: bytes) -> TopicAssignment:
    """TopicZNode.decode: any version (1 and 2 lack adding/removing, before 3 the topic id)."""
    doc = json.loads(data) if data else {}
    topic_id = doc.get("topic_id")

    def replicas(key: str) -> Replicas:
        return {int(p): tuple(int(r) for r in rs) for p, rs in (doc.get(key) or {}).items()}

    return TopicAssignment(decode_uuid(topic_id) if topic_id is not None else None, replicas("partitions"),
                           replicas("adding_replicas"), replicas("removing_replicas"))


# --- partition state: /brokers/topics/<t>/partitions/<p>/state ------------------------------------
def encode_partition_state(state: PartitionState) -> bytes:
    """TopicPartitionStateZNode.encode, version 1 (leader_recovery_state, written by Kafka
    only while RECOVERING after an unclean election, is not used by Krait)."""
    return _json({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                  "controller_epoch": state.controller_epoch, "isr": [int(r) for r in state.isr]})


def decode_partition_state(data: bytes, zk_version: int = -1) -> PartitionState:
    """TopicPartitionStateZNode.decode; ``zk_version`` is the znode's Stat version (Kafka's
    partitionEpoch in ZooKeeper mode), the version a conditional update expects."""
    doc = json.loads(data)
    return PartitionState(int(doc["leader"]), int(doc["leader_epoch"]), tuple(int(r) for r in doc["isr"]),
                          int(doc["controller_epoch"]), zk_version)


# --- topic config: /config/topics/<t> (ConfigEntityZNode) -----------------------------------------
def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def encode_config(configs: dict[str, str]) -> bytes:
    """ConfigEntityZNode.encode: {"version":1,"config":{"retention.ms":"1000"}}: the
    entity's overrides only, every value a string (a java.util.Properties)."""
    return _json({"version": 1, "config": {str(k): str(v) for k, v in configs.items()}})


def decode_config(data: bytes | None) -> dict[str, str]:
    """ConfigEntityZNode.decode: an empty or missing node is no override."""
    if not data:
        return {}
    doc = json.loads(data)
    config = doc.get("config") if isinstance(doc, dict) else None
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()}


# --- config change notification: /config/changes/config_change_<seq> ---------------------------
def config_change_path() -> str:
    """The path to create as a PERSISTENT_SEQUENTIAL node: ZooKeeper appends the sequence
    number (config_change_0000000000, ...)."""
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


def topic_entity_path(topic: str) -> str:
    """The sanitized entity path of a topic (topic names need no sanitizing)."""
    return f"topics/{topic}"


def encode_config_change(entity_path: str) -> bytes:
    """ConfigEntityChangeNotificationSequenceZNode.encode, version 2:
    {"version":2,"entity_path":"topics/<t>"}."""
    return _json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path of a notification: version 2, or version 1's entity_type and
    entity_name (ConfigEntityChangeNotification's two formats)."""
    doc = json.loads(data)
    if int(doc.get("version", 1)) == 1:
        return f"{doc['entity_type']}/{doc['entity_name']}"
    return str(doc["entity_path"])


# --- /admin/reassign_partitions (ReassignPartitionsZNode, Kafka's legacy trigger) ---------------
def encode_reassignment(reassignment: dict[tuple[str, int], tuple[int, ...] | list[int]]) -> bytes:
    """{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}"""
    return _json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": [int(r) for r in rs]} for (t, p), rs in reassignment.items()]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    doc = json.loads(data)
    return {(str(e["topic"]), int(e["partition"])): tuple(int(r) for r in e["replicas"]) for e in doc["partitions"]}


# --- producer id block: /latest_producer_id_block (ProducerIdBlockZNode) --------------------------
def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    """{"version":1,"broker":<id>,"block_start":"<n>","block_end":"<n>"}: the bounds are
    strings (longs), the block is inclusive of both."""
    return _json({"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)})


def decode_producer_id_block(data: bytes) -> tuple[int, int, int]:
    """(broker, block_start, block_end), as ProducerIdBlockZNode.parseProducerIdBlockData."""
    doc = json.loads(data)
    return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])


def next_producer_id_block(current: bytes | None, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
    """ZkProducerIdManager: the block after the one the node holds (empty or missing: the
    first block, from 0), as (first, last). Ids are Java longs: past the last block, Kafka's
    "Have exhausted all producerIds."."""
    if not current:
        return 0, block_size - 1
    _, _, last = decode_producer_id_block(current)
    if last > 2**63 - 1 - block_size:
        raise KafkaError(ErrorCode.unknown_server_error, "Have exhausted all producerIds.")
    return last + 1, last + block_size


# --- log dir events: /log_dir_event_notification/log_dir_event_<seq> -----------------------------
def log_dir_event_path() -> str:
    """The path to create as a PERSISTENT_SEQUENTIAL node (log_dir_event_0000000000, ...)."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"


def encode_log_dir_event(broker_id: int) -> bytes:
    """LogDirEventNotificationSequenceZNode.encode: {"version":1,"broker":<id>,"event":1}."""
    return _json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int | None:
    """The broker id of a notification (Kafka reads only "broker"); None if unreadable."""
    try:
        return int(json.loads(data)["broker"])
    except (ValueError, KeyError, TypeError):
        return None
