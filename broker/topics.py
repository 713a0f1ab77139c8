"""The topic registry: every topic's id, partition count and config overrides, plus the
dynamic broker configs (this broker's own and the cluster-wide defaults), persisted as one
JSON document in the first log dir. On a single node it is also where the local metadata
store (broker.metadata.local) keeps the partition states and producer id blocks; on
ZooKeeper its topics are a cache of ZooKeeper's.

Apache Kafka keeps this in its metadata log (KRaft); a single broker needs only a small
document written atomically (tmp + fsync + rename). Partition data lives in storage/.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from storage.config import LogConfig

from .config import TOPIC_DEFAULT_SOURCES, ConfigError, validate_dynamic_configs

METADATA_FILE = "krait-metadata.json"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
#: Kafka's AdminUtils.ADMIN_CLIENT_ID: the one client id whose Produce requests may append
#: to internal topics (KafkaApis' internalTopicsAllowed)
ADMIN_CLIENT_ID = "__admin_client"
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249

log = logging.getLogger("krait.topics")


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate: the reason a name is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    def __init__(self, log_dir: str | Path):
        self.path = Path(log_dir) / METADATA_FILE
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        #: dynamic configs of this broker (resource name = its id): DYNAMIC_BROKER_CONFIG
        self.broker_configs: dict[str, str] = {}
        #: cluster-wide dynamic defaults (resource name ""): DYNAMIC_DEFAULT_BROKER_CONFIG
        self.default_broker_configs: dict[str, str] = {}
        self.cluster_id: str | None = None
        self.next_producer_id_block = 0
        #: the local metadata store's partition states (broker.metadata.local), as stored
        self.partition_states: dict[str, dict] = {}
        #: bumped on every change so cached Metadata responses can be invalidated
        self.version = 0

    def load(self) -> None:
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        self.cluster_id = doc.get("cluster_id")
        self.broker_configs = _valid_dynamic(doc.get("broker_configs", {}), per_broker=True)
        self.default_broker_configs = _valid_dynamic(doc.get("default_broker_configs", {}), per_broker=False)
        self.next_producer_id_block = int(doc.get("next_producer_id_block", 0))
        self.partition_states = dict(doc.get("partition_states", {}))
        for name, t in doc.get("topics", {}).items():
            info = TopicInfo(name, uuid.UUID(t["id"]), int(t["partitions"]), dict(t.get("configs", {})))
            self.topics[name] = info
            self.by_id[info.topic_id] = info
        self.version += 1

    def save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "broker_configs": self.broker_configs,
            "default_broker_configs": self.default_broker_configs,
            "next_producer_id_block": self.next_producer_id_block,
            "partition_states": self.partition_states,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in self.topics.values()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.version += 1

    def broker_configs_as_topic_defaults(self) -> dict[str, str]:
        """Dynamic broker configs (AlterConfigs on the broker) that change topic defaults,
        renamed to their topic-level keys (log.retention.ms -> retention.ms, ...); this
        broker's own win over the cluster-wide defaults. Only the first broker synonym of a
        topic config is dynamic in Kafka, so these simply replace the static defaults."""
        return dynamic_topic_defaults(self.default_broker_configs, self.broker_configs)

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def add(self, name: str, partitions: int, configs: dict[str, str], topic_id: uuid.UUID | None = None) -> TopicInfo:
        """Add a topic to the view; the local metadata store saves the document after it."""
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs))
        self.topics[name] = info
        self.by_id[info.topic_id] = info
        return info

    def replace_topics(self, topics: dict[str, TopicInfo]) -> None:
        """Cluster mode: the topics are ZooKeeper's; this document only caches them."""
        if topics == self.topics:
            return
        self.topics = dict(topics)
        self.by_id = {t.topic_id: t for t in topics.values()}
        self.version += 1

    def remove(self, name: str) -> TopicInfo | None:
        """Take a topic out of the view (as :meth:`add`, not saved here)."""
        info = self.topics.pop(name, None)
        if info is not None:
            self.by_id.pop(info.topic_id, None)
        return info


def dynamic_topic_defaults(default: dict[str, str], per_broker: dict[str, str]) -> dict[str, str]:
    """Topic-config defaults set by dynamic broker configs, under their topic-level names."""
    merged = {**default, **per_broker}
    return {t: merged[b] for t, b in TOPIC_DEFAULT_SOURCES.items() if b in merged}


def _valid_dynamic(configs: dict[str, str], per_broker: bool) -> dict[str, str]:
    """Persisted dynamic configs that are still valid; as Kafka does, others are logged and
    ignored rather than stopping the broker (a Krait upgrade may refuse a key it accepted)."""
    reverse = {b: t for t, b in TOPIC_DEFAULT_SOURCES.items()}
    out = {}
    for k, v in configs.items():
        try:
            validate_dynamic_configs({k: v}, per_broker)
            if k in reverse:
                LogConfig.from_props({reverse[k]: v})
        except (ConfigError, ValueError) as exc:
            log.error("Dynamic %s config %s is invalid and will be ignored: %s",
                      "broker" if per_broker else "default cluster", k, exc)
            continue
        out[str(k)] = str(v)
    return out
