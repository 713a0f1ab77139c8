"""In-process tests of the ReplicaManager: make this broker the leader of every local log,
with an ISR of itself, as a single node's metadata store does at start-up (Partition
objects are what the ReplicaManager appends and reads through)."""

from __future__ import annotations

from broker.cluster.election import PartitionState
from broker.replica.manager import ReplicaManager
from broker.replica.partition import Partition


def lead_every_partition(rm: ReplicaManager, epoch: int = 0) -> None:
    me = rm.broker_id
    for (topic, p), plog in rm.logs.partitions().items():
        part = rm.partitions.get((topic, p)) or Partition(topic, p, plog, me)
        rm.partitions[(topic, p)] = part
        part.apply(PartitionState(me, epoch, (me,), 1, 0), (me,), 0)
        part.maybe_increment_high_watermark()
