"""Drives the pure GroupCoordinator from the event loop: persists its records into
``__consumer_offsets``, replays that topic at start-up, runs its timers, and turns its
``respond`` callbacks into values or awaitables for the connection.

In cluster mode the coordinator of a group is the leader of its ``__consumer_offsets``
partition: the driver loads a partition's groups when this broker becomes its leader and
drops them when leadership moves (:meth:`CoordinatorDriver.follow_leadership`), and a
response that wrote records waits until the ISR has them (Kafka appends group records
with acks=all), so a commit that was answered survives the loss of this broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from coordinator.config import CoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.records import build_batch, iter_headers, iter_records

from .config import BrokerConfig
from .replica_manager import ReplicaManager
from .topic_admin import TopicAdmin
from .topics import TopicRegistry

log = logging.getLogger("krait.groups")

OFFSETS_TOPIC = "__consumer_offsets"


def _now_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorDriver:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, replicas: ReplicaManager, topics: TopicAdmin):
        self.broker_config = config
        self.registry = registry
        self.replicas = replicas
        self.topics = topics
        self.config = CoordinatorConfig.from_properties(config.values)
        self.coordinator = GroupCoordinator(self.config, _now_ms, self,
                                            partition_exists=lambda t, p: replicas.logs.get(t, p) is not None)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._stopped = False
        #: cluster mode: (partition, next offset, epoch) of appends made by the current call
        self._appended: list[tuple[tuple[str, int], int, int]] = []
        topics.internal_topic_creators[OFFSETS_TOPIC] = self.ensure_topic
        if replicas.replicated:
            self.coordinator.serve_only(())  # none until this broker leads a partition
            self.follow_leadership()
        elif registry.get(OFFSETS_TOPIC) is not None:
            self._load()

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
        # as Kafka: offsets.topic.replication.factor, but never more than the live brokers
        rf = max(1, min(cfg["offsets.topic.replication.factor"], len(self.topics.live_brokers())))
        try:
            self.topics.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
                "compression.type": "producer",
            }, replication_factor=rf)
        except KafkaError as exc:
            # in a cluster another broker may have created it a moment ago
            if exc.error_code != ErrorCode.topic_already_exists:
                raise
        if self.replicas.replicated:
            self.follow_leadership()
            return
        partitions = range(self.config.offsets_topic_num_partitions)
        self.coordinator.start_loading(partitions)
        for p in partitions:
            self.coordinator.finished_loading(p)

    def _load(self) -> None:
        """Replay every partition of __consumer_offsets into the coordinator."""
        t0 = time.monotonic()
        info = self.registry.get(OFFSETS_TOPIC)
        partitions = range(info.partitions)
        self.coordinator.start_loading(partitions)
        total = 0
        for p in partitions:
            plog = self.replicas.logs.get(OFFSETS_TOPIC, p)
            records = list(self._read_partition(plog)) if plog is not None else []
            total += len(records)
            self.coordinator.load_partition(p, records)
            self.coordinator.finished_loading(p)
        log.info("loaded %d groups from %d %s records in %.3fs", len(self.coordinator.groups()), total,
                 OFFSETS_TOPIC, time.monotonic() - t0)

    def follow_leadership(self) -> None:
        """Cluster mode, after every metadata change: serve the groups of exactly the
        __consumer_offsets partitions this broker leads, loading them from its replica."""
        led = {tp[1] for tp, part in self.replicas.partitions.items() if tp[0] == OFFSETS_TOPIC and part.is_leader}
        served = self.coordinator.served_partitions() or set()
        for p in sorted(served - led):
            n = self.coordinator.unload_partition(p)
            log.info("%s-%d moved away: unloaded %d groups", OFFSETS_TOPIC, p, n)
        for p in sorted(led - served):
            plog = self.replicas.logs.get(OFFSETS_TOPIC, p)
            self.coordinator.start_loading([p])
            self.coordinator.serve_only([p])
            # the new leader's log is the truth now: load all of it, up to its end
            records = list(self._read_partition(plog, plog.log_end_offset)) if plog is not None else []
            self.coordinator.load_partition(p, records)
            self.coordinator.finished_loading(p)
            log.info("leading %s-%d: loaded %d records", OFFSETS_TOPIC, p, len(records))
        self.reschedule_soon()

    def reschedule_soon(self) -> None:
        try:
            self.reschedule()
        except RuntimeError:
            pass  # no running loop (tools opening storage): nothing to schedule

    @staticmethod
    def _read_partition(plog, end: int | None = None):
        offset = plog.log_start_offset
        end = plog.high_watermark if end is None else end
        while offset < end:
            region = plog.read(offset, 8 << 20, max_offset=end)
            if region is None or region.length == 0:
                break
            data = region.read()
            last = offset
            for pos, h in iter_headers(data):
                last = h.next_offset
                if h.is_control:
                    continue
                try:
                    for rec in iter_records(data, pos):
                        if rec.offset >= offset:
                            yield rec.offset, rec.key, rec.value
                except ProtocolError as exc:
                    # A damaged batch in the offsets log must never stop the broker.
                    log.warning("skipping undecodable batch at offset %d of %s: %s", h.base_offset, plog, exc)
            if last <= offset:
                break
            offset = last

    # --- OffsetsLog protocol ------------------------------------------------------------------
    def append(self, partition: int, records: list) -> None:
        # A KafkaError raised here carries the error code the coordinator maps for clients.
        batch = build_batch([(k, v) for k, v in records], timestamp=_now_ms())
        res = self.replicas.append_records(OFFSETS_TOPIC, partition, bytearray(batch), _now_ms(), internal_ok=True)
        if self.replicas.replicated:
            self._appended.append(((OFFSETS_TOPIC, partition), res.last_offset + 1,
                                   self.replicas.leader_epoch_of(OFFSETS_TOPIC, partition)))

    # --- calling the coordinator ------------------------------------------------------------
    def call(self, op, req, **kwargs):
        """Run one coordinator operation; returns the response, or a Future of it."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def respond(resp: Any) -> None:
            if not fut.done():
                fut.set_result(resp)

        self._appended = []
        op(req, respond, **kwargs)
        appended, self._appended = self._appended, []
        self.reschedule()
        if appended:
            return self._after_replication(fut, appended)
        if fut.done():
            return fut.result()
        return fut

    async def _after_replication(self, fut, appended):
        """Answer once the ISR holds what this call wrote (as Kafka's acks=all group appends)."""
        codes = await self.replicas.wait_for_high_watermark(appended, self.broker_config["offsets.commit.timeout.ms"] / 1000)
        bad = {tp: c for tp, c in codes.items() if c != ErrorCode.none}
        if bad:
            log.warning("group records not replicated: %s", {f"{t}-{p}": c.name for (t, p), c in bad.items()})
        return await fut

    def reschedule(self) -> None:
        if self._stopped:
            return
        nxt = self.coordinator.next_deadline_ms()
        if nxt is None:
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + max(0.0, (nxt - _now_ms()) / 1000)
        if self._timer is not None and self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        try:
            self.coordinator.poll()
        except Exception:
            log.exception("group coordinator timer failed")
        self.reschedule()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
