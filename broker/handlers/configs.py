"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic and broker
resources. Topic overrides and dynamic broker configs are persisted in the topic
registry; topic defaults follow the broker's log.* settings, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol import apis
from protocol.apis import ApiKey
from protocol.build import make
from protocol.errors import ErrorCode

from ..config import BROKER_KEYS, TOPIC_DEFAULT_SOURCES
from ..errors import ApiError
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 4, 5
# ConfigType
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
_TOPIC_TYPES = {
    "cleanup.policy": LIST, "compression.type": STRING, "message.timestamp.type": STRING,
    "min.cleanable.dirty.ratio": DOUBLE, "preallocate": BOOLEAN, "unclean.leader.election.enable": BOOLEAN,
    "segment.bytes": INT, "segment.index.bytes": INT, "index.interval.bytes": INT, "max.message.bytes": INT,
    "min.insync.replicas": INT,
}
# Broker keys that may change at run time (they only feed topic defaults).
DYNAMIC_BROKER_KEYS = set(TOPIC_DEFAULT_SOURCES.values()) | {"log.retention.ms", "log.roll.ms"}


def _topic_configs(broker: Broker, name: str, keys, synonyms: bool) -> list[dict]:
    info = broker.registry.get(name)
    if info is None:
        raise ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
    cfg = broker.topic_log_config(info)
    reverse = TOPIC_DEFAULT_SOURCES
    out = []
    for key, value in sorted(cfg.to_props().items()):
        if keys and key not in keys:
            continue
        broker_key = reverse.get(key)
        syn = []
        if key in info.configs:
            source = DYNAMIC_TOPIC_CONFIG
            syn.append(dict(name=key, value=info.configs[key], source=DYNAMIC_TOPIC_CONFIG))
        elif broker_key and broker_key in broker.registry.broker_configs:
            source = DYNAMIC_BROKER_CONFIG
        elif broker_key and broker_key in broker.config.originals:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        if broker_key and broker_key in broker.config.originals:
            syn.append(dict(name=broker_key, value=broker.config.originals[broker_key], source=STATIC_BROKER_CONFIG))
        out.append(dict(name=key, value=value, read_only=False, config_source=source, is_sensitive=False,
                        synonyms=syn if synonyms else [], config_type=_TOPIC_TYPES.get(key, LONG),
                        documentation=None))
    return out


def _broker_configs(broker: Broker, keys, synonyms: bool) -> list[dict]:
    out = []
    dyn = broker.registry.broker_configs
    for key, (parser, default) in sorted(BROKER_KEYS.items()):
        if keys and key not in keys:
            continue
        if key in dyn:
            value, source = dyn[key], DYNAMIC_BROKER_CONFIG
        elif key in broker.config.originals:
            value, source = broker.config.originals[key], STATIC_BROKER_CONFIG
        else:
            value, source = default, DEFAULT_CONFIG
        ctype = BOOLEAN if parser.__name__ == "_bool" else LIST if parser.__name__ == "_list" else \
            STRING if parser.__name__ == "_str" else DOUBLE if parser is float else LONG
        out.append(dict(name=key, value=value, read_only=key not in DYNAMIC_BROKER_KEYS, config_source=source,
                        is_sensitive=False, synonyms=[dict(name=key, value=value, source=source)] if synonyms else [],
                        config_type=ctype, documentation=None))
    return out


def _check_broker_name(broker: Broker, name: str) -> None:
    if name not in ("", str(broker.node_id)):
        raise ApiError(ErrorCode.invalid_request, f"Unexpected broker id, expected {broker.node_id} but received {name}")


@handles(ApiKey.DESCRIBE_CONFIGS)
def describe_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    results = []
    for r in req.resources:
        keys = set(r.configuration_keys) if r.configuration_keys else None
        entry = dict(error_code=ErrorCode.none, error_message=None, resource_type=r.resource_type,
                     resource_name=r.resource_name, configs=[])
        try:
            if r.resource_type == TOPIC:
                entry["configs"] = _topic_configs(broker, r.resource_name, keys, req.include_synonyms)
            elif r.resource_type == BROKER:
                _check_broker_name(broker, r.resource_name)
                entry["configs"] = _broker_configs(broker, keys, req.include_synonyms)
            elif r.resource_type == BROKER_LOGGER:
                entry["configs"] = []
            else:
                raise ApiError(ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}")
        except ApiError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    return make(apis.response_type(ApiKey.DESCRIBE_CONFIGS, ctx.version), throttle_time=0, results=results)


def _apply_broker(broker: Broker, new: dict[str, str], validate_only: bool) -> None:
    bad = [k for k in new if k not in DYNAMIC_BROKER_KEYS]
    if bad:
        raise ApiError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: {sorted(bad)}")
    try:
        broker.config.with_overrides(new)
    except ValueError as exc:
        raise ApiError(ErrorCode.invalid_config, str(exc)) from None
    if validate_only:
        return
    broker.registry.broker_configs = dict(new)
    broker.registry.save()
    for info in broker.registry.topics.values():
        broker.logs.update_config(info.name, broker.topic_log_config(info))


def _alter(broker: Broker, ctx, req, incremental: bool):
    results = []
    for r in req.resources:
        entry = dict(error_code=ErrorCode.none, error_message=None, resource_type=r.resource_type,
                     resource_name=r.resource_name)
        try:
            if r.resource_type == TOPIC:
                info = broker.registry.get(r.resource_name)
                if info is None:
                    raise ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {r.resource_name} does not exist.")
                current = dict(info.configs) if incremental else {}
                new = _merge(current, r.configs, incremental, broker.topic_log_config(info).to_props())
                broker.alter_topic_configs(r.resource_name, new, validate_only=req.validate_only)
            elif r.resource_type == BROKER:
                _check_broker_name(broker, r.resource_name)
                current = dict(broker.registry.broker_configs) if incremental else {}
                new = _merge(current, r.configs, incremental, {})
                _apply_broker(broker, new, req.validate_only)
            elif r.resource_type == BROKER_LOGGER:
                pass
            else:
                raise ApiError(ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}")
        except ApiError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        results.append(entry)
    api = ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS
    return make(apis.response_type(api, ctx.version), throttle_time=0, responses=results)


def _merge(current: dict[str, str], ops, incremental: bool, effective: dict[str, str]) -> dict[str, str]:
    """Apply AlterConfigs (replace all) or IncrementalAlterConfigs (SET/DELETE/APPEND/SUBTRACT)."""
    if not incremental:
        return {c.name: c.value for c in ops if c.value is not None}
    for c in ops:
        op = c.config_operation
        if op == 0:
            current[c.name] = c.value
        elif op == 1:
            current.pop(c.name, None)
        elif op in (2, 3):
            base = current.get(c.name, effective.get(c.name, ""))
            items = [x for x in base.split(",") if x]
            vals = [x for x in (c.value or "").split(",") if x]
            if op == 2:
                items += [v for v in vals if v not in items]
            else:
                items = [x for x in items if x not in vals]
            current[c.name] = ",".join(items)
        else:
            raise ApiError(ErrorCode.invalid_request, f"Unknown config operation {op}")
    return current


@handles(ApiKey.ALTER_CONFIGS)
def alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return _alter(broker, ctx, req, incremental=False)


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
def incremental_alter_configs(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return _alter(broker, ctx, req, incremental=True)
