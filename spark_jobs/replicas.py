"""Which replica of a partition to read when the log dirs of several brokers are given.

In cluster mode a partition has a replica (a ``<topic>-<partition>/`` directory) on
several brokers, and each log dir's ``replication-offset-checkpoint`` holds the high
watermark of each of its replicas as of that broker's last checkpoint. Given all the
brokers' log dirs, the reader groups partition directories by (topic, partition) across
the dirs and reads exactly one replica of each, never one per replica:

1. the replica with the highest high watermark, taken as the broker takes it when it
   loads the log: min(checkpointed HW, log end offset) (a crash can leave a checkpointed
   HW above what recovery kept). Records below a HW are committed, hence the same on every
   replica that holds them, so the highest HW gives the most committed records. With
   ``highWatermark=checkpoint`` (the default) the read stops there: a replica's records
   at or above its HW are uncommitted and may be truncated when it next follows a leader;
2. ties: the larger log end offset, then the first replica in the order of ``log.dirs``;
3. a replica whose log dir's checkpoint has no entry for it ranks below every replica
   with one (its HW is unknown: a replicated broker loads it as the log start);
4. when no replica has an entry (checkpoint never written, files copied without it), the
   same order applies, the largest log end then the first in order, and the chosen
   replica is read to its end, as the reader always did for one broker.

The choice does not depend on ``highWatermark``: ``ignore`` reads the same replica up to
its last whole batch. Offsets below the chosen replica's log start offset are not taken
from other replicas. A partition found once (one broker, with one or several log dirs)
is used as it is: nothing to choose, no log end computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .logdir import PartitionLog

__all__ = ["choose_replicas", "replica_rank"]


def replica_rank(plog: PartitionLog, order: int) -> tuple[int, int, int, int]:
    """Sort key of one replica, the largest wins: (has a HW entry, min(HW, log end),
    log end, -order). ``order`` is the replica's position among its partition's replicas
    in ``log.dirs`` order. Reads the tail of the active segment once (cached)."""
    leo = plog.log_end()[0]
    if plog.high_watermark is None:
        return (0, 0, leo, -order)
    return (1, min(plog.high_watermark, leo), leo, -order)


def choose_replicas(plogs: list[PartitionLog]) -> list[PartitionLog]:
    """One PartitionLog per (topic, partition), chosen as the module docstring says.

    ``plogs`` lists replicas in ``log.dirs`` order within a partition (as
    :func:`spark_jobs.logdir.list_partitions` does); the result keeps the input's order
    of partitions."""
    groups: dict[tuple[str, int], list[PartitionLog]] = {}
    for p in plogs:
        groups.setdefault((p.topic, p.partition), []).append(p)
    out = []
    for replicas in groups.values():
        if len(replicas) == 1:
            out.append(replicas[0])
        else:
            out.append(max(enumerate(replicas), key=lambda ir: replica_rank(ir[1], ir[0]))[1])
    return out
