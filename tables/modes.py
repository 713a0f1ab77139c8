"""The values of the topic config ``krait.iceberg.mode`` (Redpanda's ``redpanda.iceberg.mode``).

- ``disabled`` (the default): no table;
- ``key_value``: columns partition, offset, timestamp, timestamp_type, key, value, headers;
- ``value_schema_id_prefix``: the value decoded with the schema its Confluent wire-format
  prefix names (magic byte 0, 4-byte schema id), its fields as columns, plus the metadata;
- ``value_schema_latest``: the value decoded with the latest schema of the topic's subject
  ``<topic>-value`` (TopicNameStrategy); the value is the bare payload, without the
  prefix, as Redpanda expects in this mode.
"""

from __future__ import annotations

from storage.config import ICEBERG_MODES
from storage.config_def import OneOf

__all__ = ["DECODED_MODES", "DISABLED", "KEY_VALUE", "MODES", "MODE_VALIDATOR", "VALUE_SCHEMA_ID_PREFIX", "VALUE_SCHEMA_LATEST",
           "parse_mode"]

#: one source of truth: storage declares the topic config key and its values (it cannot
#: import this layer); the names below are those values
MODES: tuple[str, ...] = ICEBERG_MODES
DISABLED, KEY_VALUE, VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST = MODES
#: the modes that decode the value with a registry schema
DECODED_MODES = (VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST)
#: the validator for the config key's declaration (ConfigDef.ValidString)
MODE_VALIDATOR = OneOf(MODES)
CONFIG_NAME = "krait.iceberg.mode"


def parse_mode(value: str | None) -> str:
    """The mode a topic config value names (None or empty: ``disabled``); ConfigError
    (a ValueError) for anything else, with Kafka's ConfigException message."""
    if value is None or value == "":
        return DISABLED
    mode = value.strip()
    MODE_VALIDATOR(CONFIG_NAME, mode)
    return mode
