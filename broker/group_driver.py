"""Drives the pure GroupCoordinator from the event loop: persists its records into
``__consumer_offsets``, replays that topic at start-up, runs its timers, and turns its
``respond`` callbacks into values or awaitables for the connection.

The coordinator of a group is the leader of its ``__consumer_offsets`` partition (on a
single node, this broker, which leads them all): the driver loads a partition's groups when this broker becomes its leader and
drops them when leadership moves (:meth:`CoordinatorDriver.follow_leadership`), and a
response that wrote records waits until the ISR has them (Kafka appends group records
with acks=all), so a commit that was answered survives the loss of this broker. The
coordinator shows what it wrote (a committed offset, an assignment) only once the high
watermark passes it: the driver reports each append's outcome (:meth:`write_settled`)
before the answers go, so no client reads an offset a failover could take back.

Transactions: TxnOffsetCommit first asks the transaction coordinator whether the group's
``__consumer_offsets`` partition is in the producer's transaction (KIP-890, unless the
transaction is open there already), then appends the offsets as a transactional batch of
the producer carrying the verification guard (:meth:`CoordinatorDriver.txn_offset_commit`).
The transaction driver calls :meth:`CoordinatorDriver.complete_transaction` after writing a
marker into ``__consumer_offsets``; the replay hands the coordinator each record's producer
and the markers, so that offsets of open transactions are pending again after a restart.

Groups written by Krait's former placement into another partition: each partition is loaded
after the records of its legacy partition (broker/legacy_placement.py reads it, here or
from its leader, and deletes the moved groups there once their copies are durable).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.config import CoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from coordinator.diagnostics import SlowRebalanceWatch
from protocol.errors import ErrorCode, KafkaError
from protocol.records import NO_SEQUENCE, build_batch
from storage.transactions import SENTINEL_GUARD, VerificationGuard

from .config import BrokerConfig
from .coordinator_shell import CoordinatorShell, now_ms, read_partition
from .legacy_placement import LegacyPartitions
from .replica.manager import ReplicaManager
from .share.service import BrokerShareHooks
from .topic_admin import TopicAdmin
from .topics import INTERNAL_TOPICS, TopicRegistry

if TYPE_CHECKING:
    from coordinator.loader import LoadItem

    from .broker import Broker

log = logging.getLogger("krait.groups")

OFFSETS_TOPIC = "__consumer_offsets"
#: how often the driver looks for slow rebalances (coordinator/diagnostics.py)
REBALANCE_CHECK_INTERVAL_S = 1.0


Verified = dict[tuple[str, int], ErrorCode]


class TransactionVerifier(Protocol):
    """What TxnOffsetCommit needs of the transaction coordinator's driver (KIP-890)."""

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: list[tuple[str, int]]) -> Verified | Awaitable[Verified]:
        """Per partition NONE when it is in the producer's ongoing transaction, else why not."""
        ...


class CoordinatorDriver(CoordinatorShell):
    tracks_writes = True

    def __init__(self, config: BrokerConfig, registry: TopicRegistry, replicas: ReplicaManager, topics: TopicAdmin,
                 broker: Broker | None = None):
        """``broker``: where the other brokers are (legacy partitions led there)."""
        super().__init__(replicas, config["offsets.commit.timeout.ms"] / 1000, log)
        self._legacy = LegacyPartitions(self, OFFSETS_TOPIC, broker)
        self.broker_config = config
        self.registry = registry
        self.topics = topics
        self.config = CoordinatorConfig.from_properties(config.values)
        self._topic_map: tuple[int, dict[str, tuple[uuid.UUID, int]]] = (-1, {})
        self.coordinator = GroupCoordinator(self.config, now_ms, self,
                                            partition_exists=lambda t, p: replicas.logs.get(t, p) is not None,
                                            topics=self.topic_map,
                                            share_hooks=BrokerShareHooks(broker) if broker is not None else None,
                                            group_config=lambda group_id, key: broker.configs.group_overrides(
                                                group_id).get(key) if broker is not None else None)
        #: (partition, producer id) -> the verification guard the running TxnOffsetCommit's
        #: transactional append must carry (set only around that call)
        self._guards: dict[tuple[int, int], VerificationGuard] = {}
        topics.internal_topic_creators[OFFSETS_TOPIC] = self.ensure_topic
        self._rebalance_watch = SlowRebalanceWatch()
        self._rebalance_check: asyncio.TimerHandle | None = None
        #: partition -> the leader epoch at which its groups were last loaded: an append of
        #: an earlier leadership was failed by the unload, whatever its wait reports later
        self._loaded_epoch: dict[int, int] = {}
        self._schedule_rebalance_check()
        self.coordinator.serve_only(())  # none until this broker leads a partition
        self.follow_leadership()

    def topic_map(self) -> dict[str, tuple[uuid.UUID, int]]:
        """What consumer groups subscribe to: every topic but the internal ones, as {name:
        (topic id, partitions)}; asked on every heartbeat, so rebuilt only when the
        registry changed."""
        version, topics = self._topic_map
        if version != self.registry.version:
            topics = {t.name: (t.topic_id, t.partitions) for t in self.registry.topics.values()
                      if t.name not in INTERNAL_TOPICS}
            self._topic_map = (self.registry.version, topics)
        return topics

    # --- the __consumer_offsets topic -----------------------------------------------------------
    def ready(self) -> CoordinatorDriver:
        """The driver, with __consumer_offsets created (group APIs create it on first use)."""
        self.ensure_topic()
        return self

    def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use, as Kafka does."""
        if self.registry.get(OFFSETS_TOPIC) is not None:
            return
        cfg = self.broker_config
        self.create_internal_topic(self.topics, OFFSETS_TOPIC, self.config.offsets_topic_num_partitions,
                                   cfg["offsets.topic.replication.factor"], {
                                       "cleanup.policy": "compact",
                                       "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                                       "compression.type": "producer",
                                   })
        self.follow_leadership()

    def _load_partition(self, p: int, legacy: list[LoadItem], records: list[LoadItem], hw: int | None = None) -> None:
        """Load one partition after the records of its legacy partition, and delete there
        what the load moved once its copies here are durable. ``hw``: records from there
        on are not committed yet."""
        with self.operation() as appended:
            if self.coordinator.legacy_partition(p) != p:
                self.coordinator.load_legacy_partition(p, legacy)
            self.coordinator.load_partition(p, records, high_watermark=hw)
            moved = self.coordinator.finished_loading(p)
        if moved is not None:
            self._legacy.delete(moved, p, appended)

    def follow_leadership(self) -> None:
        """After every metadata change: serve the groups of exactly the __consumer_offsets
        partitions this broker leads, loading them from its replica."""
        led = {tp[1] for tp, part in self.replicas.partitions.items() if tp[0] == OFFSETS_TOPIC and part.is_leader}
        served = self.coordinator.served_partitions() or set()
        for p in sorted(served - led):
            self._legacy.cancel(p)
            n = self.coordinator.unload_partition(p)
            log.info("%s-%d moved away: unloaded %d groups", OFFSETS_TOPIC, p, n)
        for p in sorted(led - served):
            self._loaded_epoch[p] = self.replicas.leader_epoch_of(OFFSETS_TOPIC, p)
            self.coordinator.start_loading([p])
            self.coordinator.serve_only([p])
            q = self.coordinator.legacy_partition(p)
            legacy = self._legacy.local(q) if q != p else []
            if legacy is None:
                # loading until the legacy partition's leader answers
                self._legacy.fetch_then(p, q, lambda records, p=p: self._load_led(p, records))
                continue
            self._load_led(p, legacy)
        self.reschedule_soon()

    def _load_led(self, p: int, legacy: list[LoadItem]) -> None:
        plog = self.replicas.local_log(OFFSETS_TOPIC, p)
        # the new leader's log is the truth now: load all of it, up to its end; what lies
        # past its high watermark shows once the followers have it
        records = list(read_partition(plog, plog.log_end_offset)) if plog is not None else []
        hw = plog.high_watermark if plog is not None else None
        self._load_partition(p, legacy, records, hw)
        if plog is not None and hw is not None and hw < plog.log_end_offset:
            tp = (OFFSETS_TOPIC, p)
            self.background(self._settle_while_leading(tp, plog.log_end_offset, self.replicas.leader_epoch_of(*tp)))
        log.info("leading %s-%d: loaded %d records", OFFSETS_TOPIC, p, len(records))
        self.reschedule_soon()

    # --- slow rebalances ------------------------------------------------------------------------
    def check_rebalances(self) -> list[str]:
        """Log (once each) the rebalances waiting too long for members: a classic group's
        members that have not rejoined, a consumer group's members that have not revoked."""
        lines = self._rebalance_watch.check(self.coordinator.groups(), now_ms())
        for line in lines:
            log.warning("%s", line)
        return lines

    def _schedule_rebalance_check(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (tools opening storage): nothing to watch
        self._rebalance_check = loop.call_later(REBALANCE_CHECK_INTERVAL_S, self._on_rebalance_check)

    def _on_rebalance_check(self) -> None:
        self._rebalance_check = None
        if self._stopped:
            return
        try:
            self.check_rebalances()
        except Exception:
            log.exception("slow rebalance check failed")
        self._schedule_rebalance_check()

    def stop(self) -> None:
        self._legacy.stop()
        if self._rebalance_check is not None:
            self._rebalance_check.cancel()
            self._rebalance_check = None
        super().stop()

    # --- the core's interfaces ----------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        return self.coordinator.next_deadline_ms()

    def poll(self) -> None:
        self.coordinator.poll()

    def write_settled(self, tp: tuple[str, int], end: int, epoch: int, code: ErrorCode) -> None:
        if tp[0] != OFFSETS_TOPIC or epoch < self._loaded_epoch.get(tp[1], -1):
            return
        if code == ErrorCode.none:
            self.coordinator.on_committed(tp[1], end)
        else:
            self.coordinator.on_write_failed(tp[1], end, code)

    # --- OffsetsLog protocol ------------------------------------------------------------------
    def high_watermark(self, partition: int) -> int | None:
        plog = self.replicas.local_log(OFFSETS_TOPIC, partition)
        return None if plog is None else plog.high_watermark

    def append(self, partition: int, records: list, *, producer_id: int = -1, producer_epoch: int = -1) -> int:
        # A KafkaError raised here carries the error code the coordinator maps for clients.
        # With a producer: Kafka's transactional batch (no sequence), which opens or extends
        # the producer's transaction on the partition until the marker.
        txn = producer_id >= 0
        batch = build_batch([(k, v) for k, v in records], timestamp=now_ms(), producer_id=producer_id,
                            producer_epoch=producer_epoch, transactional=txn)
        guard = self._guards.get((partition, producer_id)) if txn else None
        res = self.replicas.append_records(OFFSETS_TOPIC, partition, bytearray(batch), now_ms(), internal_ok=True,
                                           verification_guard=guard, origin_coordinator=True)
        self.appended((OFFSETS_TOPIC, partition), res.last_offset + 1)
        return res.base_offset

    # --- steps that are not requests ---------------------------------------------------------
    async def write_step(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, ErrorCode]:
        """Run one coordinator step that may write records (the share-group offset APIs run
        several, with persister calls between them) and wait until the ISR has what it
        wrote, as an answer would. Returns its result and NONE, or the error clients get
        when the records were not replicated (NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE)."""
        with self.operation() as appended:
            result = fn(*args)
        self.reschedule()
        if not appended:
            return result, ErrorCode.none
        bad = await self._not_replicated(appended)
        self.settle(appended, bad)
        if not bad:
            return result, ErrorCode.none
        moved = {ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error} & set(bad.values())
        return result, ErrorCode.not_coordinator if moved else ErrorCode.coordinator_not_available

    # --- transactions -------------------------------------------------------------------------
    def txn_offset_commit(self, req: Any, transactions: TransactionVerifier | None = None) -> Any:
        """TxnOffsetCommit: unless ``transactions`` is None or has verification off, confirm
        with it that the group's __consumer_offsets partition is in the producer's
        transaction (Kafka's maybeStartTransactionVerification: not asked when the
        transaction is open on the partition already), then write. Returns the response
        or an awaitable of it."""
        core = self.coordinator
        partition = core.txn_offset_commit_partition(req)
        if partition is None or transactions is None or not getattr(transactions, "verification", True):
            return self.call(core.txn_offset_commit, req)
        try:
            guard = self.replicas.start_transaction_verification(OFFSETS_TOPIC, partition, req.producer_id,
                                                                 NO_SEQUENCE, req.producer_epoch)
        except KafkaError as exc:
            # Kafka's getPartitionOrException: no replica here (UNKNOWN_TOPIC_OR_PARTITION),
            # not its leader, or offline; the core answers COORDINATOR_NOT_AVAILABLE
            return self.call(core.txn_offset_commit, req, verification=exc.error_code)
        if guard is SENTINEL_GUARD:
            return self.call(core.txn_offset_commit, req)
        try:
            got = transactions.verify(req.transactional_id, req.producer_id, req.producer_epoch,
                                      [(OFFSETS_TOPIC, partition)])
        except Exception as exc:
            return self._commit_verified(req, partition, guard, self._verify_failed(exc, partition))
        if inspect.isawaitable(got):
            return self._commit_when_verified(req, partition, guard, got)
        return self._commit_verified(req, partition, guard, got)

    async def _commit_when_verified(self, req: Any, partition: int, guard: VerificationGuard,
                                    pending: Awaitable[Verified]) -> Any:
        try:
            got = await pending
        except Exception as exc:
            got = self._verify_failed(exc, partition)
        res = self._commit_verified(req, partition, guard, got)
        return await res if inspect.isawaitable(res) else res

    @staticmethod
    def _verify_failed(exc: BaseException, partition: int) -> Verified:
        log.warning("verifying a transactional offset commit failed: %s", exc)
        code = getattr(exc, "error_code", None)
        return {(OFFSETS_TOPIC, partition): code if isinstance(code, ErrorCode) else ErrorCode.unknown_server_error}

    def _commit_verified(self, req: Any, partition: int, guard: VerificationGuard, got: Verified) -> Any:
        code = ErrorCode(got.get((OFFSETS_TOPIC, partition), ErrorCode.none))
        if code != ErrorCode.none:
            return self.call(self.coordinator.txn_offset_commit, req, verification=code)
        # The append must carry the guard: an abort written since the verification started
        # invalidates it, and the write then fails (INVALID_TXN_STATE) instead of opening a
        # transaction the coordinator knows nothing of.
        key = (partition, req.producer_id)
        self._guards[key] = guard
        try:
            return self.call(self.coordinator.txn_offset_commit, req, verification=ErrorCode.none)
        finally:
            self._guards.pop(key, None)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool, marker_end: int | None = None) -> int:
        """A COMMIT/ABORT marker of ``producer_id`` was written into
        __consumer_offsets-``partition``, ending at log offset ``marker_end``: its pending
        offsets there become committed or go, once the marker is committed. Returns how
        many groups have some."""
        with self.operation() as appended:
            n = self.coordinator.complete_transaction(partition, producer_id, commit, marker_end)
        if marker_end is not None:
            tp = (OFFSETS_TOPIC, partition)
            self.background(self._settle_while_leading(tp, marker_end, self.replicas.leader_epoch_of(*tp)))
        self.settle_later(appended)
        self.reschedule_soon()
        return n

    async def _settle_while_leading(self, tp: tuple[str, int], end: int, epoch: int) -> None:
        """Wait for records no answer of the coordinator waits for (a marker, the part of a
        new leader's log past its high watermark) as long as this broker leads: they are
        committed whenever the followers have them, however late (a marker's sender may
        see it committed after a wait of ours timed out, and send no other)."""
        while True:
            codes = await self.replicas.wait_for_high_watermark([(tp, end, epoch)], self.commit_timeout_s)
            code = codes.get(tp, ErrorCode.none)
            if code != ErrorCode.request_timed_out or self._stopped:
                break
        self.settle([(tp, end, epoch)], {tp: code} if code != ErrorCode.none else {})
