"""Broker configuration: Kafka's keys and defaults, clear failures on bad values."""

import subprocess
import sys

import pytest

from broker.config import BrokerConfig, ConfigError, read_properties
from tests.krait_harness import REPO


def test_defaults_are_kafkas():
    cfg = BrokerConfig.from_props({})
    assert [str(x) for x in cfg.listeners] == ["PLAINTEXT://127.0.0.1:9092"]
    assert cfg.log_dirs == ["./data"]
    assert cfg["num.partitions"] == 1 and cfg["message.max.bytes"] == 1048588
    assert cfg["socket.request.max.bytes"] == 104857600
    d = cfg.topic_defaults()
    assert d["segment.bytes"] == "1073741824" and d["retention.ms"] == str(168 * 3600 * 1000)
    assert d["segment.ms"] == str(168 * 3600 * 1000) and d["cleanup.policy"] == "delete"


def test_retention_precedence_ms_over_minutes_over_hours():
    assert BrokerConfig.from_props({"log.retention.hours": "1"}).retention_ms() == 3_600_000
    assert BrokerConfig.from_props({"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms() == 120_000
    assert BrokerConfig.from_props({"log.retention.minutes": "2", "log.retention.ms": "5"}).retention_ms() == 5


@pytest.mark.parametrize("key,value", [("num.partitions", "zero"), ("num.partitions", "0"),
                                       ("listeners", "nonsense"), ("log.cleanup.policy", "sometimes"),
                                       ("auto.create.topics.enable", "yes")])
def test_invalid_values_raise(key, value):
    with pytest.raises(ConfigError, match=key.split(".")[0]):
        BrokerConfig.from_props({key: value})


def test_properties_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnum.partitions=3\nlog.dirs = /tmp/a,/tmp/b\nlisteners: PLAINTEXT://0.0.0.0:9999\n")
    cfg = BrokerConfig.from_props(read_properties(f))
    assert cfg["num.partitions"] == 3 and cfg.log_dirs == ["/tmp/a", "/tmp/b"]
    assert [str(x) for x in cfg.advertised_listeners] == ["PLAINTEXT://127.0.0.1:9999"]


def test_serve_refuses_invalid_config_and_warns_unknown(tmp_path):
    out = subprocess.run([sys.executable, "-m", "broker", "--override", "num.partitions=-3",
                          "--override", f"log.dirs={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "num.partitions" in out.stderr
    out = subprocess.run([sys.executable, "-m", "broker", "--override", "no.such.key=1", "--override",
                          "listeners=nonsense"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "no.such.key" in out.stderr and "isn't a known config" in out.stderr


def test_second_broker_on_same_log_dir_refuses_to_start(broker):
    out = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={broker.log_dir}",
                          "--override", "listeners=PLAINTEXT://127.0.0.1:0"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1
    assert "lock" in out.stderr and broker.log_dir in out.stderr
