"""Which partition of a coordinator's topic holds a key: a group in ``__consumer_offsets``,
a transactional id in ``__transaction_state``. Both coordinators use this module and only
it, and so do the tools that look a group's records up, so that Krait lays its internal
topics out exactly as Kafka does (a log dir moved between Kafka and Krait keeps its groups).

Kafka's rule (GroupCoordinator/TransactionStateManager ``partitionFor``) is
``Utils.abs(key.hashCode()) % partitions``, where ``Utils.abs(n)`` is ``Math.abs(n)`` except
that Integer.MIN_VALUE gives 0. Krait used to compute ``(hashCode & 0x7fffffff) %
partitions`` instead (Kafka's ``Utils.toPositive``, the producer partitioner's rule), which
differs for every negative hash code. Logs written then keep such keys in another
partition; :func:`legacy_partition` names it, so that a coordinator loading a partition
finds and moves them (coordinator/relocation.py, txn_coordinator/loader.py).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "Relocation",
    "java_string_hash",
    "kafka_abs",
    "legacy_partition",
    "legacy_partition_for_key",
    "partition_for_key",
]

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, int32 arithmetic."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: Math.abs, but Integer.MIN_VALUE (whose Math.abs overflows to
    itself) gives 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for_key(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % numPartitions``: the partition of a group id in
    ``__consumer_offsets`` or of a transactional id in ``__transaction_state``."""
    return kafka_abs(java_string_hash(key)) % num_partitions


def legacy_partition_for_key(key: str, num_partitions: int) -> int:
    """Where Krait before this rule wrote the key (``Utils.toPositive``); only to find
    records of such logs, never to place new ones."""
    return (java_string_hash(key) & 0x7FFFFFFF) % num_partitions


def legacy_partition(partition: int, num_partitions: int) -> int:
    """The one partition where the former rule put the keys that Kafka's rule places in
    ``partition``. Both rules agree for hash codes >= 0 and for Integer.MIN_VALUE; for any
    other negative h, Kafka's partition is ``-h mod n`` and the former one
    ``(h + 2**31) mod n``, i.e. ``(2**31 - partition) mod n``. The mapping is its own
    inverse: partitions swap their misplaced keys in pairs (or keep them, when equal)."""
    return ((1 << 31) - partition) % num_partitions


class Relocation(NamedTuple):
    """What remains of a load that moved keys out of their legacy partition: the keys to
    delete (tombstone) there, once the copies written into their own partition are durable
    (before that, the legacy records are the only copy)."""

    source: int
    tombstones: list[bytes]
