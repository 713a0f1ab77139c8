"""The Kafka broker keys Krait accepts but does not use itself, declared once each: Kafka
4.0's dynamic keys (DynamicBrokerConfig.AllDynamicConfigs, which AlterConfigs stores and
DescribeConfigs reports, as Kafka does: they change nothing here), the static keys a Kafka
server.properties commonly carries (taken silently), and the broker quotas."""

from __future__ import annotations

from storage.config import LOG_CLEANER
from storage.config_def import (
    ACCEPTED,
    CLASS,
    CLUSTER_WIDE,
    DOUBLE,
    HIGH,
    IGNORED,
    INT,
    INT_MAX,
    LIST,
    LONG,
    LONG_MAX,
    MEDIUM,
    PASSWORD,
    PER_BROKER,
    QUOTA,
    READ_ONLY,
    SHORT,
    STRING,
    AtLeast,
    ConfigKey,
)

# Kafka's groups of reconfigurable keys, which broker/config.py's rules name
#: DynamicListenerConfig.ReconfigurableConfigs: per broker, unless cluster-wide (see below)
LISTENER = "listener"
#: SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only per listener (listener.name.<l>.<key>)
SSL_PER_LISTENER = "ssl-per-listener"
#: DynamicBrokerConfig.ListenerMechanismConfigs: listener.name.<l>.<mechanism>.<key>
LISTENER_MECHANISM = "listener-mechanism"
#: DynamicThreadPool (and the network threads): may at most halve or double at a time
THREAD_POOL = "thread-pool"

_SSL = frozenset({LISTENER, SSL_PER_LISTENER})
_LST = frozenset({LISTENER})


def _accepted(name: str, kind: str, default: str | None, dynamic: str = CLUSTER_WIDE, tags: frozenset = frozenset(),
              validator: AtLeast | None = None, importance: str = MEDIUM) -> ConfigKey:
    return ConfigKey(name, kind, default, validator, importance, dynamic, use=ACCEPTED, tags=tags)


ACCEPTED_KEYS: tuple[ConfigKey, ...] = (
    # SslConfigs.RECONFIGURABLE_CONFIGS
    _accepted("ssl.keystore.type", STRING, "JKS", PER_BROKER, _SSL),
    _accepted("ssl.keystore.location", STRING, None, PER_BROKER, _SSL, importance=HIGH),
    _accepted("ssl.keystore.password", PASSWORD, None, PER_BROKER, _SSL, importance=HIGH),
    _accepted("ssl.key.password", PASSWORD, None, PER_BROKER, _SSL, importance=HIGH),
    _accepted("ssl.truststore.type", STRING, "JKS", PER_BROKER, _SSL),
    _accepted("ssl.truststore.location", STRING, None, PER_BROKER, _SSL, importance=HIGH),
    _accepted("ssl.truststore.password", PASSWORD, None, PER_BROKER, _SSL, importance=HIGH),
    _accepted("ssl.keystore.certificate.chain", PASSWORD, None, PER_BROKER, _SSL),
    _accepted("ssl.keystore.key", PASSWORD, None, PER_BROKER, _SSL),
    _accepted("ssl.truststore.certificates", PASSWORD, None, PER_BROKER, _SSL),
    # LogCleaner.ReconfigurableConfigs
    _accepted("log.cleaner.threads", INT, "1", tags=frozenset({LOG_CLEANER}), validator=AtLeast(0)),
    _accepted("log.cleaner.dedupe.buffer.size", LONG, "134217728", tags=frozenset({LOG_CLEANER})),
    _accepted("log.cleaner.io.buffer.load.factor", DOUBLE, "0.9", tags=frozenset({LOG_CLEANER})),
    _accepted("log.cleaner.io.buffer.size", INT, "524288", tags=frozenset({LOG_CLEANER}), validator=AtLeast(0)),
    _accepted("log.cleaner.io.max.bytes.per.second", DOUBLE, "1.7976931348623157E308", tags=frozenset({LOG_CLEANER})),
    # DynamicThreadPool, metrics
    _accepted("num.io.threads", INT, "8", tags=frozenset({THREAD_POOL}), validator=AtLeast(1), importance=HIGH),
    _accepted("num.recovery.threads.per.data.dir", INT, "2", tags=frozenset({THREAD_POOL}), validator=AtLeast(1),
              importance=HIGH),
    _accepted("background.threads", INT, "10", tags=frozenset({THREAD_POOL}), validator=AtLeast(1), importance=HIGH),
    _accepted("metric.reporters", LIST, "org.apache.kafka.common.metrics.JmxReporter"),
    # DynamicListenerConfig, SocketServer
    _accepted("principal.builder.class", CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", PER_BROKER, _LST),
    _accepted("ssl.protocol", STRING, "TLSv1.3", PER_BROKER, _LST),
    _accepted("ssl.provider", STRING, None, PER_BROKER, _LST),
    _accepted("ssl.cipher.suites", LIST, "", PER_BROKER, _LST),
    _accepted("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", PER_BROKER, _LST),
    _accepted("ssl.keymanager.algorithm", STRING, "SunX509", PER_BROKER, _LST),
    _accepted("ssl.trustmanager.algorithm", STRING, "PKIX", PER_BROKER, _LST),
    _accepted("ssl.endpoint.identification.algorithm", STRING, "https", PER_BROKER, _LST),
    _accepted("ssl.secure.random.implementation", STRING, None, PER_BROKER, _LST),
    _accepted("ssl.client.auth", STRING, "none", PER_BROKER, _LST),
    _accepted("ssl.engine.factory.class", CLASS, None, PER_BROKER, _LST),
    _accepted("sasl.jaas.config", PASSWORD, None, PER_BROKER, frozenset({LISTENER, LISTENER_MECHANISM})),
    _accepted("sasl.enabled.mechanisms", LIST, "GSSAPI", PER_BROKER, _LST),
    _accepted("sasl.kerberos.service.name", STRING, None, PER_BROKER, _LST),
    _accepted("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", PER_BROKER, _LST),
    _accepted("sasl.kerberos.ticket.renew.window.factor", DOUBLE, "0.8", PER_BROKER, _LST),
    _accepted("sasl.kerberos.ticket.renew.jitter", DOUBLE, "0.05", PER_BROKER, _LST),
    _accepted("sasl.kerberos.min.time.before.relogin", LONG, "60000", PER_BROKER, _LST),
    _accepted("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", PER_BROKER, _LST),
    _accepted("sasl.login.refresh.window.factor", DOUBLE, "0.8", PER_BROKER, _LST),
    _accepted("sasl.login.refresh.window.jitter", DOUBLE, "0.05", PER_BROKER, _LST),
    _accepted("sasl.login.refresh.min.period.seconds", SHORT, "60", PER_BROKER, _LST),
    _accepted("sasl.login.refresh.buffer.seconds", SHORT, "300", PER_BROKER, _LST),
    _accepted("max.connection.creation.rate", INT, str(INT_MAX), tags=_LST, validator=AtLeast(0)),
    _accepted("num.network.threads", INT, "3", tags=frozenset({LISTENER, THREAD_POOL}), validator=AtLeast(1),
              importance=HIGH),
    # DynamicRemoteLogConfig
    _accepted("remote.log.index.file.cache.total.size.bytes", LONG, "1073741824"),
    _accepted("remote.fetch.max.wait.ms", INT, "500"),
    _accepted("remote.log.manager.copy.max.bytes.per.second", LONG, str(LONG_MAX)),
    _accepted("remote.log.manager.fetch.max.bytes.per.second", LONG, str(LONG_MAX)),
    _accepted("remote.list.offsets.request.timeout.ms", LONG, "30000"),
    # static keys a Kafka server.properties commonly carries that mean nothing to Krait
    *(ConfigKey(name, kind, None, None, HIGH, READ_ONLY, use=IGNORED, tags=tags) for name, kind, tags in (
        ("process.roles", LIST, frozenset()), ("controller.quorum.voters", LIST, frozenset()),
        ("controller.quorum.bootstrap.servers", LIST, frozenset()), ("controller.listener.names", STRING, frozenset()),
        ("socket.send.buffer.bytes", INT, frozenset()), ("socket.receive.buffer.bytes", INT, frozenset()),
        ("sasl.login.callback.handler.class", CLASS, frozenset({LISTENER_MECHANISM})),
        ("sasl.login.class", CLASS, frozenset({LISTENER_MECHANISM})),
        ("sasl.server.callback.handler.class", CLASS, frozenset({LISTENER_MECHANISM})))),
    # QuotaConfig.brokerQuotaConfigs: dynamic (DynamicConfig.Broker) though not KafkaConfig keys
    *(ConfigKey(name, LONG, str(LONG_MAX), None, MEDIUM, CLUSTER_WIDE, use=QUOTA) for name in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second")),
)
