"""The group coordinator's settings, named after Kafka's broker properties.

The broker's config module owns parsing server.properties; :meth:`CoordinatorConfig.from_properties`
picks the keys that concern groups out of a flat ``{kafka.name: value}`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["CoordinatorConfig", "NEW_MEMBER_JOIN_TIMEOUT_MS"]

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined without a member id
#: and whose join never completes is dropped after this long (its client likely gave up).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> CoordinatorConfig:
        """Build from Kafka property names (``group.max.size`` ...); unknown keys are ignored."""
        kwargs: dict[str, int] = {}
        for f in fields(cls):
            key = f.name.replace("_", ".")
            if key in props:
                kwargs[f.name] = int(props[key])
        return cls(**kwargs)
