"""The ACL model: what an ACL binding is, how a filter matches it, and which bindings
CreateAcls accepts. Pure values, no I/O; the authorizer (``authorizer.py``) indexes them.

Follows Kafka's client classes one for one:

- ``PatternType``, ``AclPermissionType`` (common/resource, common/acl); ``ResourceType`` and
  ``AclOperation`` are the enums of ``operations.py``, reused;
- ``ResourcePattern`` / ``AccessControlEntry`` / ``AclBinding``: a binding's constructor
  refuses what Kafka's refuses (resource type ANY, pattern type ANY or MATCH, operation
  ANY, permission ANY) and accepts UNKNOWN (``is_unknown``), as Kafka's does;
- ``ResourcePatternFilter`` / ``AccessControlEntryFilter`` / ``AclBindingFilter``: ``None``
  fields match anything; pattern type ANY matches every pattern type by exact name, MATCH
  matches the patterns that would apply to the named resource (the literal name, the
  literal wildcard ``*`` and every PREFIXED pattern the name starts with);
- ``validate_new_binding`` / ``validate_filter``: CreateAcls' checks (AclApis: the CLUSTER
  name and the empty name; AclControlManager.validateNewAcl: type, pattern, operation,
  permission) and DeleteAcls' (AclControlManager.validateFilter), with Kafka's messages,
  raised as INVALID_REQUEST. One addition: a principal without ``type:`` is refused at
  creation; Kafka accepts it and then fails every authorization of that resource
  (StandardAcl.kafkaPrincipal throws).

``binding_to_dict`` / ``binding_from_dict`` give the persisted form (enum names, so the
document stays readable), ``from_codes`` the wire form (unknown codes become UNKNOWN, as
Kafka's ``fromCode``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from protocol.errors import ErrorCode, KafkaError

from .operations import AclOperation, ResourceType

__all__ = [
    "AclOperation", "ResourceType", "PatternType", "AclPermissionType",
    "ResourcePattern", "AccessControlEntry", "AclBinding",
    "ResourcePatternFilter", "AccessControlEntryFilter", "AclBindingFilter",
    "WILDCARD_RESOURCE", "WILDCARD_PRINCIPAL", "WILDCARD_HOST", "CLUSTER_NAME",
    "validate_new_binding", "validate_filter", "parse_principal",
    "binding_to_dict", "binding_from_dict", "sorted_bindings",
]

#: ResourcePattern.WILDCARD_RESOURCE: a LITERAL pattern with this name applies to every
#: resource of its type
WILDCARD_RESOURCE = "*"
#: StandardAuthorizerData.WILDCARD_PRINCIPAL: an entry for every principal
WILDCARD_PRINCIPAL = "User:*"
#: StandardAuthorizerData.WILDCARD: an entry for every host
WILDCARD_HOST = "*"
#: the only name a CLUSTER resource has (Kafka's CLUSTER_NAME)
CLUSTER_NAME = "kafka-cluster"


class PatternType(IntEnum):
    """Kafka's PatternType. ANY and MATCH exist only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    def is_specific(self) -> bool:
        return self not in (PatternType.UNKNOWN, PatternType.ANY, PatternType.MATCH)


class AclPermissionType(IntEnum):
    """Kafka's AclPermissionType. ANY exists only in filters."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)


def _from_code(enum: type[E], code: int) -> E:
    """Kafka's ``fromCode``: an unknown code is UNKNOWN, not an error."""
    try:
        return enum(code)
    except ValueError:
        return enum["UNKNOWN"]


def _from_name(enum: type[E], name: str) -> E:
    """Kafka's ``fromString`` / SecurityUtils: case- and underscore-insensitive
    ("Read", "READ", "TransactionalId", "TRANSACTIONAL_ID"); unlike Kafka an unknown name
    raises, since a persisted ACL we cannot read must not silently become UNKNOWN."""
    key = name.replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == key:
            return member
    raise ValueError(f"unknown {enum.__name__} {name!r}")


def parse_principal(principal: str) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: ``type:name``, split at the first colon."""
    principal_type, sep, name = (principal or "").partition(":")
    if not sep:
        raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
    return principal_type, name


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Kafka's ResourcePattern: (resource type, name, LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type == ResourceType.ANY:
            raise ValueError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Kafka's AccessControlEntry: who (``User:alice``, ``User:*``), from where (an IP
    address or ``*``), what, and whether it is allowed or denied."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if self.operation == AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """Kafka's AclBinding: a resource pattern and an access control entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, resource_type: ResourceType, name: str, pattern_type: PatternType, principal: str,
           host: str, operation: AclOperation, permission_type: AclPermissionType) -> AclBinding:
        """The flat form: (type, name, pattern, principal, host, operation, permission)."""
        return cls(ResourcePattern(resource_type, name, pattern_type),
                   AccessControlEntry(principal, host, operation, permission_type))

    @classmethod
    def from_codes(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str,
                   operation: int, permission_type: int) -> AclBinding:
        """CreateAclsRequest.aclBinding: wire codes, unknown codes as UNKNOWN. Raises
        ValueError where Kafka's constructors throw (ANY / MATCH)."""
        return cls.of(_from_code(ResourceType, resource_type), name, _from_code(PatternType, pattern_type),
                      principal, host, _from_code(AclOperation, operation),
                      _from_code(AclPermissionType, permission_type))

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        p, e = self.pattern, self.entry
        return (f"(pattern=ResourcePattern(resourceType={p.resource_type.name}, name={p.name}, "
                f"patternType={p.pattern_type.name}), entry=(principal={e.principal}, host={e.host}, "
                f"operation={e.operation.name}, permissionType={e.permission_type.name}))")


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter: ``name=None`` matches any name; resource type ANY
    any type; pattern type ANY any pattern type (by exact name), MATCH the patterns that
    would apply to resource ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if pt == PatternType.ANY or pt == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH against a specific pattern
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's AccessControlEntryFilter: ``None`` principal / host match anything, as do
    operation ANY and permission ANY. No wildcard expansion: principal ``User:*`` matches
    only entries for ``User:*``."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}"
        if self.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission_type.name}"
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: the pattern filter and the entry filter must both match.
    ``AclBindingFilter()`` is Kafka's ``AclBindingFilter.ANY``."""

    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    @classmethod
    def from_codes(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
                   host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
        """DescribeAclsRequest / DeleteAclsRequest filters: wire codes, unknown as UNKNOWN."""
        return cls(ResourcePatternFilter(_from_code(ResourceType, resource_type), name,
                                         _from_code(PatternType, pattern_type)),
                   AccessControlEntryFilter(principal, host, _from_code(AclOperation, operation),
                                            _from_code(AclPermissionType, permission_type)))

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def validate_new_binding(binding: AclBinding) -> None:
    """CreateAcls' checks for one binding, in Kafka's order (AclApis.handleCreateAcls, then
    AclControlManager.validateNewAcl); raises INVALID_REQUEST with Kafka's message."""
    p, e = binding.pattern, binding.entry
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not p.name:
        raise _invalid("Invalid empty resource name")
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise _invalid(f"Invalid resourceType {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {p.pattern_type.name}")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise _invalid(f"Invalid operation {e.operation.name}")
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise _invalid(f"Invalid permissionType {e.permission_type.name}")
    if ":" not in e.principal:
        raise _invalid(f"Could not parse principal from `{e.principal}` (no colon is present "
                       "separating the principal type from the principal name)")


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """AclControlManager.validateFilter (DeleteAcls): raises INVALID_REQUEST."""
    if acl_filter.pattern_filter.is_unknown():
        raise _invalid("Unknown patternFilter.")
    if acl_filter.entry_filter.is_unknown():
        raise _invalid("Unknown entryFilter.")


def sorted_bindings(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    """Kafka's listing order (StandardAcl.compareTo): resource type, then name in REVERSE,
    then pattern type, operation, principal, host, permission. Names compare by code point
    (Java by UTF-16 unit: the same order outside the astral planes)."""
    out = sorted(bindings, key=lambda b: (b.pattern.pattern_type, b.entry.operation, b.entry.principal,
                                          b.entry.host, b.entry.permission_type))
    out.sort(key=lambda b: b.pattern.name, reverse=True)  # stable, reverse keeps ties in order
    out.sort(key=lambda b: b.pattern.resource_type)
    return out


def binding_to_dict(binding: AclBinding) -> dict[str, str]:
    """The persisted form: one flat dict, enums by name (AccessControlEntryRecord's fields)."""
    p, e = binding.pattern, binding.entry
    return {"resource_type": p.resource_type.name, "resource_name": p.name,
            "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission_type": e.permission_type.name}


def binding_from_dict(d: dict[str, Any]) -> AclBinding:
    """Inverse of :func:`binding_to_dict`; raises ValueError on an unreadable entry."""
    try:
        return AclBinding.of(_from_name(ResourceType, d["resource_type"]), str(d["resource_name"]),
                             _from_name(PatternType, d["pattern_type"]), str(d["principal"]), str(d["host"]),
                             _from_name(AclOperation, d["operation"]),
                             _from_name(AclPermissionType, d["permission_type"]))
    except KeyError as exc:
        raise ValueError(f"ACL entry without {exc.args[0]!r}: {d!r}") from None
