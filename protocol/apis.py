"""The API registry: Kafka's API keys, the version ranges Krait serves (declared by the
broker's handler modules, see broker/handlers/__init__.py) and the kio request/response
types for each version.

kio generates one Python dataclass module per (API, version) from Kafka's own JSON
schemas; this module is the only place that knows how to find them.
"""

from __future__ import annotations

import importlib
import importlib.util
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
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class ApiRange:
    api_key: int
    min_version: int
    max_version: int
    # Versions we advertise below what we can decode. Kafka advertises Produce from v0
    # (older librdkafka disables compression otherwise); requests below `min_served`
    # are refused at request time.
    min_served: int | None = None
    #: False: served but left out of ApiVersions (an API a client must not discover yet)
    advertised: bool = True

    @property
    def served_from(self) -> int:
        return self.min_version if self.min_served is None else self.min_served


#: api key -> served range. Filled by the broker's handler modules, which declare the
#: versions they serve (broker.handlers.handles).
SUPPORTED: dict[int, ApiRange] = {}


def register(r: ApiRange) -> None:
    """Declare a served API range (called by the handler registry)."""
    SUPPORTED[r.api_key] = r


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api_{api_key}")


def is_supported(api_key: int, version: int) -> bool:
    """Whether a request of this key and version is served (declared by a handler)."""
    r = SUPPORTED.get(api_key)
    return r is not None and r.served_from <= version <= r.max_version


@cache
def has_schema(api_key: int, version: int, kind: str = "request") -> bool:
    """Whether kio has the (API, version) schema, i.e. the codec can handle it at all."""
    name = api_key_map.get(api_key)
    if name is None or version < 0:
        return False
    try:
        return importlib.util.find_spec(f"kio.schema.{name}.v{version}.{kind}") is not None
    except ModuleNotFoundError:  # the version's package itself is missing
        return False


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
