"""The storage config keys, declared once each (Kafka's ServerLogConfigs with the topic
configs they default, LogConfig's topic-level definitions), and LogConfig: the per-topic
storage settings derived from them, under Kafka's own topic-config names.

``LogConfig.from_props({"segment.bytes": "1048576", ...})`` validates every value the way
Kafka's LogConfig does (types, ranges, enums) and raises ValueError (ConfigError) naming the
key and the rule it broke. ``to_props()`` gives back every setting as Kafka names -> strings,
for DescribeConfigs. Unknown keys are refused unless ``strict=False`` (Kafka refuses them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config_def import (
    ACCEPTED,
    BOOLEAN,
    CLUSTER_WIDE,
    DOUBLE,
    HIGH,
    IGNORED,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    MEDIUM,
    STRING,
    AtLeast,
    Between,
    ConfigError,
    ConfigKey,
    OneOf,
    TopicSynonym,
    render_value,
    walk,
)
from .iceberg_mode import MODE_KEY, MODE_VALIDATOR
from .iceberg_spec import DEFAULT_PARTITION_SPEC, PARTITION_SPEC_KEY, PARTITION_SPEC_VALIDATOR

__all__ = ["LogConfig", "LOG_KEYS", "LONG_MAX", "INT_MAX", "TOPIC_CONFIG_NAMES", "TOPIC_KEYS"]

_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_DYN = CLUSTER_WIDE  # DynamicLogConfig: every topic-config synonym changes cluster-wide
#: LogCleaner.ReconfigurableConfigs (see broker/config.py's reconfiguration checks)
LOG_CLEANER = "log-cleaner"


def _hours(name: str, default: str | None, doc: str) -> ConfigKey:
    return ConfigKey(name, INT, default, AtLeast(1) if default else None, HIGH, doc=doc, unit_ms=3_600_000)


#: The broker keys that default a topic config, each with its topic synonym, then the topic
#: configs Kafka accepts that have no broker key Krait knows. Kafka's types, defaults and
#: validators; a topic synonym has its own default or validator only where Kafka's differ.
LOG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("log.segment.bytes", INT, "1073741824", AtLeast(14), HIGH, _DYN, "size at which a segment rolls",
              topic=TopicSynonym("segment.bytes")),
    ConfigKey("log.roll.ms", LONG, None, None, HIGH, _DYN, "age at which a segment rolls (over log.roll.hours)",
              topic=TopicSynonym("segment.ms", "604800000", AtLeast(1)),
              synonyms=(_hours("log.roll.hours", "168", "age at which a segment rolls"),)),
    ConfigKey("log.roll.jitter.ms", LONG, None, None, HIGH, _DYN, "random jitter subtracted from the roll age",
              topic=TopicSynonym("segment.jitter.ms", "0", AtLeast(0)),
              synonyms=(ConfigKey("log.roll.jitter.hours", INT, "0", AtLeast(0), HIGH, unit_ms=3_600_000,
                                  doc="random jitter subtracted from the roll age"),)),
    ConfigKey("log.index.size.max.bytes", INT, "10485760", AtLeast(4), doc="size of a segment's offset index",
              dynamic=_DYN, topic=TopicSynonym("segment.index.bytes")),
    ConfigKey("log.index.interval.bytes", INT, "4096", AtLeast(0), dynamic=_DYN,
              doc="log bytes between two sparse index entries", topic=TopicSynonym("index.interval.bytes")),
    ConfigKey("log.retention.ms", LONG, None, None, HIGH, _DYN, "how long a segment is kept (-1: forever)",
              topic=TopicSynonym("retention.ms", "604800000", AtLeast(-1)),
              synonyms=(ConfigKey("log.retention.minutes", INT, None, None, HIGH, unit_ms=60_000,
                                  doc="how long a segment is kept, in minutes"),
                        _hours("log.retention.hours", "168", "how long a segment is kept, in hours"))),
    ConfigKey("log.retention.bytes", LONG, "-1", None, HIGH, _DYN, "partition size above which old segments go",
              topic=TopicSynonym("retention.bytes")),
    ConfigKey("log.cleanup.policy", LIST, "delete", OneOf(("compact", "delete")), dynamic=_DYN,
              doc="delete old segments, compact to the latest record per key, or both",
              topic=TopicSynonym("cleanup.policy")),
    ConfigKey("log.cleaner.delete.retention.ms", LONG, "86400000", AtLeast(0), dynamic=_DYN,
              doc="how long compaction keeps tombstones", topic=TopicSynonym("delete.retention.ms")),
    ConfigKey("log.cleaner.min.compaction.lag.ms", LONG, "0", AtLeast(0), dynamic=_DYN,
              doc="minimum age before a record may be compacted", topic=TopicSynonym("min.compaction.lag.ms")),
    ConfigKey("log.cleaner.max.compaction.lag.ms", LONG, str(LONG_MAX), AtLeast(1), dynamic=_DYN,
              doc="maximum age before a record must be compacted", topic=TopicSynonym("max.compaction.lag.ms")),
    ConfigKey("log.cleaner.min.cleanable.ratio", DOUBLE, "0.5", Between(0, 1), dynamic=_DYN,
              doc="dirty ratio above which a log is compacted", topic=TopicSynonym("min.cleanable.dirty.ratio")),
    ConfigKey("log.flush.interval.messages", LONG, str(LONG_MAX), AtLeast(1), HIGH, _DYN,
              "records between two fsyncs (fsync on clean shutdown always)", topic=TopicSynonym("flush.messages")),
    ConfigKey("log.flush.interval.ms", LONG, None, None, HIGH, _DYN, "time between two fsyncs",
              topic=TopicSynonym("flush.ms", str(LONG_MAX), AtLeast(0)),
              synonyms=(ConfigKey("log.flush.scheduler.interval.ms", LONG, str(LONG_MAX), None, HIGH,
                                  doc="default of log.flush.interval.ms", default_only=True),)),
    ConfigKey("log.message.timestamp.type", STRING, "CreateTime", OneOf(("CreateTime", "LogAppendTime")),
              dynamic=_DYN, doc="the record's own timestamp or the broker's append time",
              topic=TopicSynonym("message.timestamp.type")),
    ConfigKey("log.message.timestamp.before.max.ms", LONG, str(LONG_MAX), AtLeast(0), dynamic=_DYN,
              doc="how far in the past a CreateTime timestamp may be (else INVALID_TIMESTAMP)",
              topic=TopicSynonym("message.timestamp.before.max.ms")),
    ConfigKey("log.message.timestamp.after.max.ms", LONG, "3600000", AtLeast(0), dynamic=_DYN,
              doc="how far in the future a CreateTime timestamp may be (else INVALID_TIMESTAMP)",
              topic=TopicSynonym("message.timestamp.after.max.ms")),
    ConfigKey("log.segment.delete.delay.ms", LONG, "60000", AtLeast(0), HIGH, _DYN,
              "delay before a deleted segment's files go", topic=TopicSynonym("file.delete.delay.ms")),
    ConfigKey("message.max.bytes", INT, "1048588", AtLeast(0), HIGH, _DYN, "largest record batch accepted",
              topic=TopicSynonym("max.message.bytes"), tags=frozenset({LOG_CLEANER})),
    ConfigKey("compression.type", STRING, "producer", OneOf(_COMPRESSION_TYPES), HIGH, _DYN,
              "codec batches are stored in (producer: as sent)", topic=TopicSynonym()),
    ConfigKey("log.preallocate", BOOLEAN, "false", dynamic=_DYN, doc="preallocate segment files",
              topic=TopicSynonym("preallocate")),
    ConfigKey("min.insync.replicas", INT, "1", AtLeast(1), HIGH, _DYN,
              "replicas that must have an acks=all write", topic=TopicSynonym()),
    ConfigKey("unclean.leader.election.enable", BOOLEAN, "false", None, HIGH, _DYN,
              "may a replica outside the ISR become leader", topic=TopicSynonym()),
    # Krait's own (issue 27): storage only carries it; broker/tables/ writes the table
    ConfigKey(MODE_KEY, STRING, "disabled", MODE_VALIDATOR, MEDIUM, _DYN,
              "keep the topic as an Apache Iceberg table: disabled, key_value, or the value decoded with the "
              "registry schema its prefix names (value_schema_id_prefix) or a subject's latest "
              "(value_schema_latest[:subject=S][,protobuf_name=M]; default subject <topic>-value)",
              topic=TopicSynonym()),
    ConfigKey(PARTITION_SPEC_KEY, STRING, DEFAULT_PARTITION_SPEC, PARTITION_SPEC_VALIDATOR, MEDIUM, _DYN,
              "the partition spec of the topic's Iceberg table (Redpanda's syntax); a change evolves the table's "
              "spec at the next commit, older files keep theirs", topic=TopicSynonym()),
    # Kafka's keys that storage has no use for (codec levels, tiered storage): accepted at
    # both levels so that clients which set them are not refused; they change nothing here
    *(ConfigKey(f"compression.{codec}.level", INT, level, dynamic=_DYN, use=ACCEPTED,
                topic=TopicSynonym(used=False)) for codec, level in (("gzip", "-1"), ("lz4", "9"), ("zstd", "3"))),
    ConfigKey("log.local.retention.ms", LONG, "-2", dynamic=_DYN, use=ACCEPTED,
              topic=TopicSynonym("local.retention.ms", used=False)),
    ConfigKey("log.local.retention.bytes", LONG, "-2", dynamic=_DYN, use=ACCEPTED,
              topic=TopicSynonym("local.retention.bytes", used=False)),
    *(ConfigKey(name, kind, default, topic_only=True, use=IGNORED, topic=TopicSynonym(used=False))
      for name, kind, default in (
          ("leader.replication.throttled.replicas", LIST, ""), ("follower.replication.throttled.replicas", LIST, ""),
          ("message.downconversion.enable", BOOLEAN, "true"), ("message.format.version", STRING, "3.0-IV1"),
          ("message.timestamp.difference.max.ms", LONG, str(LONG_MAX)), ("remote.storage.enable", BOOLEAN, "false"),
          ("remote.log.copy.disable", BOOLEAN, "false"), ("remote.log.delete.on.disable", BOOLEAN, "false"))),
)

#: topic config name -> the key declaring it (the broker key it is the synonym of)
TOPIC_KEYS: dict[str, ConfigKey] = {k.topic_name: k for k in walk(LOG_KEYS) if k.topic_name}
#: the topic configs storage implements, in declaration order (DescribeConfigs lists them)
TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(n for n, k in TOPIC_KEYS.items() if k.topic.used)

_PY_TYPES = {INT: int, LONG: int, DOUBLE: float, BOOLEAN: bool, LIST: tuple, STRING: str}


def _field(name: str) -> tuple[str, type, Any]:
    key = TOPIC_KEYS[name]
    return name.replace(".", "_"), _PY_TYPES[key.type], dataclasses.field(default=key.parse_topic(key.topic_default))


# LogConfig's fields are the topic configs storage uses: dots -> underscores, typed and
# defaulted by the declarations above
_Settings = dataclasses.make_dataclass("_Settings", [_field(n) for n in TOPIC_CONFIG_NAMES], frozen=True)


@dataclass(frozen=True)
class LogConfig(_Settings):
    """Per-partition storage settings. Field names are Kafka's with dots -> underscores
    (``segment_bytes``, ``cleanup_policy``, ...); ``cleanup_policy`` is in the order
    configured (DescribeConfigs shows it so): test membership, never order."""

    def __post_init__(self) -> None:
        # Sets are accepted for convenience; they have no order of their own, so sort them.
        p = self.cleanup_policy
        if not isinstance(p, tuple):
            object.__setattr__(self, "cleanup_policy", tuple(sorted(p) if isinstance(p, (set, frozenset)) else p))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_props(cls, props: Mapping[str, str], *, base: LogConfig | None = None, strict: bool = True) -> LogConfig:
        """Build a config from Kafka-named string properties over ``base`` (defaults if None)."""
        values: dict[str, Any] = {}
        for name, raw in props.items():
            key = TOPIC_KEYS.get(name)
            if key is None or not key.topic.used:
                if key is None and strict:
                    raise ConfigError(f"Unknown topic config name: {name}")
                continue
            if raw is None:
                raise ConfigError(f"Invalid value None for configuration {name}: a value is required")
            values[name.replace(".", "_")] = key.parse_topic(str(raw))
        cfg = dataclasses.replace(base or cls(), **values)
        if cfg.segment_index_bytes < 8:
            raise ConfigError("Invalid value for configuration segment.index.bytes: must hold at least one index entry")
        return cfg

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_props(props, base=self)

    def to_props(self) -> dict[str, str]:
        """Every setting under its Kafka name, rendered as Kafka renders it."""
        return {name: render_value(getattr(self, name.replace(".", "_"))) for name in TOPIC_CONFIG_NAMES}

