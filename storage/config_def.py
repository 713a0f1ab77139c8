"""Kafka's ConfigDef for Krait: how a config key is declared (:class:`ConfigKey`: name,
type, default, validator, importance, dynamic update mode, topic synonym, doc) and how a
string value is parsed and checked against its declaration, with Kafka's messages.

The declarations themselves live beside what they configure: the storage keys (the broker's
``log.*`` keys and the topic configs they default) in storage/config.py, the rest of the
broker's keys in broker/config_keys.py and broker/dynamic_keys.py. Every other view of the
keys (LogConfig's fields, BrokerConfig's parsing, DescribeConfigs' types and read-only
flags, the dynamic-update rules, the README's table) is derived from them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AtLeast", "Between", "ConfigError", "ConfigKey", "OneOf", "TopicSynonym", "INT_MAX", "LONG_MAX",
    "parse_value", "render_value", "walk",
]

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

# ConfigDef.Type names, as DescribeConfigs and Kafka's docs name them
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
_INT_BITS = {SHORT: 16, INT: 32, LONG: 64}
# ConfigDef.Importance
HIGH, MEDIUM, LOW = "high", "medium", "low"
# The "Update Mode" Kafka's docs give each broker key (DynamicBrokerConfig)
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
# What Krait does with a key: reads it (USED); keeps, reports and stores it without using it
# (ACCEPTED: Kafka's dynamic keys, listed by DescribeConfigs with their default); takes it
# silently from server.properties (IGNORED: listed only once set); or a broker quota
# (QUOTA: DynamicConfig.Broker, not a KafkaConfig key, so listed only once set and read-only)
USED, ACCEPTED, IGNORED, QUOTA = "used", "accepted", "ignored", "quota"


class ConfigError(ValueError):
    """An invalid configuration value (Kafka's ConfigException); start-up stops with it."""


def _invalid(name: str, value: object, message: str) -> ConfigError:
    # ConfigException(name, value, message)
    return ConfigError(f"Invalid value {value} for configuration {name}: {message}")


@dataclass(frozen=True)
class AtLeast:
    """ConfigDef.Range.atLeast."""

    minimum: float

    def __call__(self, name: str, value: Any) -> None:
        if value < self.minimum:
            raise _invalid(name, value, f"Value must be at least {self.minimum}")

    def __str__(self) -> str:
        return f"[{self.minimum},...]"


@dataclass(frozen=True)
class Between:
    """ConfigDef.Range.between."""

    lo: float
    hi: float

    def __call__(self, name: str, value: Any) -> None:
        if not self.lo <= value <= self.hi:
            raise _invalid(name, value, f"Value must be between {self.lo} and {self.hi}")

    def __str__(self) -> str:
        return f"[{self.lo},...,{self.hi}]"


@dataclass(frozen=True)
class OneOf:
    """ConfigDef.ValidString, or ValidList when the key's type is LIST (each item checked)."""

    options: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value if isinstance(value, tuple) else (value,):
            if item not in self.options:
                raise _invalid(name, item, f"String must be one of: {', '.join(self.options)}")

    def __str__(self) -> str:
        return f"[{', '.join(self.options)}]"


@dataclass(frozen=True)
class ParsedBy:
    """A validator for a value with a grammar of its own: ``parse`` raises ValueError saying
    what is wrong, reported as Kafka's ConfigException words it; ``doc`` is what the README's
    config table shows (no '|': a table cell)."""

    parse: Callable[[Any], Any]
    doc: str

    def __call__(self, name: str, value: Any) -> None:
        try:
            self.parse(value)
        except ValueError as exc:
            raise _invalid(name, value, str(exc)) from None

    def __str__(self) -> str:
        return self.doc


#: "the same as the broker key's" for a TopicSynonym field
SAME: Any = object()


@dataclass(frozen=True)
class TopicSynonym:
    """The topic config a broker key supplies the default of (Kafka's
    ServerTopicConfigSynonyms). Its name, default and validator are the broker key's unless
    given (``name=None``: the same name at both levels)."""

    name: str | None = None
    default: Any = SAME
    validator: Any = SAME
    #: False for topic configs Kafka accepts that storage has no use for (accepted, ignored)
    used: bool = True


@dataclass(frozen=True)
class ConfigKey:
    """One config key, declared once (Kafka's ConfigDef.define)."""

    name: str
    type: str
    default: str | None = None  #: as Kafka renders it; None: Kafka has no default
    validator: Any = None
    importance: str = MEDIUM
    dynamic: str = READ_ONLY  #: Kafka's update mode: read-only, per-broker or cluster-wide
    doc: str = ""
    use: str = USED
    topic: TopicSynonym | None = None
    #: keys setting the same value at lower precedence (log.retention.minutes, .hours), with
    #: ``unit_ms`` their unit in the primary key's (milliseconds)
    synonyms: tuple[ConfigKey, ...] = ()
    unit_ms: int = 1
    #: a synonym that only supplies its primary key's default (log.flush.scheduler.interval.ms
    #: for log.flush.interval.ms), so not named back to it (Kafka's brokerConfigSynonyms)
    default_only: bool = False
    #: a STRING key Krait holds as a comma-separated list (listeners, log.dirs)
    as_list: bool = False
    #: a topic config with no broker key of its own (its ``name`` is the topic config's)
    topic_only: bool = False
    #: Kafka's reconfigurable groups the key belongs to (see broker/config.py)
    tags: frozenset[str] = field(default_factory=frozenset)

    @property
    def sensitive(self) -> bool:
        return self.type == PASSWORD

    @property
    def topic_name(self) -> str | None:
        if self.topic is None:
            return None
        return self.topic.name or self.name

    @property
    def topic_default(self) -> str | None:
        t = self.topic
        return self.default if t is None or t.default is SAME else t.default

    @property
    def topic_validator(self) -> Any:
        t = self.topic
        return self.validator if t is None or t.validator is SAME else t.validator

    def parse(self, raw: str) -> Any:
        """ConfigDef.parseValue: the typed value of ``raw``, checked by the validator."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def parse_topic(self, raw: str) -> Any:
        """The same for the topic config this key defaults (its own validator if it has one)."""
        name = self.topic_name or self.name
        value = parse_value(name, self.type, raw)
        check = self.topic_validator
        if check is not None:
            check(name, value)
        return value


def walk(keys: Iterable[ConfigKey]) -> Iterator[ConfigKey]:
    """Every key declared, its synonyms after it."""
    for k in keys:
        yield k
        yield from walk(k.synonyms)


def parse_value(name: str, kind: str, raw: str) -> Any:
    """ConfigDef.parseType: a string value as ``kind``, with Kafka's messages. LIST values are
    tuples of trimmed items (empty items kept, "" is the empty list)."""
    s = raw.strip()
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        try:
            v = int(s)
        except ValueError:
            raise _invalid(name, raw, f"Not a number of type {kind}") from None
        if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
            raise _invalid(name, raw, f"Not a number of type {kind}")
        return v
    if kind == DOUBLE:
        try:
            return float(s)
        except ValueError:
            raise _invalid(name, raw, "Not a number of type DOUBLE") from None
    if kind == BOOLEAN:
        if s.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return s.lower() == "true"
    if kind == LIST:
        return tuple(x.strip() for x in s.split(",")) if s else ()
    return s


def render_value(v: Any) -> str:
    """A typed value as Kafka renders it in DescribeConfigs."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return ",".join(v)
    return str(v)
