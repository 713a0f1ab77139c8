"""LogConfig: the per-topic storage settings, under Kafka's own topic-config names.

``LogConfig.from_props({"segment.bytes": "1048576", ...})`` validates every value the way
Kafka's LogConfig does (types, ranges, enums) and raises ValueError naming the key and
the rule it broke. ``to_props()`` gives back every setting as Kafka names -> strings, for
DescribeConfigs. Unknown keys are refused unless ``strict=False`` (Kafka refuses them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LogConfig", "LONG_MAX", "TOPIC_CONFIG_NAMES"]

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _parse_long(key: str, s: str) -> int:
    try:
        v = int(s.strip())
    except ValueError:
        raise ValueError(f"Invalid value {s!r} for configuration {key}: Not a number of type LONG") from None
    if not -(1 << 63) <= v <= LONG_MAX:
        raise ValueError(f"Invalid value {s!r} for configuration {key}: out of range for LONG")
    return v


def _parse_int(key: str, s: str) -> int:
    v = _parse_long(key, s)
    if not -(1 << 31) <= v <= INT_MAX:
        raise ValueError(f"Invalid value {s!r} for configuration {key}: Not a number of type INT")
    return v


def _parse_double(key: str, s: str) -> float:
    try:
        return float(s.strip())
    except ValueError:
        raise ValueError(f"Invalid value {s!r} for configuration {key}: Not a number of type DOUBLE") from None


def _parse_bool(key: str, s: str) -> bool:
    v = s.strip().lower()
    if v not in ("true", "false"):
        raise ValueError(f"Invalid value {s!r} for configuration {key}: Expected value to be either true or false")
    return v == "true"


def _parse_list(s: str) -> tuple[str, ...]:
    """Kafka's ConfigDef LIST parsing: comma-separated, trimmed, order and duplicates kept."""
    s = s.strip()
    return tuple(x.strip() for x in s.split(",")) if s else ()


def _parse_policy(key: str, s: str) -> tuple[str, ...]:
    # Order and duplicates are kept as given (Kafka 4.0's ValidList checks only membership,
    # and an empty list, meaning neither deletion nor compaction, is allowed).
    items = _parse_list(s)
    for item in items:
        if item not in ("compact", "delete"):
            raise ValueError(f"Invalid value {item} for configuration {key}: String must be one of: compact, delete")
    return items


def _enum(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(key: str, s: str) -> str:
        v = s.strip()
        if v not in options:
            raise ValueError(f"Invalid value {s!r} for configuration {key}: String must be one of: {', '.join(options)}")
        return v

    return parse


def _at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(key: str, v: Any) -> None:
        if v < minimum:
            raise ValueError(f"Invalid value {v} for configuration {key}: Value must be at least {minimum}")

    return check


def _between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(key: str, v: Any) -> None:
        if not lo <= v <= hi:
            raise ValueError(f"Invalid value {v} for configuration {key}: Value must be between {lo} and {hi}")

    return check


def _render(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(v)
    return str(v)


@dataclass(frozen=True)
class LogConfig:
    """Per-partition storage settings. Field names are Kafka's with dots -> underscores."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    #: in the order configured (DescribeConfigs shows it so); test membership, never order
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1048588
    compression_type: str = "producer"
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

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
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                if key in _IGNORED:
                    continue
                if strict:
                    raise ValueError(f"Unknown topic config name: {key}")
                continue
            parse, check = spec
            if raw is None:
                raise ValueError(f"Invalid value None for configuration {key}: a value is required")
            v = parse(key, str(raw))
            if check is not None:
                check(key, v)
            values[key.replace(".", "_")] = v
        cfg = dataclasses.replace(base or cls(), **values)
        if cfg.segment_index_bytes < 8:
            raise ValueError("Invalid value for configuration segment.index.bytes: must hold at least one index entry")
        return cfg

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_props(props, base=self)

    def to_props(self) -> dict[str, str]:
        """Every setting under its Kafka name, rendered as Kafka renders it."""
        return {name: _render(getattr(self, name.replace(".", "_"))) for name in _SPECS}


_SPECS: dict[str, tuple[Callable[[str, str], Any], Callable[[str, Any], None] | None]] = {
    "segment.bytes": (_parse_int, _at_least(14)),
    "segment.ms": (_parse_long, _at_least(1)),
    "segment.jitter.ms": (_parse_long, _at_least(0)),
    "segment.index.bytes": (_parse_int, _at_least(4)),
    "index.interval.bytes": (_parse_int, _at_least(0)),
    "retention.ms": (_parse_long, _at_least(-1)),
    "retention.bytes": (_parse_long, None),
    "cleanup.policy": (_parse_policy, None),
    "delete.retention.ms": (_parse_long, _at_least(0)),
    "min.compaction.lag.ms": (_parse_long, _at_least(0)),
    "max.compaction.lag.ms": (_parse_long, _at_least(1)),
    "min.cleanable.dirty.ratio": (_parse_double, _between(0, 1)),
    "flush.messages": (_parse_long, _at_least(1)),
    "flush.ms": (_parse_long, _at_least(0)),
    "message.timestamp.type": (_enum(_TIMESTAMP_TYPES), None),
    "message.timestamp.before.max.ms": (_parse_long, _at_least(0)),
    "message.timestamp.after.max.ms": (_parse_long, _at_least(0)),
    "file.delete.delay.ms": (_parse_long, _at_least(0)),
    "max.message.bytes": (_parse_int, _at_least(0)),
    "compression.type": (_enum(_COMPRESSION_TYPES), None),
    "preallocate": (_parse_bool, None),
    "min.insync.replicas": (_parse_int, _at_least(1)),
    "unclean.leader.election.enable": (_parse_bool, None),
}

# Topic configs Kafka accepts that storage has no use for (replication throttles,
# tiered storage, down-conversion, codec levels): accepted so that clients which set
# them are not refused, but they change nothing here.
_IGNORED = frozenset({
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.difference.max.ms",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
})

TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(_SPECS)
