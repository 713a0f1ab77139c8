"""The API registry: for every Kafka API Krait serves, the version range it supports and
the kio request/response types for each version.

kio generates one Python dataclass module per (API, version) from Kafka's own JSON
schemas; this module is the only place that knows how to find them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.index import api_key_map

__all__ = ["ApiKey", "ApiRange", "SUPPORTED", "request_type", "response_type", "is_supported", "api_name"]


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TOPIC_PARTITIONS = 75


@dataclass(frozen=True, slots=True)
class ApiRange:
    api_key: int
    min_version: int
    max_version: int
    # Versions we advertise below what we can decode. Kafka advertises Produce from v0
    # (older librdkafka disables compression otherwise); requests below `min_served`
    # are refused at request time.
    min_served: int | None = None

    @property
    def served_from(self) -> int:
        return self.min_version if self.min_served is None else self.min_served


_RANGES = [
    ApiRange(ApiKey.PRODUCE, 0, 11, min_served=3),
    ApiRange(ApiKey.FETCH, 4, 17),
    ApiRange(ApiKey.LIST_OFFSETS, 1, 10),
    ApiRange(ApiKey.METADATA, 0, 12),
    ApiRange(ApiKey.OFFSET_COMMIT, 2, 9),
    ApiRange(ApiKey.OFFSET_FETCH, 1, 9),
    ApiRange(ApiKey.FIND_COORDINATOR, 0, 6),
    ApiRange(ApiKey.JOIN_GROUP, 0, 9),
    ApiRange(ApiKey.HEARTBEAT, 0, 4),
    ApiRange(ApiKey.LEAVE_GROUP, 0, 5),
    ApiRange(ApiKey.SYNC_GROUP, 0, 5),
    ApiRange(ApiKey.DESCRIBE_GROUPS, 0, 5),
    ApiRange(ApiKey.LIST_GROUPS, 0, 5),
    ApiRange(ApiKey.API_VERSIONS, 0, 4),
    ApiRange(ApiKey.CREATE_TOPICS, 2, 7),
    ApiRange(ApiKey.DELETE_TOPICS, 1, 6),
    ApiRange(ApiKey.DELETE_RECORDS, 0, 2),
    ApiRange(ApiKey.INIT_PRODUCER_ID, 0, 5),
    ApiRange(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4),
    ApiRange(ApiKey.DESCRIBE_CONFIGS, 1, 4),
    ApiRange(ApiKey.ALTER_CONFIGS, 0, 2),
    # v0 of both was removed in Kafka 4.0 (KIP-896); kio has no v0 either
    ApiRange(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2),
    ApiRange(ApiKey.DESCRIBE_LOG_DIRS, 1, 4),
    ApiRange(ApiKey.CREATE_PARTITIONS, 0, 3),
    ApiRange(ApiKey.DELETE_GROUPS, 0, 2),
    ApiRange(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    ApiRange(ApiKey.OFFSET_DELETE, 0, 0),
    ApiRange(ApiKey.DESCRIBE_CLUSTER, 0, 1),
    # without an authorizer these answer SECURITY_DISABLED, as Kafka does; v0 went in 4.0
    ApiRange(ApiKey.DESCRIBE_ACLS, 1, 3),
    ApiRange(ApiKey.CREATE_ACLS, 1, 3),
    ApiRange(ApiKey.DELETE_ACLS, 1, 3),
    ApiRange(ApiKey.ELECT_LEADERS, 0, 2),
    ApiRange(ApiKey.DESCRIBE_PRODUCERS, 0, 0),
    ApiRange(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0),
]

#: api key -> advertised range, in the order ApiVersions lists them
SUPPORTED: dict[int, ApiRange] = {r.api_key: r for r in sorted(_RANGES, key=lambda r: r.api_key)}


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


def is_supported(api_key: int, version: int) -> bool:
    """Whether a request of this key and version can be decoded and served."""
    r = SUPPORTED.get(api_key)
    return r is not None and r.served_from <= version <= r.max_version


@cache
def _module(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api_key_map[api_key]}.v{version}.{kind}")


def _entity(api_key: int, version: int, kind: str) -> type:
    mod = _module(api_key, version, kind)
    suffix = "Request" if kind == "request" else "Response"
    for name, obj in vars(mod).items():
        if name.endswith(suffix) and isinstance(obj, type) and getattr(obj, "__api_key__", None) == api_key \
                and getattr(obj, "__type__", None) is not None and obj.__type__.name == kind:
            return obj
    raise LookupError(f"no {kind} type for api {api_key} v{version}")


@cache
def request_type(api_key: int, version: int) -> type:
    """The kio request dataclass for (api_key, version)."""
    return _entity(api_key, version, "request")


@cache
def response_type(api_key: int, version: int) -> type:
    """The kio response dataclass for (api_key, version)."""
    return _entity(api_key, version, "response")


def is_flexible_request(api_key: int, version: int) -> bool:
    return request_type(api_key, version).__flexible__
