"""Tables of Kafka broker keys that Krait accepts dynamically but does not use itself
(Kafka 4.0's DynamicBrokerConfig sets), with their Kafka types and defaults. Data only."""

from __future__ import annotations

from storage.config import INT_MAX, LONG_MAX

# Broker keys Kafka changes without a restart (DynamicBrokerConfig.AllDynamicConfigs, Kafka
# 4.0) that Krait has no use for: name -> (Kafka type, Kafka default). AlterConfigs stores
# them and DescribeConfigs reports them, as Kafka does; they change nothing here.
DYNAMIC_ONLY_KEYS: dict[str, tuple[str, str | None]] = {
    # SslConfigs.RECONFIGURABLE_CONFIGS: per listener only (listener.name.<l>.<key>)
    "ssl.keystore.type": ("STRING", "JKS"), "ssl.keystore.location": ("STRING", None),
    "ssl.keystore.password": ("PASSWORD", None), "ssl.key.password": ("PASSWORD", None),
    "ssl.truststore.type": ("STRING", "JKS"), "ssl.truststore.location": ("STRING", None),
    "ssl.truststore.password": ("PASSWORD", None), "ssl.keystore.certificate.chain": ("PASSWORD", None),
    "ssl.keystore.key": ("PASSWORD", None), "ssl.truststore.certificates": ("PASSWORD", None),
    # LogCleaner.ReconfigurableConfigs
    "log.cleaner.threads": ("INT", "1"), "log.cleaner.dedupe.buffer.size": ("LONG", "134217728"),
    "log.cleaner.io.buffer.load.factor": ("DOUBLE", "0.9"), "log.cleaner.io.buffer.size": ("INT", "524288"),
    "log.cleaner.io.max.bytes.per.second": ("DOUBLE", "1.7976931348623157E308"),
    # DynamicLogConfig: topic-config synonyms Krait's storage does not implement
    "compression.gzip.level": ("INT", "-1"), "compression.lz4.level": ("INT", "9"),
    "compression.zstd.level": ("INT", "3"), "log.local.retention.ms": ("LONG", "-2"),
    "log.local.retention.bytes": ("LONG", "-2"),
    # DynamicThreadPool, metrics, DynamicListenerConfig, SocketServer
    "num.io.threads": ("INT", "8"), "num.replica.fetchers": ("INT", "1"),
    "num.recovery.threads.per.data.dir": ("INT", "2"), "background.threads": ("INT", "10"),
    "metric.reporters": ("LIST", "org.apache.kafka.common.metrics.JmxReporter"),
    "principal.builder.class": ("CLASS", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    "ssl.protocol": ("STRING", "TLSv1.3"), "ssl.provider": ("STRING", None), "ssl.cipher.suites": ("LIST", ""),
    "ssl.enabled.protocols": ("LIST", "TLSv1.2,TLSv1.3"), "ssl.keymanager.algorithm": ("STRING", "SunX509"),
    "ssl.trustmanager.algorithm": ("STRING", "PKIX"), "ssl.endpoint.identification.algorithm": ("STRING", "https"),
    "ssl.secure.random.implementation": ("STRING", None), "ssl.client.auth": ("STRING", "none"),
    "ssl.engine.factory.class": ("CLASS", None), "sasl.mechanism.inter.broker.protocol": ("STRING", "GSSAPI"),
    "sasl.jaas.config": ("PASSWORD", None), "sasl.enabled.mechanisms": ("LIST", "GSSAPI"),
    "sasl.kerberos.service.name": ("STRING", None), "sasl.kerberos.kinit.cmd": ("STRING", "/usr/bin/kinit"),
    "sasl.kerberos.ticket.renew.window.factor": ("DOUBLE", "0.8"), "sasl.kerberos.ticket.renew.jitter": ("DOUBLE", "0.05"),
    "sasl.kerberos.min.time.before.relogin": ("LONG", "60000"), "sasl.kerberos.principal.to.local.rules": ("LIST", "DEFAULT"),
    "sasl.login.refresh.window.factor": ("DOUBLE", "0.8"), "sasl.login.refresh.window.jitter": ("DOUBLE", "0.05"),
    "sasl.login.refresh.min.period.seconds": ("SHORT", "60"), "sasl.login.refresh.buffer.seconds": ("SHORT", "300"),
    "max.connections": ("INT", str(INT_MAX)), "max.connection.creation.rate": ("INT", str(INT_MAX)),
    "num.network.threads": ("INT", "3"), "max.connections.per.ip": ("INT", str(INT_MAX)),
    "max.connections.per.ip.overrides": ("STRING", ""),
    # DynamicProducerStateManagerConfig, DynamicRemoteLogConfig
    "transaction.partition.verification.enable": ("BOOLEAN", "true"),
    "remote.log.index.file.cache.total.size.bytes": ("LONG", "1073741824"), "remote.fetch.max.wait.ms": ("INT", "500"),
    "remote.log.manager.copy.max.bytes.per.second": ("LONG", str(LONG_MAX)),
    "remote.log.manager.fetch.max.bytes.per.second": ("LONG", str(LONG_MAX)),
    "remote.list.offsets.request.timeout.ms": ("LONG", "30000"),
}

# QuotaConfig.brokerQuotaConfigs: accepted dynamically (DynamicConfig.Broker) although not
# KafkaConfig keys, so Kafka lists them only once set, and as read-only.
BROKER_QUOTA_KEYS: dict[str, tuple[str, str | None]] = {
    "leader.replication.throttled.rate": ("LONG", str(LONG_MAX)),
    "follower.replication.throttled.rate": ("LONG", str(LONG_MAX)),
    "replica.alter.log.dirs.io.max.bytes.per.second": ("LONG", str(LONG_MAX)),
}
