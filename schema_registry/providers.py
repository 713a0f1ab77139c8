"""The schema types the registry serves (Confluent's SchemaProviders): importing this fills
:data:`schema_registry.schema_types.PARSERS`."""

from __future__ import annotations

from . import avro, json_schema, protobuf
from .schema_types import PARSERS

__all__ = ["PARSERS", "avro", "json_schema", "protobuf"]
