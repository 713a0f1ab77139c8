"""Log dir failures (KIP-112, Kafka's ZooKeeper-mode path), on either metadata store.

The broker whose log dir failed tells the controller by creating a log dir event
notification in the store (on ZooKeeper a persistent sequential
``/log_dir_event_notification/log_dir_event_<seq>`` holding
``{"version":1,"broker":<id>,"event":1}``, Kafka's propagateLogDirEvent). It does so again
whenever the controller changes while it has an offline dir: a new controller knows
nothing of it (Kafka's learns it from the LeaderAndIsr answers it collects at failover).

The controller watches those notifications (processLogDirEventNotification). For each
broker named it finds out which of the broker's replicas are offline (Kafka sends the
broker LeaderAndIsr and reads KAFKA_STORAGE_ERROR per partition in the answer; Krait's
brokers take their state from ZooKeeper, so the controller asks DescribeLogDirs instead:
a replica assigned to the broker that no online dir of it holds is offline), remembers
them with the broker's epoch until the broker registers again (a restart recovers the dir)
and runs its pass: those replicas count as dead for their partitions only, so leadership
moves to a healthy ISR member and they leave the ISRs (onReplicasBecomeOffline). Then it
deletes the notifications it has handled.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

from .broker_channel import BrokerChannel

if TYPE_CHECKING:
    from .node import ClusterNode

log = logging.getLogger("krait.log_dir_events")

TopicPartition = tuple[str, int]
DESCRIBE_LOG_DIRS_VERSION = 1
#: between attempts at a ZooKeeper write or a broker's answer that failed
RETRY_S = 1.0


class LogDirEvents:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._channel: BrokerChannel | None = None
        self._tasks: set[asyncio.Task] = set()
        self._processing: asyncio.Task | None = None
        self._again = False
        #: whether this broker reported a failed dir, and to which controller last
        self._reported = False
        self._reported_to: int | None = None
        self._was_controller = False
        self.stopped = False

    def start(self) -> None:
        self.node.metadata.watch_log_dir_events(self._on_children)

    def stop(self) -> None:
        self.stopped = True
        for t in list(self._tasks):
            t.cancel()
        if self._channel is not None:
            self._channel.close()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- the broker's side --------------------------------------------------------------------
    def report(self) -> None:
        """A log dir of this broker failed: tell the controller."""
        if self.stopped:
            return
        self._reported = True
        self._reported_to = self.node.membership.controller_id
        self._spawn(self._report())

    async def _report(self) -> None:
        node = self.node
        while not self.stopped:
            try:
                path = await node.membership.call(ErrorCode.request_timed_out, node.metadata.add_log_dir_event,
                                                  node.broker_id)
                log.info("Added %s for broker %d", path, node.broker_id)
                return
            except Exception as exc:
                log.warning("cannot write the log dir event notification (%s); retrying", exc)
                await asyncio.sleep(RETRY_S)

    def on_sync(self) -> None:
        """After every cluster state change: report again to a new controller; a broker
        that becomes the controller handles the notifications already there."""
        m = self.node.membership
        if self._reported and m.controller_id is not None and m.controller_id != self._reported_to:
            self.report()
        controller = m.controller_id == self.node.broker_id
        if controller and not self._was_controller:
            self._schedule()
        self._was_controller = controller

    # --- the controller's side ------------------------------------------------------------------
    def _on_children(self, children: list[str]) -> bool:
        """New notifications (from kazoo's thread, or the loop's with the local store)."""
        if self.stopped:
            return False
        loop = self.node.loop
        if children and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._schedule)
        return True

    def _schedule(self) -> None:
        if self.stopped or self.node.membership.controller_id != self.node.broker_id:
            return
        if self._processing is not None and not self._processing.done():
            self._again = True
            return
        self._processing = self._spawn(self._process())

    async def _process(self) -> None:
        try:
            while True:
                self._again = False
                await self._process_once()
                if not self._again or self.stopped:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # ZooKeeper away, most likely: try again in a moment
            log.warning("handling log dir event notifications failed (%s); retrying", exc or type(exc).__name__)
            await asyncio.sleep(RETRY_S)
            self._processing = None
            self._schedule()

    async def _process_once(self) -> None:
        node = self.node
        md, call = node.metadata, node.membership.call
        by_broker: dict[int, list[str]] = {}
        for path, broker in await call(ErrorCode.request_timed_out, md.read_log_dir_events):
            by_broker.setdefault(broker if broker is not None else -1, []).append(path)
        if not by_broker:
            return
        log.info("Handling log directory failure for brokers %s", ",".join(str(b) for b in sorted(by_broker)))
        done = list(by_broker.pop(-1, []))
        for broker, paths in by_broker.items():
            if await self._learn(broker):
                done += paths
            else:
                self._again = True  # unreachable for now: ask again
        if node.membership.controller_id != node.broker_id:
            return  # no longer the controller: the next one handles what is left
        await call(ErrorCode.request_timed_out, md.delete_log_dir_events, done)
        node._schedule_sync()

    async def _learn(self, broker: int) -> bool:
        """Find the offline replicas of ``broker`` and give them to the controller; False
        when the broker could not be asked (the notification stays for the next pass)."""
        node = self.node
        epoch = node.membership.broker_epochs.get(broker)
        if epoch is None:
            return True  # not registered: it is dead to the controller, replicas and all
        for _ in range(5):
            try:
                offline = await self._offline_replicas(broker)
                break
            except Exception as exc:
                log.warning("cannot describe the log dirs of broker %d: %s", broker, exc)
                await asyncio.sleep(RETRY_S)
                if node.membership.broker_epochs.get(broker) != epoch:
                    return True  # restarted or gone meanwhile: nothing offline to remember
        else:
            return False
        if offline:
            log.info("replicas of broker %d in failed log dirs: %s", broker,
                     ",".join(f"{t}-{p}" for t, p in sorted(offline)))
            _, known = node.controller.offline_replicas.get(broker, (epoch, frozenset()))
            node.controller.offline_replicas[broker] = (epoch, known | offline)
        return True

    async def _offline_replicas(self, broker: int) -> frozenset[TopicPartition]:
        node = self.node
        if broker == node.broker_id:
            return frozenset(tp for tp, plog in node.replicas.logs.partitions().items() if plog.offline)
        if self._channel is None:
            self._channel = BrokerChannel(node.broker_id, node.endpoint_of, timeout_s=10.0,
                                          security=node.inter_broker_security)
        resp = await self._channel.request(broker, ApiKey.DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_VERSION, topics=None)
        if getattr(resp, "error_code", 0):
            raise ConnectionError(f"DescribeLogDirs refused with error {resp.error_code}")
        if all(r.error_code == 0 for r in resp.results):
            return frozenset()
        online = {(t.name, p.partition_index) for r in resp.results if r.error_code == 0 for t in r.topics
                  for p in t.partitions if not p.is_future_key}
        return frozenset(tp for tp, replicas in node._assignments().items() if broker in replicas and tp not in online)
