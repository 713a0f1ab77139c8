"""What the broker does when a log dir fails (Kafka's ReplicaManager.handleLogDirFailure,
KIP-112). Storage has already taken every log in the dir offline, synchronously, when the
I/O error was met (storage.log_dir_failure); from then on the ReplicaManager answers
KAFKA_STORAGE_ERROR for its partitions, before any leadership check, the replica
fetchers skip them, and the ISR is no longer shrunk for them. Here, on the event loop
(never from inside the storage call that failed):

- parked fetches and acks=all produces on those partitions answer now (with
  KAFKA_STORAGE_ERROR: Kafka completes delayed operations of an offline partition);
- Metadata answers are rebuilt (this broker's replicas there are offline replicas);
- in cluster mode the controller is told (a log dir event notification in ZooKeeper,
  :mod:`broker.cluster.log_dir_events`), which moves leadership to healthy ISR members
  and takes this broker's replicas there out of the ISRs;
- when the last dir has failed, the broker shuts down with exit code 1 ("Shutdown broker
  because all log dirs in ... have failed"), after a controlled shutdown when ZooKeeper
  is reachable. Kafka halts at once; the controlled shutdown only moves leadership
  sooner than the session timeout would.

Nothing in the failed dir is written again by this process; the next start recovers it
(its clean-shutdown marker is never written).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("krait.log_dir_failure")

#: the exit code of a broker whose every log dir failed (Kafka's Exit.halt(1))
EXIT_ALL_LOG_DIRS_FAILED = 1


class LogDirFailureHandler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._loop: asyncio.AbstractEventLoop | None = None
        self.handled: set[str] = set()

    def attach(self) -> None:
        """Listen to the storage's failure channel; dirs that failed while loading are
        handled now."""
        self._loop = asyncio.get_running_loop()
        channel = self.broker.logs.failure_channel
        channel.listeners.append(self._failed)
        for log_dir in list(channel.offline):
            self._loop.call_soon(self.handle, log_dir)

    def _failed(self, log_dir: str) -> None:
        # called from inside the storage call that failed: the rest runs after it
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon(self.handle, log_dir)

    def handle(self, log_dir: str) -> None:
        b = self.broker
        if log_dir in self.handled or b.logs is None:
            return
        self.handled.add(log_dir)
        tps = b.logs.partitions_in(log_dir)
        log.warning("Broker %d stopped fetcher for partitions %s because they are in the failed log directory %s",
                    b.node_id, ",".join(f"{t}-{p}" for t, p in sorted(tps)), log_dir)
        b.replicas.wake(tps)
        b.metadata_cache.clear()
        if not b.logs.live_log_dirs:
            if not b.stopping:
                log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(b.logs.log_dirs))
                b.fatal_stop(EXIT_ALL_LOG_DIRS_FAILED)
            return
        if b.cluster is not None:  # None only before start() joined the cluster
            b.cluster.log_dir_events.report()
            b.cluster.sync()  # the coordinators let go of the partitions they led there
        log.warning("Stopped serving replicas in dir %s", log_dir)
