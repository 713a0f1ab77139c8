"""The ACL authorizer: which ACLs exist, and whether a principal connecting from a host may
perform an operation on a resource. Pure and synchronous (no I/O, no clock): the broker
persists ``to_dicts()`` in its metadata document and calls ``authorize`` on the request path.

Follows Kafka's StandardAuthorizer / StandardAuthorizerData (KRaft) and, for the checks,
its predecessor AclAuthorizer, whose semantics are the same:

- ``super.users`` (``User:alice;User:bob``) may do anything, whatever the ACLs say;
- an ACL applies to a resource when its pattern is the LITERAL name, the LITERAL wildcard
  ``*``, or a PREFIXED name the resource's name starts with; to a principal when it names
  it or ``User:*``; to a host when it names it or ``*``;
- DENY wins over ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, an ALLOW
  of ALTER_CONFIGS implies DESCRIBE_CONFIGS; a DENY implies nothing except that operation
  ALL, allowed or denied, covers every operation;
- nothing matches: if the resource has no ACL at all (for anyone) the answer is
  ``allow.everyone.if.no.acl.found`` (default false); if it has ACLs, none of them for this
  caller, DENIED.

The index follows the idea of StandardAuthorizerData's sorted set (reach the ACLs of one
resource without scanning the rest) with Python dicts: per resource type, LITERAL buckets
by name and PREFIXED buckets by name, each bucket keyed by principal; and the set of
lengths the PREFIXED names have. A check probes the literal name, ``*`` and one prefix of
the name per distinct PREFIXED length (at most ``len(name)``), then reads only the entries
of the caller's principal and ``User:*``: its cost does not grow with the number of ACLs.
``probes`` counts bucket look-ups and entries read, so tests can check that.

``authorize_by_resource_type`` is Kafka's Authorizer.authorizeByResourceType default
(InitProducerId without a transactional id, for instance). ``AUTHORIZER_CLASS_NAMES`` are
the ``authorizer.class.name`` values that turn this authorizer on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from protocol.errors import KafkaError

from .acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_from_dict,
    binding_to_dict,
    parse_principal,
    sorted_bindings,
    validate_filter,
    validate_new_binding,
)
from .operations import SUPPORTED_OPERATIONS

__all__ = [
    "Authorizer", "AUTHORIZER_CLASS_NAMES", "AUTHORIZER_CLASS_NAME_CONFIG", "SUPER_USERS_CONFIG",
    "ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG", "IMPLIES_DESCRIBE", "IMPLIES_DESCRIBE_CONFIGS",
    "authorizer_from_configs", "parse_super_users", "parse_allow_everyone",
]

AUTHORIZER_CLASS_NAME_CONFIG = "authorizer.class.name"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG = "allow.everyone.if.no.acl.found"
#: ``authorizer.class.name`` values that mean "this authorizer" ("" means none)
AUTHORIZER_CLASS_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})

_O = AclOperation
#: operations whose ALLOW implies DESCRIBE (StandardAuthorizerData.IMPLIES_DESCRIBE)
IMPLIES_DESCRIBE = frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
#: operations whose ALLOW implies DESCRIBE_CONFIGS
IMPLIES_DESCRIBE_CONFIGS = frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})
_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY
_ALL = AclOperation.ALL

#: principal -> the entries of one resource pattern for that principal
Bucket = dict[str, list[AccessControlEntry]]


def parse_super_users(value: Any) -> frozenset[str]:
    """StandardAuthorizer.getConfiguredSuperUsers: ``;``-separated, blanks ignored, each a
    ``type:name`` principal (ValueError otherwise)."""
    if value is None:
        return frozenset()
    users = set()
    for item in str(value).split(";"):
        item = item.strip()
        if item:
            parse_principal(item)
            users.add(item)
    return frozenset(users)


def parse_allow_everyone(value: Any) -> bool:
    """StandardAuthorizer.getDefaultResult: Java's Boolean.parseBoolean of the trimmed value."""
    return value is not None and str(value).strip().lower() == "true"


def authorizer_from_configs(configs: Mapping[str, Any]) -> Authorizer | None:
    """The broker's authorizer for its configs: None when ``authorizer.class.name`` is empty
    (Kafka's default), ValueError for a class Krait does not have."""
    name = str(configs.get(AUTHORIZER_CLASS_NAME_CONFIG) or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"Class {name} cannot be found (Krait's authorizer answers to "
                         f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))})")
    return Authorizer.from_configs(configs)


class Authorizer:
    """The ACLs and the checks against them. Mutations (``add``, ``remove``, ``create_acls``,
    ``delete_acls``, ``load_dicts``) keep the index current; every check reads it."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 bindings: Iterable[AclBinding] = ()) -> None:
        self.super_users: frozenset[str] = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        #: bucket look-ups plus entries read by the checks (a test's cost counter)
        self.probes = 0
        self._bindings: dict[AclBinding, None] = {}
        self._literal: dict[ResourceType, dict[str, Bucket]] = {}
        self._prefixed: dict[ResourceType, dict[str, Bucket]] = {}
        self._prefix_count: dict[ResourceType, Counter[int]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        for b in bindings:
            self.add(b)

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> Authorizer:
        """StandardAuthorizer.configure: ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        auth = cls()
        auth.configure(configs)
        return auth

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Re-read the two configs, keeping the ACLs."""
        self.super_users = parse_super_users(configs.get(SUPER_USERS_CONFIG))
        self.allow_everyone_if_no_acl_found = parse_allow_everyone(configs.get(ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG))

    # ------------------------------------------------------------------ the ACLs

    def __len__(self) -> int:
        """Authorizer.aclCount."""
        return len(self._bindings)

    def __contains__(self, binding: object) -> bool:
        return binding in self._bindings

    def add(self, binding: AclBinding) -> bool:
        """Add one binding (validated as CreateAcls does: KafkaError INVALID_REQUEST); False
        if it was there already (Kafka's createAcls answers success for a duplicate)."""
        validate_new_binding(binding)
        if binding in self._bindings:
            return False
        self._bindings[binding] = None
        p = binding.pattern
        t = p.resource_type
        if p.pattern_type == PatternType.PREFIXED:
            buckets = self._prefixed.setdefault(t, {})
            if p.name not in buckets:
                counts = self._prefix_count.setdefault(t, Counter())
                counts[len(p.name)] += 1
                self._prefix_lengths[t] = sorted(counts)
        else:
            buckets = self._literal.setdefault(t, {})
        buckets.setdefault(p.name, {}).setdefault(binding.entry.principal, []).append(binding.entry)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Remove one binding; False if it was not there."""
        if binding not in self._bindings:
            return False
        del self._bindings[binding]
        p, e = binding.pattern, binding.entry
        t = p.resource_type
        prefixed = p.pattern_type == PatternType.PREFIXED
        buckets = (self._prefixed if prefixed else self._literal)[t]
        bucket = buckets[p.name]
        entries = bucket[e.principal]
        entries.remove(e)
        if not entries:
            del bucket[e.principal]
        if not bucket:
            del buckets[p.name]
            if prefixed:
                counts = self._prefix_count[t]
                counts[len(p.name)] -= 1
                if not counts[len(p.name)]:
                    del counts[len(p.name)]
                self._prefix_lengths[t] = sorted(counts)
        return True

    def acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Authorizer.acls (DescribeAcls): the bindings the filter matches, in Kafka's order."""
        f = acl_filter or AclBindingFilter()
        return sorted_bindings(b for b in self._bindings if f.matches(b))

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[KafkaError | None]:
        """CreateAcls: one result per binding, None for success (a duplicate included), the
        KafkaError otherwise. Valid bindings are added even when others fail."""
        results: list[KafkaError | None] = []
        for b in bindings:
            try:
                self.add(b)
            except KafkaError as exc:
                results.append(exc)
            else:
                results.append(None)
        return results

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding] | KafkaError]:
        """DeleteAcls: per filter, the bindings it matched (and which are now gone) or its
        KafkaError. As AclControlManager does, every filter matches against the ACLs as
        they were before the request, so a binding two filters match is reported by both."""
        before = list(self._bindings)
        results: list[list[AclBinding] | KafkaError] = []
        doomed: dict[AclBinding, None] = {}
        for f in filters:
            try:
                validate_filter(f)
            except KafkaError as exc:
                results.append(exc)
                continue
            matched = sorted_bindings(b for b in before if f.matches(b))
            doomed.update(dict.fromkeys(matched))
            results.append(matched)
        for b in doomed:
            self.remove(b)
        return results

    def to_dicts(self) -> list[dict[str, str]]:
        """Every binding, persisted form (``acls.binding_to_dict``), in Kafka's order."""
        return [binding_to_dict(b) for b in sorted_bindings(self._bindings)]

    def load_dicts(self, dicts: Iterable[Mapping[str, Any]]) -> None:
        """Replace every binding with those of a ``to_dicts()`` list (StandardAuthorizer.loadSnapshot)."""
        bindings = [binding_from_dict(dict(d)) for d in dicts]
        for b in list(self._bindings):
            self.remove(b)
        for b in bindings:
            self.add(b)

    # ------------------------------------------------------------------ the checks

    def _buckets(self, resource_type: ResourceType, name: str) -> list[Bucket]:
        """The buckets whose pattern applies to the resource: its literal name, the literal
        wildcard, and each PREFIXED name the name starts with."""
        out: list[Bucket] = []
        probes = 0
        literal = self._literal.get(resource_type)
        if literal:
            probes += 1
            b = literal.get(name)
            if b:
                out.append(b)
            if name != WILDCARD_RESOURCE:
                probes += 1
                b = literal.get(WILDCARD_RESOURCE)
                if b:
                    out.append(b)
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            n = len(name)
            for length in self._prefix_lengths[resource_type]:
                if length > n:
                    break
                probes += 1
                b = prefixed.get(name[:length])
                if b:
                    out.append(b)
        self.probes += probes
        return out

    def _entries(self, principal: str, host: str, resource_type: ResourceType,
                 name: str) -> tuple[bool, list[AccessControlEntry]]:
        """(does the resource have any ACL at all, the entries for this principal and host)."""
        buckets = self._buckets(resource_type, name)
        entries: list[AccessControlEntry] = []
        for bucket in buckets:
            for p in (principal, WILDCARD_PRINCIPAL):
                found = bucket.get(p)
                if found:
                    self.probes += len(found)
                    entries.extend(e for e in found if e.host == WILDCARD_HOST or e.host == host)
        return bool(buckets), entries

    def _decide(self, operation: AclOperation, has_acls: bool, entries: list[AccessControlEntry]) -> bool:
        """StandardAuthorizerData.findResult over the entries, then MatchingRuleBuilder.build."""
        allowed = False
        for e in entries:
            op = e.operation
            if e.permission_type == _ALLOW:
                if not allowed and (op == _ALL or op == operation
                                    or (operation == _O.DESCRIBE and op in IMPLIES_DESCRIBE)
                                    or (operation == _O.DESCRIBE_CONFIGS and op in IMPLIES_DESCRIBE_CONFIGS)):
                    allowed = True
            elif op == _ALL or op == operation:
                return False  # DENY (any non-ALLOW permission is a deny, as in findResult)
        if allowed:
            return True
        return False if has_acls else self.allow_everyone_if_no_acl_found

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """May ``principal`` (``User:alice``) from ``host`` (the client's IP address) perform
        ``operation`` on the resource (a LITERAL resource: a real topic, group, ...)?"""
        if principal in self.super_users:
            return True
        has_acls, entries = self._entries(principal, host, resource_type, name)
        return self._decide(operation, has_acls, entries)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> set[AclOperation]:
        """The supported operations of the resource type the caller may perform (AuthHelper.
        authorizedOperations, for Metadata / DescribeGroups / DescribeCluster bit fields;
        ``operations.to_bit_field`` encodes the set). One index walk for all of them."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if principal in self.super_users:
            return set(supported)
        has_acls, entries = self._entries(principal, host, resource_type, name)
        return {op for op in supported if self._decide(op, has_acls, entries)}

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Authorizer.authorizeByResourceType: may the caller perform ``operation`` on at
        least one resource of the type? (An ALLOW that no DENY of the same pattern type and
        name, or of a PREFIXED name that is a prefix of it, dominates.)"""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError("Must specify a non-filter resource type for authorizeByResourceType"
                             if resource_type == ResourceType.ANY else "Unknown resource type")
        if operation in (_O.ANY, _O.UNKNOWN):
            raise ValueError("Must specify a non-filter operation type for authorizeByResourceType"
                             if operation == _O.ANY else "Unknown operation type")
        # a hard-coded name, so that super users (and allow-everyone) pass whatever the DENYs
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for pattern_type, index in ((PatternType.LITERAL, self._literal), (PatternType.PREFIXED, self._prefixed)):
            for name, bucket in index.get(resource_type, {}).items():
                for p in (principal, WILDCARD_PRINCIPAL):
                    for e in bucket.get(p, ()):
                        if e.host != host and e.host != WILDCARD_HOST:
                            continue
                        if e.operation != operation and e.operation != _ALL:
                            continue
                        literal = pattern_type == PatternType.LITERAL
                        if e.permission_type == _DENY:
                            if literal and name == WILDCARD_RESOURCE:
                                return False
                            (deny_literal if literal else deny_prefixed).add(name)
                        elif e.permission_type == _ALLOW:
                            if literal and name == WILDCARD_RESOURCE:
                                wildcard_allow = True
                            else:
                                (allow_literal if literal else allow_prefixed).add(name)
        if wildcard_allow:
            return True
        for literal, names in ((True, allow_literal), (False, allow_prefixed)):
            for name in names:
                if literal and name in deny_literal:
                    continue
                if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                    return True
        return False
