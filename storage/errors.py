"""Storage exceptions: :class:`protocol.errors.KafkaError` subclasses whose class fixes
the Kafka error code the broker answers for the one partition concerned; nothing here is
fatal to the process.
"""

from __future__ import annotations

from protocol.errors import CodedError, ErrorCode

__all__ = [
    "StorageError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "RecordTooLargeError",
    "CorruptIndexError",
    "UnexpectedAppendOffsetError",
]


class StorageError(CodedError):
    """Base class; ``error_code`` is what goes into the response for this partition."""


class KafkaStorageError(StorageError):
    """The partition's files failed (EIO, ENOSPC, ...); the partition is offline."""

    error_code = ErrorCode.kafka_storage_error


class OffsetOutOfRangeError(StorageError):
    """Requested offset lies outside [log_start_offset, log_end_offset]."""

    error_code = ErrorCode.offset_out_of_range


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer skipped sequence numbers."""

    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(StorageError):
    """A batch carries an epoch older than the producer's current one (fenced)."""

    error_code = ErrorCode.invalid_producer_epoch


class InvalidTxnStateError(StorageError):
    """A producer's batch that does not fit its transaction: non-transactional data while
    its transaction is open, or a transactional batch the coordinator did not verify."""

    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(StorageError):
    """A COMMIT/ABORT marker from a coordinator epoch older than one already seen (a zombie
    coordinator)."""

    error_code = ErrorCode.transaction_coordinator_fenced


class RecordTooLargeError(StorageError):
    """A batch is larger than max.message.bytes."""

    error_code = ErrorCode.message_too_large


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; callers rebuild it from the log."""

    error_code = ErrorCode.kafka_storage_error


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose batches start below the log end offset or whose offsets do
    not increase (Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException,
    which are not API errors either). ``first_offset`` and ``last_offset`` are those of
    the refused batches, so that the fetcher can decide to start over at the leader's."""

    error_code = ErrorCode.unknown_server_error

    def __init__(self, message: str, first_offset: int = -1, last_offset: int = -1) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
