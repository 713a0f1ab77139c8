"""The share coordinator's settings, named after Kafka's broker properties
(``ShareCoordinatorConfig``, with its defaults and ranges).

The broker's config module owns parsing server.properties;
:meth:`ShareCoordinatorConfig.from_properties` picks the keys that concern the share
coordinator out of a flat ``{kafka.name: value}`` mapping. Keys Kafka uses only for its own
runtime (``share.coordinator.threads``, ``share.coordinator.load.buffer.size``,
``share.coordinator.append.linger.ms``, ``share.coordinator.cached.buffer.max.bytes``) are
kept so that a Kafka server.properties means the same here, though this core reads none of
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["ShareCoordinatorConfig", "SHARE_GROUP_STATE_TOPIC"]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

# Kafka property name of each field.
_KEYS = {
    "state_topic_num_partitions": "share.coordinator.state.topic.num.partitions",
    "state_topic_replication_factor": "share.coordinator.state.topic.replication.factor",
    "state_topic_min_isr": "share.coordinator.state.topic.min.isr",
    "state_topic_segment_bytes": "share.coordinator.state.topic.segment.bytes",
    "state_topic_compression_codec": "share.coordinator.state.topic.compression.codec",
    "snapshot_update_records_per_snapshot": "share.coordinator.snapshot.update.records.per.snapshot",
    "write_timeout_ms": "share.coordinator.write.timeout.ms",
    "num_threads": "share.coordinator.threads",
    "load_buffer_size": "share.coordinator.load.buffer.size",
    "append_linger_ms": "share.coordinator.append.linger.ms",
    "state_topic_prune_interval_ms": "share.coordinator.state.topic.prune.interval.ms",
    "cold_partition_snapshot_interval_ms": "share.coordinator.cold.partition.snapshot.interval.ms",
    "cached_buffer_max_bytes": "share.coordinator.cached.buffer.max.bytes",
}

# Kafka's validators (ConfigDef ranges): field -> (min, max or None).
_RANGES = {
    "state_topic_num_partitions": (1, None),
    "state_topic_replication_factor": (1, 32767),
    "state_topic_min_isr": (1, 32767),
    "state_topic_segment_bytes": (1, None),
    "snapshot_update_records_per_snapshot": (0, 500),
    "write_timeout_ms": (1, None),
    "num_threads": (1, None),
    "load_buffer_size": (1, None),
    "append_linger_ms": (-1, None),
    "state_topic_prune_interval_ms": (1, None),
    "cold_partition_snapshot_interval_ms": (1, None),
    "cached_buffer_max_bytes": (512 * 1024, None),
}


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    state_topic_num_partitions: int = 50  # share.coordinator.state.topic.num.partitions
    state_topic_replication_factor: int = 3  # share.coordinator.state.topic.replication.factor
    state_topic_min_isr: int = 2  # share.coordinator.state.topic.min.isr
    state_topic_segment_bytes: int = 104_857_600  # share.coordinator.state.topic.segment.bytes (100 MiB)
    state_topic_compression_codec: int = 0  # share.coordinator.state.topic.compression.codec (none)
    # share.coordinator.snapshot.update.records.per.snapshot: updates between two snapshots
    snapshot_update_records_per_snapshot: int = 500
    write_timeout_ms: int = 5_000  # share.coordinator.write.timeout.ms
    num_threads: int = 1  # share.coordinator.threads
    load_buffer_size: int = 5 * 1024 * 1024  # share.coordinator.load.buffer.size
    append_linger_ms: int = -1  # share.coordinator.append.linger.ms (-1: adaptive)
    state_topic_prune_interval_ms: int = 300_000  # share.coordinator.state.topic.prune.interval.ms (internal)
    # share.coordinator.cold.partition.snapshot.interval.ms (internal): a share-partition not
    # written for this long gets a fresh snapshot, so that old segments can go
    cold_partition_snapshot_interval_ms: int = 300_000
    cached_buffer_max_bytes: int = 1024 * 1024 + 12  # share.coordinator.cached.buffer.max.bytes

    def __post_init__(self) -> None:
        for name, (low, high) in _RANGES.items():
            v = getattr(self, name)
            if v < low or (high is not None and v > high):
                bound = f"at least {low}" if high is None else f"in [{low}, {high}]"
                raise ValueError(f"{_KEYS[name]} must be {bound}, not {v}")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ShareCoordinatorConfig:
        """Build from Kafka property names; unknown keys are ignored."""
        kwargs = {f.name: int(props[_KEYS[f.name]]) for f in fields(cls) if _KEYS[f.name] in props}
        return cls(**kwargs)

    def topic_configs(self) -> dict[str, str]:
        """The topic configs Kafka creates ``__share_group_state`` with
        (ShareCoordinatorService.shareGroupStateTopicConfigs): delete, not compact (KIP-932:
        old records become redundant once a newer snapshot exists, and cold share-partitions
        are snapshotted again), the producer's compression, the segment size. Kafka 4.2 declares
        ``share.coordinator.state.topic.min.isr`` but does not put it here; neither do we."""
        return {
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(self.state_topic_segment_bytes),
        }
