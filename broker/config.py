"""Broker configuration: server.properties keys with Kafka's names, defaults and
validation, plus the mapping from broker-level `log.*` keys to topic-level defaults.

Unknown keys warn (Kafka logs "was supplied but isn't a known config"); invalid values
stop start-up with a message naming the key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger("krait.config")

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("expected true or false")


def _int(v: str) -> int:
    return int(v.strip())


def _str(v: str) -> str:
    return v.strip()


def _list(v: str) -> list[str]:
    return [x.strip() for x in v.split(",") if x.strip()]


# key -> (parser, default as a string or None). Defaults are Kafka's, except `listeners`
# and `log.dirs`, which the brief pins to a local embedded default.
BROKER_KEYS: dict[str, tuple] = {
    "listeners": (_list, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_list, None),
    "node.id": (_int, None),
    "broker.id": (_int, "1"),
    "log.dirs": (_list, None),
    "log.dir": (_list, "./data"),
    "num.partitions": (_int, "1"),
    "default.replication.factor": (_int, "1"),
    "auto.create.topics.enable": (_bool, "true"),
    "delete.topic.enable": (_bool, "true"),
    "message.max.bytes": (_int, "1048588"),
    "socket.request.max.bytes": (_int, "104857600"),
    "log.segment.bytes": (_int, "1073741824"),
    "log.roll.ms": (_int, None),
    "log.roll.hours": (_int, "168"),
    "log.index.size.max.bytes": (_int, "10485760"),
    "log.index.interval.bytes": (_int, "4096"),
    "log.retention.ms": (_int, None),
    "log.retention.minutes": (_int, None),
    "log.retention.hours": (_int, "168"),
    "log.retention.bytes": (_int, "-1"),
    "log.retention.check.interval.ms": (_int, "300000"),
    "log.segment.delete.delay.ms": (_int, "60000"),
    "log.flush.interval.messages": (_int, str(LONG_MAX)),
    "log.flush.interval.ms": (_int, None),
    "log.flush.scheduler.interval.ms": (_int, str(LONG_MAX)),
    "log.flush.offset.checkpoint.interval.ms": (_int, "60000"),
    "log.flush.start.offset.checkpoint.interval.ms": (_int, "60000"),
    "log.cleanup.policy": (_list, "delete"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.backoff.ms": (_int, "15000"),
    "log.cleaner.delete.retention.ms": (_int, "86400000"),
    "log.cleaner.min.compaction.lag.ms": (_int, "0"),
    "log.cleaner.min.cleanable.ratio": (float, "0.5"),
    "log.message.timestamp.type": (_str, "CreateTime"),
    "compression.type": (_str, "producer"),
    "min.insync.replicas": (_int, "1"),
    "offsets.topic.num.partitions": (_int, "50"),
    "offsets.topic.replication.factor": (_int, "3"),
    "offsets.topic.segment.bytes": (_int, "104857600"),
    "offsets.retention.minutes": (_int, "10080"),
    "offsets.retention.check.interval.ms": (_int, "600000"),
    "offset.metadata.max.bytes": (_int, "4096"),
    "group.min.session.timeout.ms": (_int, "6000"),
    "group.max.session.timeout.ms": (_int, "1800000"),
    "group.initial.rebalance.delay.ms": (_int, "3000"),
    "group.max.size": (_int, str(INT_MAX)),
    "transactional.id.expiration.ms": (_int, "604800000"),
    "producer.id.expiration.ms": (_int, "86400000"),
    "cluster.id": (_str, None),
}

# Keys a Kafka server.properties commonly carries that mean nothing to a single
# embedded broker: accepted silently so a copied config does not spam warnings.
IGNORED_KEYS = {
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "inter.broker.listener.name", "listener.security.protocol.map",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr", "log.cleaner.threads", "num.replica.fetchers",
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "group.coordinator.rebalance.protocols",
}

# topic config name -> broker key that supplies its default
TOPIC_DEFAULT_SOURCES: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "message.timestamp.type": "log.message.timestamp.type",
    "max.message.bytes": "message.max.bytes",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
}


class ConfigError(ValueError):
    """An invalid configuration value; start-up stops with this message."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listener(spec: str, key: str = "listeners") -> Listener:
    try:
        u = urlsplit(spec)
        port = u.port
    except ValueError:
        port = None
    if not u.scheme or port is None:
        raise ConfigError(f"Invalid value {spec!r} for configuration {key}: must look like PLAINTEXT://host:port")
    if u.scheme.upper() != "PLAINTEXT":
        raise ConfigError(f"Invalid value {spec!r} for configuration {key}: only PLAINTEXT listeners are supported")
    return Listener(u.scheme.upper(), u.hostname or "0.0.0.0", port)


def read_properties(path: str | Path) -> dict[str, str]:
    """Java .properties format: key=value or key: value, # and ! comments, \\ continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


@dataclass
class BrokerConfig:
    values: dict[str, object]
    originals: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> BrokerConfig:
        values: dict[str, object] = {}
        for key, (parser, default) in BROKER_KEYS.items():
            raw = props.get(key, default)
            if raw is None:
                values[key] = None
                continue
            try:
                values[key] = parser(str(raw))
            except ValueError as exc:
                raise ConfigError(f"Invalid value {raw!r} for configuration {key}: {exc}") from None
        for key in props:
            if key not in BROKER_KEYS and key not in IGNORED_KEYS:
                log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        cfg = cls(values, dict(props))
        cfg._validate()
        return cfg

    def __getitem__(self, key: str):
        return self.values[key]

    def _validate(self) -> None:
        for key in ("num.partitions", "default.replication.factor", "message.max.bytes",
                    "socket.request.max.bytes", "log.segment.bytes", "offsets.topic.num.partitions"):
            if int(self.values[key]) < 1:
                raise ConfigError(f"Invalid value {self.values[key]} for configuration {key}: must be at least 1")
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("Invalid value for configuration log.message.timestamp.type: "
                              "must be CreateTime or LogAppendTime")
        for p in self.values["log.cleanup.policy"]:
            if p not in ("delete", "compact"):
                raise ConfigError(f"Invalid value {p} for configuration log.cleanup.policy")
        self.listeners  # noqa: B018 - parse now so bad listeners fail at start-up
        self.advertised_listeners  # noqa: B018

    @property
    def node_id(self) -> int:
        nid = self.values["node.id"]
        return int(nid if nid is not None else self.values["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self.values["log.dirs"] or self.values["log.dir"])

    @property
    def listeners(self) -> list[Listener]:
        return [parse_listener(s) for s in self.values["listeners"]]

    @property
    def advertised_listeners(self) -> list[Listener]:
        adv = self.values["advertised.listeners"]
        if not adv:
            out = []
            for lst in self.listeners:
                host = lst.host if lst.host not in ("0.0.0.0", "", "::") else "127.0.0.1"
                out.append(Listener(lst.name, host, lst.port))
            return out
        return [parse_listener(s, "advertised.listeners") for s in adv]

    def retention_ms(self) -> int:
        if self.values["log.retention.ms"] is not None:
            return int(self.values["log.retention.ms"])
        if self.values["log.retention.minutes"] is not None:
            return int(self.values["log.retention.minutes"]) * 60_000
        return int(self.values["log.retention.hours"]) * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level config defaults as strings, derived from the broker's log.* keys."""
        out: dict[str, str] = {}
        for topic_key, broker_key in TOPIC_DEFAULT_SOURCES.items():
            v = self.values.get(broker_key)
            if topic_key == "retention.ms":
                v = self.retention_ms()
            elif topic_key == "segment.ms" and v is None:
                v = int(self.values["log.roll.hours"]) * 3_600_000
            elif topic_key == "flush.ms" and v is None:
                v = LONG_MAX
            if v is None:
                continue
            out[topic_key] = ",".join(v) if isinstance(v, list) else str(v)
        return out

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        props = dict(self.originals)
        props.update(overrides)
        return BrokerConfig.from_props(props)


def new_cluster_id() -> str:
    """Kafka's cluster ids are base64url UUIDs without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
