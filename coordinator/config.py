"""The group coordinator's settings, named after Kafka's broker properties.

The broker's config module owns parsing server.properties; :meth:`CoordinatorConfig.from_properties`
picks the keys that concern groups out of a flat ``{kafka.name: value}`` mapping. Most are
ints; ``group.consumer.assignors`` and ``group.coordinator.rebalance.protocols`` are lists
(comma-separated strings or sequences), ``group.consumer.migration.policy`` a string.
Inconsistent values raise ValueError naming the key, with Kafka's messages
(GroupCoordinatorConfig / KafkaConfig).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["CoordinatorConfig", "MIGRATION_POLICIES", "NEW_MEMBER_JOIN_TIMEOUT_MS", "REBALANCE_PROTOCOLS"]

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined without a member id
#: and whose join never completes is dropped after this long (its client likely gave up).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

#: group.coordinator.rebalance.protocols values Kafka knows (Group.GroupType)
REBALANCE_PROTOCOLS = ("classic", "consumer", "share")

#: group.consumer.assignors takes names or Kafka's class names for the built-in assignors
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

#: group.consumer.migration.policy values (Kafka's ConsumerGroupMigrationPolicy): which online
#: conversions between a classic group and a consumer group are allowed
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")

_LISTS = ("group_consumer_assignors", "group_coordinator_rebalance_protocols", "group_share_assignors")
_STRINGS = ("group_consumer_migration_policy",)


def _as_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Sequence):
        items = [str(v) for v in value]
    else:
        raise ValueError(f"{key}: expected a list, got {value!r}")
    return tuple(i.strip() for i in items if i.strip())


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_max_size: int = 2_147_483_647  # group.max.size
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS  # not configurable in Kafka
    # --- KIP-848 consumer groups (Kafka's GroupCoordinatorConfig) ---------------------------
    group_consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    group_consumer_min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    group_consumer_max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    group_consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    group_consumer_min_heartbeat_interval_ms: int = 5000  # group.consumer.min.heartbeat.interval.ms
    group_consumer_max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    group_consumer_max_size: int = 2_147_483_647  # group.consumer.max.size
    #: group.consumer.assignors: server assignors by name; the first is the default
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.coordinator.rebalance.protocols: "consumer" enables ConsumerGroupHeartbeat
    group_coordinator_rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    #: group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled (any
    #: case); converting a classic group with members to a consumer group (upgrade) and back
    group_consumer_migration_policy: str = "bidirectional"
    # --- KIP-932 share groups (Kafka's GroupCoordinatorConfig / ShareGroupConfig) -------------
    group_share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    group_share_min_session_timeout_ms: int = 45_000  # group.share.min.session.timeout.ms
    group_share_max_session_timeout_ms: int = 60_000  # group.share.max.session.timeout.ms
    group_share_heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    group_share_min_heartbeat_interval_ms: int = 5000  # group.share.min.heartbeat.interval.ms
    group_share_max_heartbeat_interval_ms: int = 15_000  # group.share.max.heartbeat.interval.ms
    group_share_max_size: int = 200  # group.share.max.size
    #: group.share.assignors: share-group assignors by name; the first is used (Kafka has one)
    group_share_assignors: tuple[str, ...] = ("simple",)

    def __post_init__(self) -> None:
        for name in _LISTS:
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, _as_list(name.replace("_", "."), value))
        object.__setattr__(
            self, "group_consumer_assignors",
            tuple(_ASSIGNOR_CLASSES.get(a, a) for a in self.group_consumer_assignors),
        )
        policy = self.group_consumer_migration_policy
        if not isinstance(policy, str) or policy.lower() not in MIGRATION_POLICIES:
            # Kafka's CaseInsensitiveValidString
            raise ValueError(
                f"Invalid value {policy} for configuration group.consumer.migration.policy: String must be one "
                f"of (case insensitive): {', '.join(p.upper() for p in MIGRATION_POLICIES)}"
            )
        object.__setattr__(self, "group_consumer_migration_policy", policy.lower())
        self._validate()

    def _validate(self) -> None:
        def require(ok: bool, message: str) -> None:
            if not ok:
                raise ValueError(message)

        for prefix in ("group_consumer_", "group_share_"):
            self._validate_modern(prefix, require)
        require(bool(self.group_consumer_assignors), "group.consumer.assignors must name at least one assignor")
        require(bool(self.group_share_assignors), "group.share.assignors must name at least one assignor")
        protocols = self.group_coordinator_rebalance_protocols
        unknown = [p for p in protocols if p not in REBALANCE_PROTOCOLS]
        require(
            not unknown,
            f"group.coordinator.rebalance.protocols: unknown protocols {unknown} (known: {', '.join(REBALANCE_PROTOCOLS)})",
        )
        require("classic" in protocols, "group.coordinator.rebalance.protocols: Disabling the 'classic' protocol is not supported.")

    def _validate_modern(self, prefix: str, require: Any) -> None:
        """The session and heartbeat bounds of consumer (``group_consumer_``) or share
        (``group_share_``) groups, with Kafka's messages (GroupCoordinatorConfig)."""
        k = prefix.replace("_", ".")
        for f in fields(self):
            if f.name.startswith(prefix) and f.name not in _LISTS + _STRINGS:
                require(getattr(self, f.name) >= 1, f"{f.name.replace('_', '.')} must be at least 1")

        def v(name: str) -> int:
            return int(getattr(self, prefix + name))

        require(v("max_heartbeat_interval_ms") >= v("min_heartbeat_interval_ms"),
                f"{k}max.heartbeat.interval.ms must be greater than or equal to {k}min.heartbeat.interval.ms")
        require(v("heartbeat_interval_ms") >= v("min_heartbeat_interval_ms"),
                f"{k}heartbeat.interval.ms must be greater than or equal to {k}min.heartbeat.interval.ms")
        require(v("heartbeat_interval_ms") <= v("max_heartbeat_interval_ms"),
                f"{k}heartbeat.interval.ms must be less than or equal to {k}max.heartbeat.interval.ms")
        require(v("max_session_timeout_ms") >= v("min_session_timeout_ms"),
                f"{k}max.session.timeout.ms must be greater than or equal to {k}min.session.timeout.ms")
        require(v("session_timeout_ms") >= v("min_session_timeout_ms"),
                f"{k}session.timeout.ms must be greater than or equal to {k}min.session.timeout.ms")
        require(v("session_timeout_ms") <= v("max_session_timeout_ms"),
                f"{k}session.timeout.ms must be less than or equal to {k}max.session.timeout.ms")
        require(v("heartbeat_interval_ms") < v("session_timeout_ms"),
                f"{k}heartbeat.interval.ms must be less than {k}session.timeout.ms")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether ConsumerGroupHeartbeat is served ("consumer" in group.coordinator.rebalance.protocols)."""
        return "consumer" in self.group_coordinator_rebalance_protocols

    @property
    def online_upgrade_enabled(self) -> bool:
        """group.consumer.migration.policy allows converting a classic group to a consumer group."""
        return self.group_consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def online_downgrade_enabled(self) -> bool:
        """group.consumer.migration.policy allows converting a consumer group to a classic group."""
        return self.group_consumer_migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> CoordinatorConfig:
        """Build from Kafka property names (``group.max.size`` ...); unknown keys are ignored.
        Raises ValueError, naming the key, for a value that is not valid."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            key = f.name.replace("_", ".")
            if key not in props:
                continue
            value = props[key]
            if f.name in _LISTS:
                kwargs[f.name] = _as_list(key, value)
                continue
            if f.name in _STRINGS:
                kwargs[f.name] = str(value).strip()
                continue
            try:
                kwargs[f.name] = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"{key}: not an integer: {value!r}") from None
        return cls(**kwargs)
