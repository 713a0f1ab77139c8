"""Broker configuration: BrokerConfig (server.properties parsed and checked by the key
declarations of broker/config_keys.py, the topic-level defaults the broker's `log.*` keys
give) and Kafka's rules for dynamic broker configs (which keys may change without a restart,
at which level, how their values are checked and how they override the static ones), all
derived from those declarations.

Unknown keys warn (Kafka logs "was supplied but isn't a known config"); invalid values
stop start-up with a message naming the key.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.config_def import (
    ACCEPTED,
    IGNORED,
    INT_MAX,
    LIST,
    LONG_MAX,
    PER_BROKER,
    QUOTA,
    READ_ONLY,
    USED,
    ConfigError,
    ConfigKey,
    render_value,
)

from .config_keys import BROKER_KEYS, LISTENER, LISTENER_MECHANISM, LOG_CLEANER, RESTART_ONLY, THREAD_POOL
from .dynamic_keys import SSL_PER_LISTENER
from .endpoints import EndpointError, Listener, parse_listener, parse_protocol_map
from .properties import read_properties

__all__ = ["BROKER_KEYS", "BrokerConfig", "ConfigError", "INT_MAX", "LONG_MAX", "read_properties"]

log = logging.getLogger("krait.config")


def _tagged(tag: str) -> frozenset[str]:
    return frozenset(n for n, k in BROKER_KEYS.items() if tag in k.tags)


#: topic config name -> the broker key that supplies its default
TOPIC_DEFAULT_SOURCES: dict[str, str] = {
    k.topic_name: n for n, k in BROKER_KEYS.items() if k.topic is not None and k.topic.used}
#: Kafka's DynamicBrokerConfig.AllDynamicConfigs: what DescribeConfigs reports as not read-only
ALL_DYNAMIC_CONFIGS: frozenset[str] = frozenset(
    n for n, k in BROKER_KEYS.items() if k.dynamic != READ_ONLY and k.use != QUOTA)
#: settable only on the broker's own resource (name = its id), never as a cluster-wide default
PER_BROKER_CONFIGS: frozenset[str] = frozenset(n for n, k in BROKER_KEYS.items() if k.dynamic == PER_BROKER)
_CLUSTER_LEVEL_LISTENER_CONFIGS = _tagged(LISTENER) - PER_BROKER_CONFIGS
_SSL_RECONFIGURABLE = _tagged(SSL_PER_LISTENER)
_LISTENER_MECHANISM_CONFIGS = _tagged(LISTENER_MECHANISM)
KRAIT_RESTART_ONLY = _tagged(RESTART_ONLY)
# Keys Krait knows to be Kafka's and not dynamic; others outside the dynamic sets are kept
# as custom configs, as Kafka keeps them (it refuses only its own static keys).
NON_DYNAMIC_CONFIGS: frozenset[str] = frozenset(
    n for n, k in BROKER_KEYS.items() if k.dynamic == READ_ONLY and k.use != QUOTA)
#: Kafka's defaults (KafkaConfig.defaultValues: keys without one are absent)
BROKER_DEFAULTS: dict[str, str] = {
    n: k.default for n, k in BROKER_KEYS.items() if k.default is not None and k.use in (USED, ACCEPTED, IGNORED)}
_THREAD_POOLS = _tagged(THREAD_POOL)
_CLEANER_RECONFIGURABLE = _tagged(LOG_CLEANER)
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")


def _synonym_groups() -> dict[str, list[str]]:
    """Each key with synonyms, and each synonym but those that only supply a default -> the
    group, highest precedence first (log.retention.ms, .minutes, .hours)."""
    out: dict[str, list[str]] = {}
    for k in BROKER_KEYS.values():
        if k.synonyms:
            group = [k.name, *(s.name for s in k.synonyms)]
            out[k.name] = group
            out.update((s.name, group) for s in k.synonyms if not s.default_only)
    return out


_SYNONYM_GROUPS = _synonym_groups()


def _held(key: ConfigKey, raw: str) -> Any:
    """A value as BrokerConfig holds it: typed and checked; lists (and the STRING keys Krait
    splits, like listeners) as lists without empty items."""
    v = key.parse(raw)
    if key.type == LIST or key.as_list:
        items = v if key.type == LIST else v.split(",")
        return [x.strip() for x in items if x.strip()]
    return v


@dataclass
class BrokerConfig:
    values: dict[str, object]
    originals: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_props(cls, props: Mapping[str, str], *, warn_unknown: bool = True) -> BrokerConfig:
        values: dict[str, object] = {}
        for name, key in BROKER_KEYS.items():
            if key.use != USED:
                continue  # Kafka's keys Krait has no use for are checked only when set dynamically
            raw = props.get(name, key.default)
            values[name] = None if raw is None else _held(key, str(raw))
        for key in props if warn_unknown else ():
            if broker_config_type(key) is None:
                log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        cfg = cls(values, dict(props))
        cfg._validate()
        return cfg

    def __getitem__(self, key: str):
        return self.values[key]

    def _validate(self) -> None:
        # each value was checked by its declaration's validator; what is left spans keys
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

    def _in_ms(self, name: str) -> Any:
        """A key's value, else that of the first of its synonyms set, in the key's unit."""
        key = BROKER_KEYS[name]
        for k in (key, *key.synonyms):
            v = self.values.get(k.name)
            if v is not None:
                return v * k.unit_ms if k.unit_ms != 1 else v
        return None

    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours (Kafka's precedence)."""
        return int(self._in_ms("log.retention.ms"))

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level config defaults as strings, derived from the broker's log.* keys."""
        out: dict[str, str] = {}
        for topic_key, broker_key in TOPIC_DEFAULT_SOURCES.items():
            v = self._in_ms(broker_key)
            if v is not None:
                out[topic_key] = render_value(v)
        return out

    def with_dynamic(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The config in force once dynamic configs apply over these static ones."""
        return BrokerConfig.from_props(merge_dynamic(self.originals, default, per_broker), warn_unknown=False)


def new_cluster_id() -> str:
    """Kafka's cluster ids are base64url UUIDs without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# --- dynamic broker configs (Kafka's DynamicBrokerConfig) -------------------------------------


def broker_config_synonyms(name: str, match_listener_override: bool) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys that set the same value,
    highest precedence first."""
    if name in _SYNONYM_GROUPS:
        return list(_SYNONYM_GROUPS[name])
    m = _LISTENER_CONFIG.fullmatch(name)
    if m and match_listener_override:
        base = m.group(1)
        return [name, next((c for c in sorted(_LISTENER_MECHANISM_CONFIGS) if base.endswith(c)), base)]
    return [name]


def broker_config_type(name: str) -> str | None:
    """Kafka's ConfigDef type of a broker key (a listener override has its base key's), or
    None for a key Kafka does not define (which DescribeConfigs then treats as sensitive)."""
    for n in [name, *broker_config_synonyms(name, match_listener_override=True)]:
        if n in BROKER_KEYS:
            return BROKER_KEYS[n].type
    return None


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
        key = BROKER_KEYS.get(m.group(1) if m else k)
        if key is not None:  # custom keys are Kafka's to keep, not to check
            key.parse(v)  # Kafka's ConfigDef.parse: its type, then its validator
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
