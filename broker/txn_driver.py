"""Drives the pure TransactionCoordinator from the event loop: creates and replays
``__transaction_state``, persists the coordinator's records into it, writes transaction
markers (locally, or with WriteTxnMarkers to the partition's leader), verifies
transactional produces (KIP-890 part 1) and runs the coordinator's timers.

The coordinator of a transactional id is the leader of its
``__transaction_state`` partition, with that partition's leader epoch as coordinator
epoch: the driver loads a partition when this broker becomes its leader and drops it when
leadership moves (:meth:`TransactionDriver.follow_leadership`). Answers that wrote records
wait until the ISR has them, and markers are sent only once PrepareCommit/PrepareAbort is
replicated (Kafka sends them from the append's acks=all callback): a coordinator that dies
before then leaves an Ongoing transaction, which its successor aborts, and never a
transaction committed on some partitions but not prepared in the log.

Transactional ids written by Krait's former placement into another partition: each
partition is loaded after the records of its legacy partition (broker/legacy_placement.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from coordinator.loader import TxnMarker
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.records import build_batch
from txn_coordinator import (
    TRANSACTION_STATE_TOPIC,
    MarkerRequest,
    MarkerResults,
    TopicPartition,
    TransactionConfig,
    TransactionCoordinator,
)

from .cluster.broker_channel import CHANNEL_FAILURES, BrokerChannel
from .coordinator_shell import CoordinatorShell, now_ms, read_partition
from .group_driver import OFFSETS_TOPIC
from .legacy_placement import LegacyPartitions

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("krait.transactions")

#: Test-only crash points (tests/transactions kill the broker exactly there): the broker
#: SIGKILLs itself when this environment variable names a point it reaches.
FAULT_ENV = "KRAIT_TXN_CRASH_AT"

WRITE_TXN_MARKERS_VERSION = 1
ADD_PARTITIONS_VERIFY_VERSION = 4

Verified = dict[tuple[str, int], ErrorCode]


class TransactionDriver(CoordinatorShell):
    def __init__(self, broker: Broker) -> None:
        cfg = broker.config
        super().__init__(broker.replicas, cfg["offsets.commit.timeout.ms"] / 1000, log)
        self.broker = broker
        self.registry = broker.registry
        self.topics = broker.topics
        self.config = TransactionConfig.from_properties(cfg.values)
        self.verification = bool(cfg["transaction.partition.verification.enable"])
        self.coordinator = TransactionCoordinator(
            self.config, now_ms, self, broker.producer_ids, _MarkerSender(self),
            partition_for_group=broker.groups.coordinator.partition_for,
            partition_exists=self._partition_exists)
        self._legacy = LegacyPartitions(self, TRANSACTION_STATE_TOPIC, broker)
        self._tasks: set[asyncio.Task] = set()
        #: the leader epoch each served __transaction_state partition was loaded at
        self._epochs: dict[int, int] = {}
        self.topics.internal_topic_creators[TRANSACTION_STATE_TOPIC] = self.ensure_topic
        self._channel = BrokerChannel(broker.node_id, broker.cluster.endpoint_of,
                                      security=broker.cluster.inter_broker_security)
        self.follow_leadership()

    # --- the core's interfaces ------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        return self.coordinator.next_deadline_ms()

    def poll(self) -> None:
        self.coordinator.poll()

    def append(self, partition: int, records: list) -> None:
        """TransactionStateLog: one uncompressed batch into __transaction_state-<partition>."""
        batch = build_batch(records, timestamp=now_ms())
        res = self.replicas.append_records(TRANSACTION_STATE_TOPIC, partition, bytearray(batch), now_ms(),
                                           internal_ok=True, acks=-1)
        self.appended((TRANSACTION_STATE_TOPIC, partition), res.last_offset + 1)

    def uncommitted(self, partitions: list[int] | None = None) -> list[tuple[tuple[str, int], int, int]]:
        """The served __transaction_state partitions whose log end is past the high
        watermark: a state read now may rest on records a failover would take back (an
        AddPartitionsToTxn retried after a timed-out write was answered 'already added' from
        them, and the producer's next batch failed verification at the new coordinator)."""
        out = []
        for p in self.coordinator.served_partitions() if partitions is None else partitions:
            try:
                plog = self.replicas.leader(TRANSACTION_STATE_TOPIC, p).log
            except KafkaError:
                continue
            if plog.log_end_offset > plog.high_watermark:
                out.append(((TRANSACTION_STATE_TOPIC, p), plog.log_end_offset,
                            self.replicas.leader_epoch_of(TRANSACTION_STATE_TOPIC, p)))
        return out

    def _partition_exists(self, topic: str, partition: int) -> bool:
        info = self.registry.get(topic)
        return info is not None and 0 <= partition < info.partitions

    # --- __transaction_state ----------------------------------------------------------------
    def ready(self) -> TransactionDriver:
        """The driver, with __transaction_state created (FindCoordinator creates it on first use)."""
        self.ensure_topic()
        return self

    def ensure_topic(self) -> None:
        if self.registry.get(TRANSACTION_STATE_TOPIC) is not None:
            return
        cfg = self.config
        self.create_internal_topic(self.topics, TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions,
                                   cfg.transaction_state_log_replication_factor, cfg.topic_configs())
        self.follow_leadership()

    def _load(self, partition: int, coordinator_epoch: int, *, to_log_end: bool) -> int:
        """Load a partition after the records of its legacy partition (fetched from its
        leader first when this broker's replica may lack some: the partition is loading
        until then). Returns how many records of its own were replayed (0 when deferred)."""
        self._legacy.cancel(partition)
        self.coordinator.start_loading(partition, coordinator_epoch)
        q = self.coordinator.legacy_partition(partition)
        legacy = self._legacy.local(q) if q != partition else []
        if legacy is None:
            self._legacy.fetch_then(partition, q, lambda records: self._replay(
                partition, coordinator_epoch, to_log_end, records))
            return 0
        return self._replay(partition, coordinator_epoch, to_log_end, legacy)

    def _replay(self, partition: int, coordinator_epoch: int, to_log_end: bool, legacy: list) -> int:
        if not self.coordinator.is_loading(partition):
            return 0  # unloaded meanwhile
        plog = self.replicas.local_log(TRANSACTION_STATE_TOPIC, partition)
        # __transaction_state holds no transactional batches: plain (offset, key, value) records
        records = [r[:3] for r in read_partition(plog, plog.log_end_offset if to_log_end else None)
                   if not isinstance(r, TxnMarker)] if plog is not None else []
        with self.operation() as appended:  # finishing a load may send markers: they wait for nothing older
            if self.coordinator.legacy_partition(partition) != partition:
                self.coordinator.load_legacy_partition(partition, [r[:3] for r in legacy if not isinstance(r, TxnMarker)])
            self.coordinator.load_partition(partition, records)
            moved = self.coordinator.finished_loading(partition)
        if moved is not None:
            self._legacy.delete(moved, partition, appended)
        self.reschedule_soon()
        return len(records)

    def follow_leadership(self) -> None:
        """After every metadata change: coordinate exactly the ids of the
        __transaction_state partitions this broker leads, at their leader epochs."""
        led = {tp[1]: part.leader_epoch for tp, part in self.replicas.partitions.items()
               if tp[0] == TRANSACTION_STATE_TOPIC and part.is_leader}
        served = self.coordinator.served_partitions()
        # a partition still waiting for its legacy partition is loading, not served yet
        for p in sorted((served | set(self._epochs)) - set(led)):
            self._epochs.pop(p, None)
            self._legacy.cancel(p)
            n = self.coordinator.unload_partition(p)
            log.info("%s-%d moved away: unloaded %d transactional ids", TRANSACTION_STATE_TOPIC, p, n)
        for p, epoch in sorted(led.items()):
            if self._epochs.get(p) == epoch and (p in served or self.coordinator.is_loading(p)):
                continue
            self._epochs[p] = epoch
            # the new leader's log is the truth now: load all of it, up to its end
            n = self._load(p, epoch, to_log_end=True)
            log.info("leading %s-%d at epoch %d: loaded %d records", TRANSACTION_STATE_TOPIC, p, epoch, n)
        self.reschedule_soon()

    # --- requests -----------------------------------------------------------------------------
    def coordinator_of(self, transactional_id: str) -> tuple[int, int]:
        """(__transaction_state partition, coordinator broker id or -1) of a transactional id."""
        p = self.coordinator.partition_for(transactional_id)
        error, leader, *_ = self.broker.partition_metadata(TRANSACTION_STATE_TOPIC, p)
        return p, leader if error == ErrorCode.none else -1

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[tuple[str, int]]) -> Verified | Awaitable[Verified]:
        """KIP-890 verification: is each partition in the producer's ongoing transaction?
        NONE when it is. Asks the coordinator here, or with AddPartitionsToTxn v4
        (verify_only) the broker that coordinates the id."""
        p, leader = self.coordinator_of(transactional_id)
        if leader == self.broker.node_id and p in self.coordinator.served_partitions():
            pending = self.uncommitted([p])
            if pending:
                return self._verify_when_committed(pending, transactional_id, producer_id, producer_epoch, partitions)
            return self._verify_here(transactional_id, producer_id, producer_epoch, partitions)
        if leader < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if leader == self.broker.node_id:
            return dict.fromkeys(partitions, ErrorCode.coordinator_load_in_progress)
        return self._verify_remote(leader, transactional_id, producer_id, producer_epoch, partitions)

    def _verify_here(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> Verified:
        got = self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                 [TopicPartition(t, q) for t, q in partitions])
        return {(tp.topic, tp.partition): code for tp, code in got.items()}

    async def _verify_when_committed(self, pending: list, transactional_id: str, producer_id: int,
                                     producer_epoch: int, partitions: list[tuple[str, int]]) -> Verified:
        if not await self.replicated(pending) or transactional_id is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if self.coordinator.partition_for(transactional_id) not in self.coordinator.served_partitions():
            return dict.fromkeys(partitions, ErrorCode.not_coordinator)
        return self._verify_here(transactional_id, producer_id, producer_epoch, partitions)

    async def _verify_remote(self, leader: int, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> Verified:
        topics: dict[str, list[int]] = {}
        for t, q in partitions:
            topics.setdefault(t, []).append(q)
        try:
            resp = await self._channel.request(
                leader, ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_VERIFY_VERSION, transactions=[dict(
                    transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                    verify_only=True, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])])
        except CHANNEL_FAILURES as exc:
            log.info("verifying %s with broker %d failed: %s", transactional_id, leader, exc)
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        out: Verified = dict.fromkeys(partitions, ErrorCode(resp.error_code) if resp.error_code
                                      else ErrorCode.unknown_server_error)
        for res in resp.results_by_transaction:
            for tr in res.topic_results:
                for pr in tr.results_by_partition:
                    out[(tr.name, pr.partition_index)] = ErrorCode(pr.partition_error_code)
        return out

    # --- markers ---------------------------------------------------------------------------------
    def write_markers_locally(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                              partitions: list[tuple[str, int]]) -> tuple[dict[tuple[str, int], ErrorCode],
                                                                        list[tuple[tuple[str, int], int, int]]]:
        """Append the markers this broker leads (WriteTxnMarkers' work): per partition the
        error code, and the appends to wait for before answering. A marker in
        __consumer_offsets also completes the group's pending transactional offsets."""
        results: dict[tuple[str, int], ErrorCode] = {}
        waits = []
        for i, tp in enumerate(partitions):
            if i == 1:
                _maybe_crash("after-first-marker")
            try:
                res = self.replicas.append_marker(tp[0], tp[1], producer_id, producer_epoch, coordinator_epoch, commit)
            except KafkaError as exc:  # storage's errors are KafkaErrors with Kafka's codes
                results[tp] = exc.error_code
                continue
            results[tp] = ErrorCode.none
            waits.append((tp, res.last_offset + 1, self.replicas.leader_epoch_of(*tp)))
            if tp[0] == OFFSETS_TOPIC:
                complete = getattr(self.broker.groups, "complete_transaction", None)
                if complete is not None:
                    # the offsets show once the marker is committed, as Kafka completes them
                    # only after the marker's acks=all append
                    complete(tp[1], producer_id, commit, marker_end=res.last_offset + 1)
        return results, waits

    def send_markers(self, request: MarkerRequest, on_complete: Callable[[MarkerResults], None]) -> None:
        """MarkerSender: after the transaction's Prepare* record is replicated (at once on
        a single node), written locally and sent to the other leaders."""
        pending = list(self._appended)
        _maybe_crash("after-prepare")
        task = asyncio.ensure_future(self._send_markers(request, on_complete, pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_markers(self, request: MarkerRequest, on_complete: Callable[[MarkerResults], None],
                            prepared: list) -> None:
        results: dict[TopicPartition, ErrorCode | None] = {}
        try:
            if prepared and not await self.replicated(prepared):
                # the Prepare* record may be lost: send nothing now, the coordinator retries
                on_complete({tp: ErrorCode.not_enough_replicas for tp in request.partitions})
                return
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in request.partitions:
                if not self._partition_exists(tp.topic, tp.partition):
                    results[tp] = None  # deleted: no marker needed
                    continue
                error, leader, *_ = self.broker.partition_metadata(tp.topic, tp.partition)
                if error != ErrorCode.none or leader < 0:
                    results[tp] = ErrorCode.not_leader_or_follower
                    continue
                by_leader.setdefault(leader, []).append((tp.topic, tp.partition))
            jobs = [self._markers_on(leader, request, tps) for leader, tps in by_leader.items()]
            for got in await asyncio.gather(*jobs):
                results.update({TopicPartition(*tp): c for tp, c in got.items()})
        except Exception:
            log.exception("sending the markers of %s failed", request.transactional_id)
        finally:
            try:
                with self.operation():
                    on_complete(results)
            finally:
                self.reschedule_soon()

    async def _markers_on(self, leader: int, request: MarkerRequest, tps: list[tuple[str, int]]
                          ) -> dict[tuple[str, int], ErrorCode]:
        if leader == self.broker.node_id:
            codes, waits = self.write_markers_locally(request.producer_id, request.producer_epoch,
                                                      request.coordinator_epoch, request.committed, tps)
            if waits:
                got = await self.replicas.wait_for_high_watermark(waits, self.commit_timeout_s)
                codes.update({tp: c for tp, c in got.items() if c != ErrorCode.none})
            return codes
        topics: dict[str, list[int]] = {}
        for t, q in tps:
            topics.setdefault(t, []).append(q)
        try:
            resp = await self._channel.request(leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, markers=[dict(
                producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                transaction_result=request.committed, coordinator_epoch=request.coordinator_epoch,
                topics=[dict(name=t, partition_indexes=ps) for t, ps in topics.items()])])
        except CHANNEL_FAILURES as exc:
            log.info("markers of %s to broker %d failed: %s", request.transactional_id, leader, exc)
            return {}  # not reached: the coordinator sends them again
        out = {}
        for m in resp.markers:
            for t in m.topics:
                for pr in t.partitions:
                    out[(t.name, pr.partition_index)] = ErrorCode(pr.error_code)
        return out

    # --- lifecycle -------------------------------------------------------------------------------
    def stop(self) -> None:
        super().stop()
        self._legacy.stop()
        for t in self._tasks:
            t.cancel()
        if self._channel is not None:
            self._channel.close()


def _maybe_crash(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        log.warning("%s=%s: killing this broker", FAULT_ENV, point)
        os.kill(os.getpid(), signal.SIGKILL)


class _MarkerSender:
    """The coordinator's MarkerSender, bound to the driver."""

    def __init__(self, driver: TransactionDriver) -> None:
        self._driver = driver

    def send(self, request: MarkerRequest, on_complete: Callable[[MarkerResults], None]) -> None:
        self._driver.send_markers(request, on_complete)
