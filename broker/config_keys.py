"""The broker's config keys Krait reads, declared once each (Kafka's KafkaConfig,
SocketServerConfigs, GroupCoordinatorConfig, TransactionLogConfig, ReplicationConfigs, ...),
and BROKER_KEYS: every broker key Krait knows, from these, the storage keys (storage/config.py)
and the keys it accepts without using them (broker/dynamic_keys.py).

A declaration (storage/config_def.py's ConfigKey) holds the key's Kafka type, default,
validator, importance, dynamic update mode, topic synonym and doc; server.properties parsing,
DescribeConfigs, the dynamic-update rules and the README's table are derived from it
(``python -m broker.config_keys`` prints that table). Defaults are Kafka's, except
``listeners``, ``log.dir`` and ``broker.id``, which the brief pins to a local embedded broker.
"""

from __future__ import annotations

import sys

from storage.config import LOG_CLEANER, LOG_KEYS
from storage.config_def import (
    ACCEPTED,
    BOOLEAN,
    CLUSTER_WIDE,
    HIGH,
    IGNORED,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LOW,
    MEDIUM,
    PER_BROKER,
    QUOTA,
    READ_ONLY,
    SHORT,
    STRING,
    USED,
    AtLeast,
    Between,
    ConfigKey,
    OneOf,
    walk,
)

from .dynamic_keys import ACCEPTED_KEYS, LISTENER, LISTENER_MECHANISM, THREAD_POOL

__all__ = ["BROKER_KEYS", "LOG_CLEANER", "LISTENER", "LISTENER_MECHANISM", "RESTART_ONLY", "THREAD_POOL",
           "readme_table"]

#: dynamic in Kafka, but Krait binds its listeners once at start-up: refused rather than
#: stored and silently not applied
RESTART_ONLY = "restart-only"
_LISTENER_KEY = frozenset({LISTENER, RESTART_ONLY})
_PROTOCOLS = ("SASL_SSL", "PLAINTEXT", "SSL", "SASL_PLAINTEXT")

_SERVER_KEYS: tuple[ConfigKey, ...] = (
    # --- listeners and security
    ConfigKey("listeners", STRING, "PLAINTEXT://127.0.0.1:9092", None, HIGH, PER_BROKER,
              "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or named listeners", as_list=True, tags=_LISTENER_KEY),
    # Kafka 4 no longer changes advertised.listeners dynamically (DynamicListenerConfig)
    ConfigKey("advertised.listeners", STRING, None, None, HIGH, READ_ONLY,
              "what Metadata returns (default: listeners)", as_list=True),
    ConfigKey("listener.security.protocol.map", STRING, ",".join(f"{p}:{p}" for p in _PROTOCOLS), None, LOW,
              PER_BROKER, "listener name -> security protocol", as_list=True, tags=_LISTENER_KEY),
    ConfigKey("inter.broker.listener.name", STRING, None, None, MEDIUM, READ_ONLY,
              "the listener brokers reach each other on"),
    ConfigKey("security.inter.broker.protocol", STRING, "PLAINTEXT", None, MEDIUM, READ_ONLY,
              "the inter-broker protocol when no listener name is given"),
    ConfigKey("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", None, MEDIUM, PER_BROKER,
              "SASL mechanism between brokers", tags=frozenset({LISTENER})),
    ConfigKey("connections.max.reauth.ms", LONG, "0", None, MEDIUM, READ_ONLY,
              "SASL re-authentication interval (0: never)", tags=frozenset({LISTENER_MECHANISM})),
    ConfigKey("connection.failed.authentication.delay.ms", INT, "100", None, LOW, READ_ONLY,
              "delay before a failed authentication is answered"),
    ConfigKey("sasl.server.max.receive.size", INT, "524288", None, LOW, READ_ONLY,
              "largest SASL packet accepted before authentication"),
    ConfigKey("max.connections", INT, str(INT_MAX), AtLeast(0), MEDIUM, CLUSTER_WIDE, "connection limit",
              tags=frozenset({LISTENER})),
    ConfigKey("max.connections.per.ip", INT, str(INT_MAX), AtLeast(0), MEDIUM, CLUSTER_WIDE,
              "connection limit per client address"),
    ConfigKey("max.connections.per.ip.overrides", STRING, "", None, MEDIUM, CLUSTER_WIDE,
              "host:limit,... exceptions to it"),
    ConfigKey("authorizer.class.name", STRING, "", None, LOW, READ_ONLY,
              "set (to StandardAuthorizer or AclAuthorizer) to enforce ACLs"),
    ConfigKey("super.users", STRING, None, None, LOW, READ_ONLY, "User:a;User:b allowed everything"),
    ConfigKey("allow.everyone.if.no.acl.found", BOOLEAN, "false", None, LOW, READ_ONLY,
              "allow a resource no ACL names"),
    ConfigKey("quota.window.num", INT, "11", AtLeast(1), LOW, READ_ONLY, "samples kept per quota"),
    ConfigKey("quota.window.size.seconds", INT, "1", AtLeast(1), LOW, READ_ONLY, "length of a quota sample"),
    # --- the broker, its log dirs and topics
    ConfigKey("node.id", INT, None, None, HIGH, READ_ONLY, "this broker's id (over broker.id)"),
    ConfigKey("broker.id", INT, "1", None, HIGH, READ_ONLY, "this broker's id"),
    ConfigKey("log.dirs", STRING, None, None, HIGH, READ_ONLY, "partition directories (over log.dir)",
              as_list=True),
    ConfigKey("log.dir", STRING, "./data", None, HIGH, READ_ONLY,
              "the first also holds krait-metadata.json (topics, ids, configs)", as_list=True),
    ConfigKey("num.partitions", INT, "1", AtLeast(1), MEDIUM, READ_ONLY, "partitions of auto-created topics"),
    ConfigKey("default.replication.factor", INT, "1", AtLeast(1), MEDIUM, READ_ONLY,
              "replicas of auto-created topics (at most the live brokers)"),
    ConfigKey("auto.create.topics.enable", BOOLEAN, "true", None, HIGH, READ_ONLY,
              "create a topic at its first Metadata or Produce"),
    ConfigKey("delete.topic.enable", BOOLEAN, "true", None, HIGH, READ_ONLY, "allow DeleteTopics"),
    ConfigKey("socket.request.max.bytes", INT, "104857600", AtLeast(1), HIGH, READ_ONLY,
              "largest request, checked before it is read"),
    ConfigKey("log.retention.check.interval.ms", LONG, "300000", None, MEDIUM, READ_ONLY,
              "how often retention runs"),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", INT, "60000", None, HIGH, READ_ONLY,
              "how often recovery points are checkpointed"),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", INT, "60000", None, HIGH, READ_ONLY,
              "how often log start offsets are checkpointed"),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", LONG, "5000", None, HIGH, READ_ONLY,
              "how often high watermarks are checkpointed (where the Spark source stops reading)"),
    ConfigKey("log.cleaner.enable", BOOLEAN, "true", None, MEDIUM, READ_ONLY, "compact compacted topics"),
    ConfigKey("log.cleaner.backoff.ms", LONG, "15000", AtLeast(0), MEDIUM, CLUSTER_WIDE,
              "pause of the cleaner when there is nothing to compact", tags=frozenset({LOG_CLEANER})),
    ConfigKey("max.request.partition.size.limit", INT, "2000", None, LOW, READ_ONLY,
              "page size cap of DescribeTopicPartitions"),
    # --- groups
    ConfigKey("offsets.topic.num.partitions", INT, "50", AtLeast(1), HIGH, READ_ONLY,
              "partitions of __consumer_offsets"),
    ConfigKey("offsets.topic.replication.factor", SHORT, "3", None, HIGH, READ_ONLY,
              "replicas of __consumer_offsets (at most the live brokers)"),
    ConfigKey("offsets.topic.segment.bytes", INT, "104857600", None, HIGH, READ_ONLY,
              "segment size of __consumer_offsets"),
    ConfigKey("offsets.retention.minutes", INT, "10080", None, HIGH, READ_ONLY,
              "how long an empty group's offsets are kept"),
    ConfigKey("offsets.retention.check.interval.ms", LONG, "600000", None, HIGH, READ_ONLY,
              "how often expired offsets are removed"),
    ConfigKey("offset.metadata.max.bytes", INT, "4096", None, HIGH, READ_ONLY, "largest commit metadata"),
    ConfigKey("offsets.commit.timeout.ms", INT, "5000", None, HIGH, READ_ONLY,
              "how long a commit waits for its replicas"),
    ConfigKey("group.min.session.timeout.ms", INT, "6000", None, MEDIUM, READ_ONLY,
              "shortest classic-group session timeout"),
    ConfigKey("group.max.session.timeout.ms", INT, "1800000", None, MEDIUM, READ_ONLY,
              "longest classic-group session timeout"),
    ConfigKey("group.initial.rebalance.delay.ms", INT, "3000", None, MEDIUM, READ_ONLY,
              "wait for more members before a new group's first rebalance"),
    ConfigKey("group.max.size", INT, str(INT_MAX), None, MEDIUM, READ_ONLY, "members of a classic group"),
    ConfigKey("group.coordinator.rebalance.protocols", LIST, "classic,consumer", None, MEDIUM, READ_ONLY,
              "without consumer, ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION"),
    ConfigKey("group.consumer.session.timeout.ms", INT, "45000", None, MEDIUM, READ_ONLY,
              "consumer-group (KIP-848) session timeout"),
    ConfigKey("group.consumer.min.session.timeout.ms", INT, "45000", None, MEDIUM, READ_ONLY,
              "shortest consumer-group session timeout"),
    ConfigKey("group.consumer.max.session.timeout.ms", INT, "60000", None, MEDIUM, READ_ONLY,
              "longest consumer-group session timeout"),
    ConfigKey("group.consumer.heartbeat.interval.ms", INT, "5000", None, MEDIUM, READ_ONLY,
              "consumer-group heartbeat interval (below the session timeout)"),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", INT, "5000", None, MEDIUM, READ_ONLY,
              "shortest consumer-group heartbeat interval"),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", INT, "15000", None, MEDIUM, READ_ONLY,
              "longest consumer-group heartbeat interval"),
    ConfigKey("group.consumer.max.size", INT, str(INT_MAX), None, MEDIUM, READ_ONLY, "members of a consumer group"),
    ConfigKey("group.consumer.assignors", LIST, "uniform,range", None, MEDIUM, READ_ONLY,
              "server-side assignors; the first is the default"),
    ConfigKey("group.consumer.migration.policy", STRING, "bidirectional", None, MEDIUM, READ_ONLY,
              "classic <-> consumer group conversion"),
    # --- share groups (KIP-932): GroupCoordinatorConfig, ShareGroupConfig, ShareCoordinatorConfig
    ConfigKey("group.share.session.timeout.ms", INT, "45000", AtLeast(1), MEDIUM, READ_ONLY,
              "share-group session timeout"),
    ConfigKey("group.share.min.session.timeout.ms", INT, "45000", AtLeast(1), MEDIUM, READ_ONLY,
              "shortest share-group session timeout"),
    ConfigKey("group.share.max.session.timeout.ms", INT, "60000", AtLeast(1), MEDIUM, READ_ONLY,
              "longest share-group session timeout"),
    ConfigKey("group.share.heartbeat.interval.ms", INT, "5000", AtLeast(1), MEDIUM, READ_ONLY,
              "share-group heartbeat interval (below the session timeout)"),
    ConfigKey("group.share.min.heartbeat.interval.ms", INT, "5000", AtLeast(1), MEDIUM, READ_ONLY,
              "shortest share-group heartbeat interval"),
    ConfigKey("group.share.max.heartbeat.interval.ms", INT, "15000", AtLeast(1), MEDIUM, READ_ONLY,
              "longest share-group heartbeat interval"),
    ConfigKey("group.share.max.size", INT, "200", Between(1, 1000), MEDIUM, READ_ONLY, "members of a share group"),
    ConfigKey("group.share.assignors", LIST, "simple", None, MEDIUM, READ_ONLY,
              "share-group assignors; the first is the default"),
    ConfigKey("group.share.record.lock.duration.ms", INT, "30000", Between(1000, 3600000), MEDIUM, READ_ONLY,
              "how long a share consumer holds a record it was given"),
    ConfigKey("group.share.min.record.lock.duration.ms", INT, "15000", Between(1000, 30000), MEDIUM, READ_ONLY,
              "shortest record lock a group may set"),
    ConfigKey("group.share.max.record.lock.duration.ms", INT, "60000", Between(30000, 3600000), MEDIUM, READ_ONLY,
              "longest record lock a group may set"),
    ConfigKey("group.share.delivery.count.limit", INT, "5", Between(2, 10), MEDIUM, READ_ONLY,
              "deliveries of a record before it is archived"),
    ConfigKey("group.share.partition.max.record.locks", INT, "2000", Between(100, 10000), MEDIUM, READ_ONLY,
              "records of a share-partition in flight at once"),
    ConfigKey("group.share.max.share.sessions", INT, "2000", AtLeast(1), MEDIUM, READ_ONLY,
              "share sessions per broker"),
    ConfigKey("share.coordinator.state.topic.num.partitions", INT, "50", AtLeast(1), HIGH, READ_ONLY,
              "partitions of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.replication.factor", SHORT, "3", AtLeast(1), HIGH, READ_ONLY,
              "replicas of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.min.isr", SHORT, "2", AtLeast(1), HIGH, READ_ONLY,
              "min.insync.replicas of __share_group_state"),
    ConfigKey("share.coordinator.state.topic.segment.bytes", INT, "104857600", AtLeast(1), HIGH, READ_ONLY,
              "segment size of __share_group_state"),
    ConfigKey("share.coordinator.snapshot.update.records.per.snapshot", INT, "500", Between(0, 500), MEDIUM,
              READ_ONLY, "ShareUpdate records between two ShareSnapshot records of a share-partition"),
    # --- transactions and producer ids
    ConfigKey("transactional.id.expiration.ms", INT, "604800000", None, HIGH, READ_ONLY,
              "how long an idle transactional id is kept"),
    ConfigKey("transaction.state.log.num.partitions", INT, "50", None, HIGH, READ_ONLY,
              "partitions of __transaction_state"),
    ConfigKey("transaction.state.log.replication.factor", SHORT, "3", None, HIGH, READ_ONLY,
              "replicas of __transaction_state"),
    ConfigKey("transaction.state.log.min.isr", INT, "2", None, HIGH, READ_ONLY,
              "min.insync.replicas of __transaction_state"),
    ConfigKey("transaction.state.log.segment.bytes", INT, "104857600", None, HIGH, READ_ONLY,
              "segment size of __transaction_state"),
    ConfigKey("transaction.max.timeout.ms", INT, "900000", None, HIGH, READ_ONLY, "longest transaction timeout"),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", None, LOW, READ_ONLY,
              "how often timed-out transactions are aborted"),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000", None, LOW, READ_ONLY,
              "how often expired transactional ids are removed"),
    ConfigKey("transaction.partition.verification.enable", BOOLEAN, "true", None, LOW, CLUSTER_WIDE,
              "a transactional write needs its partition added first (KIP-890)"),
    ConfigKey("producer.id.expiration.ms", INT, "86400000", AtLeast(1), LOW, CLUSTER_WIDE,
              "how long an idle producer's state is kept"),
    # --- cluster mode
    ConfigKey("cluster.id", STRING, None, None, MEDIUM, READ_ONLY, "the cluster's id"),
    ConfigKey("zookeeper.connect", STRING, None, None, HIGH, READ_ONLY, "cluster mode (empty: a single broker)"),
    ConfigKey("zookeeper.session.timeout.ms", INT, "18000", None, HIGH, READ_ONLY, "ZooKeeper session timeout"),
    ConfigKey("zookeeper.connection.timeout.ms", INT, None, None, HIGH, READ_ONLY,
              "ZooKeeper connection timeout (default: the session timeout)"),
    ConfigKey("replica.lag.time.max.ms", LONG, "30000", None, HIGH, READ_ONLY,
              "a follower that has not caught up for this long leaves the ISR"),
    ConfigKey("replica.fetch.max.bytes", INT, "1048576", None, MEDIUM, READ_ONLY, "follower fetch size per partition"),
    ConfigKey("replica.fetch.response.max.bytes", INT, "10485760", None, MEDIUM, READ_ONLY,
              "follower fetch size per response"),
    ConfigKey("replica.fetch.wait.max.ms", INT, "500", None, MEDIUM, READ_ONLY, "follower fetch long-poll"),
    ConfigKey("replica.socket.timeout.ms", INT, "30000", None, HIGH, READ_ONLY,
              "a follower fetch unanswered this long is retried on a new connection"),
    ConfigKey("replica.fetch.backoff.ms", INT, "1000", None, MEDIUM, READ_ONLY, "pause after a failed follower fetch"),
    ConfigKey("num.replica.fetchers", INT, "1", None, HIGH, CLUSTER_WIDE, "fetcher connections per leader",
              tags=frozenset({THREAD_POOL})),
    ConfigKey("controlled.shutdown.enable", BOOLEAN, "true", None, MEDIUM, READ_ONLY,
              "move leadership away before stopping"),
    ConfigKey("auto.leader.rebalance.enable", BOOLEAN, "true", None, HIGH, READ_ONLY,
              "move leadership back to preferred replicas"),
    ConfigKey("leader.imbalance.check.interval.seconds", LONG, "300", None, HIGH, READ_ONLY,
              "how often leadership balance is checked"),
    ConfigKey("leader.imbalance.per.broker.percentage", INT, "10", None, HIGH, READ_ONLY,
              "leader imbalance (%) that moves leadership back"),
    # --- Krait's own
    ConfigKey("krait.http.listener", STRING, "127.0.0.1:9644", None, MEDIUM, READ_ONLY,
              "host:port of /metrics, /healthz and /readyz (empty disables it)"),
    ConfigKey("krait.log.format", STRING, "text", OneOf(("text", "json")), MEDIUM, READ_ONLY,
              "log lines as text or JSON lines"),
    # --- the built-in Schema Registry (Confluent's REST API v1)
    ConfigKey("krait.schema.registry.listener", STRING, "127.0.0.1:8081", None, MEDIUM, READ_ONLY,
              "host:port (http://, https://) of the Schema Registry's REST API (empty disables it)"),
    ConfigKey("krait.schema.registry.topic", STRING, "_schemas", None, LOW, READ_ONLY,
              "the compacted topic that stores the registry (Confluent's kafkastore.topic)"),
    ConfigKey("krait.schema.registry.compatibility.level", STRING, "BACKWARD",
              OneOf(("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                     "FULL_TRANSITIVE")), MEDIUM, READ_ONLY,
              "the compatibility level of subjects without one (Confluent's schema.compatibility.level)"),
    ConfigKey("krait.schema.registry.timeout.ms", INT, "10000", AtLeast(1), LOW, READ_ONLY,
              "how long a registry write waits for the schema store to replicate it"),
    # --- Iceberg table topics (topics with krait.iceberg.mode other than disabled)
    ConfigKey("krait.iceberg.commit.interval.ms", LONG, "10000", AtLeast(100), MEDIUM, READ_ONLY,
              "how often a partition leader commits its new records to the topic's Iceberg table"),
    ConfigKey("krait.iceberg.catalog.uri", STRING, "", None, MEDIUM, READ_ONLY,
              "the Iceberg catalog: a SQLAlchemy URL (SQL catalog) or http(s) (REST); empty: SQLite "
              "under the first log dir"),
    ConfigKey("krait.iceberg.warehouse", STRING, "", None, MEDIUM, READ_ONLY,
              "where table files go (a path or URI); empty: under the first log dir"),
    ConfigKey("krait.iceberg.namespace", STRING, "krait", None, LOW, READ_ONLY,
              "the catalog namespace of the topics' tables"),
    # table upkeep (tables/upkeep.py): compaction of small files, snapshot expiry, orphan files
    ConfigKey("krait.iceberg.upkeep.interval.ms", LONG, "60000", AtLeast(1000), LOW, READ_ONLY,
              "how often a broker runs the upkeep of the Iceberg tables it writes (compaction, expiry, orphans)"),
    ConfigKey("krait.iceberg.compaction.target.file.bytes", LONG, "134217728", AtLeast(1 << 20), LOW, READ_ONLY,
              "compaction rewrites a table partition's small data files into Parquet files of about this size"),
    ConfigKey("krait.iceberg.compaction.min.input.files", INT, "5", AtLeast(2), LOW, READ_ONLY,
              "a table partition being written is compacted once its newest run of small files (each older one "
              "no larger than the newer ones together) counts this many; one that got no file for 15 minutes "
              "from 2 small files"),
    ConfigKey("krait.iceberg.snapshot.retention.ms", LONG, "3600000", AtLeast(0), MEDIUM, READ_ONLY,
              "table snapshots older than this are expired and the files only they used deleted; the current "
              "snapshot and its parent are always kept (1 hour, not Iceberg's 5 days: a commit every 10 s costs "
              "more with every snapshot kept, see tables/upkeep.py)"),
    ConfigKey("krait.iceberg.orphan.file.age.ms", LONG, "259200000", AtLeast(60000), LOW, READ_ONLY,
              "data files no snapshot references are deleted once this old (a failed commit's; Iceberg's "
              "remove_orphan_files default, 3 days)"),
)


def _index(declared: tuple[ConfigKey, ...]) -> dict[str, ConfigKey]:
    out: dict[str, ConfigKey] = {}
    for k in walk(declared):
        if k.topic_only:
            continue
        if k.name in out:  # tests/broker/test_config_keys.py checks this too
            raise AssertionError(f"config key {k.name} is declared twice")
        out[k.name] = k
    return out


#: every broker key Krait knows, by name
BROKER_KEYS: dict[str, ConfigKey] = _index((*_SERVER_KEYS, *LOG_KEYS, *ACCEPTED_KEYS))


def _cell(v: str | None) -> str:
    return "" if v is None else f"`{v}`" if v != "" else '`""`'


def readme_table() -> str:
    """The README's table of the keys Krait reads, then the ones it accepts without use."""
    rows = ["| key | type | default | update mode | topic config | |", "|---|---|---|---|---|---|"]
    for k in (k for k in BROKER_KEYS.values() if k.use == USED):  # in declaration order: by subject
        valid = f" {k.validator}" if k.validator is not None else ""
        rows.append(f"| `{k.name}` | {k.type.lower()}{valid} | {_cell(k.default)} | {k.dynamic} | "
                    f"{_cell(k.topic_name)} | {k.doc} |")

    def names(use: str) -> str:
        return ", ".join(f"`{n}`" for n in sorted(n for n, k in BROKER_KEYS.items() if k.use == use))

    return "\n".join([
        *rows, "",
        f"Accepted, stored and reported, but unused (Kafka's dynamic keys): {names(ACCEPTED)}.", "",
        f"Accepted silently from server.properties: {names(IGNORED)}.", "",
        f"Broker quotas (settable, reported once set): {names(QUOTA)}.", ""])


if __name__ == "__main__":
    sys.stdout.write(readme_table())
