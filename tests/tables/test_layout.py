"""tables.layout, tables.catalog names and tables.modes."""

from __future__ import annotations

import re

import pytest
from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform, IdentityTransform

from storage.config_def import ConfigError
from storage.iceberg_mode import MODE_VALIDATOR
from tables.catalog import embedded_paths, open_catalog, table_identifier, table_name
from tables.layout import key_value_schema, partition_spec
from tables.modes import MODES, parse_mode, parse_mode_options


def test_schema_columns():
    s = key_value_schema()
    assert [f.name for f in s.fields] == ["partition", "offset", "timestamp", "timestamp_type", "key", "value",
                                          "headers"]
    assert [str(f.field_type) for f in s.fields][:6] == ["int", "long", "timestamptz", "int", "binary", "binary"]
    assert str(s.find_field("headers").field_type) == "list<struct<9: key: required string, 10: value: optional binary>>"


def test_partition_spec_default_and_configured():
    s = key_value_schema()
    spec = partition_spec(s)
    assert [(f.source_id, type(f.transform), f.name) for f in spec.fields] == [
        (1, IdentityTransform, "partition"), (3, HourTransform, "timestamp_hour")]
    spec = partition_spec(s, "(partition, bucket(16, key), truncate(4, value), day(timestamp))")
    assert [(f.source_id, f.field_id, str(f.transform), f.name) for f in spec.fields] == [
        (1, 1000, "identity", "partition"), (5, 1001, "bucket[16]", "key_bucket_16"),
        (6, 1002, "truncate[4]", "value_trunc_4"), (3, 1003, "day", "timestamp_day")]
    spec = partition_spec(s, ["bucket(16, key)", "day(timestamp)"])
    assert [type(f.transform) for f in spec.fields] == [BucketTransform, DayTransform]
    assert partition_spec(s, "()").fields == ()
    for bad, message in (("(nosuch)", "no column"), ("(hour(nosuch))", "no column"),
                         ("(fortnight(timestamp))", "unknown partition transform"), ("(partition", "expected"),
                         ("(hour(key))", "hour cannot partition the binary column key"),
                         ("(headers)", "identity cannot partition")):
        with pytest.raises(ValueError, match=message):
            partition_spec(s, bad)


def test_table_names():
    assert table_name("orders.eu-west_1") == "orders_eu-west_1"
    assert table_identifier("a.b", "ns") == ("ns", "a_b")
    assert table_name("t~dlq") == "t~dlq"
    with pytest.raises(ValueError):
        table_name("no/slash")


def test_embedded_catalog_needs_no_setup(tmp_path):
    cat = open_catalog(str(tmp_path / "logs"))
    db, wh = embedded_paths(str(tmp_path / "logs"))
    assert db == str(tmp_path / "logs" / "krait-iceberg" / "catalog.db")
    assert (tmp_path / "logs" / "krait-iceberg" / "catalog.db").exists() and (tmp_path / "logs" / "krait-iceberg"
                                                                              / "warehouse").is_dir()
    assert cat.properties["warehouse"] == "file://" + wh
    explicit = open_catalog(catalog_uri=f"sqlite:///{tmp_path}/other.db", warehouse=str(tmp_path / "wh"))
    assert explicit.properties["uri"] == f"sqlite:///{tmp_path}/other.db"
    with pytest.raises(ValueError):
        open_catalog(catalog_uri=f"sqlite:///{tmp_path}/x.db")  # no warehouse, no log dir


def test_modes():
    assert MODES == ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")
    assert [parse_mode(m) for m in MODES] == list(MODES)
    assert parse_mode(None) == parse_mode("") == "disabled"
    with pytest.raises(ValueError, match="String must be one of"):
        parse_mode("keyvalue")


def test_value_schema_latest_options():
    """Redpanda's options of value_schema_latest: the subject and the Protobuf message; the
    config validator refuses what the parser refuses, naming the key."""
    assert parse_mode_options("value_schema_latest:subject=orders-v2") == ("value_schema_latest", "orders-v2", None)
    assert parse_mode_options(" value_schema_latest : subject = s , protobuf_name = shop.Order ") == (
        "value_schema_latest", "s", "shop.Order")
    assert parse_mode_options("value_schema_latest:protobuf_name=.shop.Order").protobuf_name == ".shop.Order"
    assert parse_mode("value_schema_latest:subject=s") == "value_schema_latest"
    bad = {"key_value:subject=s": "key_value takes no options",
           "value_schema_latest:topic=s": "unknown option 'topic'",
           "value_schema_latest:subject=": "needs a value",
           "value_schema_latest:subject": "needs a value",
           "value_schema_latest:subject=a,subject=b": "given twice",
           "value_schema_latest:": "unknown option ''"}
    for value, why in bad.items():
        with pytest.raises(ValueError, match=why):
            parse_mode_options(value)
        with pytest.raises(ConfigError, match=f"Invalid value {re.escape(value)} for configuration "
                                              f"krait.iceberg.mode: .*{why}"):
            MODE_VALIDATOR("krait.iceberg.mode", value)
    MODE_VALIDATOR("krait.iceberg.mode", "value_schema_latest:subject=s,protobuf_name=p.M")
