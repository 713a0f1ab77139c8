"""Partition reassignment (KIP-455, as Kafka's controller runs it in ZooKeeper mode):
AlterPartitionReassignments writes the target replicas into the topic znode together with
the original ones (``adding`` / ``removing``), so that the new replicas are created and
start following; once every target replica is in the ISR, the controller completes it:
leadership moves into the target set if it must (epoch + 1), the removed replicas leave
the ISR, and the topic znode keeps only the target replicas, after which the brokers that
lost a replica delete it. Cancelling (null replicas) goes back to the original replicas.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

from . import election
from .election import PartitionState
from .zk_metadata import ZkMetadata

log = logging.getLogger("krait.reassignment")

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Ongoing:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


def ongoing(md: ZkMetadata) -> dict[TopicPartition, Ongoing]:
    """Every partition being reassigned, from the topic znodes."""
    out = {}
    for name, t in md.topics.items():
        for p in set(t.adding) | set(t.removing):
            out[(name, p)] = Ongoing(tuple(t.assignment.get(p, ())), tuple(t.adding.get(p, ())),
                                     tuple(t.removing.get(p, ())))
    return out


class Reassignments:
    def __init__(self, md: Callable[[], ZkMetadata | None], live: Callable[[], set[int]],
                 controller_epoch: Callable[[], int],
                 write_state: Callable[[TopicPartition, PartitionState], Awaitable[PartitionState | None]],
                 call: Callable[..., Awaitable]) -> None:
        self._md = md
        #: runs a store write (membership.call: off the loop for ZooKeeper)
        self._call = call
        self._live = live
        self._epoch = controller_epoch
        self._write_state = write_state
        self._inflight: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task] = set()

    async def _zk(self, fn, *args):
        return await self._call(ErrorCode.request_timed_out, fn, *args)

    # --- AlterPartitionReassignments -----------------------------------------------------------
    async def alter(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        """Start, replace or (``replicas`` None) cancel one partition's reassignment."""
        md = self._md()
        meta = md.topics.get(topic) if md is not None else None
        if meta is None or partition not in meta.assignment:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}-{partition}.")
        tp = (topic, partition)
        cur = ongoing(md).get(tp)
        original = cur.original if cur is not None else tuple(meta.assignment[partition])
        if replicas is None:
            if cur is None:
                raise KafkaError(ErrorCode.no_reassignment_in_progress,
                                 f"Unable to find an ongoing reassignment for partition {topic}-{partition}")
            await self._finish(tp, original, cancelled=True)
            return
        replicas = [int(r) for r in replicas]
        if not replicas:
            raise KafkaError(ErrorCode.invalid_replica_assignment, "The replica list is empty.")
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"The replica list {replicas} has duplicate brokers.")
        dead = [r for r in replicas if r not in self._live()]
        if dead:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, dead))}")
        full = tuple(dict.fromkeys([*replicas, *original]))
        adding = tuple(r for r in replicas if r not in original)
        removing = tuple(r for r in original if r not in replicas)
        if not adding and not removing and cur is None:
            if tuple(replicas) != tuple(meta.assignment[partition]):
                await self._zk(md.set_reassignment, topic, partition, tuple(replicas), (), ())
            return
        log.info("reassigning %s-%d from %s to %s", topic, partition, list(original), replicas)
        await self._zk(md.set_reassignment, topic, partition, full, adding, removing)

    # --- the controller's side -------------------------------------------------------------------
    def progress(self) -> None:
        """On the controller after every change: complete the reassignments whose target
        replicas are all in the ISR."""
        md = self._md()
        if md is None:
            return
        for tp, r in ongoing(md).items():
            st = md.states.get(tp)
            if tp in self._inflight or st is None or not all(x in st.isr for x in r.target):
                continue
            self._inflight.add(tp)
            task = asyncio.ensure_future(self._complete(tp, r.target))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _complete(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        try:
            await self._finish(tp, target, cancelled=False)
        except KafkaError as exc:  # ZooKeeper unreachable: a later pass completes it
            log.warning("%s-%d: completing the reassignment failed: %s", tp[0], tp[1], exc)

    async def _finish(self, tp: TopicPartition, final: tuple[int, ...], *, cancelled: bool) -> None:
        """Leadership and ISR into ``final`` (epoch + 1 when they change), then the topic
        znode holds exactly ``final``."""
        try:
            md = self._md()
            st = md.states.get(tp) if md is not None else None
            if st is None:
                return
            live = self._live()
            leader = st.leader if st.leader in final and st.leader in live else \
                election.reassignment_leader(final, st.isr, live)
            if leader is None:
                log.warning("%s-%d: no live in-sync replica among %s to lead; waiting", tp[0], tp[1], list(final))
                return
            isr = tuple(r for r in st.isr if r in final) or (leader,)
            if (leader, isr) != (st.leader, st.isr):
                if await self._write_state(tp, st.new_leader_and_isr(leader, isr, self._epoch())) is None:
                    return  # the state moved on: the next pass decides again
            await self._zk(md.set_reassignment, tp[0], tp[1], final, (), ())
            log.info("%s-%d: reassignment %s, replicas now %s", tp[0], tp[1],
                     "cancelled" if cancelled else "completed", list(final))
        finally:
            self._inflight.discard(tp)

    def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
