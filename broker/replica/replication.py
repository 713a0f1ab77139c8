"""Replication, the leader's side and the state changes: applying the partition states
the metadata store holds (ZooKeeper's, or a single node's local store) to this broker's replicas (lead, follow, or drop them),
answering followers' Fetch requests (reads up to the log end, KIP-320 divergence,
follower progress that moves the high watermark) and keeping the ISR: followers that
catch up join it, followers lagging more than ``replica.lag.time.max.ms`` leave it,
through conditional ZooKeeper updates fenced by the state's version (Kafka's ZK-mode
leader ISR update). The follower's side, fetching, is :mod:`broker.replica.fetcher`.

An ISR write has three outcomes, as Kafka's conditionalUpdatePath with its
checkLeaderAndIsrZkData sees them: stored; refused because the znode moved on (the state
there is read back: if it is the one we wrote, an earlier attempt whose answer was lost
landed, and that is success); or unknown (the connection went with the request in
flight). An unknown outcome is retried, with the same znode version, so that it lands at
most once, until ZooKeeper answers. Until then the change stays pending and the high
watermark counts its members (:class:`broker.partition.Partition`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError
from storage.log import PartitionLog

from ..cluster.election import PartitionState
from .manager import ReplicaManager
from .partition import Partition

log = logging.getLogger("krait.replication")

TopicPartition = tuple[str, int]
#: writes a partition state to ZooKeeper if its version still matches; the stored state or None
IsrWriter = Callable[[TopicPartition, PartitionState], Awaitable[PartitionState | None]]
#: reads a partition's state from ZooKeeper (None: no such znode)
StateReader = Callable[[TopicPartition], Awaitable[PartitionState | None]]
#: the first wait before retrying an ISR write whose outcome is unknown, and the longest
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 0.2, 5.0
#: how often at most a leader re-reads a partition's state because a follower fetched at
#: an epoch newer than its own
STALE_EPOCH_READ_INTERVAL_S = 1.0


@dataclass(slots=True)
class FollowerRead:
    high_watermark: int
    log_start_offset: int
    records: bytes
    #: the leader's LSO (Kafka reports it to followers too; they do not use it)
    last_stable_offset: int = -1
    #: (epoch, end offset) when the follower's log diverged from ours
    diverging_epoch: tuple[int, int] | None = None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _same_change(stored: PartitionState, wrote: PartitionState) -> bool:
    """Kafka's checkLeaderAndIsrZkData: the znode holds what we wrote (its version aside)."""
    return (stored.leader, stored.leader_epoch, tuple(stored.isr), stored.controller_epoch) == \
        (wrote.leader, wrote.leader_epoch, tuple(wrote.isr), wrote.controller_epoch)


class Replication:
    def __init__(self, replicas: ReplicaManager, write_isr: IsrWriter, *, lag_time_max_ms: int,
                 read_state: StateReader | None = None, is_live: Callable[[int], bool] | None = None) -> None:
        self.replicas = replicas
        replicas.replication = self  # followers' fetches reach this through the ReplicaManager
        self.write_isr = write_isr
        self.read_state = read_state
        #: whether a broker is registered in ZooKeeper: only live brokers join an ISR (Kafka's
        #: isReplicaIsrEligible in ZooKeeper mode), else the controller takes a broker it
        #: holds dead out again, and the two would take turns for ever
        self.is_live = is_live or (lambda _broker: True)
        self.lag_time_max_ms = lag_time_max_ms
        #: the broker's metrics (broker.metrics.BrokerMetrics): ISR shrinks and expansions
        self.metrics = None
        self._tasks: set[asyncio.Task] = set()
        #: partitions whose state is being read back because a follower knew a newer epoch
        self._stale_reads: dict[TopicPartition, float] = {}

    @property
    def broker_id(self) -> int:
        return self.replicas.broker_id

    # --- states from ZooKeeper ----------------------------------------------------------------
    def apply(self, assignments: dict[TopicPartition, tuple[int, ...]], states: dict[TopicPartition, PartitionState],
              open_log: Callable[[str, int], PartitionLog],
              removing: dict[TopicPartition, tuple[int, ...]] | None = None
              ) -> tuple[dict[TopicPartition, tuple[int, int]], list]:
        """Make this broker's replicas match ZooKeeper: open a log for every partition
        assigned here, lead or follow at the state's epoch. Returns the partitions to
        follow, {tp: (leader, epoch)}, and those no longer assigned here."""
        rm = self.replicas
        now = _now_ms()
        follow: dict[TopicPartition, tuple[int, int]] = {}
        mine = set()
        for tp, replicas in assignments.items():
            if self.broker_id not in replicas:
                continue
            mine.add(tp)
            part = rm.partitions.get(tp)
            if part is None:
                try:
                    plog = open_log(*tp)
                except KafkaError:
                    continue  # its log may be in a failed log dir: not hosted here until a restart
                part = rm.partitions[tp] = Partition(tp[0], tp[1], plog, self.broker_id)
            if part.log.offline:
                continue  # in a failed log dir: neither led nor followed from here (Kafka's Offline)
            part.removing = frozenset(removing.get(tp, ())) if removing else frozenset()
            state = states.get(tp)
            if state is None:
                continue  # being created: the state znode is not there yet
            role = part.apply(state, replicas, now)
            if role is not None:
                log.info("%s-%d: %s at epoch %d (leader %d, isr %s)", tp[0], tp[1], role, state.leader_epoch,
                         state.leader, list(state.isr))
                rm.purgatory.notify(tp)  # parked acks=all produces and fetches see the change
            if part.is_leader:
                if part.maybe_increment_high_watermark():
                    rm.purgatory.notify(tp)
            elif state.leader >= 0:
                follow[tp] = (state.leader, state.leader_epoch)
        gone = [tp for tp in rm.partitions if tp not in mine]
        for tp in gone:
            del rm.partitions[tp]
            rm.purgatory.notify(tp)
        return follow, gone

    # --- the leader's side of a follower's fetch ---------------------------------------------
    def follower_fetch(self, replica_id: int, topic: str, partition: int, fetch_offset: int,
                       last_fetched_epoch: int, current_leader_epoch: int, max_bytes: int,
                       min_one_batch: bool) -> FollowerRead:
        """Kafka's fetch from a follower: check the epochs, detect divergence from the
        last fetched epoch (the follower then truncates), record the follower's progress
        (HW, ISR), and read up to the log end."""
        rm = self.replicas
        part = rm.leader(topic, partition)
        if current_leader_epoch > part.leader_epoch:
            # the follower has seen a newer state than ours: we may have been replaced
            self._read_back(part)
        rm.check_leader_epoch(current_leader_epoch, topic, partition)
        plog = part.log
        if last_fetched_epoch >= 0:
            epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0:
                # the follower has an epoch newer than any we know: we are the stale one
                self._read_back(part)
                raise KafkaError(ErrorCode.unknown_leader_epoch)
            if epoch < last_fetched_epoch or end < fetch_offset:
                return FollowerRead(plog.high_watermark, plog.log_start_offset, b"", plog.last_stable_offset,
                                    (epoch, end))
        if fetch_offset < plog.log_start_offset or fetch_offset > plog.log_end_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"fetch offset {fetch_offset} of replica {replica_id} is outside "
                             f"[{plog.log_start_offset}, {plog.log_end_offset}] of {plog.name}")
        if part.update_follower(replica_id, fetch_offset, _now_ms()):
            if part.maybe_increment_high_watermark():
                rm.purgatory.notify(part.tp)
            if not part.isr_update_pending and part.isr_to_expand(replica_id) and self.is_live(replica_id):
                self._change_isr(part, part.isr | {replica_id}, "expand")
        got = rm.read(plog, fetch_offset, max_bytes, min_one_batch=min_one_batch, to_log_end=True)
        return FollowerRead(got.high_watermark, got.log_start_offset, got.records, got.last_stable_offset)

    # --- ISR ------------------------------------------------------------------------------------
    def shrink_isrs(self) -> None:
        """Every replica.lag.time.max.ms / 2 (as Kafka schedules it): drop lagging followers."""
        now = _now_ms()
        for part in list(self.replicas.partitions.values()):
            if not part.is_leader or part.isr_update_pending:
                continue
            lagging = part.out_of_sync(now, self.lag_time_max_ms)
            if lagging:
                self._change_isr(part, part.isr - lagging, "shrink")

    def _change_isr(self, part: Partition, isr: frozenset[int] | set[int], why: str) -> None:
        if part.state is None:
            return
        old = sorted(part.isr)
        new = part.propose_isr(isr)
        log.info("%s-%d: %s ISR from %s to %s", part.topic, part.index, why, old, list(new.isr))
        self._spawn(self._write(part, new, why))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _proposing(self, part: Partition, new: PartitionState) -> bool:
        """Whether ``new`` is still this leader's pending change: no state from ZooKeeper
        has settled it meanwhile, and the partition is still ours."""
        return self.replicas.partitions.get(part.tp) is part and part.state is not None \
            and part.state.zk_version == new.zk_version and part.pending_isr == frozenset(new.isr)

    async def _write(self, part: Partition, new: PartitionState, why: str = "") -> None:
        backoff = RETRY_BACKOFF_S
        refused = False
        while self._proposing(part, new):
            try:
                if not refused:
                    stored = await self.write_isr(part.tp, new)
                    if stored is None:
                        refused = True  # the znode moved on: by our own lost write, or another's
                        continue
                elif self.read_state is None:
                    return  # a newer state reaches us through the watch; the change stays pending till then
                else:
                    stored = await self.read_state(part.tp)
                    if stored is None or not _same_change(stored, new):
                        # someone else's state: it settles the pending change once applied
                        # (the read brings it to the view and a sync applies it)
                        log.info("%s-%d: the ISR change to %s was refused: the state is now %s", part.topic,
                                 part.index, list(new.isr), stored)
                        return
                    log.info("%s-%d: the ISR change to %s had landed (its answer was lost)", part.topic, part.index,
                             list(new.isr))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # the outcome is unknown: retry with the same version, so it lands at most once
                log.warning("%s-%d: the outcome of the ISR change to %s is unknown (%s); retrying in %.1fs",
                            part.topic, part.index, list(new.isr), exc or type(exc).__name__, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
                continue
            self._stored(part, stored, why)
            return

    def _stored(self, part: Partition, stored: PartitionState, why: str) -> None:
        if self.metrics is not None:
            if why == "shrink":
                self.metrics.isr_shrinks += 1
            elif why == "expand":
                self.metrics.isr_expands += 1
        if self.replicas.partitions.get(part.tp) is part and part.leader_epoch == stored.leader_epoch:
            part.apply(stored, part.assignment, _now_ms())
            # a smaller ISR can move the HW, and acks=all waiters check the ISR size
            part.maybe_increment_high_watermark()
            self.replicas.purgatory.notify(part.tp)

    def _read_back(self, part: Partition) -> None:
        """Re-read a partition's state from ZooKeeper (at most one read at a time and one a
        second per partition): a follower fetching at a newer epoch tells a leader it may
        be stale before the watch does (or when the watch cannot: ZooKeeper unreachable)."""
        if self.read_state is None:
            return
        now = time.monotonic()
        if self._stale_reads.get(part.tp, 0.0) > now:
            return
        self._stale_reads[part.tp] = now + STALE_EPOCH_READ_INTERVAL_S
        self._spawn(self._read_state_quietly(part.tp))

    async def _read_state_quietly(self, tp: TopicPartition) -> None:
        try:
            await self.read_state(tp)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("%s-%d: reading the partition state failed: %s", tp[0], tp[1], exc)

    def stop(self) -> None:
        """Cancel the ISR writes still in flight (the broker is leaving the cluster)."""
        for t in list(self._tasks):
            t.cancel()
