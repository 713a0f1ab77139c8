"""The transaction coordinator's settings, named after Kafka's broker properties
(TransactionLogConfig and TransactionStateManagerConfig, with their defaults).

The broker's config module owns parsing server.properties;
:meth:`TransactionConfig.from_properties` picks the keys that concern transactions out of a
flat ``{kafka.name: value}`` mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["TransactionConfig", "TRANSACTION_STATE_TOPIC", "GROUP_METADATA_TOPIC", "MARKER_RETRY_BACKOFF_MS"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
GROUP_METADATA_TOPIC = "__consumer_offsets"

#: How long a transaction waits before markers that failed with a retriable error are sent
#: again, or before a failed CompleteCommit/CompleteAbort write is retried. Kafka's marker
#: sender thread retries on its next poll, paced by the inter-broker client's
#: ``retry.backoff.ms`` (100 ms by default); a pure core needs an explicit pace so a sender
#: that fails at once cannot spin.
MARKER_RETRY_BACKOFF_MS = 100

# Kafka property name of each field whose name is not simply its dotted form.
_KEYS = {
    "transaction_state_log_num_partitions": "transaction.state.log.num.partitions",
    "transaction_state_log_replication_factor": "transaction.state.log.replication.factor",
    "transaction_state_log_min_isr": "transaction.state.log.min.isr",
    "transaction_state_log_segment_bytes": "transaction.state.log.segment.bytes",
    "transaction_max_timeout_ms": "transaction.max.timeout.ms",
    "transactional_id_expiration_ms": "transactional.id.expiration.ms",
    "transaction_abort_timed_out_transaction_cleanup_interval_ms":
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction_remove_expired_transaction_cleanup_interval_ms":
        "transaction.remove.expired.transaction.cleanup.interval.ms",
}


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    transaction_state_log_replication_factor: int = 3  # transaction.state.log.replication.factor
    transaction_state_log_min_isr: int = 2  # transaction.state.log.min.isr
    transaction_state_log_segment_bytes: int = 104_857_600  # transaction.state.log.segment.bytes
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms (15 min)
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms (1 hour)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> TransactionConfig:
        """Build from Kafka property names; unknown keys are ignored."""
        kwargs = {f.name: int(props[_KEYS[f.name]]) for f in fields(cls) if _KEYS[f.name] in props}
        return cls(**kwargs)

    def topic_configs(self) -> dict[str, str]:
        """The topic configs Kafka forces on ``__transaction_state``
        (TransactionStateManager.transactionTopicConfigs)."""
        return {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(self.transaction_state_log_min_isr),
            "segment.bytes": str(self.transaction_state_log_segment_bytes),
        }
