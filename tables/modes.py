"""The values of the topic config ``krait.iceberg.mode`` (Redpanda's ``redpanda.iceberg.mode``).

- ``disabled`` (the default): no table;
- ``key_value``: columns partition, offset, timestamp, timestamp_type, key, value, headers;
- ``value_schema_id_prefix``: the value decoded with the schema its Confluent wire-format
  prefix names (magic byte 0, 4-byte schema id), its fields as columns, plus the metadata;
- ``value_schema_latest``: the value decoded with the latest schema of the topic's subject
  ``<topic>-value`` (TopicNameStrategy), or of the subject its ``subject=`` option names;
  the value is the bare payload, without the prefix, as Redpanda expects in this mode; a
  Protobuf value is the schema's first message or the one ``protobuf_name=`` names
  (``value_schema_latest:subject=s,protobuf_name=pkg.Msg``).
"""

from __future__ import annotations

from storage.iceberg_mode import ICEBERG_MODES, MODE_KEY, IcebergMode, parse_iceberg_mode

__all__ = ["DECODED_MODES", "DISABLED", "KEY_VALUE", "MODES", "VALUE_SCHEMA_ID_PREFIX", "VALUE_SCHEMA_LATEST",
           "IcebergMode", "parse_mode", "parse_mode_options"]

#: one source of truth: storage declares the topic config key and its values (it cannot
#: import this layer); the names below are those values
MODES: tuple[str, ...] = ICEBERG_MODES
DISABLED, KEY_VALUE, VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST = MODES
#: the modes that decode the value with a registry schema
DECODED_MODES = (VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST)
CONFIG_NAME = MODE_KEY


#: the mode a topic config value names, with its options (None or empty: ``disabled``);
#: ValueError for anything else
parse_mode_options = parse_iceberg_mode


def parse_mode(value: str | None) -> str:
    """The mode a topic config value names, without its options."""
    return parse_iceberg_mode(value).mode
