"""The transaction coordinator (a pure state machine) and the ``__transaction_state``
record codecs.

Import :class:`TransactionCoordinator` and :class:`TransactionConfig` from here; see
txn_coordinator/coordinator.py for how the broker drives it, and txn_coordinator/state.py
for the interfaces the broker implements (the log, the marker sender, the producer-id
allocator).
"""

from txn_coordinator.config import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, TransactionConfig
from txn_coordinator.coordinator import TransactionCoordinator
from txn_coordinator.metadata import TransactionMetadata, TransactionResult, TransactionState
from txn_coordinator.records import TopicPartition
from txn_coordinator.state import (
    MarkerRequest,
    MarkerResults,
    MarkerSender,
    ProducerIdAllocator,
    TransactionStateLog,
    partition_for_transactional_id,
)

__all__ = [
    "GROUP_METADATA_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "MarkerRequest",
    "MarkerResults",
    "MarkerSender",
    "ProducerIdAllocator",
    "TopicPartition",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionResult",
    "TransactionState",
    "TransactionStateLog",
    "partition_for_transactional_id",
]
