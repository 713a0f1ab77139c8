"""Broker configuration: server.properties keys with Kafka's names, defaults and
validation, plus the mapping from broker-level `log.*` keys to topic-level defaults, and
Kafka's rules for dynamic broker configs (which keys may change without a restart, at which
level, how their values are checked and how they override the static ones).

Unknown keys warn (Kafka logs "was supplied but isn't a known config"); invalid values
stop start-up with a message naming the key.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .dynamic_keys import BROKER_QUOTA_KEYS, DYNAMIC_ONLY_KEYS
from .endpoints import EndpointError, Listener, parse_listener, parse_protocol_map
from .key_types import BROKER_KEY_TYPES

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
    "listener.security.protocol.map": (_list, ",".join(f"{p}:{p}" for p in ("SASL_SSL", "PLAINTEXT", "SSL", "SASL_PLAINTEXT"))),
    "inter.broker.listener.name": (_str, None),
    "security.inter.broker.protocol": (_str, "PLAINTEXT"),
    "sasl.mechanism.inter.broker.protocol": (_str, "GSSAPI"),
    "connections.max.reauth.ms": (_int, "0"),
    "connection.failed.authentication.delay.ms": (_int, "100"),
    "sasl.server.max.receive.size": (_int, "524288"),
    "max.connections": (_int, str(INT_MAX)),
    "max.connections.per.ip": (_int, str(INT_MAX)),
    "max.connections.per.ip.overrides": (_str, ""),
    "authorizer.class.name": (_str, ""),
    "super.users": (_str, None),
    "allow.everyone.if.no.acl.found": (_bool, "false"),
    "quota.window.num": (_int, "11"),
    "quota.window.size.seconds": (_int, "1"),
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
    "log.roll.jitter.ms": (_int, None),
    "log.roll.jitter.hours": (_int, "0"),
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
    "replica.high.watermark.checkpoint.interval.ms": (_int, "5000"),
    "log.cleanup.policy": (_list, "delete"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.backoff.ms": (_int, "15000"),
    "log.cleaner.delete.retention.ms": (_int, "86400000"),
    "log.cleaner.min.compaction.lag.ms": (_int, "0"),
    "log.cleaner.max.compaction.lag.ms": (_int, str(LONG_MAX)),
    "log.cleaner.min.cleanable.ratio": (float, "0.5"),
    "log.message.timestamp.type": (_str, "CreateTime"),
    "log.message.timestamp.before.max.ms": (_int, str(LONG_MAX)),
    "log.message.timestamp.after.max.ms": (_int, "3600000"),
    "log.preallocate": (_bool, "false"),
    "compression.type": (_str, "producer"),
    "min.insync.replicas": (_int, "1"),
    "unclean.leader.election.enable": (_bool, "false"),
    "offsets.topic.num.partitions": (_int, "50"),
    "offsets.topic.replication.factor": (_int, "3"),
    "offsets.topic.segment.bytes": (_int, "104857600"),
    "offsets.retention.minutes": (_int, "10080"),
    "offsets.retention.check.interval.ms": (_int, "600000"),
    "offset.metadata.max.bytes": (_int, "4096"),
    "offsets.commit.timeout.ms": (_int, "5000"),
    "group.min.session.timeout.ms": (_int, "6000"),
    "group.max.session.timeout.ms": (_int, "1800000"),
    "group.initial.rebalance.delay.ms": (_int, "3000"),
    "group.max.size": (_int, str(INT_MAX)),
    # KIP-848 consumer groups (Kafka's GroupCoordinatorConfig)
    "group.coordinator.rebalance.protocols": (_list, "classic,consumer"),
    "group.consumer.session.timeout.ms": (_int, "45000"),
    "group.consumer.min.session.timeout.ms": (_int, "45000"),
    "group.consumer.max.session.timeout.ms": (_int, "60000"),
    "group.consumer.heartbeat.interval.ms": (_int, "5000"),
    "group.consumer.min.heartbeat.interval.ms": (_int, "5000"),
    "group.consumer.max.heartbeat.interval.ms": (_int, "15000"),
    "group.consumer.max.size": (_int, str(INT_MAX)),
    "group.consumer.assignors": (_list, "uniform,range"),
    "group.consumer.migration.policy": (_str, "bidirectional"),
    "max.request.partition.size.limit": (_int, "2000"),
    "transactional.id.expiration.ms": (_int, "604800000"),
    # transactions (Kafka's TransactionLogConfig / TransactionStateManagerConfig)
    "transaction.state.log.num.partitions": (_int, "50"),
    "transaction.state.log.replication.factor": (_int, "3"),
    "transaction.state.log.min.isr": (_int, "2"),
    "transaction.state.log.segment.bytes": (_int, "104857600"),
    "transaction.max.timeout.ms": (_int, "900000"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_int, "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_int, "3600000"),
    "transaction.partition.verification.enable": (_bool, "true"),
    "producer.id.expiration.ms": (_int, "86400000"),
    "cluster.id": (_str, None),
    "zookeeper.connect": (_str, None),
    "zookeeper.session.timeout.ms": (_int, "18000"),
    "zookeeper.connection.timeout.ms": (_int, None),
    # replication (cluster mode)
    "replica.lag.time.max.ms": (_int, "30000"),
    "replica.fetch.max.bytes": (_int, "1048576"),
    "replica.fetch.response.max.bytes": (_int, "10485760"),
    "replica.fetch.wait.max.ms": (_int, "500"),
    "replica.socket.timeout.ms": (_int, "30000"),
    "replica.fetch.backoff.ms": (_int, "1000"),
    "num.replica.fetchers": (_int, "1"),
    "controlled.shutdown.enable": (_bool, "true"),
    "auto.leader.rebalance.enable": (_bool, "true"),
    "leader.imbalance.check.interval.seconds": (_int, "300"),
    "leader.imbalance.per.broker.percentage": (_int, "10"),
    # Krait's own keys: the HTTP listener of /metrics, /healthz and /readyz (empty disables
    # it), and log lines as text or JSON
    "krait.http.listener": (_str, "127.0.0.1:9644"),
    "krait.log.format": (_str, "text"),
}
#: the ConfigDef-like types of Krait's own keys (DescribeConfigs shows them, unmasked)
KRAIT_KEY_TYPES = {"krait.http.listener": "STRING", "krait.log.format": "STRING"}

# Keys a Kafka server.properties commonly carries that mean nothing to a single
# embedded broker: accepted silently so a copied config does not spam warnings.
IGNORED_KEYS = {
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr", "log.cleaner.threads",
}

# topic config name -> broker key that supplies its default
TOPIC_DEFAULT_SOURCES: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
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
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "max.message.bytes": "message.max.bytes",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


_SSL_RECONFIGURABLE = frozenset(k for k in DYNAMIC_ONLY_KEYS if k in (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"))
_LISTENER_RECONFIGURABLE = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads",
}) | _SSL_RECONFIGURABLE
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                               "sasl.server.callback.handler.class", "connections.max.reauth.ms")

#: Kafka's DynamicBrokerConfig.AllDynamicConfigs: what DescribeConfigs reports as not read-only.
ALL_DYNAMIC_CONFIGS: frozenset[str] = (
    frozenset(DYNAMIC_ONLY_KEYS) | frozenset(TOPIC_DEFAULT_SOURCES.values()) | _LISTENER_RECONFIGURABLE
    | {"log.cleaner.backoff.ms", "producer.id.expiration.ms"})
#: settable only on the broker's own resource (name = its id), never as a cluster-wide default
PER_BROKER_CONFIGS: frozenset[str] = _LISTENER_RECONFIGURABLE - _CLUSTER_LEVEL_LISTENER_CONFIGS
# Dynamic in Kafka, but Krait binds its listeners once at start-up: refused rather than
# stored and silently not applied.
KRAIT_RESTART_ONLY = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
# Keys Krait knows to be Kafka's and not dynamic; others outside the dynamic sets are kept
# as custom configs, as Kafka keeps them (it refuses only its own static keys).
NON_DYNAMIC_CONFIGS: frozenset[str] = (frozenset(BROKER_KEYS) | frozenset(IGNORED_KEYS)) - ALL_DYNAMIC_CONFIGS

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")


class ConfigError(ValueError):
    """An invalid configuration value; start-up stops with this message."""


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
    def from_props(cls, props: Mapping[str, str], *, warn_unknown: bool = True) -> BrokerConfig:
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
        for key in props if warn_unknown else ():
            if broker_config_type(key) is None:
                log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        cfg = cls(values, dict(props))
        cfg._validate()
        return cfg

    def __getitem__(self, key: str):
        return self.values[key]

    def _validate(self) -> None:
        for key in ("num.partitions", "default.replication.factor", "message.max.bytes",
                    "socket.request.max.bytes", "log.segment.bytes", "offsets.topic.num.partitions",
                    "quota.window.num", "quota.window.size.seconds"):
            if int(self.values[key]) < 1:
                raise ConfigError(f"Invalid value {self.values[key]} for configuration {key}: must be at least 1")
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("Invalid value for configuration log.message.timestamp.type: "
                              "must be CreateTime or LogAppendTime")
        for p in self.values["log.cleanup.policy"]:
            if p not in ("delete", "compact"):
                raise ConfigError(f"Invalid value {p} for configuration log.cleanup.policy")
        if self.values["krait.log.format"] not in ("text", "json"):
            raise ConfigError(f"Invalid value {self.values['krait.log.format']} for configuration krait.log.format: "
                              "must be text or json")
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
    def protocol_map(self) -> dict[str, str]:
        try:
            return parse_protocol_map(self.values["listener.security.protocol.map"])
        except EndpointError as exc:
            raise ConfigError(str(exc)) from None

    def _parse_listeners(self, key: str) -> list[Listener]:
        pmap = self.protocol_map
        try:
            return [parse_listener(s, key, pmap) for s in self.values[key]]
        except EndpointError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def listeners(self) -> list[Listener]:
        out = self._parse_listeners("listeners")
        names = [lst.name for lst in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ConfigError(f"Invalid value {','.join(self.values['listeners'])} for configuration listeners: "
                              f"each listener must have a different name, {dup} appears more than once")
        return out

    def inter_broker_listener(self) -> Listener:
        """The listener brokers reach each other on: inter.broker.listener.name, else the
        first listener of security.inter.broker.protocol (Kafka's KafkaConfig rules)."""
        name = self.values["inter.broker.listener.name"]
        adv = self.advertised_listeners
        if name:
            found = next((lst for lst in adv if lst.name == name.upper()), None)
            if found is None:
                raise ConfigError(f"Invalid value {name} for configuration inter.broker.listener.name: "
                                  "it must be a listener name defined in advertised.listeners")
            return found
        proto = str(self.values["security.inter.broker.protocol"]).upper()
        found = next((lst for lst in adv if lst.name == proto), None)
        if found is None:
            # Krait's embedded default tolerates a single listener of another protocol
            found = adv[0]
        return found

    @property
    def advertised_listeners(self) -> list[Listener]:
        adv = self.values["advertised.listeners"]
        if not adv:
            out = []
            for lst in self.listeners:
                host = lst.host if lst.host not in ("0.0.0.0", "", "::") else "127.0.0.1"
                out.append(Listener(lst.name, host, lst.port, lst.security_protocol))
            return out
        return self._parse_listeners("advertised.listeners")

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
            elif topic_key == "segment.jitter.ms" and v is None:
                v = int(self.values["log.roll.jitter.hours"]) * 3_600_000
            elif topic_key == "flush.ms" and v is None:
                v = LONG_MAX
            if v is None:
                continue
            out[topic_key] = ",".join(v) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)
        return out

    def with_dynamic(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The config in force once dynamic configs apply over these static ones."""
        return BrokerConfig.from_props(merge_dynamic(self.originals, default, per_broker), warn_unknown=False)


def new_cluster_id() -> str:
    """Kafka's cluster ids are base64url UUIDs without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# --- dynamic broker configs (Kafka's DynamicBrokerConfig) -------------------------------------
#: Kafka's defaults of the keys above (KafkaConfig.defaultValues: keys without one are absent)
BROKER_DEFAULTS: dict[str, str] = {
    **{k: d for k, (_, d) in BROKER_KEYS.items() if d is not None},
    **{k: d for k, (_, d) in DYNAMIC_ONLY_KEYS.items() if d is not None},
}

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_AT_LEAST = {
    "message.max.bytes": 0, "log.segment.bytes": 14, "log.index.size.max.bytes": 4, "log.index.interval.bytes": 0,
    "log.flush.interval.messages": 1, "log.segment.delete.delay.ms": 0, "min.insync.replicas": 1,
    "log.message.timestamp.before.max.ms": 0, "log.message.timestamp.after.max.ms": 0, "log.cleaner.threads": 0,
    "log.cleaner.io.buffer.size": 0, "log.cleaner.backoff.ms": 0, "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.min.compaction.lag.ms": 0, "log.cleaner.max.compaction.lag.ms": 1, "num.io.threads": 1,
    "num.network.threads": 1, "background.threads": 1, "num.recovery.threads.per.data.dir": 1,
    "max.connections": 0, "max.connections.per.ip": 0, "max.connection.creation.rate": 0,
    "producer.id.expiration.ms": 1, "quota.window.num": 1, "quota.window.size.seconds": 1,
}
_AT_MOST = {"log.cleaner.min.cleanable.ratio": 1}
_ONE_OF = {
    "log.message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "log.cleanup.policy": ("compact", "delete"),
}
_RANGES = {"SHORT": 1 << 15, "INT": 1 << 31, "LONG": 1 << 63}
_THREAD_POOLS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
                 "num.network.threads")
_CLEANER_RECONFIGURABLE = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
                           "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
                           "log.cleaner.backoff.ms")


def broker_config_synonyms(name: str, match_listener_override: bool) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys that set the same value,
    highest precedence first."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":  # the scheduler interval is its default
        return [name, "log.flush.scheduler.interval.ms"]
    m = _LISTENER_CONFIG.fullmatch(name)
    if m and match_listener_override:
        base = m.group(1)
        return [name, next((c for c in _LISTENER_MECHANISM_CONFIGS if base.endswith(c)), base)]
    return [name]


def _type_exact(name: str) -> str | None:
    spec = DYNAMIC_ONLY_KEYS.get(name) or BROKER_QUOTA_KEYS.get(name)
    return BROKER_KEY_TYPES.get(name) or KRAIT_KEY_TYPES.get(name) or (spec[0] if spec else None)


def broker_config_type(name: str) -> str | None:
    """Kafka's ConfigDef type of a broker key (a listener override has its base key's), or
    None for a key Kafka does not define (which DescribeConfigs then treats as sensitive)."""
    for n in [name, *broker_config_synonyms(name, match_listener_override=True)]:
        t = _type_exact(n)
        if t is not None:
            return t
    return None


def _check_value(name: str, raw: str) -> None:
    """Kafka's ConfigDef.parse of one dynamic value: its type, then its validator."""
    kind = _type_exact(name)
    if kind is None:
        return  # custom keys are Kafka's to keep, not to check
    s = raw.strip()
    value: object = s

    def bad(message: str, shown: object = raw) -> ConfigError:
        return ConfigError(f"Invalid value {shown} for configuration {name}: {message}")

    if kind in _RANGES:
        try:
            value = int(s)
        except ValueError:
            raise bad(f"Not a number of type {kind}") from None
        if not -_RANGES[kind] <= value < _RANGES[kind]:
            raise bad(f"Not a number of type {kind}")
    elif kind == "DOUBLE":
        try:
            value = float(s)
        except ValueError:
            raise bad("Not a number of type DOUBLE") from None
    elif kind == "BOOLEAN":
        if s.lower() not in ("true", "false"):
            raise bad("Expected value to be either true or false")
    if name in _AT_LEAST and value < _AT_LEAST[name]:  # type: ignore[operator]
        raise bad(f"Value must be at least {_AT_LEAST[name]}", value)
    if name in _AT_MOST and value > _AT_MOST[name]:  # type: ignore[operator]
        raise bad(f"Value must be no more than {_AT_MOST[name]}", value)
    if name in _ONE_OF:
        items = [s] if kind != "LIST" else [x.strip() for x in s.split(",")] if s else []
        for item in items:
            if item not in _ONE_OF[name]:
                raise bad(f"String must be one of: {', '.join(_ONE_OF[name])}", item)


def _kafka_set(names: list[str]) -> str:
    return f"Set({', '.join(names)})"  # how Scala prints the set Kafka's message names


def validate_dynamic_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs for the whole dynamic config of one
    resource (the broker's id if ``per_broker``, else the cluster-wide default); raises
    ConfigError with Kafka's message."""
    def refuse(names: list[str], message: str) -> None:
        if names:
            raise ConfigError(f"{message}: {_kafka_set(names)}")

    refuse([k for k in props if k in NON_DYNAMIC_CONFIGS], "Cannot update these configs dynamically")
    refuse([k for k in props if k in KRAIT_RESTART_ONLY],
           "Cannot update these configs dynamically (Krait binds its listeners at start-up)")
    refuse([k for k in props if k in _SSL_RECONFIGURABLE],
           "These security configs can be dynamically updated only per-listener using the listener prefix")
    for k, v in props.items():
        m = _LISTENER_CONFIG.fullmatch(k)
        _check_value(m.group(1) if m else k, v)
    if not per_broker:
        def per_broker_only(k: str) -> bool:
            m = _LISTENER_CONFIG.fullmatch(k)
            return k in PER_BROKER_CONFIGS or bool(m and m.group(1) not in _CLUSTER_LEVEL_LISTENER_CONFIGS)

        refuse([k for k in props if per_broker_only(k)],
               "Cannot update these configs at default cluster level, broker id must be specified")


def validate_reconfiguration(old: Mapping[str, str], new: Mapping[str, str]) -> None:
    """The checks Kafka's reconfigurable components make on a change of the config in force
    (thread pools may at most halve or double, ...). ``old`` and ``new`` are the merged
    props (see merge_dynamic); raises ConfigError with Kafka's message."""
    def get(props: Mapping[str, str], key: str) -> int:
        return int(props.get(key, BROKER_DEFAULTS[key]))

    def check() -> None:
        for key in _THREAD_POOLS:
            n, o = get(new, key), get(old, key)
            if n != o:
                msg = f"Dynamic thread count update validation failed for {key}={n}"
                if n <= 0:
                    raise ValueError(f"{msg}, value should be at least 1")
                if n < o // 2:
                    raise ValueError(f"{msg}, value should be at least half the current value {o}")
                if n > o * 2:
                    raise ValueError(f"{msg}, value should not be greater than double the current value {o}")
        if any(new.get(k) != old.get(k) for k in _CLEANER_RECONFIGURABLE):
            n, o = get(new, "log.cleaner.threads"), get(old, "log.cleaner.threads")
            if n < 1:
                raise ValueError("Log cleaner threads should be at least 1")
            if n < o // 2:
                raise ValueError(f"Log cleaner threads cannot be reduced to less than half the current value {o}")
            if n > o * 2:
                raise ValueError(f"Log cleaner threads cannot be increased to more than double the current value {o}")

    try:
        check()
    except ValueError as exc:
        # Kafka wraps these in ConfigException("Invalid dynamic configuration", e), which
        # Java resolves to its (name, value) constructor: hence this odd message.
        raise ConfigError(f"Invalid value org.apache.kafka.common.config.ConfigException: {exc} "
                          "for configuration Invalid dynamic configuration") from None




def merge_dynamic(static: Mapping[str, str], default: Mapping[str, str], per_broker: Mapping[str, str]) -> dict[str, str]:
    """Static props overridden by the cluster-wide dynamic default, then by this broker's
    dynamic configs. A dynamic key drops its static synonyms, so that a dynamic
    log.retention.ms beats a static log.retention.hours (Kafka's overrideProps)."""
    props = dict(static)
    for layer in (default, per_broker):
        for k, v in layer.items():
            for syn in broker_config_synonyms(k, match_listener_override=False):
                props.pop(syn, None)
            props[k] = v
    return props
