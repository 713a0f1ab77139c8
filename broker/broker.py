"""The Broker: the composition root. It builds the services the handlers work through
(ReplicaManager for partitions, TopicAdmin for topics and configs, the group coordinator's
driver, producer ids) over the config, the topic registry and the LogManager, dispatches
requests to the handler registered for their API, and runs the lifecycle: start,
scheduled storage tasks, graceful stop.

Everything here runs on the event loop thread; storage calls are synchronous file I/O
into the page cache, which is cheaper than handing them to a thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError, UnsupportedVersionError
from protocol.produce_codec import decode_produce_request
from storage.manager import LogManager

from .cluster import zk_layout
from .cluster.node import ClusterNode
from .config import BrokerConfig, ConfigError, new_cluster_id
from .config_admin import ConfigAdmin
from .group_driver import CoordinatorDriver
from .handlers import HANDLERS, load_all
from .handlers.api_versions import unsupported_version_response
from .handlers.produce import legacy_produce_response
from .http import HttpListener, start_http
from .log_dir_failure import LogDirFailureHandler
from .log_dirs import LogDirs
from .metrics import BrokerMetrics
from .producer_ids import ProducerIdManager
from .replica.manager import ReplicaManager
from .schema_registry.rest import RegistryListener, start_registry
from .security.authorizer import Authorizer, authorizer_from_configs
from .security.listeners import ConnectionLimits, listener_security
from .security.quotas import QuotaManager
from .security.sasl import ScramCredential
from .security.store import SecurityStore, entity_path
from .security.zk_store import ZkSecurityStore
from .server import start_listeners
from .share.coordinator_driver import ShareCoordinatorDriver, SharePersister
from .share.service import ShareService
from .tables.driver import TableTopics
from .topic_admin import TopicAdmin, base_log_config
from .topics import TopicRegistry
from .txn_driver import TransactionDriver

log = logging.getLogger("krait.broker")

VERSION = "0.1.0"


class Broker:
    def __init__(self, config: BrokerConfig):
        load_all()
        self.config = config
        self.node_id = config.node_id
        self.log_dirs = config.log_dirs
        self.registry = TopicRegistry(self.log_dirs[0])
        self.producer_ids = ProducerIdManager()
        try:
            #: None unless authorizer.class.name names Kafka's ACL authorizer
            self.authorizer: Authorizer | None = authorizer_from_configs(config.originals)
        except ValueError as exc:
            raise ConfigError(f"Invalid value for configuration authorizer.class.name: {exc}") from None
        #: per listener: TLS context and SASL settings (bad keys stop start-up here)
        self.listener_security = listener_security(config)
        self.connection_limits = ConnectionLimits.from_config(config)
        if self.connection_limits.max_connections >= 2**31 - 1 and self.connection_limits.per_ip >= 2**31 - 1 \
                and not self.connection_limits.overrides:
            self.connection_limits = None  # Kafka's defaults: no limit, no bookkeeping
        #: ACLs, SCRAM credentials and client quotas (the metadata store's: ZooKeeper's in a
        #: ZooKeeper cluster, the log dir's own otherwise)
        self.security_store: SecurityStore | ZkSecurityStore = SecurityStore(self.log_dirs[0])
        #: client quotas (producer/consumer byte rates, request percentage) from the store
        self.quotas = QuotaManager.from_originals(config.originals)
        self.security_store.listeners.append(self._security_changed)
        # built by open_storage()
        self.logs: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.topics: TopicAdmin | None = None
        self.configs: ConfigAdmin | None = None
        self.log_dirs_admin: LogDirs | None = None
        #: membership, metadata, replication, controller (a single node is a one-broker
        #: cluster on the local metadata store); built at start()
        self.cluster: ClusterNode | None = None
        #: the leader's side of replication (followers' fetches, the ISR), at start()
        self.replication = None
        self.groups: CoordinatorDriver | None = None  # the group coordinator's driver, set at start()
        self.transactions: TransactionDriver | None = None  # the transaction coordinator's driver, at start()
        #: the share coordinator's driver and the share-partitions' service (KIP-932), at start()
        self.share_coordinator: ShareCoordinatorDriver | None = None
        self.share: ShareService | None = None
        #: Iceberg table topics (krait.iceberg.mode), at start()
        self.tables: TableTopics | None = None
        self.connections: set = set()
        self._tasks: set[asyncio.Task] = set()
        self._servers: list = []
        self._timers: list[asyncio.Task] = []
        self.stopping = False
        #: the process's exit code: non-zero after a fatal error (every log dir failed)
        self.exit_code = 0
        #: asks the process to stop (the serve command's; None: stop() is scheduled here)
        self.on_fatal: Callable[[], None] | None = None
        #: Kafka's handleLogDirFailure, run when storage reports a failed log dir
        self.log_dir_failures = LogDirFailureHandler(self)
        #: replicas whose log could not be created (an offline log dir may hold them)
        self._unhosted: set[tuple[str, int]] = set()
        #: the request, topic and replication counters /metrics reports (broker.metrics)
        self.metrics = BrokerMetrics()
        #: krait.http.listener: /metrics, /healthz, /readyz (None when disabled)
        self.http: HttpListener | None = None
        #: krait.schema.registry.listener: the Schema Registry's REST API (None when disabled)
        self.schema_registry: RegistryListener | None = None
        #: the Kafka listeners are open (for /readyz)
        self.serving = False
        #: encoded Metadata bodies by (version, requested topics), for one registry version
        self.metadata_cache: dict[Any, Any] = {}

    # --- lifecycle ------------------------------------------------------------------------
    def open_storage(self) -> None:
        """Load metadata and every partition (synchronous; also used by tools and tests)."""
        t0 = time.monotonic()
        self.registry.load()
        self.security_store.load()
        self._security_changed()
        # every log keeps its high watermark apart from its end (replication moves it, on
        # one node as on many): a single node's ISR of one moves it at each append
        self.logs = LogManager(self.log_dirs, base_log_config(self.config.topic_defaults(), self.registry),
                               producer_id_expiration_ms=self.effective_config()["producer.id.expiration.ms"],
                               replicated=True)
        self.replicas = ReplicaManager(self.logs, self.node_id)
        self.topics = TopicAdmin(self.config, self.registry, self.logs)
        self.configs = ConfigAdmin(self.config, self.registry, self.topics, self.logs, self.node_id,
                                   security_store=lambda: self.security_store)
        self.log_dirs_admin = LogDirs(self.logs, self.registry)
        # the metadata store says which replicas this broker holds (at start(); one missing
        # from the log dirs is created empty then)
        self.logs.load({info.name: self.topics.topic_log_config(info) for info in self.registry.topics.values()})
        log.info("loaded %d topics, %d partitions in %.3fs", len(self.registry.topics),
                 len(self.logs.partitions()), time.monotonic() - t0)

    async def start(self) -> None:
        self.open_storage()
        try:
            self.http = await start_http(self)  # a taken port stops start-up here
            self.schema_registry = await start_registry(self)
        except BaseException:
            if self.http is not None:
                await self.http.stop()
            self.logs.shutdown()
            raise
        self._join_cluster()
        self.log_dir_failures.attach()
        self.groups = CoordinatorDriver(self.config, self.registry, self.replicas, self.topics, broker=self)
        self.transactions = TransactionDriver(self)
        self.cluster.listeners.append(self.groups.follow_leadership)
        self.cluster.listeners.append(self.transactions.follow_leadership)
        self.share_coordinator = ShareCoordinatorDriver(self)
        self.share = ShareService(self, SharePersister(self.share_coordinator))
        self.cluster.listeners.append(self.share_coordinator.follow_leadership)
        self.cluster.listeners.append(self.share.follow_leadership)
        self.share.start()
        self.tables = TableTopics(self)
        self.tables.start()
        self._servers = await start_listeners(self)
        self.serving = True
        self._timers = [
            asyncio.ensure_future(self._every(self.config["log.retention.check.interval.ms"] / 1000, self.logs.run_retention)),
            asyncio.ensure_future(self._every(1.0, self.logs.run_flush)),
            asyncio.ensure_future(self._every(self.config["log.flush.offset.checkpoint.interval.ms"] / 1000,
                                              self.logs.checkpoint)),
            # Kafka writes replication-offset-checkpoint on its own, shorter, schedule: it is
            # what readers of the files (the Spark source) take as the committed end
            asyncio.ensure_future(self._every(self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                                              self.logs.checkpoint_high_watermarks)),
            asyncio.ensure_future(self._every(lambda: min(15.0, self.effective_config()["log.cleaner.backoff.ms"] / 1000),
                                              self._clean)),
        ]
        # Kafka checks for lagging followers every replica.lag.time.max.ms / 2
        self._timers.append(asyncio.ensure_future(
            self._every(self.config["replica.lag.time.max.ms"] / 2000, self.replication.shrink_isrs)))
        if self.config["auto.leader.rebalance.enable"]:
            self._timers.append(asyncio.ensure_future(self._every(
                self.config["leader.imbalance.check.interval.seconds"],
                lambda: self.track(asyncio.ensure_future(self.cluster.rebalance_leaders())))))
        log.info("Krait %s started: node.id=%d listeners=%s advertised=%s log.dirs=%s cluster.id=%s", VERSION,
                 self.node_id, ",".join(map(str, self.config.listeners)),
                 ",".join(map(str, self.config.advertised_listeners)), ",".join(self.log_dirs),
                 self.registry.cluster_id)

    def _security_changed(self) -> None:
        if self.authorizer is not None:
            self.authorizer.load_dicts(self.security_store.acls)
        self.quotas.update(self.security_store.entities)
        self.metadata_cache.clear()  # Metadata answers depend on what a principal may describe

    def _join_cluster(self) -> None:
        cfg = self.config
        self.cluster = ClusterNode(cfg, self.registry, self.replicas, self._open_replica_log,
                                   self.logs.delete_topic, self._apply_topic_config)
        self.replication = self.cluster.replication
        self.replication.metrics = self.metrics
        self.topics.cluster = self.cluster
        if self.schema_registry is not None:  # other brokers forward registry writes to it
            self.cluster.membership.extra_registration[zk_layout.SCHEMA_REGISTRY_URL] = \
                self.schema_registry.advertised_url()
        self.producer_ids.fetch_block = self.cluster.allocate_producer_ids
        try:
            cluster_id = self.cluster.start(self.registry.cluster_id, cfg["cluster.id"] or new_cluster_id())
        except BaseException:
            self.cluster.stop()
            self.logs.shutdown()
            raise
        if cluster_id != self.registry.cluster_id:
            self.registry.cluster_id = cluster_id
            self.registry.save()
        # ACLs, SCRAM credentials and quotas are the cluster's (ZooKeeper's, in Kafka's layout)
        store = self.cluster.membership.security_store(self.security_store, asyncio.get_running_loop())
        if store is not self.security_store:
            store.load()
            self.security_store = store
            self._security_changed()

    def _open_replica_log(self, info, partition: int):
        """The local log of a replica the metadata store assigns here (created empty)."""
        plog = self.logs.get(info.name, partition)
        if plog is None:
            try:
                plog = self.logs.create(info.name, partition, self.topics.topic_log_config(info), info.topic_id)
            except KafkaError as exc:
                if (info.name, partition) not in self._unhosted:
                    self._unhosted.add((info.name, partition))
                    log.warning("replica %s-%d is not hosted here: %s", info.name, partition, exc)
                raise
        return plog

    def _apply_topic_config(self, info) -> None:
        try:
            self.logs.update_config(info.name, self.topics.topic_log_config(info))
        except ValueError as exc:
            log.error("topic %s has an invalid config in ZooKeeper, keeping the old one: %s", info.name, exc)

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        """The stored SCRAM credential of a user (SASL/SCRAM's lookup)."""
        raw = self.security_store.entities.get(entity_path({"user": username}), {}).get(mechanism)
        if raw is None:
            return None
        try:
            return ScramCredential.from_string(raw)
        except ValueError:
            log.error("the stored %s credential of user %r is not valid; refusing it", mechanism, username)
            return None

    def live_brokers(self, listener: str | None = None) -> list[tuple[int, str, int]]:
        """(id, host, port) of every live broker on ``listener`` (a client is answered with the
        endpoints of the listener it connected to, as in Kafka; None: the first listener)."""
        return self.cluster.membership.live_endpoints(listener)

    def cluster_version(self) -> tuple[int, int]:
        """Changes whenever brokers, the controller or partition states change (Metadata's
        cache key)."""
        return (self.cluster.membership.version, self.cluster.version)

    def cluster_states(self) -> dict:
        """Every partition's state (leader, epoch, ISR) from the metadata store."""
        return self.cluster.states()

    def partition_metadata(self, topic: str, partition: int) -> tuple[int, int, int, tuple, tuple, tuple]:
        """(error, leader, leader epoch, replicas, ISR, offline replicas) of one partition,
        as Metadata and DescribeTopicPartitions report it."""
        plog = self.logs.get(topic, partition) if self.logs is not None else None
        # this broker's own replica in a failed log dir is offline too (Kafka's metadata
        # learns it from the controller; the other brokers' ones are left out of their ISRs)
        local_offline = plog is not None and plog.offline
        meta = self.cluster.metadata.topics.get(topic) if self.cluster.metadata is not None else None
        replicas = tuple(meta.assignment.get(partition, ())) if meta is not None else ()
        state = self.cluster.states().get((topic, partition))
        live = self.cluster.membership.brokers
        offline = tuple(r for r in replicas if r not in live or (r == self.node_id and local_offline))
        if state is None or state.leader < 0 or state.leader not in live:
            return (ErrorCode.leader_not_available, -1, state.leader_epoch if state else -1, replicas,
                    tuple(state.isr) if state else (), offline)
        return ErrorCode.none, state.leader, state.leader_epoch, replicas, tuple(state.isr), offline

    def controller_id(self) -> int:
        """The cluster's controller (this broker on a single node); -1 when none is elected."""
        cid = self.cluster.membership.controller_id
        return -1 if cid is None else cid

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish, flush, checkpoint, mark clean."""
        self.stopping = True
        if self.cluster is not None:  # None before start() joined the cluster
            if self.config["controlled.shutdown.enable"]:
                await self.cluster.controlled_shutdown(grace)
            self.security_store.stop()
            self.cluster.stop()  # the registration (and the controller role) go at once
        if self.log_dirs_admin is not None:
            self.log_dirs_admin.stopping = True
        for s in self._servers:
            s.close()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        for t in self._timers:
            t.cancel()
        if self.replicas is not None:
            self.replicas.wake()  # parked fetches answer now with what they have
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for conn in list(self.connections):
            conn.close()
        if self.groups is not None:
            self.groups.stop()
        if self.transactions is not None:
            self.transactions.stop()
        if self.tables is not None:
            await self.tables.stop()
        if self.share is not None:
            await self.share.stop()
        if self.share_coordinator is not None:
            self.share_coordinator.stop()
        if self.logs is not None:
            self.logs.shutdown()
        if self.http is not None:
            await self.http.stop()
        if self.exit_code:
            log.error("Krait stopped after a fatal error (exit code %d)", self.exit_code)
        else:
            log.info("Krait stopped cleanly")

    def fatal_stop(self, exit_code: int) -> None:
        """Stop the broker because it cannot go on (e.g. every log dir failed)."""
        self.exit_code = exit_code
        if self.on_fatal is not None:
            self.on_fatal()
        elif not self.stopping:
            self.track(asyncio.ensure_future(self.stop()))

    def track(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, seconds: float | Callable[[], float], fn) -> None:
        while True:
            await asyncio.sleep(max(0.05, seconds() if callable(seconds) else seconds))
            try:
                fn()
            except Exception:
                log.exception("scheduled task %s failed", fn.__name__)

    def _clean(self) -> None:
        if self.config["log.cleaner.enable"]:
            self.logs.run_cleaner()

    def effective_config(self) -> BrokerConfig:
        """The static config with the dynamic broker configs (AlterConfigs on the broker)
        applied over it; ``self.config`` stays the static layer DescribeConfigs reports."""
        reg = self.registry
        return self.config.with_dynamic(reg.default_broker_configs, reg.broker_configs)

    # --- dispatch -------------------------------------------------------------------------
    def dispatch(self, ctx, frame: bytes):
        """Answer one request: a value, or an awaitable of one; timed for the request metrics."""
        started = time.perf_counter()
        result = self._answer(ctx, frame)
        if not inspect.isawaitable(result):
            self._record(ctx, started)
        elif isinstance(result, asyncio.Future):
            # a bare future (a JoinGroup waiting for its rebalance) stays one
            result.add_done_callback(lambda _: self._record(ctx, started))
        else:
            result = self._timed(result, ctx, started)
        return result

    def _record(self, ctx, started: float) -> None:
        seconds = time.perf_counter() - started
        self.metrics.request(ctx.header.api_key, seconds)
        if ctx.metric_name is not None:
            self.metrics.request(ctx.metric_name, seconds)

    async def _timed(self, result, ctx, started: float):
        try:
            return await result
        finally:
            self._record(ctx, started)

    def _answer(self, ctx, frame: bytes):
        h = ctx.header
        if h.api_key == ApiKey.API_VERSIONS and not apis.is_supported(h.api_key, h.api_version):
            return unsupported_version_response(h.correlation_id)
        if h.api_key == ApiKey.PRODUCE and h.api_version < 3:
            return legacy_produce_response(h, frame)
        handler = HANDLERS.get(h.api_key)
        if handler is None or not apis.is_supported(h.api_key, h.api_version):
            raise UnsupportedVersionError(f"{apis.api_name(h.api_key)} v{h.api_version} (key {h.api_key}) is not served")
        if h.api_key == ApiKey.PRODUCE:
            # records stay views into the frame (patched and written in place): no kio copy
            req = decode_produce_request(frame, h.body_offset, h.api_version)
        else:
            req = framing.decode_request(h, frame)
        return handler(self, ctx, req)
