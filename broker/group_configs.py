"""Group configs (GROUP config resources, Kafka's GroupConfig): per-group overrides of the
consumer-group and share-group settings, as DescribeConfigs / IncrementalAlterConfigs and
``kafka-configs.sh --entity-type groups`` serve them.

Each key is declared once here; its default is the broker key it overrides (Kafka's
ALL_GROUP_CONFIG_SYNONYMS), or Kafka's own default where no broker key stands behind it
(share.auto.offset.reset, share.isolation.level, share.renew.acknowledge.enable). A value
set on a group must parse, pass the key's validator, fall within the broker's min/max
bounds, and keep the session timeout above the heartbeat interval (GroupConfig.validate);
a failure is INVALID_CONFIG with Kafka's message.

Streams-group keys are not here: Krait has no streams groups, so setting one is refused as
an unknown group config rather than silently kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storage.config_def import (
    BOOLEAN,
    INT,
    STRING,
    AtLeast,
    ConfigError,
    OneOf,
    parse_value,
    render_value,
)


@dataclass(frozen=True)
class GroupKey:
    name: str
    type: str
    validator: Any
    #: the broker key whose value is the default; None: ``default`` is
    broker_synonym: str | None
    default: str | None = None
    #: (min, max) broker keys bounding a value set on a group
    bounds: tuple[str, str] | None = None
    doc: str = ""


_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.I)


def parse_share_auto_offset_reset(value: str) -> tuple[str, int | None]:
    """ShareGroupAutoOffsetResetStrategy.fromString: ("latest"|"earliest", None) or
    ("by_duration", milliseconds)."""
    v = value.strip().lower()
    if v in ("latest", "earliest"):
        return v, None
    if v.startswith("by_duration:"):
        m = _ISO_DURATION.match(value.strip()[len("by_duration:"):])
        if m and any(g is not None for g in m.groups()):
            days, hours, minutes, seconds = m.groups()
            ms = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * 1000
            return "by_duration", ms + round(float(seconds or 0) * 1000)
    raise ValueError(value)


class _AutoOffsetReset:
    def __call__(self, name: str, value: Any) -> None:
        try:
            parse_share_auto_offset_reset(value)
        except ValueError:
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              "Invalid value for share.auto.offset.reset; must be latest, earliest or "
                              "by_duration:<ISO8601 duration>") from None

    def __str__(self) -> str:
        return "[latest, earliest, by_duration:PnDTnHnMn.nS]"


GROUP_KEYS: dict[str, GroupKey] = {k.name: k for k in (
    GroupKey("consumer.session.timeout.ms", INT, AtLeast(1), "group.consumer.session.timeout.ms",
             bounds=("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
             doc="consumer-group session timeout"),
    GroupKey("consumer.heartbeat.interval.ms", INT, AtLeast(1), "group.consumer.heartbeat.interval.ms",
             bounds=("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
             doc="consumer-group heartbeat interval"),
    GroupKey("share.session.timeout.ms", INT, AtLeast(1), "group.share.session.timeout.ms",
             bounds=("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
             doc="share-group session timeout"),
    GroupKey("share.heartbeat.interval.ms", INT, AtLeast(1), "group.share.heartbeat.interval.ms",
             bounds=("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
             doc="share-group heartbeat interval"),
    GroupKey("share.record.lock.duration.ms", INT, AtLeast(1000), "group.share.record.lock.duration.ms",
             bounds=("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
             doc="how long a share consumer holds a record it was given"),
    GroupKey("share.delivery.count.limit", INT, AtLeast(2), "group.share.delivery.count.limit",
             doc="deliveries of a record before it is archived"),
    GroupKey("share.partition.max.record.locks", INT, AtLeast(100), "group.share.partition.max.record.locks",
             doc="records of a share-partition in flight at once"),
    GroupKey("share.auto.offset.reset", STRING, _AutoOffsetReset(), None, "latest",
             doc="where a new share-partition starts: latest, earliest or by_duration:<ISO8601>"),
    GroupKey("share.isolation.level", STRING, OneOf(("read_committed", "read_uncommitted")), None,
             "read_uncommitted", doc="whether a share group sees aborted transactional records"),
    GroupKey("share.renew.acknowledge.enable", BOOLEAN, None, None, "true",
             doc="whether members may renew a record's lock (RENEW acknowledgements)"),
)}

#: (session timeout, heartbeat interval): the first must stay above the second
_SESSION_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                  ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def default_value(key: GroupKey, broker: Mapping[str, Any]) -> Any:
    if key.broker_synonym is not None:
        return broker[key.broker_synonym]
    return parse_value(key.name, key.type, key.default or "")


def validate(overrides: Mapping[str, str], broker: Mapping[str, Any]) -> dict[str, Any]:
    """GroupConfig.validate: the parsed overrides, or ConfigError with Kafka's message.
    ``broker`` maps broker keys to their values in force."""
    for name in overrides:
        if name not in GROUP_KEYS:
            raise ConfigError(f"Unknown group config name: {name}")
    parsed: dict[str, Any] = {}
    for name, raw in overrides.items():
        key = GROUP_KEYS[name]
        value = parse_value(name, key.type, raw)
        if key.validator is not None:
            key.validator(name, value)
        if key.bounds is not None:
            lo, hi = (int(broker[b]) for b in key.bounds)
            if not lo <= value <= hi:
                raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")
        parsed[name] = value
    for session, heartbeat in _SESSION_PAIRS:
        if session in parsed or heartbeat in parsed:
            s = parsed.get(session, default_value(GROUP_KEYS[session], broker))
            h = parsed.get(heartbeat, default_value(GROUP_KEYS[heartbeat], broker))
            if s <= h:
                raise ConfigError(f"{session} must be greater than {heartbeat}")
    return parsed


def effective(overrides: Mapping[str, str], broker: Mapping[str, Any]) -> dict[str, Any]:
    """Every group config's value in force for a group with these overrides."""
    out = {name: default_value(key, broker) for name, key in GROUP_KEYS.items()}
    for name, raw in overrides.items():
        key = GROUP_KEYS.get(name)
        if key is not None:
            out[name] = parse_value(name, key.type, raw)
    return out


def render(value: Any) -> str:
    return render_value(value)
