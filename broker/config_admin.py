"""ConfigAdmin: topic, broker and group configs with Kafka's semantics, for DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs (and the entries CreateTopics returns).

Group configs (GROUP resources, declared in broker/group_configs.py) are entity configs of
the security store (``groups/<group>``), like client quotas: in the log dir on a single
node, in ZooKeeper (/config/groups/<group>, with a change notification) on a cluster, where
every broker sees them.

Topic overrides and dynamic broker configs are persisted in the topic registry. A broker
resource named with this broker's id holds its own dynamic configs (DYNAMIC_BROKER_CONFIG);
the one named "" holds the cluster-wide defaults (DYNAMIC_DEFAULT_BROKER_CONFIG). A value
comes from, in order: a topic override, this broker's dynamic config, the cluster-wide
dynamic default, server.properties (STATIC_BROKER_CONFIG), Kafka's default; DescribeConfigs
lists synonyms in that order. Each key's type, read-only flag and sensitivity come from its
declaration (broker/config_keys.py). What Kafka can change without a restart is accepted (see
broker/config.py); what Krait uses of it (the log.* topic defaults, message.max.bytes, ...)
applies at once to every partition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from protocol.errors import ErrorCode, KafkaError
from storage.config import TOPIC_KEYS, LogConfig
from storage.config_def import ACCEPTED, LIST, QUOTA, USED
from storage.manager import LogManager

from . import group_configs
from .config import (
    ALL_DYNAMIC_CONFIGS,
    BROKER_DEFAULTS,
    BROKER_KEYS,
    TOPIC_DEFAULT_SOURCES,
    BrokerConfig,
    ConfigError,
    broker_config_synonyms,
    broker_config_type,
    merge_dynamic,
    validate_dynamic_configs,
    validate_reconfiguration,
)
from .security.store import SecurityStore, group_entity_path
from .topic_admin import TopicAdmin
from .topics import TopicRegistry, dynamic_topic_defaults

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
# ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG = 4, 5, 8
# ConfigType, by Kafka's ConfigDef.Type name
_CONFIG_TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
                    "PASSWORD": 9}
# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Kafka's ConfigDef defaults of the LIST topic configs: what APPEND/SUBTRACT start from
# when the topic has no override (not the broker's log.* default: Kafka's controller
# reads the schema default).
_TOPIC_LIST_DEFAULTS = {n: k.topic_default or "" for n, k in TOPIC_KEYS.items() if k.type == LIST}
# what DescribeConfigs lists for this broker's id besides what is set: Kafka's keys
_LISTED_BROKER_KEYS = frozenset(n for n, k in BROKER_KEYS.items() if k.use in (USED, ACCEPTED))


class ConfigAdmin:
    """Topic and broker configs: what DescribeConfigs reports and how AlterConfigs /
    IncrementalAlterConfigs change them."""

    def __init__(self, config: BrokerConfig, registry: TopicRegistry, topics: TopicAdmin, logs: LogManager,
                 node_id: int, security_store: Callable[[], SecurityStore] | None = None) -> None:
        """``security_store()``: the store of entity configs (group configs live there)."""
        self.security_store = security_store
        self.config = config
        self.registry = registry
        self.topics = topics
        self.logs = logs
        self.node_id = node_id

    def _synonyms(self, name: str, names: list[str], sensitive: bool) -> list[dict]:
        """Kafka's ConfigHelper.configSynonyms: every layer that sets one of ``names``, highest
        precedence first, starting at ``name`` itself (a higher-precedence synonym of another
        name, e.g. log.retention.ms when describing log.retention.hours, is dropped)."""
        reg = self.registry
        layers = ((reg.broker_configs, DYNAMIC_BROKER_CONFIG),
                  (reg.default_broker_configs, DYNAMIC_DEFAULT_BROKER_CONFIG),
                  (self.config.originals, STATIC_BROKER_CONFIG), (BROKER_DEFAULTS, DEFAULT_CONFIG))
        out = [dict(name=n, value=None if sensitive else str(layer[n]), source=source)
               for layer, source in layers for n in names if n in layer]
        while out and out[0]["name"] != name:
            out.pop(0)
        return out

    def topic_config_entries(self, info: Any, keys: Iterable[str] | None = None,
                             include_synonyms: bool = False) -> list[dict]:
        """A topic's DescribeConfigs entries (also what CreateTopics returns)."""
        cfg = self.topics.topic_log_config(info)
        out = []
        for key, value in sorted(cfg.to_props().items()):
            if keys and key not in keys:
                continue
            broker_key = TOPIC_DEFAULT_SOURCES.get(key)
            syn = self._synonyms(broker_key, broker_config_synonyms(broker_key, True), False) if broker_key else []
            if key in info.configs:
                syn.insert(0, dict(name=key, value=value, source=DYNAMIC_TOPIC_CONFIG))
            out.append(dict(name=key, value=value, read_only=False,
                            config_source=syn[0]["source"] if syn else DEFAULT_CONFIG,
                            is_sensitive=False, synonyms=syn if include_synonyms else [],
                            config_type=_CONFIG_TYPE_IDS[TOPIC_KEYS[key].type], documentation=None))
        return out

    def _broker_config_entries(self, per_broker: bool, keys: Iterable[str] | None,
                               include_synonyms: bool) -> list[dict]:
        """Kafka's ConfigHelper for a broker resource: every config in force for this broker's
        id, only the cluster-wide dynamic defaults for ""."""
        reg = self.registry
        if per_broker:
            names = (set(_LISTED_BROKER_KEYS) | set(self.config.originals)
                     | set(reg.default_broker_configs) | set(reg.broker_configs))
            in_force = merge_dynamic(self.config.originals, reg.default_broker_configs, reg.broker_configs)
        else:
            names = set(reg.default_broker_configs)
            in_force = reg.default_broker_configs
        out = []
        for name in sorted(names):
            if keys and name not in keys:
                continue
            kind = broker_config_type(name)
            # Kafka hides what it cannot type as well as passwords
            sensitive = kind is None or kind == "PASSWORD"
            syn = self._synonyms(name, broker_config_synonyms(name, True), sensitive)
            if not per_broker:
                syn = [s for s in syn if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = in_force.get(name, BROKER_DEFAULTS.get(name) if per_broker else None)
            out.append(dict(name=name, value=None if sensitive or value is None else str(value),
                            read_only=name not in ALL_DYNAMIC_CONFIGS,
                            config_source=syn[0]["source"] if syn else DEFAULT_CONFIG, is_sensitive=sensitive,
                            synonyms=syn if include_synonyms else [], config_type=_CONFIG_TYPE_IDS.get(kind or "", 0),
                            documentation=None))
        return out

    def group_overrides(self, group_id: str) -> dict[str, str]:
        """The configs set on group ``group_id``."""
        if self.security_store is None:
            return {}
        return self.security_store().entities.get(group_entity_path(group_id), {})

    def group_configs(self, group_id: str) -> dict[str, Any]:
        """Every group config's value in force for ``group_id`` (its overrides, else the
        broker keys behind them)."""
        return group_configs.effective(self.group_overrides(group_id), self.config)

    def group_config_entries(self, group_id: str, keys: Iterable[str] | None, include_synonyms: bool) -> list[dict]:
        """ConfigHelper.createGroupConfigEntry for each group config: DYNAMIC_GROUP_CONFIG when the
        group sets it, else the layers of the broker key behind it."""
        if not group_id:
            raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
        overrides = self.group_overrides(group_id)
        values = group_configs.effective(overrides, self.config)
        out = []
        for name in sorted(group_configs.GROUP_KEYS):
            if keys and name not in keys:
                continue
            key = group_configs.GROUP_KEYS[name]
            value = group_configs.render(values[name])
            syn = (self._synonyms(key.broker_synonym, broker_config_synonyms(key.broker_synonym, True), False)
                   if key.broker_synonym else [])
            if name in overrides:
                syn.insert(0, dict(name=name, value=value, source=DYNAMIC_GROUP_CONFIG))
            out.append(dict(name=name, value=value, read_only=False,
                            config_source=syn[0]["source"] if syn else DEFAULT_CONFIG, is_sensitive=False,
                            synonyms=syn if include_synonyms else [], config_type=_CONFIG_TYPE_IDS[key.type],
                            documentation=None))
        return out

    async def _alter_group(self, r: Any, incremental: bool, validate_only: bool) -> None:
        if not r.resource_name:
            raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
        current = self.group_overrides(r.resource_name)
        if incremental:
            new = self._incremental(dict(current), r.configs, lambda name: None, lambda op, name: KafkaError(
                ErrorCode.invalid_config, f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST."))
        else:
            new = {c.name: c.value for c in r.configs}
        try:
            group_configs.validate(new, self.config)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only or self.security_store is None:
            return
        updates: dict[str, str | None] = {k: None for k in current if k not in new}
        updates.update(new)
        await self.security_store().alter_entity(group_entity_path(r.resource_name), updates)

    def describe(self, req: Any) -> list[dict]:
        """DescribeConfigs' results, one per requested resource."""
        results = []
        for r in req.resources:
            keys = set(r.configuration_keys) if r.configuration_keys else None
            entry = dict(error_code=ErrorCode.none, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name, configs=[])
            try:
                if r.resource_type == TOPIC:
                    info = self.registry.get(r.resource_name)
                    if info is None:
                        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                                         f"Topic {r.resource_name} does not exist.")
                    entry["configs"] = self.topic_config_entries(info, keys, req.include_synonyms)
                elif r.resource_type == BROKER:
                    if r.resource_name:
                        self._check_broker_id(r.resource_name, "Broker id must be an integer, but it is: {}",
                                              "Unexpected broker id, expected {} or empty string, but received {}")
                    entry["configs"] = self._broker_config_entries(bool(r.resource_name), keys, req.include_synonyms)
                elif r.resource_type == GROUP:
                    entry["configs"] = self.group_config_entries(r.resource_name, keys, req.include_synonyms)
                elif r.resource_type == BROKER_LOGGER:
                    if not r.resource_name:
                        raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
                    self._check_broker_id(r.resource_name, "Broker id must be an integer, but it is: {}",
                                          "Unexpected broker id, expected {} but received {}")
                else:
                    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {r.resource_type}")
            except KafkaError as exc:
                entry.update(error_code=exc.error_code, error_message=exc.message)
            results.append(entry)
        return results

    def _check_broker_id(self, name: str, not_int: str, mismatch: str) -> None:
        try:
            node = int(name)
        except ValueError:
            raise KafkaError(ErrorCode.invalid_request, not_int.format(name)) from None
        if node != self.node_id:
            raise KafkaError(ErrorCode.invalid_request, mismatch.format(self.node_id, name))

    @staticmethod
    def _java_split(s: str) -> list[str]:
        """Java's String.split(","), which Kafka uses on APPEND/SUBTRACT values: trailing empty
        parts are dropped, but "" splits to [""]."""
        if "," not in s:
            return [s]
        parts = s.split(",")
        while parts and parts[-1] == "":
            parts.pop()
        return parts

    @staticmethod
    def _incremental(current: dict[str, str], ops: Any, list_default: Any, not_list: Any) -> dict[str, str]:
        """Kafka's controller (ConfigurationControlManager.incrementalAlterConfigResource): SET,
        DELETE, and on LIST configs APPEND (values not yet present, in order, after the current
        ones) and SUBTRACT (first occurrence of each value). ``list_default(name)`` is the
        config's default if it is a LIST, else None; ``not_list(op, name)`` the error if not."""
        for c in ops:
            op = c.config_operation
            if op == SET:
                current[c.name] = c.value
            elif op == DELETE:
                current.pop(c.name, None)
            elif op in (APPEND, SUBTRACT):
                default = list_default(c.name)
                if default is None:
                    raise not_list(op, c.name)
                base = current.get(c.name, default)
                parts = [p for p in base.split(",") if p]
                for v in ConfigAdmin._java_split(c.value):
                    if op == APPEND and v not in parts:
                        parts.append(v)
                    elif op == SUBTRACT and v in parts:
                        parts.remove(v)
                current[c.name] = ",".join(parts)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"Unknown operations type {op}")
        return current

    async def _alter_topic(self, r: Any, incremental: bool, validate_only: bool) -> None:
        info = self.registry.get(r.resource_name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {r.resource_name} does not exist.")
        if incremental:
            new = self._incremental(dict(info.configs), r.configs, _TOPIC_LIST_DEFAULTS.get,
                                    lambda op, name: KafkaError(
                                        ErrorCode.invalid_config,
                                        f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST."))
        else:
            new = {c.name: c.value for c in r.configs}
        await self.topics.alter_topic_configs(r.resource_name, new, validate_only=validate_only)

    @staticmethod
    def _broker_list_default(name: str) -> str | None:
        # Kafka looks the exact name up among its KafkaConfig keys (no listener overrides, no
        # custom keys) and fails on others
        key = BROKER_KEYS.get(name)
        if key is None or key.use == QUOTA:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown config name: {name}")
        return BROKER_DEFAULTS.get(name, "") if key.type == LIST else None

    def _alter_broker(self, r: Any, incremental: bool, validate_only: bool) -> None:
        per_broker = r.resource_name != ""
        if per_broker:
            self._check_broker_id(r.resource_name, "Node id must be an integer, but it is: {}",
                                  "Unexpected broker id, expected {}, but received {}")
        reg = self.registry
        current = reg.broker_configs if per_broker else reg.default_broker_configs
        if incremental:
            new = self._incremental(dict(current), r.configs, self._broker_list_default, lambda op, name: KafkaError(
                ErrorCode.invalid_config,
                f"Config value {'append' if op == APPEND else 'subtract'} is not allowed for config key: {name}"))
        else:
            new = {c.name: c.value for c in r.configs}
        default, own = (reg.default_broker_configs, new) if per_broker else (new, reg.broker_configs)
        try:
            validate_dynamic_configs(new, per_broker)
            static = self.config.originals
            validate_reconfiguration(merge_dynamic(static, reg.default_broker_configs, reg.broker_configs),
                                     merge_dynamic(static, default, own))
            in_force = self.config.with_dynamic(default, own)  # Krait's own checks of what it uses
            LogConfig.from_props({**self.topics.default_topic_props, **dynamic_topic_defaults(default, own)},
                                 strict=False)
        except (ConfigError, ValueError) as exc:
            # INVALID_REQUEST, not INVALID_CONFIG: Kafka keeps it for compatibility (KAFKA-13609)
            raise KafkaError(ErrorCode.invalid_request, str(exc)) from None
        if validate_only:
            return
        if per_broker:
            reg.broker_configs = new
        else:
            reg.default_broker_configs = new
        reg.save()
        self.topics.apply_topic_defaults()
        self.logs.producer_id_expiration_ms = int(in_force["producer.id.expiration.ms"])

    async def alter(self, req: Any, incremental: bool) -> list[dict]:
        """AlterConfigs' (replace all) or IncrementalAlterConfigs' results, one per resource."""
        ids = Counter((r.resource_type, r.resource_name) for r in req.resources)
        results = []
        for r in req.resources:
            entry = dict(error_code=ErrorCode.none, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name)
            try:
                if ids[(r.resource_type, r.resource_name)] > 1:
                    raise KafkaError(ErrorCode.invalid_request, "Each resource must appear at most once.")
                names = [c.name for c in r.configs]
                if len(set(names)) != len(names):
                    raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
                nulls = [c.name for c in r.configs
                         if c.value is None and not (incremental and c.config_operation == DELETE)]
                if nulls:
                    raise KafkaError(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
                if r.resource_type == TOPIC:
                    await self._alter_topic(r, incremental, req.validate_only)
                elif r.resource_type == BROKER:
                    self._alter_broker(r, incremental, req.validate_only)
                elif r.resource_type == GROUP:
                    await self._alter_group(r, incremental, req.validate_only)
                elif r.resource_type == BROKER_LOGGER and incremental:
                    pass  # log levels are not Kafka's log4j loggers here; accepted and ignored
                else:
                    raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {r.resource_type}")
            except KafkaError as exc:
                entry.update(error_code=exc.error_code, error_message=exc.message)
            results.append(entry)
        return results
