"""Config APIs as real clients see them: IncrementalAlterConfigs APPEND/SUBTRACT on list
configs, and dynamic broker configs (per broker and cluster-wide default) with Kafka's
sources, synonyms, refusals, persistence and effects.

confluent-kafka drives most cases; kafka-python where its admin client is the natural
tool (alter_configs on a broker, synonym lists); the Java client for the cluster-wide
default resource (named ""), which librdkafka cannot address.
"""

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from tests.krait_harness import BrokerProcess, JavaProgram

TOPIC, BROKER = ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _create(admin: AdminClient, name: str, config: dict | None = None) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(10)


def _alter(admin: AdminClient, rtype, name: str, *ops, validate_only: bool = False) -> None:
    """IncrementalAlterConfigs; ops are (key, value, op) triples. Raises KafkaException."""
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)


def _refused(admin: AdminClient, rtype, name: str, *ops) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        _alter(admin, rtype, name, *ops)
    return ei.value.args[0]


def _describe(admin: AdminClient, rtype, name: str) -> dict:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(10)


# --- APPEND / SUBTRACT on list configs ---------------------------------------------------


def test_append_subtract_keep_order_and_skip_present_values(broker):
    admin = _admin(broker)
    t = _topic("append")
    _create(admin, t, {"cleanup.policy": "delete"})

    def policy() -> str:
        entry = _describe(admin, TOPIC, t)["cleanup.policy"]
        assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return entry.value

    _alter(admin, TOPIC, t, ("cleanup.policy", "compact", APPEND))
    assert policy() == "delete,compact"  # appended after, not re-sorted
    _alter(admin, TOPIC, t, ("cleanup.policy", "delete", APPEND))
    assert policy() == "delete,compact"  # already present: unchanged
    _alter(admin, TOPIC, t, ("cleanup.policy", "compact,delete", APPEND))
    assert policy() == "delete,compact"
    _alter(admin, TOPIC, t, ("cleanup.policy", "delete", SUBTRACT))
    assert policy() == "compact"
    _alter(admin, TOPIC, t, ("cleanup.policy", "delete", APPEND))
    assert policy() == "compact,delete"
    _alter(admin, TOPIC, t, ("cleanup.policy", "compact,delete", SUBTRACT))
    assert policy() == ""  # an empty policy is allowed (Kafka 4.0: no deletion, no compaction)

    # without an override, APPEND starts from Kafka's default ("delete")
    t2 = _topic("append-default")
    _create(admin, t2)
    _alter(admin, TOPIC, t2, ("cleanup.policy", "compact", APPEND))
    assert _describe(admin, TOPIC, t2)["cleanup.policy"].value == "delete,compact"
    # a value outside the list is still refused after the merge
    err = _refused(admin, TOPIC, t2, ("cleanup.policy", "sometimes", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG and "cleanup.policy" in err.str()


def test_append_subtract_on_non_list_config_is_invalid_config(broker):
    admin = _admin(broker)
    t = _topic("append-nonlist")
    _create(admin, t, {"retention.ms": "60000"})
    err = _refused(admin, TOPIC, t, ("retention.ms", "5", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Can't APPEND to key retention.ms because its type is not LIST."
    err = _refused(admin, TOPIC, t, ("retention.ms", "5", SUBTRACT))
    assert err.str() == "Can't SUBTRACT to key retention.ms because its type is not LIST."
    assert _describe(admin, TOPIC, t)["retention.ms"].value == "60000"
    # the broker resource answers with the broker-side wording, as Kafka's does
    err = _refused(admin, BROKER, "1", ("log.retention.ms", "5", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Config value append is not allowed for config key: log.retention.ms"


# --- dynamic broker configs --------------------------------------------------------------


def test_dynamic_broker_config_is_the_new_topic_default(fresh_broker):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import KafkaAdminClient

    admin = _admin(fresh_broker)
    t = _topic("dyn")
    _create(admin, t)
    _alter(admin, BROKER, "1", ("log.retention.ms", "3600000", SET))
    entry = _describe(admin, TOPIC, t)["retention.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    entry = _describe(admin, BROKER, "1")["log.retention.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                                               False)

    # synonyms in Kafka's order: dynamic per-broker, dynamic default, static, default
    kp = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        got = kp.describe_configs([KpResource("TOPIC", t, {"retention.ms": None})], include_synonyms=True)
        syn = got["topic"][t]["retention.ms"]["synonyms"]
        assert [(s["name"], s["value"], s["source"]) for s in syn] == [
            ("log.retention.ms", "3600000", "DYNAMIC_BROKER_CONFIG"),
            ("log.retention.hours", "168", "DEFAULT_CONFIG")]
    finally:
        kp.close()

    _alter(admin, BROKER, "1", ("log.retention.ms", None, DELETE))
    entry = _describe(admin, TOPIC, t)["retention.ms"]
    assert (entry.value, entry.source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert _describe(admin, BROKER, "1")["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_keys_krait_does_not_use_are_stored_and_reported(fresh_broker):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import KafkaAdminClient

    admin = _admin(fresh_broker)
    assert _describe(admin, BROKER, "1")["log.cleaner.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    _alter(admin, BROKER, "1", ("log.cleaner.threads", "2", SET), ("num.io.threads", "16", SET),
           ("my.plugin.setting", "x", SET))
    cfg = _describe(admin, BROKER, "1")
    for key, value in (("log.cleaner.threads", "2"), ("num.io.threads", "16")):
        assert (cfg[key].value, cfg[key].source, cfg[key].is_read_only) == (
            value, ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    # a key Kafka does not know is kept too, and shown as sensitive since its type is unknown
    custom = cfg["my.plugin.setting"]
    assert (custom.value, custom.is_sensitive, custom.source) == (None, True, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # Kafka's reconfiguration checks: a thread count may at most double
    err = _refused(admin, BROKER, "1", ("log.cleaner.threads", "5", SET))
    assert err.code() == KafkaError.INVALID_REQUEST
    assert err.str() == ("Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot be "
                         "increased to more than double the current value 2 for configuration Invalid dynamic "
                         "configuration")

    # kafka-python checks the key is a dynamic one (DescribeConfigs read_only=false) first
    kp = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        out = kp.alter_configs([KpResource("BROKER", "1", {"background.threads": "12"})])
        assert out == {"broker": {"1": "OK"}}
    finally:
        kp.close()
    assert _describe(admin, BROKER, "1")["background.threads"].value == "12"


def test_static_only_and_invalid_broker_configs_are_refused(broker):
    admin = _admin(broker)
    for key, value in (("broker.id", "7"), ("log.dirs", "/tmp/elsewhere"), ("log.retention.hours", "1")):
        err = _refused(admin, BROKER, "1", (key, value, SET))
        assert err.code() == KafkaError.INVALID_REQUEST
        assert err.str() == f"Cannot update these configs dynamically: Set({key})"
    err = _refused(admin, BROKER, "1", ("ssl.keystore.password", "x", SET))
    assert err.str() == ("These security configs can be dynamically updated only per-listener using the listener "
                         "prefix: Set(ssl.keystore.password)")
    err = _refused(admin, BROKER, "1", ("log.retention.ms", "soon", SET))
    assert (err.code(), err.str()) == (KafkaError.INVALID_REQUEST,
                                       "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
    assert _describe(admin, BROKER, "1")["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_message_max_bytes_limits_produce(fresh_broker, java_configs):
    admin = _admin(fresh_broker)
    t = _topic("maxbytes")
    _create(admin, t)

    def produce(size: int):
        p = Producer({"bootstrap.servers": fresh_broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 10000})
        errors = []
        p.produce(t, value=b"x" * size, on_delivery=lambda err, msg: errors.append(err))
        p.flush(15)
        return errors[0]

    def max_message_bytes() -> tuple:
        entry = _describe(admin, TOPIC, t)["max.message.bytes"]
        return entry.value, entry.source

    assert produce(3000) is None
    _alter(admin, BROKER, "1", ("message.max.bytes", "1000", SET))
    assert max_message_bytes() == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    err = produce(3000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    _alter(admin, BROKER, "1", ("message.max.bytes", None, DELETE))
    assert produce(3000) is None
    # the same through the cluster-wide default
    assert java_configs(fresh_broker.bootstrap, [["alter", "BROKER", "", "SET", "message.max.bytes", "1000"]]) == ["OK"]
    assert max_message_bytes() == ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    err = produce(3000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert java_configs(fresh_broker.bootstrap, [["alter", "BROKER", "", "DELETE", "message.max.bytes"]]) == ["OK"]
    assert max_message_bytes() == ("1048588", ConfigSource.DEFAULT_CONFIG.value)
    assert produce(3000) is None


def test_sensitive_keys_are_reported_without_value(fresh_broker):
    admin = _admin(fresh_broker)
    key = "listener.name.plaintext.ssl.key.password"
    _alter(admin, BROKER, "1", (key, "s3cret", SET))
    entry = _describe(admin, BROKER, "1")[key]
    assert (entry.value, entry.is_sensitive, entry.source) == (None, True, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert all(s.value is None for s in entry.synonyms.values())


def test_validate_only_changes_nothing(fresh_broker):
    admin = _admin(fresh_broker)
    t = _topic("validate")
    _create(admin, t, {"cleanup.policy": "delete"})
    _alter(admin, BROKER, "1", ("log.cleaner.threads", "2", SET), ("log.retention.ms", "1000", SET),
           validate_only=True)
    _alter(admin, TOPIC, t, ("cleanup.policy", "compact", APPEND), validate_only=True)
    with pytest.raises(KafkaException):
        _alter(admin, BROKER, "1", ("log.cleaner.threads", "9", SET), validate_only=True)
    cfg = _describe(admin, BROKER, "1")
    assert cfg["log.cleaner.threads"].value == "1" and cfg["log.cleaner.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    assert _describe(admin, TOPIC, t)["cleanup.policy"].value == "delete"
    assert _describe(admin, TOPIC, t)["retention.ms"].value == "604800000"
    doc = json.loads((Path(fresh_broker.log_dir) / "krait-metadata.json").read_text())
    assert doc["broker_configs"] == {}


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_whole_dynamic_set(fresh_broker):
    admin = _admin(fresh_broker)
    t = _topic("legacy")
    _create(admin, t)
    _alter(admin, BROKER, "1", ("log.cleaner.threads", "2", SET), ("log.retention.ms", "1000", SET))
    res = ConfigResource(BROKER, "1", set_config={"num.io.threads": "12"})
    admin.alter_configs([res])[res].result(10)  # legacy AlterConfigs: what is not named is deleted
    cfg = _describe(admin, BROKER, "1")
    assert (cfg["num.io.threads"].value, cfg["num.io.threads"].source) == ("12", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (cfg["log.cleaner.threads"].value, cfg["log.cleaner.threads"].source) == ("1", ConfigSource.DEFAULT_CONFIG.value)
    assert _describe(admin, TOPIC, t)["retention.ms"].value == "604800000"


def test_dynamic_configs_persist_across_restart(fresh_broker):
    admin = _admin(fresh_broker)
    t = _topic("persist")
    _create(admin, t, {"cleanup.policy": "delete"})
    _alter(admin, TOPIC, t, ("cleanup.policy", "compact", APPEND))
    _alter(admin, BROKER, "1", ("log.cleaner.threads", "2", SET), ("message.max.bytes", "5000", SET),
           ("listener.name.plaintext.ssl.key.password", "s3cret", SET))
    fresh_broker.restart()
    admin = _admin(fresh_broker)
    cfg = _describe(admin, BROKER, "1")
    assert (cfg["log.cleaner.threads"].value, cfg["log.cleaner.threads"].source) == (
        "2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert cfg["listener.name.plaintext.ssl.key.password"].is_sensitive
    topic_cfg = _describe(admin, TOPIC, t)
    assert topic_cfg["cleanup.policy"].value == "delete,compact"
    assert (topic_cfg["max.message.bytes"].value, topic_cfg["max.message.bytes"].source) == (
        "5000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


# --- the cluster-wide default (resource name ""), through the Java admin client -----------

JAVA_SRC = r"""
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

// Reads tab-separated commands on stdin, answers one line each:
//   alter <TYPE> <name> <OP> <key> [value]  -> OK | ERR <exception>: <message>
//   describe <TYPE> <name> <key>            -> value source sensitive readOnly syn=value@source;...
//   names <TYPE> <name>                     -> every key described, comma-separated
public class KraitConfigs {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    try (Admin admin = Admin.create(p); Scanner in = new Scanner(System.in)) {
      while (in.hasNextLine()) {
        String[] c = in.nextLine().split("\t", -1);
        ConfigResource r = new ConfigResource(ConfigResource.Type.valueOf(c[1]), c[2]);
        try {
          if (c[0].equals("alter")) {
            AlterConfigOp.OpType op = AlterConfigOp.OpType.valueOf(c[3]);
            ConfigEntry e = new ConfigEntry(c[4], op == AlterConfigOp.OpType.DELETE ? null : c[5]);
            admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(e, op)))).all().get();
            System.out.println("OK");
          } else {
            Config cfg = admin.describeConfigs(List.of(r), new DescribeConfigsOptions().includeSynonyms(true))
                .all().get().get(r);
            if (c[0].equals("names")) {
              List<String> names = new ArrayList<>();
              for (ConfigEntry e : cfg.entries()) names.add(e.name());
              Collections.sort(names);
              System.out.println(String.join(",", names));
            } else {
              ConfigEntry e = cfg.get(c[3]);
              StringBuilder syn = new StringBuilder();
              for (ConfigEntry.ConfigSynonym s : e.synonyms())
                syn.append(s.name()).append("=").append(s.value()).append("@").append(s.source()).append(";");
              System.out.println(e.value() + "\t" + e.source() + "\t" + e.isSensitive() + "\t" + e.isReadOnly()
                  + "\t" + syn);
            }
          }
        } catch (ExecutionException ex) {
          System.out.println("ERR " + ex.getCause().getClass().getSimpleName() + ": " + ex.getCause().getMessage());
        }
        System.out.flush();
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def java_configs(tmp_path_factory):
    """run(bootstrap, commands) -> one answer line per command, from the Java admin client."""
    java = JavaProgram(JAVA_SRC, "KraitConfigs", tmp_path_factory.mktemp("java-configs"))

    def run(bootstrap: str, commands: list[list[str]]) -> list[str]:
        p = java.run(bootstrap, input="".join("\t".join(c) + "\n" for c in commands))
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        lines = p.stdout.splitlines()
        assert len(lines) == len(commands), p.stdout + p.stderr[-3000:]
        return lines

    return run


def test_cluster_wide_default_broker_configs(tmp_path, java_configs):
    b = BrokerProcess(str(tmp_path / "logs"), overrides={"log.retention.ms": "86400000"}).start()
    try:
        admin = _admin(b)
        t = _topic("default")
        _create(admin, t)
        out = java_configs(b.bootstrap, [
            ["alter", "BROKER", "", "SET", "log.retention.ms", "7200000"],
            ["alter", "BROKER", "", "SET", "log.cleaner.threads", "2"],
            ["describe", "TOPIC", t, "retention.ms"],
            ["describe", "BROKER", "1", "log.retention.ms"],
            ["names", "BROKER", ""],
            ["describe", "BROKER", "", "log.retention.ms"],
            ["alter", "BROKER", "", "SET", "listener.name.plaintext.ssl.key.password", "x"],
            ["alter", "BROKER", "1", "SET", "log.retention.ms", "3600000"],
            ["describe", "TOPIC", t, "retention.ms"],
            ["describe", "BROKER", "1", "log.retention.ms"],
        ])
        assert out[:2] == ["OK", "OK"]
        assert out[2] == ("7200000\tDYNAMIC_DEFAULT_BROKER_CONFIG\tfalse\tfalse\t"
                          "log.retention.ms=7200000@DYNAMIC_DEFAULT_BROKER_CONFIG;"
                          "log.retention.ms=86400000@STATIC_BROKER_CONFIG;"
                          "log.retention.hours=168@DEFAULT_CONFIG;")
        assert out[3].split("\t")[:2] == ["7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]
        assert out[4] == "log.cleaner.threads,log.retention.ms"  # "" lists only the cluster-wide defaults
        assert out[5] == ("7200000\tDYNAMIC_DEFAULT_BROKER_CONFIG\tfalse\tfalse\t"
                          "log.retention.ms=7200000@DYNAMIC_DEFAULT_BROKER_CONFIG;")
        assert out[6] == ("ERR InvalidRequestException: Cannot update these configs at default cluster level, "
                          "broker id must be specified: Set(listener.name.plaintext.ssl.key.password)")
        assert out[7] == "OK"
        assert out[8] == ("3600000\tDYNAMIC_BROKER_CONFIG\tfalse\tfalse\t"
                          "log.retention.ms=3600000@DYNAMIC_BROKER_CONFIG;"
                          "log.retention.ms=7200000@DYNAMIC_DEFAULT_BROKER_CONFIG;"
                          "log.retention.ms=86400000@STATIC_BROKER_CONFIG;"
                          "log.retention.hours=168@DEFAULT_CONFIG;")
        assert out[9].split("\t")[:2] == ["3600000", "DYNAMIC_BROKER_CONFIG"]

        # both levels survive a restart; deleting falls back one level at a time
        b.restart()
        out = java_configs(b.bootstrap, [
            ["describe", "TOPIC", t, "retention.ms"],
            ["describe", "BROKER", "1", "log.cleaner.threads"],
            ["alter", "BROKER", "1", "DELETE", "log.retention.ms"],
            ["describe", "TOPIC", t, "retention.ms"],
            ["alter", "BROKER", "", "DELETE", "log.retention.ms"],
            ["describe", "TOPIC", t, "retention.ms"],
        ])
        assert out[0].split("\t")[:2] == ["3600000", "DYNAMIC_BROKER_CONFIG"]
        assert out[1].split("\t")[:2] == ["2", "DYNAMIC_DEFAULT_BROKER_CONFIG"]
        assert out[3].split("\t")[:2] == ["7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"]
        assert out[5].split("\t")[:2] == ["86400000", "STATIC_BROKER_CONFIG"]
    finally:
        b.stop()


def test_group_configs(tmp_path, java_configs):
    """GROUP resources (Kafka's GroupConfig): defaults from the broker keys behind them,
    overrides with DYNAMIC_GROUP_CONFIG, Kafka's refusals, kept across a restart."""
    b = BrokerProcess(str(tmp_path / "logs"), overrides={"group.share.record.lock.duration.ms": "20000"}).start()
    try:
        out = java_configs(b.bootstrap, [
            ["describe", "GROUP", "g1", "share.record.lock.duration.ms"],
            ["describe", "GROUP", "g1", "share.auto.offset.reset"],
            ["alter", "GROUP", "g1", "SET", "share.auto.offset.reset", "earliest"],
            ["alter", "GROUP", "g1", "SET", "share.record.lock.duration.ms", "45000"],
            ["describe", "GROUP", "g1", "share.auto.offset.reset"],
            ["describe", "GROUP", "g1", "share.record.lock.duration.ms"],
            ["describe", "GROUP", "g2", "share.auto.offset.reset"],
            ["alter", "GROUP", "g1", "SET", "share.record.lock.duration.ms", "70000"],
            ["alter", "GROUP", "g1", "SET", "share.auto.offset.reset", "sometimes"],
            ["alter", "GROUP", "g1", "SET", "share.auto.offset.reset", "by_duration:PT1H"],
            ["alter", "GROUP", "g1", "SET", "no.such.key", "1"],
            ["alter", "GROUP", "g1", "SET", "share.heartbeat.interval.ms", "15000"],
            ["alter", "GROUP", "g1", "SET", "share.session.timeout.ms", "15000"],
            ["alter", "GROUP", "g1", "DELETE", "share.record.lock.duration.ms"],
            ["names", "GROUP", "g1"],
        ])
        assert out[0] == ("20000\tSTATIC_BROKER_CONFIG\tfalse\tfalse\t"
                          "group.share.record.lock.duration.ms=20000@STATIC_BROKER_CONFIG;"
                          "group.share.record.lock.duration.ms=30000@DEFAULT_CONFIG;")
        assert out[1] == "latest\tDEFAULT_CONFIG\tfalse\tfalse\t"
        assert out[2:4] == ["OK", "OK"]
        assert out[4] == ("earliest\tDYNAMIC_GROUP_CONFIG\tfalse\tfalse\t"
                          "share.auto.offset.reset=earliest@DYNAMIC_GROUP_CONFIG;")
        assert out[5].startswith("45000\tDYNAMIC_GROUP_CONFIG\tfalse\tfalse\t"
                                 "share.record.lock.duration.ms=45000@DYNAMIC_GROUP_CONFIG;"
                                 "group.share.record.lock.duration.ms=20000@STATIC_BROKER_CONFIG;")
        assert out[6].split("\t")[:2] == ["latest", "DEFAULT_CONFIG"]  # another group keeps the default
        assert out[7] == ("ERR InvalidConfigurationException: share.record.lock.duration.ms must be in the range "
                          "15000 to 60000 inclusive.")
        assert out[8].startswith("ERR InvalidConfigurationException: Invalid value sometimes for configuration "
                                 "share.auto.offset.reset")
        assert out[9] == "OK"
        assert out[10] == "ERR InvalidConfigurationException: Unknown group config name: no.such.key"
        # a 15000 ms heartbeat is within its bounds and below the 45000 ms session timeout; a
        # 15000 ms session timeout is below group.share.min.session.timeout.ms
        assert out[11] == "OK"
        assert out[12] == ("ERR InvalidConfigurationException: share.session.timeout.ms must be in the range "
                           "45000 to 60000 inclusive.")
        assert out[13] == "OK"
        assert out[14] == ("consumer.heartbeat.interval.ms,consumer.session.timeout.ms,share.auto.offset.reset,"
                           "share.delivery.count.limit,share.heartbeat.interval.ms,share.isolation.level,"
                           "share.partition.max.record.locks,share.record.lock.duration.ms,"
                           "share.renew.acknowledge.enable,share.session.timeout.ms")
        b.stop()
        b.start()
        out = java_configs(b.bootstrap, [["describe", "GROUP", "g1", "share.auto.offset.reset"],
                                         ["describe", "GROUP", "g1", "share.record.lock.duration.ms"],
                                         ["describe", "GROUP", "g1", "share.heartbeat.interval.ms"]])
        assert out[0].split("\t")[:2] == ["by_duration:PT1H", "DYNAMIC_GROUP_CONFIG"]
        assert out[1].split("\t")[:2] == ["20000", "STATIC_BROKER_CONFIG"]
        assert out[2].split("\t")[:2] == ["15000", "DYNAMIC_GROUP_CONFIG"]
    finally:
        b.stop()
