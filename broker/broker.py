"""The Broker: the process-wide state the handlers work on (config, topic registry,
LogManager, group coordinator, purgatory) and its lifecycle: start, scheduled storage
tasks, graceful stop.

Everything here runs on the event loop thread; storage calls are synchronous file I/O
into the page cache, which is cheaper than handing them to a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError, UnsupportedVersionError
from storage.config import LogConfig
from storage.errors import StorageError
from storage.manager import LogManager

from .config import BrokerConfig, new_cluster_id
from .handlers import HANDLERS, load_all
from .handlers.api_versions import unsupported_version_response
from .handlers.produce import legacy_produce_response
from .purgatory import Purgatory
from .topics import INTERNAL_TOPICS, TopicInfo, TopicRegistry

log = logging.getLogger("krait.broker")

VERSION = "0.1.0"
PRODUCER_ID_BLOCK = 1000


class Broker:
    def __init__(self, config: BrokerConfig):
        load_all()
        self.config = config
        self.node_id = config.node_id
        self.log_dirs = config.log_dirs
        self.registry = TopicRegistry(self.log_dirs[0])
        self.logs: LogManager | None = None
        self.purgatory = Purgatory()
        self.coordinator_driver: Any = None  # set at start(); see group_driver.py
        self.connections: set = set()
        self._tasks: set[asyncio.Task] = set()
        self._servers: list = []
        self._timers: list[asyncio.Task] = []
        self.stopping = False
        self._next_pid = 0
        self._pid_limit = 0
        self.default_topic_props = config.topic_defaults()
        #: encoded Metadata bodies by (version, requested topics), for one registry version
        self.metadata_cache: dict[Any, Any] = {}

    # --- lifecycle ------------------------------------------------------------------------
    def open_storage(self) -> None:
        """Load metadata and every partition (synchronous; also used by tools and tests)."""
        t0 = time.monotonic()
        self.registry.load()
        if self.registry.cluster_id is None:
            self.registry.cluster_id = self.config["cluster.id"] or new_cluster_id()
            self.registry.save()
        self.logs = LogManager(self.log_dirs, self.base_log_config(),
                               producer_id_expiration_ms=self.effective_config()["producer.id.expiration.ms"])
        configs = {info.name: self.topic_log_config(info) for info in self.registry.topics.values()}
        self.logs.load(configs)
        for info in list(self.registry.topics.values()):
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    self.logs.create(info.name, p, configs[info.name], info.topic_id)
        log.info("loaded %d topics, %d partitions in %.3fs", len(self.registry.topics),
                 len(self.logs.partitions()), time.monotonic() - t0)

    async def start(self) -> None:
        from .server import start_listeners

        self.open_storage()
        self._setup_coordinator()
        self._servers = await start_listeners(self)
        self._timers = [
            asyncio.ensure_future(self._every(self.config["log.retention.check.interval.ms"] / 1000, self.logs.run_retention)),
            asyncio.ensure_future(self._every(1.0, self.logs.run_flush)),
            asyncio.ensure_future(self._every(self.config["log.flush.offset.checkpoint.interval.ms"] / 1000,
                                              self.logs.checkpoint)),
            asyncio.ensure_future(self._every(lambda: min(15.0, self.effective_config()["log.cleaner.backoff.ms"] / 1000),
                                              self._clean)),
        ]
        log.info("Krait %s started: node.id=%d listeners=%s advertised=%s log.dirs=%s cluster.id=%s", VERSION,
                 self.node_id, ",".join(map(str, self.config.listeners)),
                 ",".join(map(str, self.config.advertised_listeners)), ",".join(self.log_dirs),
                 self.registry.cluster_id)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish, flush, checkpoint, mark clean."""
        self.stopping = True
        for s in self._servers:
            s.close()
        for t in self._timers:
            t.cancel()
        self.purgatory.notify_all()  # parked fetches answer now with what they have
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for conn in list(self.connections):
            conn.close()
        if self.coordinator_driver is not None:
            self.coordinator_driver.stop()
        if self.logs is not None:
            self.logs.shutdown()
        log.info("Krait stopped cleanly")

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

    # --- coordinator ------------------------------------------------------------------------
    def _setup_coordinator(self) -> None:
        from .group_driver import CoordinatorDriver

        self.coordinator_driver = CoordinatorDriver(self)

    # --- dispatch -------------------------------------------------------------------------
    def dispatch(self, ctx, frame: bytes):
        h = ctx.header
        if h.api_key == ApiKey.API_VERSIONS and not apis.is_supported(h.api_key, h.api_version):
            return unsupported_version_response(h.correlation_id)
        if h.api_key == ApiKey.PRODUCE and h.api_version < 3:
            return legacy_produce_response(h, frame)
        handler = HANDLERS.get(h.api_key)
        if handler is None:
            raise UnsupportedVersionError(f"{apis.api_name(h.api_key)} (key {h.api_key}) is not supported")
        req = framing.decode_request(h, frame)
        return handler(self, ctx, req)

    def effective_config(self) -> BrokerConfig:
        """The static config with the dynamic broker configs (AlterConfigs on the broker)
        applied over it; ``self.config`` stays the static layer DescribeConfigs reports."""
        reg = self.registry
        return self.config.with_dynamic(reg.default_broker_configs, reg.broker_configs)

    # --- topics ---------------------------------------------------------------------------
    def base_log_config(self) -> LogConfig:
        props = dict(self.default_topic_props)
        props.update(self.registry.broker_configs_as_topic_defaults())
        return LogConfig.from_props(props, strict=False)

    def topic_log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_props(info.configs, base=self.base_log_config())

    def validate_topic_configs(self, configs: dict[str, str]) -> LogConfig:
        return LogConfig.from_props(configs, base=self.base_log_config())

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     *, validate_only: bool = False) -> TopicInfo:
        from .topics import topic_name_error

        configs = dict(configs or {})
        if name in self.registry.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        err = topic_name_error(name)
        if err:
            raise KafkaError(ErrorCode.invalid_topic_exception, err)
        if partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        try:
            cfg = self.validate_topic_configs(configs)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), partitions, configs)
        info = self.registry.add(name, partitions, configs)
        try:
            for p in range(partitions):
                self.logs.create(name, p, cfg, info.topic_id)
        except (OSError, StorageError) as exc:
            # all or nothing: a half-created topic would be listed with missing partitions
            log.error("creating topic %s failed, rolling back: %s", name, exc)
            self.registry.remove(name)
            self.logs.delete_topic(name)
            raise KafkaError(ErrorCode.kafka_storage_error, f"Cannot create topic {name}: {exc}") from None
        log.info("created topic %s with %d partitions (id %s)", name, partitions, info.topic_id)
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.registry.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        if name in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic {name} is an internal topic and cannot be deleted")
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        self.registry.remove(name)
        self.logs.delete_topic(name)
        for p in range(info.partitions):
            self.purgatory.notify((name, p))
        log.info("deleted topic %s", name)
        return info

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self.registry.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        if count <= info.partitions:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"Topic currently has {info.partitions} partitions, which is higher than or equal to the "
                             f"requested {count}.")
        if validate_only:
            return
        cfg = self.topic_log_config(info)
        for p in range(info.partitions, count):
            self.logs.create(name, p, cfg, info.topic_id)
        info.partitions = count
        self.registry.save()

    def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        info = self.registry.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        try:
            cfg = self.validate_topic_configs(configs)
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        if validate_only:
            return
        info.configs = dict(configs)
        self.registry.save()
        self.logs.update_config(name, cfg)

    def auto_create(self, name: str) -> TopicInfo | None:
        """Metadata-triggered auto creation (auto.create.topics.enable)."""
        if name in INTERNAL_TOPICS:
            # internal topics are created by their coordinator, with their own configs
            if name == "__consumer_offsets" and self.coordinator_driver is not None:
                self.coordinator_driver.ensure_topic()
                return self.registry.get(name)
            return None
        if not self.config["auto.create.topics.enable"]:
            return None
        try:
            return self.create_topic(name, self.config["num.partitions"])
        except KafkaError:
            return None

    # --- producer ids -----------------------------------------------------------------------
    def next_producer_id(self) -> int:
        """Allocate a producer id; blocks of ids are persisted before use so that an id is
        never handed out twice, even across a crash (Kafka's ProducerIdManager does the same)."""
        if self._next_pid >= self._pid_limit:
            start = self.registry.next_producer_id_block
            self.registry.next_producer_id_block = start + PRODUCER_ID_BLOCK
            self.registry.save()
            self._next_pid, self._pid_limit = start, start + PRODUCER_ID_BLOCK
        pid = self._next_pid
        self._next_pid += 1
        return pid
