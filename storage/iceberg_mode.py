"""The values of the topic config ``krait.iceberg.mode`` (Redpanda's ``redpanda.iceberg.mode``):
a mode, and for ``value_schema_latest`` Redpanda's options after a colon::

    disabled | key_value | value_schema_id_prefix | value_schema_latest
    value_schema_latest:subject=orders-v2
    value_schema_latest:subject=orders-v2,protobuf_name=shop.Order

``subject`` is the subject whose latest schema decodes the values (default: ``<topic>-value``,
TopicNameStrategy); ``protobuf_name`` the fully qualified Protobuf message they are (default:
the schema's first message).

Declared here, not in tables/, because storage declares the config key and validates its
values at CreateTopics and AlterConfigs and must not import the layer above it;
tables.modes names the modes from :data:`ICEBERG_MODES` and parses with :func:`parse_iceberg_mode`.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .config_def import ParsedBy

__all__ = ["ICEBERG_MODES", "MODE_KEY", "IcebergMode", "MODE_VALIDATOR", "parse_iceberg_mode"]

MODE_KEY = "krait.iceberg.mode"
ICEBERG_MODES = ("disabled", "key_value", "value_schema_id_prefix", "value_schema_latest")
#: the options each mode takes after a colon (Redpanda's: only value_schema_latest has any)
_OPTIONS = {"value_schema_latest": ("subject", "protobuf_name")}
#: a subject or a message name: no separator of the option list
_VALUE = re.compile(r"[^,=\s]+")


class IcebergMode(NamedTuple):
    """A parsed ``krait.iceberg.mode``: the mode, and its options (None: the default)."""

    mode: str
    subject: str | None = None
    protobuf_name: str | None = None


@functools.lru_cache(maxsize=256)
def parse_iceberg_mode(value: str | None) -> IcebergMode:
    """The mode a config value names (None or empty: ``disabled``); ValueError saying what is
    wrong otherwise."""
    text = (value or "").strip()
    if not text:
        return IcebergMode("disabled")
    mode, colon, rest = text.partition(":")
    mode = mode.strip()
    if mode not in ICEBERG_MODES:
        raise ValueError(f"String must be one of: {', '.join(ICEBERG_MODES)} (value_schema_latest may be followed "
                         f"by :subject=<subject>,protobuf_name=<message>)")
    if not colon:
        return IcebergMode(mode)
    allowed = _OPTIONS.get(mode, ())
    if not allowed:
        raise ValueError(f"{mode} takes no options")
    options: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, val = (s.strip() for s in item.partition("="))
        if key not in allowed:
            raise ValueError(f"unknown option {key!r} of {mode} (known: {', '.join(allowed)})")
        if not eq or not _VALUE.fullmatch(val):
            raise ValueError(f"option {key} of {mode} needs a value: {key}=<{key}>")
        if key in options:
            raise ValueError(f"option {key} of {mode} is given twice")
        options[key] = val
    return IcebergMode(mode, options.get("subject"), options.get("protobuf_name"))


#: the config validator of ``krait.iceberg.mode``
MODE_VALIDATOR = ParsedBy(parse_iceberg_mode, f"[{', '.join(ICEBERG_MODES)}][:subject=...,protobuf_name=...]")
