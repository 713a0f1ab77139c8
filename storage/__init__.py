"""The on-disk partition log: segments, sparse indexes, recovery, retention, compaction.

Synchronous; no asyncio. Byte-for-byte Kafka's on-disk format (``.log``, ``.index``,
``.timeindex``, ``.txnindex``, ``.snapshot``, checkpoint files, ``partition.metadata``).

Entry points: :class:`storage.manager.LogManager` (all partitions, scheduled tasks),
:class:`storage.log.PartitionLog` (append/read/offset lookups), :class:`storage.config.LogConfig`,
the exceptions in :mod:`storage.errors`, and ``storage.dump_log.main`` (``krait dump-log``).
"""

from .config import LogConfig
from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from .log import AppendResult, FileRegion, PartitionLog
from .manager import LogManager

__all__ = [
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "AppendResult",
    "FileRegion",
    "StorageError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "RecordTooLargeError",
]
