"""The controller's duties (Kafka's KafkaController in ZooKeeper mode), run by whichever
broker won the election in :mod:`broker.cluster.membership`: when brokers come and go it
moves leadership of their partitions to a live ISR member (bumping the leader epoch, so
the old leader is fenced), takes dead replicas out of ISRs, and elects a leader for
partitions that had none once an ISR member returns; replicas in a broker's failed log dir
(KIP-112, :mod:`broker.cluster.log_dir_events`) count as dead for their partitions until
that broker registers again. Every write is conditional on the
partition state's ZooKeeper version: a leader's concurrent ISR change or another
controller's write makes it fail, and the next pass works from the new state.

The rules themselves (which replica leads, what the ISR becomes) are the pure functions of
:mod:`broker.cluster.election`; this module decides when to apply them and writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from . import election
from .election import PartitionState

log = logging.getLogger("krait.controller")

TopicPartition = tuple[str, int]


class Controller:
    def __init__(self, broker_id: int, *, write: Callable[[TopicPartition, PartitionState], object],
                 unclean: Callable[[str], bool], retry: Callable[[], None]) -> None:
        self.broker_id = broker_id
        #: async (tp, new state) -> stored state or None (the version moved)
        self.write = write
        #: the topic's unclean.leader.election.enable
        self.unclean = unclean
        #: asks for another pass soon (after a failed write)
        self.retry = retry
        self.active = False
        #: replicas in failed log dirs: broker -> (its broker epoch then, partitions);
        #: forgotten once the broker registers again (its restart recovers the dir)
        self.offline_replicas: dict[int, tuple[int, frozenset[TopicPartition]]] = {}
        #: the live brokers' epochs (ZkMembership.broker_epochs)
        self.broker_epochs: Callable[[], dict[int, int]] = dict
        self._inflight: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task] = set()

    def on_change(self, controller_id: int | None, controller_epoch: int, live: set[int],
                  assignments: dict[TopicPartition, tuple[int, ...]],
                  states: dict[TopicPartition, PartitionState]) -> None:
        """Called after every change of brokers, controller or partition states."""
        if controller_id != self.broker_id:
            if self.active:
                log.info("broker %d is no longer the controller", self.broker_id)
            self.active = False
            return
        if not self.active:
            log.info("broker %d acting as controller (epoch %d): %d live brokers", self.broker_id,
                     controller_epoch, len(live))
            self.active = True
        if not live:
            return
        changes = election.states_after_broker_change(assignments, states, live, controller_epoch,
                                                      lambda tp: self.unclean(tp[0]),
                                                      self.offline_by_partition(assignments))
        for tp, new in changes.items():
            if tp in self._inflight:
                continue
            old = states.get(tp)
            if old is None:
                continue
            log.info("%s-%d: leader %d -> %d, epoch %d -> %d, isr %s -> %s", tp[0], tp[1], old.leader, new.leader,
                     old.leader_epoch, new.leader_epoch, list(old.isr), list(new.isr))
            self._inflight.add(tp)
            task = asyncio.ensure_future(self._write(tp, new))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def offline_by_partition(self, assignments: dict[TopicPartition, tuple[int, ...]]
                             ) -> dict[TopicPartition, set[int]]:
        """Per partition, its replicas in failed log dirs of brokers still registered with
        the epoch they had then (Kafka's replicasOnOfflineDirs, cleared on restart)."""
        epochs = self.broker_epochs()
        out: dict[TopicPartition, set[int]] = {}
        for broker, (epoch, tps) in list(self.offline_replicas.items()):
            if epochs.get(broker) != epoch:
                del self.offline_replicas[broker]
                continue
            for tp in tps:
                if broker in assignments.get(tp, ()):
                    out.setdefault(tp, set()).add(broker)
        return out

    async def _write(self, tp: TopicPartition, new: PartitionState) -> None:
        stored = None
        try:
            stored = await self.write(tp, new)
            if stored is None:
                log.info("%s-%d: the state changed meanwhile; the next pass decides again", tp[0], tp[1])
        except Exception as exc:
            log.warning("%s-%d: writing the partition state failed: %s", tp[0], tp[1], exc)
        finally:
            self._inflight.discard(tp)
        if stored is None:
            self.retry()

    def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
