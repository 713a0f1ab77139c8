"""ClusterNode: the cluster layer of every broker, wired in one place. A single node is a
one-broker cluster: the same layer runs over the local metadata store
(:mod:`broker.metadata.local`) as over ZooKeeper (``zookeeper.connect``), and it only
sees the store's membership and metadata interface (:mod:`broker.metadata`).

It owns the store's users (membership and controller election, the topic and
partition-state view), and on every change it brings the broker in line on the event
loop: the topic registry mirrors the store's topics, this broker's replicas lead or
follow as the partition states say (Replication), the replica fetchers follow the right
leaders, and, on the controller, leadership moves off dead brokers (Controller). It also
carries out the admin writes (topics, partitions, configs, producer id blocks) and the
controlled shutdown.

kazoo calls ZooKeeper synchronously from its own thread; writes on the request path run
in the default executor (the membership's ``call``/``run``) so that a slow or restarting
ZooKeeper never stalls the loop. The local store writes a small file inline.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from protocol.errors import ErrorCode, KafkaError
from storage.log import PartitionLog

from ..config import BrokerConfig
from ..metadata import open_membership
from ..metadata.local import LocalMetadata
from ..replica.fetcher import ReplicaFetcherManager
from ..replica.manager import ReplicaManager
from ..replica.replication import Replication
from ..topics import TopicInfo, TopicRegistry
from . import election, zk_layout
from .controller import Controller
from .election import PartitionState
from .log_dir_events import LogDirEvents
from .reassignment import Reassignments
from .zk_metadata import TopicExistsError, ZkMetadata

log = logging.getLogger("krait.cluster")

TopicPartition = tuple[str, int]
T = TypeVar("T")


class ClusterNode:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, replicas: ReplicaManager,
                 open_log: Callable[[TopicInfo, int], PartitionLog], delete_topic_logs: Callable[[str], None],
                 apply_topic_config: Callable[[TopicInfo], None]) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.registry = registry
        self.replicas = replicas
        self._open_log = open_log
        self._delete_topic_logs = delete_topic_logs
        self._apply_topic_config = apply_topic_config
        #: live brokers and the controller: ZooKeeper's, or the local store's one-broker cluster
        self.membership = open_membership(config, registry)
        self.membership.on_change = self._changed_elsewhere
        self.metadata: ZkMetadata | LocalMetadata | None = None
        self.replication = Replication(replicas, self._write_state, lag_time_max_ms=config["replica.lag.time.max.ms"],
                                       read_state=self._read_state, is_live=lambda b: b in self.membership.brokers)
        #: TLS / SASL of this broker's connections to the others (None: PLAINTEXT)
        self.inter_broker_security = self.membership.inter_broker_security(config)
        self.fetchers = ReplicaFetcherManager(
            self.broker_id, replicas, self.endpoint_of, fetch_max_bytes=config["replica.fetch.max.bytes"],
            response_max_bytes=config["replica.fetch.response.max.bytes"],
            max_wait_ms=config["replica.fetch.wait.max.ms"], backoff_ms=config["replica.fetch.backoff.ms"],
            socket_timeout_ms=config["replica.socket.timeout.ms"],
            security=self.inter_broker_security)
        self.controller = Controller(self.broker_id, write=self._write_state, unclean=self._unclean,
                                     retry=lambda: self._schedule_sync(delay=0.5))
        self.controller.broker_epochs = lambda: self.membership.broker_epochs
        #: failed log dirs: reported by this broker, handled by the controller (KIP-112)
        self.log_dir_events = LogDirEvents(self)
        self.reassignments = Reassignments(lambda: self.metadata, lambda: set(self.membership.brokers),
                                           lambda: self.membership.controller_epoch, self._write_state,
                                           self.membership.call)
        #: called after each sync (the group coordinator follows __consumer_offsets leadership)
        self.listeners: list[Callable[[], None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sync_handle: asyncio.TimerHandle | None = None
        self._sync_at = 0.0
        self._known_topics: dict[str, uuid.UUID] = {}
        self._applied_configs: dict[str, dict[str, str]] = {}
        #: bumped on every sync: the Metadata cache key
        self.version = 0
        self.stopped = False
        self.shutting_down = False

    # --- start / stop ---------------------------------------------------------------------------
    def start(self, local_cluster_id: str | None, new_cluster_id: str) -> str:
        """Join the cluster (synchronously, at start-up); returns the cluster id."""
        self.loop = asyncio.get_running_loop()
        cluster_id = self.membership.start(local_cluster_id, new_cluster_id)
        self.metadata = self.membership.open_metadata(self._changed_elsewhere)
        self.metadata.start()
        self.log_dir_events.start()
        self.sync()
        return cluster_id

    async def controlled_shutdown(self, timeout: float) -> None:
        """controlled.shutdown.enable: move leadership of this broker's partitions to other
        ISR members and leave the ISRs, before the session closes (Kafka's controlled
        shutdown, done here with the same conditional writes the controller makes)."""
        deadline = time.monotonic() + timeout
        # stop following first: a follower still fetching would be taken back into the
        # ISRs it is about to leave
        self.shutting_down = True
        self.fetchers.stop()
        while time.monotonic() < deadline and self.metadata is not None:
            md = self.metadata
            live = set(self.membership.brokers)
            changes = election.states_after_controlled_shutdown(
                self._assignments(), md.states, live, self.membership.controller_epoch, self.broker_id)
            if not changes:
                return
            if not self.membership.connected:
                log.warning("controlled shutdown skipped: ZooKeeper is not reachable")
                return
            log.info("controlled shutdown: moving %d partitions off broker %d", len(changes), self.broker_id)
            writes = asyncio.gather(*(self._write_state(tp, st) for tp, st in changes.items()), return_exceptions=True)
            try:
                await asyncio.wait_for(writes, max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
            await asyncio.sleep(0.05)
        log.warning("controlled shutdown did not complete within %.0fs; shutting down anyway", timeout)

    def stop(self) -> None:
        self.stopped = True
        self.fetchers.stop()
        self.replication.stop()
        self.controller.stop()
        self.log_dir_events.stop()
        self.reassignments.stop()
        if self.metadata is not None:
            self.metadata.stop()
        self.membership.stop()

    # --- views -------------------------------------------------------------------------------------
    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return self.membership.brokers.get(broker_id)

    def states(self) -> dict[TopicPartition, PartitionState]:
        return self.metadata.states if self.metadata is not None else {}

    def _assignments(self) -> dict[TopicPartition, tuple[int, ...]]:
        md = self.metadata
        if md is None:
            return {}
        return {(name, p): tuple(r) for name, t in md.topics.items() for p, r in t.assignment.items()}

    def _unclean(self, topic: str) -> bool:
        info = self.registry.get(topic)
        value = info.configs.get("unclean.leader.election.enable") if info is not None else None
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return value.strip().lower() == "true"

    # --- applying ZooKeeper's state ---------------------------------------------------------------
    def _changed_elsewhere(self) -> None:
        """From kazoo's thread: run a sync on the loop."""
        loop = self.loop
        if loop is not None and not loop.is_closed() and not self.stopped:
            loop.call_soon_threadsafe(self._schedule_sync)

    def _schedule_sync(self, delay: float = 0.0) -> None:
        """Coalesce sync requests; an earlier one replaces a later pending one (a retry
        in a second must not delay a change ZooKeeper just reported)."""
        if self.stopped or self.loop is None:
            return
        at = self.loop.time() + delay
        if self._sync_handle is not None:
            if self._sync_at <= at:
                return
            self._sync_handle.cancel()
        self._sync_at = at
        self._sync_handle = self.loop.call_later(delay, self.sync)

    def sync(self) -> None:
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self.metadata is None or self.stopped:
            return
        try:
            self._sync()
        except Exception:
            log.exception("applying the cluster state failed; retrying")
            self._schedule_sync(delay=1.0)

    def _sync(self) -> None:
        md = self.metadata
        topics = md.topics
        infos = {name: TopicInfo(name, t.topic_id, len(t.assignment), dict(t.configs)) for name, t in topics.items()}
        # a topic deleted (or deleted and created again) while we knew it: its replicas go
        for name, tid in list(self._known_topics.items()):
            if name not in infos or infos[name].topic_id != tid:
                log.info("topic %s was deleted: removing its replicas", name)
                gone = [tp for tp in self.replicas.partitions if tp[0] == name]
                self.replicas.partitions = {tp: p for tp, p in self.replicas.partitions.items() if tp[0] != name}
                self._delete_topic_logs(name)
                self.replicas.wake(gone)  # fetches parked on it answer now
                self._applied_configs.pop(name, None)
                del self._known_topics[name]
        self.registry.replace_topics(infos)
        for name, info in infos.items():
            self._known_topics[name] = info.topic_id
            if self._applied_configs.get(name) != info.configs:
                self._applied_configs[name] = dict(info.configs)
                self._apply_topic_config(info)
        assignments = self._assignments()
        self._drop_strays(infos, assignments)
        removing = {(name, p): r for name, t in md.topics.items() for p, r in t.removing.items()}
        follow, gone = self.replication.apply(
            assignments, md.states, lambda topic, p: self._open_log(infos[topic], p), removing)
        for tp in gone:
            log.info("no longer a replica of %s-%d: deleting it", *tp)
            self.replicas.logs.delete_partition(*tp)
        # a broker in controlled shutdown follows nothing (Kafka's StopReplica): a fetch
        # would take it back into the ISRs it is leaving, and the leaders would loop
        self.fetchers.update({} if self.shutting_down else follow)
        m = self.membership
        self.controller.on_change(m.controller_id, m.controller_epoch, set(m.brokers), assignments, md.states)
        self.log_dir_events.on_sync()
        if m.controller_id == self.broker_id:
            self.reassignments.progress()
        self.version += 1
        for fn in self.listeners:
            fn()

    def _drop_strays(self, infos: dict[str, TopicInfo], assignments: dict[TopicPartition, tuple[int, ...]]) -> None:
        """Local replicas ZooKeeper does not place here: reassigned away (while this broker
        was down, too), or of a topic deleted and created again under the same name."""
        for (topic, p), plog in self.replicas.logs.partitions().items():
            info = infos.get(topic)
            if info is None:
                continue  # a topic ZooKeeper does not know: left alone (operators decide)
            recreated = plog.topic_id is not None and info.topic_id != zk_layout.ZERO_UUID \
                and plog.topic_id != info.topic_id
            if recreated or self.broker_id not in assignments.get((topic, p), ()):
                log.info("%s-%d is not assigned to broker %d%s: deleting the local replica", topic, p,
                         self.broker_id, " (the topic was created again)" if recreated else "")
                self.replicas.partitions.pop((topic, p), None)
                self.replicas.logs.delete_partition(topic, p)

    async def _write_state(self, tp: TopicPartition, new: PartitionState) -> PartitionState | None:
        md = self.metadata
        if md is None:
            return None
        stored = await self.membership.run(md.update_partition_state, tp, new, new.zk_version)
        self._schedule_sync()
        return stored

    async def _read_state(self, tp: TopicPartition) -> PartitionState | None:
        """A partition's state read from ZooKeeper into the view, then applied by a sync
        (a leader that lost a write's answer, or was told of a newer epoch, learns where
        it stands without waiting for a watch)."""
        md = self.metadata
        if md is None:
            return None
        state = await self.membership.run(md.read_partition_state, tp)
        self._schedule_sync()
        return state

    # --- admin writes -----------------------------------------------------------------------------
    async def _zk(self, fn: Callable[..., T], *args: object, error: ErrorCode = ErrorCode.request_timed_out) -> T:
        """An admin write, off the event loop (zk_calls.off_loop). While ZooKeeper is
        unreachable it fails with a retriable error: REQUEST_TIMED_OUT, what a client of
        Kafka's ZooKeeper mode sees, its request waiting until ZooKeeper is back."""
        return await self.membership.call(error, fn, *args)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.membership.brokers)

    async def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                           assignment: dict[int, tuple[int, ...]] | None = None) -> TopicInfo:
        """Assign replicas (Kafka's rack-unaware spread) unless given, and write the topic,
        its configs and every partition's first state in one store write (one ZooKeeper
        transaction)."""
        return await self.start_topic_creation(name, partitions, replication_factor, configs, assignment)

    def start_topic_creation(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                             assignment: dict[int, tuple[int, ...]] | None = None) -> asyncio.Future[TopicInfo]:
        """:meth:`create_topic` as a future: already done when the store writes inline (a
        single node's), so that a topic created on first use is there at once."""
        topic_id, write = self._plan_topic(name, partitions, replication_factor, configs, assignment)
        out: asyncio.Future[TopicInfo] = self.loop.create_future()

        def landed(fut: asyncio.Future) -> None:
            if out.done():
                return
            exc = fut.exception()
            if isinstance(exc, TopicExistsError):
                exc = KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
            if exc is not None:
                out.set_exception(exc)
                return
            self.sync()
            info = self.registry.get(name)
            out.set_result(info if info is not None else TopicInfo(name, topic_id, partitions, dict(configs)))

        written = self.membership.submit(ErrorCode.request_timed_out, write)
        if written.done():
            landed(written)
        else:
            written.add_done_callback(landed)
        return out

    def _plan_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                    assignment: dict[int, tuple[int, ...]] | None) -> tuple[uuid.UUID, partial]:
        """The new topic's id and the store write creating it: its assignment checked or
        made, and each partition's first state (the first replica leads at epoch 0)."""
        live = self.live_broker_ids()
        if assignment is None:
            try:
                assignment = election.assign_replicas(live, partitions, replication_factor)
            except ValueError as exc:
                raise KafkaError(ErrorCode.invalid_replication_factor, str(exc)) from None
        else:
            unknown = sorted({b for r in assignment.values() for b in r} - set(live))
            if unknown:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"Unknown broker(s) {unknown} in the replica assignment")
        epoch = self.membership.controller_epoch
        states = {p: PartitionState(replicas[0], 0, tuple(replicas), epoch) for p, replicas in assignment.items()}
        topic_id = zk_layout.random_topic_id()
        return topic_id, partial(self.metadata.create_topic, name, topic_id, assignment, configs, states)

    async def add_partitions(self, name: str, count: int, current: int) -> None:
        meta = self.metadata.topics.get(name)
        if meta is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        live = self.live_broker_ids()
        rf = len(next(iter(meta.assignment.values()), ())) or 1
        try:
            assignment = election.assign_replicas(live, count - current, rf, start_partition=current)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_replication_factor, str(exc)) from None
        epoch = self.membership.controller_epoch
        states = {p: PartitionState(r[0], 0, tuple(r), epoch) for p, r in assignment.items()}
        await self._zk(self.metadata.add_partitions, name, assignment, states)
        self.sync()

    async def delete_topic(self, name: str) -> None:
        await self._zk(self.metadata.delete_topic, name)
        self.sync()

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self._zk(self.metadata.set_topic_configs, name, configs)
        self.sync()

    # --- elections ----------------------------------------------------------------------------------
    async def elect_leaders(self, unclean: bool, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """ElectLeaders on the controller (Kafka's KafkaController.electLeaders): PREFERRED
        moves leadership to the first assigned replica when it is live and in the ISR;
        UNCLEAN elects any live replica for a partition without a leader. Only partitions
        named, or all those needing an election, are in the result."""
        out: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        named = partitions is not None
        todo = list(partitions) if named else sorted(self._assignments())
        for _ in range(3):  # a concurrent ISR change fails our write: decide again
            md = self.metadata
            if md is None or self.membership.controller_id != self.broker_id:
                return {tp: (ErrorCode.not_controller, "This is not the correct controller for this cluster.")
                        for tp in todo}
            assignments, all_live = self._assignments(), set(self.membership.brokers)
            # replicas in failed log dirs cannot lead (KIP-112)
            offline = self.controller.offline_by_partition(assignments)
            epoch = self.membership.controller_epoch
            writes: dict[TopicPartition, PartitionState] = {}
            for tp in todo:
                st, replicas = md.states.get(tp), assignments.get(tp)
                if st is None or not replicas:
                    out[tp] = (ErrorCode.unknown_topic_or_partition, f"The partition {tp[0]}-{tp[1]} does not exist.")
                    continue
                live = all_live - offline.get(tp, set())
                if unclean:
                    if st.leader in live:
                        if named:
                            out[tp] = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
                        continue
                    leader = election.offline_leader(replicas, st.isr, live, True)
                    if leader is None:
                        out[tp] = (ErrorCode.eligible_leaders_not_available,
                                   f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                                   "UncleanLeaderElectionStrategy")
                        continue
                    isr = tuple(r for r in st.isr if r in live) if leader in st.isr else (leader,)
                    writes[tp] = st.new_leader_and_isr(leader, isr, epoch)
                else:
                    if st.leader == replicas[0]:
                        if named:
                            out[tp] = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
                        continue
                    if election.preferred_leader(replicas, st.isr, live) is None:
                        if named:
                            out[tp] = (ErrorCode.preferred_leader_not_available,
                                       f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                                       "PreferredReplicaPartitionLeaderElectionStrategy")
                        continue
                    writes[tp] = st.new_leader_and_isr(replicas[0], st.isr, epoch)
            results = await asyncio.gather(*(self._write_state(tp, st) for tp, st in writes.items()),
                                           return_exceptions=True)
            todo = []
            for (tp, _), stored in zip(writes.items(), results, strict=True):
                if isinstance(stored, PartitionState):
                    out[tp] = (ErrorCode.none, None)
                    log.info("%s-%d: elected leader %d (%s)", tp[0], tp[1], stored.leader,
                             "unclean" if unclean else "preferred")
                else:
                    todo.append(tp)
            if not todo:
                break
            await asyncio.sleep(0.1)
        for tp in todo:
            out.setdefault(tp, (ErrorCode.request_timed_out, "The partition state kept changing; try again"))
        return out

    async def rebalance_leaders(self) -> None:
        """auto.leader.rebalance.enable, on the controller every
        leader.imbalance.check.interval.seconds: move leadership back to preferred replicas
        on brokers whose share of non-preferred leaders exceeds
        leader.imbalance.per.broker.percentage (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        if self.membership.controller_id != self.broker_id or self.metadata is None:
            return
        states, threshold = self.metadata.states, self.config["leader.imbalance.per.broker.percentage"]
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, replicas in self._assignments().items():
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        todo = []
        for broker, tps in by_preferred.items():
            off = [tp for tp in tps if tp in states and states[tp].leader != broker]
            if off and 100 * len(off) / len(tps) > threshold:
                todo += off
        if todo:
            log.info("leader imbalance: preferred election for %d partitions", len(todo))
            await self.elect_leaders(False, todo)

    def is_controller(self) -> bool:
        return self.membership.controller_id == self.broker_id

    def allocate_producer_ids(self, block_size: int) -> asyncio.Future[tuple[int, int]]:
        """A block for the ProducerIdManager, which answers COORDINATOR_LOAD_IN_PROGRESS
        while it has none (Kafka's RPCProducerIdManager): done already when the store
        writes inline."""
        return self.membership.submit(ErrorCode.coordinator_load_in_progress, self.metadata.allocate_producer_id_block,
                                      self.broker_id, block_size)
