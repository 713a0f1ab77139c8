"""``krait configs --entity-type brokers``, as kafka-configs.sh: describe (dynamic configs of a
broker, of the cluster-wide default, ``--all``) and alter (``--add-config``,
``--delete-config``) through DescribeConfigs / IncrementalAlterConfigs on a real broker."""

from __future__ import annotations


def _configs(b, capsys, *argv: str) -> tuple[int, str, str]:
    from broker.tools import configs_cli

    rc = configs_cli.main(["--bootstrap-server", b.bootstrap, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_configs_cli_brokers(fresh_broker, capsys):
    b = fresh_broker
    one, default = ["--entity-type", "brokers", "--entity-name", "1"], ["--entity-type", "brokers", "--entity-default"]
    assert _configs(b, capsys, "--describe", *one) == (0, "Dynamic configs for broker 1 are:\n", "")
    assert _configs(b, capsys, "--alter", *one, "--add-config", "log.cleaner.threads=2,log.retention.ms=3600000") == (
        0, "Completed updating config for broker 1.\n", "")
    assert _configs(b, capsys, "--alter", *default, "--add-config", "log.retention.ms=7200000") == (
        0, "Completed updating default config for brokers in the cluster.\n", "")
    rc, out, _ = _configs(b, capsys, "--describe", *one)
    assert rc == 0 and out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
        "DEFAULT_CONFIG:log.cleaner.threads=1}",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}"]
    # without a name: every broker, then the cluster-wide default
    rc, out, _ = _configs(b, capsys, "--describe", "--entity-type", "brokers")
    assert rc == 0 and [ln for ln in out.splitlines() if not ln.startswith("  ")] == [
        "Dynamic configs for broker 1 are:", "Default configs for brokers in the cluster are:"]
    assert "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}" \
        in out.splitlines()
    rc, out, _ = _configs(b, capsys, "--describe", *one, "--all")
    assert rc == 0 and out.startswith("All configs for broker 1 are:\n")
    assert "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}" in out.splitlines()
    assert "  ssl.key.password=null sensitive=true synonyms={}" in out.splitlines()
    # refusals: Kafka's checks and the broker's messages
    rc, _, err = _configs(b, capsys, "--alter", *one, "--delete-config", "log.retention.hours")
    assert rc == 1 and "Invalid config(s): log.retention.hours" in err
    rc, _, err = _configs(b, capsys, "--alter", *one, "--add-config", "broker.id=7")
    assert rc == 1 and "Cannot update these configs dynamically: Set(broker.id)" in err
    rc, _, err = _configs(b, capsys, "--describe", "--entity-type", "brokers", "--entity-name", "one")
    assert rc == 1 and "The entity name for brokers must be a valid integer broker id, found: one" in err
    # deleting falls back a level at a time
    assert _configs(b, capsys, "--alter", *one, "--delete-config", "log.retention.ms,log.cleaner.threads")[0] == 0
    assert _configs(b, capsys, "--describe", *one)[1] == "Dynamic configs for broker 1 are:\n"
    assert _configs(b, capsys, "--alter", *default, "--delete-config", "log.retention.ms")[0] == 0
    assert _configs(b, capsys, "--describe", *default)[1] == "Default configs for brokers in the cluster are:\n"
