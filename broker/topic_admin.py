"""TopicAdmin: creating, deleting and altering topics and their partitions, the topic
config defaults that the broker's (static and dynamic) configs give, and applying a change
of those defaults to every partition. CreateTopics, DeleteTopics, CreatePartitions, the
config APIs and Metadata's auto-creation call it.

Every change is written to the metadata store through the cluster layer (``cluster``, a
:class:`broker.cluster.node.ClusterNode`), and every broker, this one included, applies
it from there: the registry, the logs and the Partition objects follow the store. The
local store of a single node writes inline, so its topics exist when the call returns.
ZooKeeper's writes run off the event loop; the creations a request only triggers
(Metadata's auto-creation, the coordinators' internal topics) then run in the background,
as Kafka's AutoTopicCreationManager's: the request is answered LEADER_NOT_AVAILABLE or
COORDINATOR_NOT_AVAILABLE meanwhile, and the client asks again."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from protocol.errors import ErrorCode, KafkaError
from storage.config import LogConfig
from storage.manager import LogManager

from .config import BrokerConfig
from .topics import INTERNAL_TOPICS, TopicInfo, TopicRegistry, topic_name_error

log = logging.getLogger("krait.topics")


def base_log_config(default_topic_props: dict[str, str], registry: TopicRegistry) -> LogConfig:
    """Topic defaults: the broker's log.* keys, then dynamic broker configs over them."""
    props = dict(default_topic_props)
    props.update(registry.broker_configs_as_topic_defaults())
    return LogConfig.from_props(props, strict=False)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, registry: TopicRegistry, logs: LogManager):
        self.config = config
        self.registry = registry
        self.logs = logs
        #: topic defaults from the static config (dynamic ones are applied over them)
        self.default_topic_props = config.topic_defaults()
        #: internal topics are created by their coordinator, with their own configs
        self.internal_topic_creators: dict[str, Callable[[], None]] = {}
        #: the broker's ClusterNode (topics live in its metadata store); set at start()
        self.cluster = None
        #: creations running in the background (a ZooKeeper write), by topic
        self._creating: dict[str, asyncio.Future] = {}

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
        self._existing(name, f"Topic {name} does not exist.")
        self.validate_topic_configs(configs)
        if validate_only:
            return
        await self.cluster.set_topic_configs(name, dict(configs))

    # --- topics -------------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                           *, validate_only: bool = False, replication_factor: int | None = None,
                           assignment: dict[int, tuple[int, ...]] | None = None) -> TopicInfo:
        configs = dict(configs or {})
        _, rf = self._check_new_topic(name, partitions, configs, replication_factor, assignment)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), partitions, configs)
        info = await self.cluster.create_topic(name, partitions, rf, configs, assignment)
        _log_created(info, rf)
        return info

    def ensure_created(self, name: str, partitions: int, configs: dict[str, str] | None = None, *,
                       replication_factor: int | None = None) -> TopicInfo | None:
        """The topic, created if missing: at once when the store writes inline (a single
        node's); else the write goes on in the background and None is returned until the
        topic is there (``being_created`` says whether a creation is under way). Raises
        KafkaError when the topic cannot be created at all."""
        info = self.registry.get(name)
        if info is not None:
            return info
        if name in self._creating:
            return None
        configs = dict(configs or {})
        _, rf = self._check_new_topic(name, partitions, configs, replication_factor, None)
        pending = self.cluster.start_topic_creation(name, partitions, rf, configs)
        if pending.done():
            info = pending.result()  # raises what the store refused
            _log_created(info, rf)
            return info
        self._creating[name] = pending
        pending.add_done_callback(lambda fut: self._created_in_background(name, rf, fut))
        return None

    def being_created(self, name: str) -> bool:
        return name in self._creating

    def _created_in_background(self, name: str, rf: int, fut: asyncio.Future) -> None:
        self._creating.pop(name, None)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            _log_created(fut.result(), rf)
        elif not (isinstance(exc, KafkaError) and exc.error_code == ErrorCode.topic_already_exists):
            # another broker being first is fine; anything else is worth a line
            log.info("creating topic %s failed: %s", name, getattr(exc, "message", None) or exc)

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

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._existing(name, "This server does not host this topic-partition.")
        if name in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic {name} is an internal topic and cannot be deleted")
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        await self.cluster.delete_topic(name)
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
        await self.cluster.add_partitions(name, count, info.partitions)

    def live_brokers(self) -> list[int]:
        return self.cluster.live_broker_ids()

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

    def _existing(self, name: str, message: str) -> TopicInfo:
        info = self.registry.get(name)
        if info is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, message)
        return info


def _log_created(info: TopicInfo, rf: int) -> None:
    log.info("created topic %s with %d partitions, replication factor %d (id %s)", info.name, info.partitions, rf,
             info.topic_id)
