"""storage.iceberg_spec: the syntax of krait.iceberg.partition.spec, and the topic config's
validation through LogConfig (what CreateTopics and AlterConfigs run)."""

from __future__ import annotations

import pytest

from storage.config import TOPIC_CONFIG_NAMES, LogConfig
from storage.config_def import ConfigError
from storage.iceberg_spec import DEFAULT_PARTITION_SPEC, PARTITION_SPEC_KEY, SpecField, parse_partition_spec


def test_items_in_order_with_their_transform():
    assert parse_partition_spec(DEFAULT_PARTITION_SPEC) == (SpecField("partition"), SpecField("timestamp", "hour"))
    got = parse_partition_spec(" ( partition ,bucket( 16 ,key), truncate(4, addr.city),year(ts), month (t2) ) ")
    assert got == (SpecField("partition"), SpecField("key", "bucket", 16), SpecField("addr.city", "truncate", 4),
                   SpecField("ts", "year"), SpecField("t2", "month"))
    assert [f.name for f in got] == ["partition", "key_bucket_16", "addr.city_trunc_4", "ts_year", "t2_month"]
    assert [str(f) for f in got] == ["partition", "bucket(16, key)", "truncate(4, addr.city)", "year(ts)", "month(t2)"]
    assert parse_partition_spec("()") == parse_partition_spec(" ( ) ") == ()
    assert parse_partition_spec("(day)") == (SpecField("day"),)  # a column may be named like a transform


@pytest.mark.parametrize(("spec", "message"), [
    ("", "expected '\\('"),
    ("partition, hour(timestamp)", "expected '\\('"),  # the parentheses are required, as Redpanda's
    ("(partition", "expected ',' or '\\)' at position 10, found the end"),
    ("(partition) x", "unexpected 'x' after the closing"),
    ("(partition,)", "expected a column or a transform at position 11"),
    ("(a b)", "expected ',' or '\\)'"),
    ("(fortnight(timestamp))", "unknown partition transform 'fortnight'"),
    ("(hour(timestamp, 3))", "expected '\\)' closing hour\\("),
    ("(hour())", "expected the column of hour\\(col\\)"),
    ("(bucket(key))", "expected the N of bucket"),
    ("(bucket(0, key))", "must be between 1 and"),
    ("(truncate(99999999999, key))", "must be between 1 and"),
    ("(bucket(4 key))", "expected ',' in bucket"),
    ("(partition, partition)", "partition is named twice"),
    ("(hour(timestamp), day(timestamp))", "redundant"),
    ("(key-1)", "unexpected '-'"),
    ("(a.)", "unexpected '.'"),
])
def test_bad_specs_say_what_and_where(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_partition_spec(spec)


def test_topic_config_default_and_validation():
    assert PARTITION_SPEC_KEY in TOPIC_CONFIG_NAMES
    assert LogConfig().krait_iceberg_partition_spec == DEFAULT_PARTITION_SPEC
    cfg = LogConfig.from_props({PARTITION_SPEC_KEY: "(day(timestamp), bucket(4, key))"})
    assert cfg.krait_iceberg_partition_spec == "(day(timestamp), bucket(4, key))"
    assert cfg.to_props()[PARTITION_SPEC_KEY] == "(day(timestamp), bucket(4, key))"
    # a column no table has yet is not the config's business (decoded fields come later)
    assert LogConfig.from_props({PARTITION_SPEC_KEY: "(day(created_at))"}).krait_iceberg_partition_spec
    with pytest.raises(ConfigError) as e:
        LogConfig.from_props({PARTITION_SPEC_KEY: "(hour(timestamp)"})
    assert str(e.value).startswith(f"Invalid value (hour(timestamp) for configuration {PARTITION_SPEC_KEY}: ")
