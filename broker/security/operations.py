"""Kafka's ACL operations and resource types, and the `*_authorized_operations`
bit fields that Metadata, DescribeCluster, DescribeGroups and DescribeTopicPartitions
return when a client asks for them.

Without an authorizer Kafka reports every operation that applies to the resource type
(AclEntry.supportedOperations, encoded by Utils.to32BitField: bit `code` set per
operation). With an authorizer (the security issue) the set narrows to what the
principal is allowed; that filter plugs in here.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["AclOperation", "ResourceType", "SUPPORTED_OPERATIONS", "authorized_operations", "NOT_REQUESTED"]

#: what Kafka puts in an `*_authorized_operations` field the client did not ask for
NOT_REQUESTED = -(1 << 31)


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
#: Kafka's AclEntry.supportedOperations
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def to_bit_field(ops: frozenset[AclOperation] | set[AclOperation]) -> int:
    """Kafka's Utils.to32BitField."""
    field = 0
    for op in ops:
        field |= 1 << int(op)
    return field


def authorized_operations(resource_type: ResourceType, requested: bool = True) -> int:
    """The `*_authorized_operations` value for one resource: NOT_REQUESTED unless the
    client asked; otherwise the operations the (so far always unauthenticated, unrestricted)
    caller may perform on it."""
    if not requested:
        return NOT_REQUESTED
    return to_bit_field(SUPPORTED_OPERATIONS[resource_type])
