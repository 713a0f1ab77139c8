"""The local metadata store: a one-broker cluster's topics, partition states, producer id
blocks and log dir events, kept in the broker's own metadata document (the topic
registry's ``krait-metadata.json`` in the first log dir, written atomically), with no
ZooKeeper. It is the embedded default (no ``zookeeper.connect``).

It gives the cluster layer (:mod:`broker.cluster.node`) what the ZooKeeper store gives,
through the same attributes and calls: a membership of one live broker that is always the
controller, and a metadata view whose writes are conditional on each partition state's
version, as znode writes are. So a single node runs the controller, the Partition objects,
the high watermark and ``acks=all`` exactly as a broker of a cluster does; only where the
facts are kept differs (Kafka's KRaft combined mode makes the same move).

Layout, as single-node Krait always wrote it: the document's ``topics`` (id, partition
count, config overrides) and ``next_producer_id_block``; new here is ``partition_states``
(``"<topic>-<p>": {"leader", "leader_epoch", "isr", "version"}``). A document without
them (written before this store) loads as every partition led by this broker at epoch 0,
the epoch the single-node broker stamped on every batch. Every replica is this broker's:
a changed ``node.id`` moves them all with it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from protocol.errors import ErrorCode, KafkaError

from ..cluster.election import INITIAL_LEADER_EPOCH, InvalidPartitionsError, PartitionState
from ..cluster.zk_metadata import TopicExistsError, TopicMeta, UnknownTopicError
from ..config import BrokerConfig
from ..endpoints import Listener
from ..security.store import SecurityStore
from ..topics import TopicRegistry

log = logging.getLogger("krait.metadata")

TopicPartition = tuple[str, int]
T = TypeVar("T")
#: the controller epoch of a one-broker cluster: the broker is the first and only controller
CONTROLLER_EPOCH = 1
PRODUCER_ID_BLOCK_SIZE = 1000


class LocalMembership:
    """A cluster of one: this broker is live, and the controller, from start to stop."""

    def __init__(self, registry: TopicRegistry, broker_id: int, advertised: list[Listener],
                 inter_broker_listener: str | None) -> None:
        self.registry = registry
        self.broker_id = broker_id
        self.on_change: Callable[[], None] | None = None
        self.advertised = advertised
        self.inter_broker_listener = inter_broker_listener or advertised[0].name
        ib = next((a for a in advertised if a.name == self.inter_broker_listener), advertised[0])
        self.brokers: dict[int, tuple[str, int]] = {broker_id: (ib.host, ib.port)}
        self.endpoints = {broker_id: {a.name: (a.host, a.port) for a in advertised}}
        self.broker_epochs: dict[int, int] = {broker_id: 0}
        self.controller_id: int | None = broker_id
        self.controller_epoch = CONTROLLER_EPOCH
        self.connected = True
        self.version = 0
        #: Krait's own registration fields (the Schema Registry's URL): nobody else to tell
        self.extra_registration: dict = {}

    def start(self, local_cluster_id: str | None, new_cluster_id: str) -> str:
        """The log dir's cluster id, or a new one (``cluster.id`` or random) for a new log dir."""
        return local_cluster_id or new_cluster_id

    def stop(self) -> None:
        pass

    def schema_registry_url(self, broker_id: int) -> str | None:
        return None  # only this broker: it is the registry's writer

    def live_endpoints(self, listener: str | None) -> list[tuple[int, str, int]]:
        """This broker's endpoint on ``listener`` (an unknown or no listener: the first
        advertised one, as single-node Krait always answered)."""
        lst = next((a for a in self.advertised if a.name == listener), self.advertised[0])
        return [(self.broker_id, lst.host, lst.port)]

    async def call(self, error: ErrorCode, fn: Callable[..., T], *args: object) -> T:
        """A store write: local writes are a small atomic file write, done inline."""
        return fn(*args)

    def submit(self, error: ErrorCode, fn: Callable[..., T], *args: object) -> asyncio.Future[T]:
        """The write, done now: the future it returns is already resolved."""
        fut = asyncio.get_running_loop().create_future()
        try:
            fut.set_result(fn(*args))
        except Exception as exc:
            fut.set_exception(exc)
        return fut

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        return fn(*args)

    def open_metadata(self, on_change: Callable[[], None]) -> LocalMetadata:
        return LocalMetadata(self.registry, self.broker_id, on_change)

    def security_store(self, local: SecurityStore, loop: object) -> SecurityStore:
        """ACLs, SCRAM credentials and quotas stay in the log dir's own store."""
        return local

    def inter_broker_security(self, config: BrokerConfig) -> None:
        """No other broker to reach: no inter-broker client (nor its credentials) needed."""
        return None


class LocalMetadata:
    """The topics and partition states of a one-broker cluster, persisted through the
    topic registry's document; the same view and conditional writes as
    :class:`broker.cluster.zk_metadata.ZkMetadata`."""

    def __init__(self, registry: TopicRegistry, broker_id: int, on_change: Callable[[], None] | None = None) -> None:
        self.registry = registry
        self.broker_id = broker_id
        self.on_change = on_change
        self.topics: dict[str, TopicMeta] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        self.version = 0
        #: log dir event notifications (KIP-112): kept in memory; a restart recovers the dirs
        self._log_dir_events: dict[str, int] = {}
        self._next_event = 0
        self._log_dir_watch: Callable[[list[str]], object] | None = None

    # --- start / stop -------------------------------------------------------------------------
    def start(self) -> None:
        """Build the view from the document; partitions it has no state for (a document of
        an older Krait, or a partition whose state was lost) are led here at epoch 0."""
        reg = self.registry
        raw = reg.partition_states
        states: dict[TopicPartition, PartitionState] = {}
        migrated = False
        for info in reg.topics.values():
            for p in range(info.partitions):
                st = raw.get(f"{info.name}-{p}")
                if st is None:
                    states[(info.name, p)] = self._initial()
                    migrated = True
                    continue
                state = PartitionState(int(st["leader"]), int(st["leader_epoch"]), tuple(st["isr"]),
                                       CONTROLLER_EPOCH, int(st.get("version", 0)))
                if state.leader not in (-1, self.broker_id) or set(state.isr) - {self.broker_id}:
                    # node.id changed: the replicas are this broker's, under its new id
                    state = PartitionState(self.broker_id if state.leader != -1 else -1, state.leader_epoch,
                                           (self.broker_id,), CONTROLLER_EPOCH, state.zk_version)
                    migrated = True
                states[(info.name, p)] = state
        self.states = states
        self._rebuild_topics()
        if migrated:
            log.info("partition states written for %d partitions", sum(i.partitions for i in reg.topics.values()))
            self._save()

    def stop(self) -> None:
        self.on_change = None

    def _initial(self) -> PartitionState:
        return PartitionState(self.broker_id, INITIAL_LEADER_EPOCH, (self.broker_id,), CONTROLLER_EPOCH, 0)

    def _rebuild_topics(self) -> None:
        me = (self.broker_id,)
        self.topics = {i.name: TopicMeta(i.name, i.topic_id, {p: me for p in range(i.partitions)}, dict(i.configs))
                       for i in self.registry.topics.values()}
        self.version += 1

    def _save(self) -> None:
        self.registry.partition_states = {
            f"{t}-{p}": {"leader": s.leader, "leader_epoch": s.leader_epoch, "isr": list(s.isr), "version": s.zk_version}
            for (t, p), s in sorted(self.states.items())}
        self.registry.save()

    def _changed(self) -> None:
        # the document's save bumps the registry's version (the Metadata cache key)
        self._rebuild_topics()
        self._save()
        if self.on_change is not None:
            self.on_change()

    def assignments(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {(t, p): rs for t, meta in self.topics.items() for p, rs in meta.assignment.items()}

    # --- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, topic_id: uuid.UUID, assignment: dict[int, tuple[int, ...]],
                     configs: dict[str, str] | None = None, states: dict[int, PartitionState] | None = None) -> None:
        if name in self.registry.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self._check_assignment(assignment)
        self.registry.add(name, len(assignment), configs or {}, topic_id)
        for p in assignment:
            self.states[(name, p)] = self._stored((states or {}).get(p))
        self._changed()

    def add_partitions(self, name: str, assignment_for_new: dict[int, tuple[int, ...]],
                       states_for_new: dict[int, PartitionState] | None = None) -> None:
        info = self.registry.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        n = info.partitions
        if sorted(assignment_for_new) != list(range(n, n + len(assignment_for_new))) or not assignment_for_new:
            raise InvalidPartitionsError(f"Topic {name} has {n} partitions: the partitions to add must be numbered "
                                         f"from {n}, not {sorted(assignment_for_new)}.")
        self._check_assignment(assignment_for_new)
        for p in assignment_for_new:
            self.states[(name, p)] = self._stored((states_for_new or {}).get(p))
        info.partitions = n + len(assignment_for_new)
        self._changed()

    def delete_topic(self, name: str) -> None:
        if self.registry.remove(name) is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self.states = {tp: s for tp, s in self.states.items() if tp[0] != name}
        self._changed()

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self.registry.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        info.configs = dict(configs)
        self._changed()

    def set_reassignment(self, name: str, partition: int, replicas, adding=(), removing=()) -> None:
        # reached only with replicas this broker's checks let through: all of them are this broker
        self._check_assignment({partition: tuple(replicas)})

    def _check_assignment(self, assignment: dict[int, tuple[int, ...]]) -> None:
        others = sorted({b for r in assignment.values() for b in r} - {self.broker_id})
        if others:
            raise KafkaError(ErrorCode.invalid_replica_assignment, f"Unknown broker(s) {others} in the replica assignment")

    def _stored(self, state: PartitionState | None) -> PartitionState:
        return self._initial() if state is None else replace(state, zk_version=0)

    # --- partition states ---------------------------------------------------------------------
    def update_partition_state(self, tp: TopicPartition, new: PartitionState, expected_zk_version: int, *,
                               controller_epoch_zk_version: int | None = None) -> PartitionState | None:
        """Conditional on the stored state's version, as a znode write is."""
        cur = self.states.get(tp)
        if cur is None or cur.zk_version != expected_zk_version:
            return None
        stored = replace(new, zk_version=cur.zk_version + 1)
        self.states[tp] = stored
        self._changed()
        return stored

    def read_partition_state(self, tp: TopicPartition) -> PartitionState | None:
        return self.states.get(tp)

    # --- producer ids ---------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """The next block, persisted before it is handed out: an id is never reused after a crash."""
        reg = self.registry
        start = reg.next_producer_id_block
        reg.next_producer_id_block = start + block_size
        reg.save()
        return start, start + block_size - 1

    # --- log dir events (KIP-112) -------------------------------------------------------------
    def watch_log_dir_events(self, callback: Callable[[list[str]], object]) -> None:
        self._log_dir_watch = callback

    def add_log_dir_event(self, broker_id: int) -> str:
        path = f"log_dir_event_{self._next_event:010d}"
        self._next_event += 1
        self._log_dir_events[path] = broker_id
        if self._log_dir_watch is not None:
            self._log_dir_watch(sorted(self._log_dir_events))
        return path

    def read_log_dir_events(self) -> list[tuple[str, int | None]]:
        return sorted(self._log_dir_events.items())

    def delete_log_dir_events(self, paths: list[str]) -> None:
        for path in paths:
            self._log_dir_events.pop(path, None)
