"""TopicAdmin: creating, deleting and altering topics and their partitions, the topic
config defaults that the broker's (static and dynamic) configs give, and applying a change
of those defaults to every partition. CreateTopics, DeleteTopics, CreatePartitions, the
config APIs and Metadata's auto-creation call it; it changes the topic registry (the
metadata document) and the LogManager together, all or nothing.

In cluster mode (``cluster`` set) the changes are written to ZooKeeper instead, off the
event loop (the writes are coroutines), and every broker, this one included, applies them
from there. The creations a request only triggers (Metadata's auto-creation, the
coordinators' internal topics) then run in the background, as Kafka's
AutoTopicCreationManager's: the request is answered LEADER_NOT_AVAILABLE or
COORDINATOR_NOT_AVAILABLE meanwhile, and the client asks again."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig
from storage.errors import StorageError
from storage.manager import LogManager

from .config import BrokerConfig
from .replica_manager import ReplicaManager
from .topics import INTERNAL_TOPICS, TopicInfo, TopicRegistry, topic_name_error

log = logging.getLogger("krait.topics")


def base_log_config(default_topic_props: dict[str, str], registry: TopicRegistry) -> LogConfig:
    """Topic defaults: the broker's log.* keys, then dynamic broker configs over them."""
    props = dict(default_topic_props)
    props.update(registry.broker_configs_as_topic_defaults())
    return LogConfig.from_props(props, strict=False)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, logs: LogManager, replicas: ReplicaManager):
        self.config = config
        self.registry = registry
        self.logs = logs
        self.replicas = replicas
        #: topic defaults from the static config (dynamic ones are applied over them)
        self.default_topic_props = config.topic_defaults()
        #: internal topics are created by their coordinator, with their own configs
        self.internal_topic_creators: dict[str, Callable[[], None]] = {}
        #: cluster mode: the broker's ClusterNode (topics live in ZooKeeper)
        self.cluster = None
        #: cluster mode: creations running in the background, by topic
        self._creating: dict[str, asyncio.Task] = {}

    # --- configs ------------------------------------------------------------------------------
    def base_log_config(self) -> LogConfig:
        return base_log_config(self.default_topic_props, self.registry)

    def topic_log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_props(info.configs, base=self.base_log_config())

    def validate_topic_configs(self, configs: dict[str, str]) -> LogConfig:
        try:
            return LogConfig.from_props(configs, base=self.base_log_config())
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None

    def apply_topic_defaults(self) -> None:
        """After the broker's dynamic configs changed: every partition gets its new config."""
        self.logs.default_config = self.base_log_config()
        for info in self.registry.topics.values():
            self.logs.update_config(info.name, self.topic_log_config(info))

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        info = self._existing(name, f"Topic {name} does not exist.")
        cfg = self.validate_topic_configs(configs)
        if validate_only:
            return
        if self.cluster is not None:
            await self.cluster.set_topic_configs(name, dict(configs))
            return
        info.configs = dict(configs)
        self.registry.save()
        self.logs.update_config(name, cfg)

    # --- topics -------------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                           *, validate_only: bool = False, replication_factor: int | None = None,
                           assignment: dict[int, tuple[int, ...]] | None = None) -> TopicInfo:
        configs = dict(configs or {})
        cfg, rf = self._check_new_topic(name, partitions, configs, replication_factor, assignment)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), partitions, configs)
        if self.cluster is not None:
            return await self._create_in_cluster(name, partitions, rf, configs, assignment)
        return self._create_local(name, partitions, configs, cfg)

    def ensure_created(self, name: str, partitions: int, configs: dict[str, str] | None = None, *,
                       replication_factor: int | None = None) -> TopicInfo | None:
        """The topic, created if missing: at once in single-node mode; in cluster mode the
        ZooKeeper write starts in the background and None is returned until the topic is
        there (``being_created`` says whether a creation is under way). Raises KafkaError
        when the topic cannot be created at all."""
        info = self.registry.get(name)
        if info is not None:
            return info
        configs = dict(configs or {})
        cfg, rf = self._check_new_topic(name, partitions, configs, replication_factor, None)
        if self.cluster is None:
            return self._create_local(name, partitions, configs, cfg)
        if name not in self._creating:
            task = asyncio.get_running_loop().create_task(self._create_in_background(name, partitions, rf, configs))
            self._creating[name] = task
            task.add_done_callback(lambda _t: self._creating.pop(name, None))
        return None

    def being_created(self, name: str) -> bool:
        return name in self._creating

    async def _create_in_background(self, name: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        try:
            await self._create_in_cluster(name, partitions, rf, configs, None)
        except KafkaError as exc:
            if exc.error_code != ErrorCode.topic_already_exists:  # another broker was first: fine
                log.info("creating topic %s failed: %s", name, exc.message or exc.error_code.name)

    async def _create_in_cluster(self, name: str, partitions: int, rf: int, configs: dict[str, str],
                                 assignment: dict[int, tuple[int, ...]] | None) -> TopicInfo:
        info = await self.cluster.create_topic(name, partitions, rf, configs, assignment)
        log.info("created topic %s with %d partitions, replication factor %d (id %s)", name, partitions, rf,
                 info.topic_id)
        return info

    def _check_new_topic(self, name: str, partitions: int, configs: dict[str, str], replication_factor: int | None,
                         assignment: dict[int, tuple[int, ...]] | None) -> tuple[LogConfig, int]:
        """CreateTopics' checks of a new topic: its config and replication factor."""
        if name in self.registry.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        err = topic_name_error(name)
        if err:
            raise KafkaError(ErrorCode.invalid_topic_exception, err)
        if partitions < 1:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        cfg = self.validate_topic_configs(configs)
        rf = self.config["default.replication.factor"] if replication_factor is None else replication_factor
        self.check_replication_factor(rf, assignment)
        return cfg, rf

    def _create_local(self, name: str, partitions: int, configs: dict[str, str], cfg: LogConfig) -> TopicInfo:
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

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._existing(name, "This server does not host this topic-partition.")
        if name in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic {name} is an internal topic and cannot be deleted")
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        if self.cluster is not None:
            await self.cluster.delete_topic(name)
            log.info("deleted topic %s", name)
            return info
        self.registry.remove(name)
        self.logs.delete_topic(name)
        self.replicas.wake((name, p) for p in range(info.partitions))
        log.info("deleted topic %s", name)
        return info

    async def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self._existing(name, f"The topic '{name}' does not exist.")
        if count <= info.partitions:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"Topic currently has {info.partitions} partitions, which is higher than or equal to the "
                             f"requested {count}.")
        if validate_only:
            return
        if self.cluster is not None:
            await self.cluster.add_partitions(name, count, info.partitions)
            return
        cfg = self.topic_log_config(info)
        for p in range(info.partitions, count):
            self.logs.create(name, p, cfg, info.topic_id)
        info.partitions = count
        self.registry.save()

    def live_brokers(self) -> list[int]:
        return self.cluster.live_broker_ids() if self.cluster is not None else [self.config.node_id]

    def check_replication_factor(self, rf: int, assignment: dict[int, tuple[int, ...]] | None = None) -> None:
        if assignment:
            return
        if rf < 1:
            raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        live = len(self.live_brokers())
        if rf > live:
            raise KafkaError(ErrorCode.invalid_replication_factor,
                             f"Unable to replicate the partition {rf} time(s): The target replication factor "
                             f"of {rf} cannot be reached because only {live} broker(s) are registered.")

    def check_assignments(self, assignments) -> None:
        """Manual replica assignments may only name live brokers, each once per partition."""
        live = set(self.live_brokers())
        for a in assignments:
            if len(set(a.broker_ids)) != len(a.broker_ids):
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"Duplicate brokers not allowed in replica assignment: {list(a.broker_ids)}")
            if any(b not in live for b in a.broker_ids):
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"Unknown broker in replica assignment {list(a.broker_ids)}")

    def auto_create(self, name: str) -> TopicInfo | None:
        """Metadata-triggered auto creation (auto.create.topics.enable); None while the
        topic is not there (in cluster mode, also while ``being_created``)."""
        if name in INTERNAL_TOPICS:
            creator = self.internal_topic_creators.get(name)
            if creator is None:
                return None
            creator()
            return self.registry.get(name)
        if not self.config["auto.create.topics.enable"]:
            return None
        try:
            return self.ensure_created(name, self.config["num.partitions"])
        except KafkaError as exc:
            log.info("auto-creating topic %s failed: %s", name, exc.message or exc.error_code.name)
            return None

    def ensure_partitions_exist(self) -> None:
        """At start-up: a partition the registry lists but no log dir holds is created empty
        (its directory was lost or never made)."""
        for info in list(self.registry.topics.values()):
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    try:
                        self.logs.create(info.name, p, self.topic_log_config(info), info.topic_id)
                    except StorageError as exc:  # it may be in a log dir that failed to load
                        log.warning("partition %s-%d is offline: %s", info.name, p, exc)

    def _existing(self, name: str, message: str) -> TopicInfo:
        info = self.registry.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, message)
        return info
