"""The ACL model and authorizer (broker/security/acls.py, authorizer.py), pure: an ACL
matrix, implied operations, super users, allow.everyone.if.no.acl.found, Kafka's filter
semantics for DescribeAcls/DeleteAcls, CreateAcls validation, persistence, and the cost of
a check with 10,000 ACLs. Cases marked "Kafka:" are ported from StandardAuthorizerTest,
AuthorizerTest (core), AclBindingTest, ResourcePatternFilterTest and AclControlManagerTest."""

from __future__ import annotations

import itertools
import json

import pytest

from broker.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding_from_dict,
    validate_filter,
    validate_new_binding,
)
from broker.security.authorizer import (
    AUTHORIZER_CLASS_NAMES,
    Authorizer,
    authorizer_from_configs,
    parse_allow_everyone,
    parse_super_users,
)
from broker.security.operations import SUPPORTED_OPERATIONS, to_bit_field
from protocol.errors import ErrorCode, KafkaError

Op = AclOperation
T = ResourceType
LITERAL, PREFIXED, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
H = "10.0.0.1"
VALID_OPS = [op for op in Op if op not in (Op.ANY, Op.UNKNOWN)]


def acl(rt: ResourceType, name: str, pt: PatternType, principal: str, op: AclOperation,
        perm: AclPermissionType = ALLOW, host: str = "*") -> AclBinding:
    return AclBinding.of(rt, name, pt, principal, host, op, perm)


def auth_with(*bindings: AclBinding, **kw) -> Authorizer:
    a = Authorizer(**kw)
    assert a.create_acls(bindings) == [None] * len(bindings)
    return a


def check(a: Authorizer, user: str, op: AclOperation, rt: ResourceType, name: str, host: str = H) -> bool:
    return a.authorize(f"User:{user}", host, op, rt, name)


# ------------------------------------------------------------------ the ACL matrix

MATRIX_ACLS = [
    acl(T.TOPIC, "orders", LITERAL, "User:alice", Op.READ),
    acl(T.TOPIC, "orders", LITERAL, "User:alice", Op.WRITE, host="10.0.0.2"),
    acl(T.TOPIC, "pay-", PREFIXED, "User:bob", Op.ALL),
    acl(T.TOPIC, "pay-secret", LITERAL, "User:bob", Op.READ, DENY),
    acl(T.TOPIC, "*", LITERAL, "User:*", Op.DESCRIBE),
    acl(T.TOPIC, "*", LITERAL, "User:mallory", Op.ALL, DENY),
    acl(T.GROUP, "g-", PREFIXED, "User:*", Op.READ),
    acl(T.GROUP, "g-private", LITERAL, "User:carol", Op.READ, DENY, host=H),
    acl(T.CLUSTER, "kafka-cluster", LITERAL, "User:admin", Op.ALTER),
]


@pytest.mark.parametrize("user,op,rt,name,host,expected", [
    # literal names, hosts
    ("alice", Op.READ, T.TOPIC, "orders", H, True),
    ("alice", Op.WRITE, T.TOPIC, "orders", H, False),            # WRITE only from 10.0.0.2
    ("alice", Op.WRITE, T.TOPIC, "orders", "10.0.0.2", True),
    ("alice", Op.READ, T.TOPIC, "orders2", H, False),            # a literal is not a prefix
    ("alice", Op.DELETE, T.TOPIC, "orders", H, False),
    ("dave", Op.READ, T.TOPIC, "orders", H, False),              # not the principal
    ("alice", Op.READ, T.GROUP, "orders", H, False),             # not the resource type
    # prefixed, ALL, deny over allow
    ("bob", Op.WRITE, T.TOPIC, "pay-in", H, True),
    ("bob", Op.ALTER_CONFIGS, T.TOPIC, "pay-", H, True),         # the prefix itself
    ("bob", Op.READ, T.TOPIC, "pay", H, False),                  # shorter than the prefix
    ("bob", Op.READ, T.TOPIC, "pay-secret", H, False),           # DENY READ wins
    ("bob", Op.WRITE, T.TOPIC, "pay-secret", H, True),           # DENY READ denies READ only
    ("bob", Op.DESCRIBE, T.TOPIC, "pay-secret", H, True),        # ... and does not deny DESCRIBE
    # wildcard resource, wildcard principal
    ("dave", Op.DESCRIBE, T.TOPIC, "anything", H, True),
    ("dave", Op.READ, T.TOPIC, "anything", H, False),
    ("mallory", Op.DESCRIBE, T.TOPIC, "orders", H, False),       # DENY ALL on * beats everything
    ("mallory", Op.READ, T.GROUP, "g-1", H, True),               # ... of its resource type only
    ("carol", Op.READ, T.GROUP, "g-private", H, False),          # DENY from this host
    ("carol", Op.READ, T.GROUP, "g-private", "10.9.9.9", True),  # not from another one
    ("dave", Op.READ, T.GROUP, "g-private", H, True),
    ("dave", Op.DESCRIBE, T.GROUP, "g-1", H, True),              # READ implies DESCRIBE
    ("admin", Op.ALTER, T.CLUSTER, "kafka-cluster", H, True),
    ("admin", Op.DESCRIBE, T.CLUSTER, "kafka-cluster", H, True),
    ("admin", Op.CLUSTER_ACTION, T.CLUSTER, "kafka-cluster", H, False),
    ("dave", Op.ALTER, T.CLUSTER, "kafka-cluster", H, False),
])
def test_acl_matrix(user, op, rt, name, host, expected):
    a = auth_with(*MATRIX_ACLS)
    assert check(a, user, op, rt, name, host) is expected


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_matrix_agrees_with_a_brute_force_scan(allow_everyone):
    """Every (principal, host, operation, resource) against a scan of all ACLs written from
    Kafka's rules: the index finds exactly the ACLs that apply."""
    a = auth_with(*MATRIX_ACLS, allow_everyone_if_no_acl_found=allow_everyone)

    def pattern_applies(b: AclBinding, rt: ResourceType, name: str) -> bool:
        p = b.pattern
        if p.resource_type != rt:
            return False
        return name.startswith(p.name) if p.pattern_type == PREFIXED else p.name in (name, "*")

    def expected(principal, host, op, rt, name):
        on_resource = [b for b in MATRIX_ACLS if pattern_applies(b, rt, name)]
        mine = [b.entry for b in on_resource
                if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")]
        if any(e.permission_type == DENY and e.operation in (op, Op.ALL) for e in mine):
            return False
        implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}
        if any(e.operation in ({op, Op.ALL} | implied.get(op, set())) for e in mine if e.permission_type == ALLOW):
            return True
        return False if on_resource else a.allow_everyone_if_no_acl_found

    users = ["User:alice", "User:bob", "User:carol", "User:mallory", "User:admin", "User:dave", "Group:alice"]
    names = ["orders", "orders2", "pay", "pay-", "pay-in", "pay-secret", "g-1", "g-private", "kafka-cluster", "*"]
    n = 0
    for user, host, op, rt, name in itertools.product(users, [H, "10.0.0.2"], VALID_OPS,
                                                     [T.TOPIC, T.GROUP, T.CLUSTER], names):
        assert a.authorize(user, host, op, rt, name) is expected(user, host, op, rt, name), (user, host, op, rt, name)
        n += 1
    assert n == 7 * 2 * len(VALID_OPS) * 3 * 10


# ------------------------------------------------------------------ implied operations


@pytest.mark.parametrize("parent,implied", [
    (Op.ALL, set(VALID_OPS)),
    (Op.READ, {Op.DESCRIBE}), (Op.WRITE, {Op.DESCRIBE}), (Op.DELETE, {Op.DESCRIBE}), (Op.ALTER, {Op.DESCRIBE}),
    (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}),
    (Op.CREATE, set()), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()), (Op.IDEMPOTENT_WRITE, set()),
])
def test_implications_of_allow(parent, implied):
    """Kafka: AuthorizerTest.testAclInheritance (testImplicationsOfAllow)."""
    a = auth_with(acl(T.CLUSTER, "kafka-cluster", LITERAL, "User:u", parent))
    for op in VALID_OPS:
        assert check(a, "u", op, T.CLUSTER, "kafka-cluster") is (op == parent or op in implied), op


@pytest.mark.parametrize("parent,denied", [
    (Op.ALL, set(VALID_OPS)), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()),
    (Op.READ, set()), (Op.ALTER_CONFIGS, set()),
])
def test_implications_of_deny(parent, denied):
    """Kafka: testImplicationsOfDeny: a DENY implies nothing but itself (ALL: everything)."""
    a = auth_with(acl(T.CLUSTER, "kafka-cluster", LITERAL, "User:u", parent, DENY),
                  acl(T.CLUSTER, "kafka-cluster", LITERAL, "User:u", Op.ALL))
    for op in VALID_OPS:
        assert check(a, "u", op, T.CLUSTER, "kafka-cluster") is not (op == parent or op in denied), op


def test_deny_precedence_with_operation_all():
    """Kafka: StandardAuthorizerTest.testDenyPrecedenceWithOperationAll."""
    a = auth_with(acl(T.TOPIC, "foo", LITERAL, "User:alice", Op.ALL, DENY),
                  acl(T.TOPIC, "foo", PREFIXED, "User:alice", Op.READ),
                  acl(T.TOPIC, "foo", LITERAL, "User:*", Op.ALL, DENY),
                  acl(T.TOPIC, "foo", PREFIXED, "User:*", Op.DESCRIBE))
    assert [check(a, "alice", op, T.TOPIC, n) for op, n in
            [(Op.WRITE, "foo"), (Op.READ, "foo"), (Op.DESCRIBE, "foo"), (Op.READ, "foobar")]] == [False, False, False, True]
    assert [check(a, "bob", op, T.TOPIC, n) for op, n in
            [(Op.DESCRIBE, "foo"), (Op.READ, "foo"), (Op.WRITE, "foo"), (Op.DESCRIBE, "foobaz"), (Op.READ, "foobaz")]
            ] == [False, False, False, True, False]


def test_many_acls_and_prefix_acls():
    """Kafka: testAuthorizationWithManyAcls, testPrefixAcls, testSingleCharacterResourceAcls."""
    a = auth_with(acl(T.TOPIC, "green2", LITERAL, "User:*", Op.READ),
                  acl(T.TOPIC, "green", PREFIXED, "User:bob", Op.READ),
                  acl(T.TOPIC, "betamax4", LITERAL, "User:bob", Op.READ),
                  acl(T.TOPIC, "betamax", LITERAL, "User:bob", Op.READ),
                  acl(T.TOPIC, "beta", PREFIXED, "User:*", Op.READ),
                  acl(T.TOPIC, "alpha", PREFIXED, "User:*", Op.READ),
                  acl(T.TOPIC, "alp", PREFIXED, "User:bob", Op.READ, DENY),
                  acl(T.GROUP, "*", LITERAL, "User:bob", Op.WRITE),
                  acl(T.GROUP, "wheel", LITERAL, "User:*", Op.WRITE, DENY))
    assert [check(a, "bob", Op.READ, T.TOPIC, "green1"), check(a, "bob", Op.WRITE, T.GROUP, "wheel")] == [True, False]
    assert [check(a, "bob", Op.READ, T.TOPIC, "alpha"), check(a, "bob", Op.WRITE, T.GROUP, "arbitrary"),
            check(a, "bob", Op.READ, T.TOPIC, "ala")] == [False, True, False]

    b = auth_with(acl(T.TOPIC, "fooa", PREFIXED, "User:alice", Op.ALL),
                  acl(T.TOPIC, "foobar", LITERAL, "User:bob", Op.ALL),
                  acl(T.TOPIC, "f", PREFIXED, "User:bob", Op.ALL))
    assert [check(b, "bob", Op.WRITE, T.TOPIC, "foobarr"), check(b, "bob", Op.READ, T.TOPIC, "goobar"),
            check(b, "bob", Op.READ, T.TOPIC, "fooa")] == [True, False, True]
    assert [check(b, "alice", Op.DESCRIBE, T.TOPIC, "fooa"), check(b, "alice", Op.WRITE, T.TOPIC, "bar")] == [True, False]

    c = auth_with(acl(T.TOPIC, "f", LITERAL, "User:u", Op.READ), acl(T.TOPIC, "_", PREFIXED, "User:u", Op.READ))
    assert [check(c, "u", Op.READ, T.TOPIC, n) for n in ("f", "foo", "_foo", "_", "foo_")] == [True, False, True, True, False]
    # a PREFIXED "*" is a prefix like any other, not a wildcard
    d = auth_with(acl(T.TOPIC, "*", PREFIXED, "User:u", Op.READ))
    assert [check(d, "u", Op.READ, T.TOPIC, n) for n in ("*x", "x")] == [True, False]


def test_host_matching():
    """Kafka: StandardAuthorizerTest.testHostAddressAclValidation."""
    local, h1, h2 = "127.0.0.1", "192.168.1.1", "192.168.1.2"
    a = auth_with(acl(T.TOPIC, "foo", LITERAL, "User:alice", Op.READ, DENY, host=h1),
                  acl(T.TOPIC, "foo", LITERAL, "User:alice", Op.READ),
                  acl(T.TOPIC, "bar", LITERAL, "User:bob", Op.READ, host=h2),
                  acl(T.TOPIC, "bar", LITERAL, "User:*", Op.DESCRIBE, host=local))
    actions = [(Op.READ, "foo"), (Op.READ, "bar"), (Op.DESCRIBE, "bar")]
    table = {("alice", local): [True, False, True], ("alice", h1): [False, False, False],
             ("alice", h2): [True, False, False], ("bob", local): [False, False, True],
             ("bob", h1): [False, False, False], ("bob", h2): [False, True, True]}
    for (user, host), want in table.items():
        assert [check(a, user, op, T.TOPIC, n, host) for op, n in actions] == want, (user, host)


# ------------------------------------------------------------------ super users, default rule


def test_super_users_and_config_parsing():
    """Kafka: testGetConfiguredSuperUsers, testGetDefaultResult, testSuperUserHasAccess."""
    assert parse_super_users(None) == frozenset() == parse_super_users(" ")
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        parse_super_users("bob;:alice")
    assert [parse_allow_everyone(v) for v in (None, "true", " TRUE ", "false", "yes", True)] == [
        False, True, True, False, False, True]

    a = Authorizer.from_configs({"super.users": "User:superman", "allow.everyone.if.no.acl.found": "false"})
    a.create_acls([acl(T.TOPIC, "*", LITERAL, "User:*", Op.ALL, DENY)])
    for op in VALID_OPS:
        assert check(a, "superman", op, T.TOPIC, "t")
        assert not check(a, "clark", op, T.TOPIC, "t")
    assert a.authorized_operations("User:superman", H, T.GROUP, "g") == set(SUPPORTED_OPERATIONS[T.GROUP])


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_allow_everyone_if_no_acl_found(allow_everyone):
    """Kafka: testAllowEveryoneIfNoAclFoundConfigEnabled/Disabled: the default applies only
    to resources without any ACL; an ACL for someone else on the resource means DENIED."""
    a = Authorizer.from_configs({"allow.everyone.if.no.acl.found": str(allow_everyone).lower()})
    assert check(a, "bob", Op.READ, T.TOPIC, "topic1") is allow_everyone  # no ACL at all
    a.create_acls([acl(T.TOPIC, "topic1", LITERAL, "User:Alice", Op.READ)])
    assert check(a, "bob", Op.READ, T.TOPIC, "topic1") is False
    assert check(a, "Alice", Op.READ, T.TOPIC, "topic1") is True
    assert check(a, "Alice", Op.WRITE, T.TOPIC, "topic1") is False     # ACLs exist: no default
    assert check(a, "bob", Op.READ, T.TOPIC, "topic2") is allow_everyone
    # an ACL that applies through a prefix or the wildcard counts as an ACL of the resource
    a.create_acls([acl(T.GROUP, "g", PREFIXED, "User:x", Op.READ), acl(T.TRANSACTIONAL_ID, "*", LITERAL, "User:x", Op.WRITE)])
    assert check(a, "bob", Op.READ, T.GROUP, "g1") is False
    assert check(a, "bob", Op.READ, T.GROUP, "h1") is allow_everyone
    assert check(a, "bob", Op.WRITE, T.TRANSACTIONAL_ID, "tx") is False
    # Kafka: testAuthorizeWithEmptyResourceName: the wildcard applies to the empty name
    assert check(a, "x", Op.WRITE, T.TRANSACTIONAL_ID, "") is True


def test_authorized_operations():
    a = auth_with(acl(T.TOPIC, "t", LITERAL, "User:u", Op.WRITE),
                  acl(T.TOPIC, "t", LITERAL, "User:u", Op.ALTER_CONFIGS),
                  acl(T.TOPIC, "t", PREFIXED, "User:*", Op.READ),
                  acl(T.TOPIC, "t", LITERAL, "User:u", Op.READ, DENY),
                  acl(T.GROUP, "*", LITERAL, "User:u", Op.ALL))
    ops = a.authorized_operations("User:u", H, T.TOPIC, "t")
    assert ops == {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert a.authorized_operations("User:v", H, T.TOPIC, "tt") == {Op.READ, Op.DESCRIBE}
    assert a.authorized_operations("User:u", H, T.GROUP, "g") == set(SUPPORTED_OPERATIONS[T.GROUP])
    assert a.authorized_operations("User:v", H, T.GROUP, "g") == set()
    # the same answers as one authorize() per supported operation, and a bit field
    for user, rt, name in [("User:u", T.TOPIC, "t"), ("User:v", T.TOPIC, "tt"), ("User:v", T.CLUSTER, "kafka-cluster")]:
        assert a.authorized_operations(user, H, rt, name) == {
            op for op in SUPPORTED_OPERATIONS[rt] if a.authorize(user, H, op, rt, name)}
    assert to_bit_field(ops) == (1 << 4) | (1 << 8) | (1 << 10) | (1 << 11)


def test_authorize_by_resource_type():
    """Kafka's Authorizer.authorizeByResourceType default (AuthorizerTest / its benchmark)."""
    u = "User:u"
    assert Authorizer(allow_everyone_if_no_acl_found=True).authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    assert not Authorizer().authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    assert Authorizer(super_users={u}).authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    a = auth_with(acl(T.TOPIC, "abc", LITERAL, u, Op.WRITE))
    assert a.authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    assert not a.authorize_by_resource_type(u, H, Op.READ, T.TOPIC)
    assert not a.authorize_by_resource_type("User:v", H, Op.WRITE, T.TOPIC)
    a.create_acls([acl(T.TOPIC, "ab", PREFIXED, u, Op.WRITE, DENY)])           # dominates abc
    assert not a.authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    a.create_acls([acl(T.TOPIC, "x", PREFIXED, "User:*", Op.ALL)])
    assert a.authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    a.create_acls([acl(T.TOPIC, "*", LITERAL, u, Op.WRITE, DENY)])             # wildcard deny: no
    assert not a.authorize_by_resource_type(u, H, Op.WRITE, T.TOPIC)
    with pytest.raises(ValueError):
        a.authorize_by_resource_type(u, H, Op.ANY, T.TOPIC)
    with pytest.raises(ValueError):
        a.authorize_by_resource_type(u, H, Op.READ, T.ANY)


# ------------------------------------------------------------------ filters (DescribeAcls/DeleteAcls)

ACL1 = AclBinding(ResourcePattern(T.TOPIC, "mytopic", LITERAL), AccessControlEntry("User:ANONYMOUS", "", Op.ALL, ALLOW))
ACL2 = AclBinding(ResourcePattern(T.TOPIC, "mytopic", LITERAL), AccessControlEntry("User:*", "", Op.READ, ALLOW))
ACL3 = AclBinding(ResourcePattern(T.TOPIC, "mytopic2", LITERAL),
                  AccessControlEntry("User:ANONYMOUS", "127.0.0.1", Op.READ, DENY))
UNKNOWN_ACL = AclBinding(ResourcePattern(T.TOPIC, "mytopic2", LITERAL),
                         AccessControlEntry("User:ANONYMOUS", "127.0.0.1", Op.UNKNOWN, DENY))
ANY_ANONYMOUS = AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter("User:ANONYMOUS", None))
ANY_DENY = AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter(permission_type=DENY))
ANY_MYTOPIC = AclBindingFilter(ResourcePatternFilter(T.TOPIC, "mytopic", LITERAL), AccessControlEntryFilter())


def test_acl_binding_filter_matching():
    """Kafka: AclBindingTest.testMatching, testUnknowns, testMatchesAtMostOne and the
    constructor checks."""
    everything = AclBindingFilter()
    assert all(everything.matches(b) for b in (ACL1, ACL2, ACL3, UNKNOWN_ACL))
    assert [ANY_ANONYMOUS.matches(b) for b in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [True, False, True, True]
    assert [ANY_DENY.matches(b) for b in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [False, False, True, True]
    assert [ANY_MYTOPIC.matches(b) for b in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [True, True, False, False]
    assert ACL1 == AclBinding.of(T.TOPIC, "mytopic", LITERAL, "User:ANONYMOUS", "", Op.ALL, ALLOW) != ACL2
    assert UNKNOWN_ACL.is_unknown() and not any(b.is_unknown() for b in (ACL1, ACL2, ACL3))
    assert not any(f.is_unknown() for f in (ANY_ANONYMOUS, ANY_DENY, ANY_MYTOPIC))
    assert all(b.to_filter().find_indefinite_field() is None for b in (ACL1, ACL2, ACL3))
    assert not any(f.matches_at_most_one() for f in (ANY_ANONYMOUS, ANY_DENY, ANY_MYTOPIC))
    assert ResourcePattern(T.TOPIC, "foo", PatternType.UNKNOWN).is_unknown()     # allowed, unknown
    assert ResourcePattern(T.UNKNOWN, "foo", LITERAL).is_unknown()
    for bad in (lambda: ResourcePattern(T.TOPIC, "foo", MATCH), lambda: ResourcePattern(T.TOPIC, "foo", ANY),
                lambda: ResourcePattern(T.ANY, "foo", LITERAL),
                lambda: AccessControlEntry("User:a", "*", Op.ANY, ALLOW),
                lambda: AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize("flt,pattern,expected", [
    ((T.UNKNOWN, None, LITERAL), None, "unknown"),
    ((T.GROUP, None, PatternType.UNKNOWN), None, "unknown"),
    ((T.TOPIC, "Name", LITERAL), (T.GROUP, "Name", LITERAL), False),
    ((T.TOPIC, "Different", PREFIXED), (T.TOPIC, "Name", PREFIXED), False),
    ((T.TOPIC, "NAME", LITERAL), (T.TOPIC, "Name", LITERAL), False),
    ((T.TOPIC, "Name", LITERAL), (T.TOPIC, "Name", PREFIXED), False),
    ((T.ANY, "Name", PREFIXED), (T.TOPIC, "Name", PREFIXED), True),
    ((T.TOPIC, None, PREFIXED), (T.TOPIC, "Name", PREFIXED), True),
    ((T.TOPIC, None, ANY), (T.TOPIC, "Name", PREFIXED), True),
    ((T.TOPIC, None, MATCH), (T.TOPIC, "Name", PREFIXED), True),
    ((T.TOPIC, "Name", LITERAL), (T.TOPIC, "Name", LITERAL), True),
    ((T.TOPIC, "Name", ANY), (T.TOPIC, "Name", LITERAL), True),
    ((T.TOPIC, "Name", MATCH), (T.TOPIC, "Name", LITERAL), True),
    ((T.TOPIC, "Name-something", MATCH), (T.TOPIC, "Name", LITERAL), False),
    ((T.TOPIC, "*", LITERAL), (T.TOPIC, "*", LITERAL), True),
    ((T.TOPIC, "Name", LITERAL), (T.TOPIC, "*", LITERAL), False),
    ((T.TOPIC, "*", LITERAL), (T.TOPIC, "Name", LITERAL), False),
    ((T.TOPIC, "Name", ANY), (T.TOPIC, "*", LITERAL), False),
    ((T.TOPIC, "Name", MATCH), (T.TOPIC, "*", LITERAL), True),
    ((T.TOPIC, "Name", PREFIXED), (T.TOPIC, "Name", PREFIXED), True),
    ((T.TOPIC, "Name", PREFIXED), (T.TOPIC, "Name-something", PREFIXED), False),
    ((T.TOPIC, "Name-something", PREFIXED), (T.TOPIC, "Name", PREFIXED), False),
    ((T.TOPIC, "Name-something", ANY), (T.TOPIC, "Name", PREFIXED), False),
    ((T.TOPIC, "Name-something", MATCH), (T.TOPIC, "Name", PREFIXED), True),
])
def test_resource_pattern_filter(flt, pattern, expected):
    """Kafka: ResourcePatternFilterTest, every case."""
    f = ResourcePatternFilter(*flt)
    if expected == "unknown":
        assert f.is_unknown()
    else:
        assert f.matches(ResourcePattern(*pattern)) is expected


def test_describe_and_delete_with_filters():
    """Kafka: AuthorizerTest.testAclsFilter, testGetAclsPrincipal, StandardAuthorizerTest.testListAcls."""
    p = "User:alice"
    acl1 = acl(T.TOPIC, "foo-1", LITERAL, p, Op.READ)
    acl2 = acl(T.TOPIC, "foo-1", LITERAL, p, Op.WRITE, host="192.168.0.1")
    acl3 = acl(T.TOPIC, "bar-1", LITERAL, p, Op.DESCRIBE)
    acl4 = acl(T.TOPIC, "bar-", PREFIXED, "User:*", Op.READ)
    a = auth_with(acl1, acl2, acl3, acl4)
    assert set(a.acls()) == {acl1, acl2, acl3, acl4}
    assert set(a.acls(AclBindingFilter(acl1.pattern.to_filter()))) == {acl1, acl2}
    assert set(a.acls(AclBindingFilter(acl4.pattern.to_filter()))) == {acl4}
    matching = AclBindingFilter(ResourcePatternFilter(T.ANY, "bar-1", MATCH))
    assert set(a.acls(matching)) == {acl3, acl4}
    # a principal filter is exact: User:* does not stand for alice, nor alice for User:*
    assert a.acls(AclBindingFilter(entry_filter=AccessControlEntryFilter("User:*"))) == [acl4]
    assert set(a.acls(AclBindingFilter(entry_filter=AccessControlEntryFilter(p)))) == {acl1, acl2, acl3}
    assert a.acls(AclBindingFilter(entry_filter=AccessControlEntryFilter(host="192.168.0.1"))) == [acl2]

    filters = [matching, acl1.to_filter(), AclBindingFilter(acl3.pattern.to_filter()),
               AclBindingFilter(ResourcePatternFilter(T.TOPIC, "baz", ANY)),
               AclBindingFilter(ResourcePatternFilter(T.TOPIC, None, PatternType.UNKNOWN))]
    results = a.delete_acls(filters)
    assert set(results[0]) == {acl3, acl4}
    assert results[1] == [acl1]
    assert results[2] == [acl3]           # matched before the request: reported by both filters
    assert results[3] == []
    assert isinstance(results[4], KafkaError) and results[4].error_code == ErrorCode.invalid_request
    assert results[4].message == "Unknown patternFilter."
    assert a.acls() == [acl2] and len(a) == 1
    # Kafka's listing order: resource type, name REVERSED, pattern type, operation, ...
    b = auth_with(acl(T.GROUP, "g", LITERAL, p, Op.READ), acl(T.TOPIC, "a", LITERAL, p, Op.READ),
                  acl(T.TOPIC, "b", PREFIXED, p, Op.READ), acl(T.TOPIC, "b", LITERAL, p, Op.WRITE),
                  acl(T.TOPIC, "b", LITERAL, p, Op.READ))
    assert [(x.pattern.resource_type, x.pattern.name, x.pattern.pattern_type, x.entry.operation) for x in b.acls()] == [
        (T.TOPIC, "b", LITERAL, Op.READ), (T.TOPIC, "b", LITERAL, Op.WRITE), (T.TOPIC, "b", PREFIXED, Op.READ),
        (T.TOPIC, "a", LITERAL, Op.READ), (T.GROUP, "g", LITERAL, Op.READ)]


# ------------------------------------------------------------------ CreateAcls validation, persistence


def test_create_acls_validation():
    """Kafka: AclControlManagerTest.testValidateNewAcl / testValidateFilter, AclApis' checks."""
    ok = AccessControlEntry("User:*", "*", Op.ALTER, ALLOW)
    validate_new_binding(AclBinding(ResourcePattern(T.TOPIC, "*", LITERAL), ok))
    validate_new_binding(AclBinding(ResourcePattern(T.TOPIC, "*", PREFIXED), ok))    # a prefix "*" is valid
    validate_new_binding(AclBinding(ResourcePattern(T.CLUSTER, "kafka-cluster", LITERAL), ok))
    cases = [
        (AclBinding(ResourcePattern(T.TOPIC, "*", PatternType.UNKNOWN), ok), "Invalid patternType UNKNOWN"),
        (AclBinding(ResourcePattern(T.UNKNOWN, "*", LITERAL), ok), "Invalid resourceType UNKNOWN"),
        (AclBinding(ResourcePattern(T.TOPIC, "*", LITERAL), AccessControlEntry("User:*", "*", Op.UNKNOWN, ALLOW)),
         "Invalid operation UNKNOWN"),
        (AclBinding(ResourcePattern(T.TOPIC, "*", LITERAL),
                    AccessControlEntry("User:*", "*", Op.ALTER, AclPermissionType.UNKNOWN)),
         "Invalid permissionType UNKNOWN"),
        (AclBinding(ResourcePattern(T.GROUP, "", LITERAL), ok), "Invalid empty resource name"),
        (AclBinding(ResourcePattern(T.CLUSTER, "*", LITERAL), ok),
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (AclBinding(ResourcePattern(T.TOPIC, "t", LITERAL), AccessControlEntry("alice", "*", Op.READ, ALLOW)),
         "Could not parse principal from `alice` (no colon is present separating the principal type "
         "from the principal name)"),
    ]
    a = Authorizer()
    results = a.create_acls([b for b, _ in cases] + [acl(T.TOPIC, "t", LITERAL, "User:a", Op.READ)] * 2)
    for (_, message), err in zip(cases, results, strict=False):
        assert isinstance(err, KafkaError) and err.error_code == ErrorCode.invalid_request
        assert err.message == message
    assert results[-2:] == [None, None]                 # a duplicate succeeds, stored once
    assert len(a) == 1
    validate_filter(AclBindingFilter(ResourcePatternFilter(T.ANY, "*", LITERAL), AccessControlEntryFilter("User:*", "*")))
    with pytest.raises(KafkaError, match="Unknown entryFilter."):
        validate_filter(AclBindingFilter(ResourcePatternFilter(T.ANY, "*", MATCH),
                                         AccessControlEntryFilter("User:*", "*", Op.ANY, AclPermissionType.UNKNOWN)))
    # wire codes: unknown codes become UNKNOWN, ANY/MATCH in a binding are refused
    assert AclBinding.from_codes(2, "t", 3, "User:a", "*", 99, 3).entry.operation == Op.UNKNOWN
    with pytest.raises(ValueError):
        AclBinding.from_codes(2, "t", 2, "User:a", "*", 3, 3)
    assert AclBindingFilter.from_codes(1, None, 1, None, None, 1, 1) == AclBindingFilter()


def test_persisted_form_round_trips():
    a = auth_with(*MATRIX_ACLS, super_users={"User:root"})
    doc = json.loads(json.dumps(a.to_dicts()))
    assert doc[0] == {"resource_type": "TOPIC", "resource_name": "pay-secret", "pattern_type": "LITERAL",
                      "principal": "User:bob", "host": "*", "operation": "READ", "permission_type": "DENY"}
    b = Authorizer()
    b.create_acls([acl(T.TOPIC, "stale", LITERAL, "User:x", Op.READ)])
    b.load_dicts(doc)
    assert b.acls() == a.acls() and b.to_dicts() == doc
    assert binding_from_dict({**doc[0], "operation": "Read", "resource_type": "Topic"}) == binding_from_dict(doc[0])
    with pytest.raises(ValueError):
        binding_from_dict({**doc[0], "operation": "Fly"})
    with pytest.raises(ValueError):
        binding_from_dict({k: v for k, v in doc[0].items() if k != "host"})


def test_remove_keeps_the_index_consistent():
    a = Authorizer()
    bs = [acl(T.TOPIC, "p", PREFIXED, "User:u", Op.READ), acl(T.TOPIC, "pq", PREFIXED, "User:u", Op.READ, DENY),
          acl(T.TOPIC, "pqr", LITERAL, "User:*", Op.WRITE)]
    a.create_acls(bs)
    assert not check(a, "u", Op.READ, T.TOPIC, "pqr")
    assert a.remove(bs[1]) and not a.remove(bs[1])
    assert check(a, "u", Op.READ, T.TOPIC, "pqr")
    a.remove(bs[0])
    a.remove(bs[2])
    assert len(a) == 0 and a._prefix_lengths[T.TOPIC] == [] and not a._literal[T.TOPIC]
    assert check(Authorizer(allow_everyone_if_no_acl_found=True), "u", Op.READ, T.TOPIC, "pqr")


def test_authorizer_class_names():
    assert authorizer_from_configs({}) is None
    assert authorizer_from_configs({"authorizer.class.name": ""}) is None
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"):
        assert name in AUTHORIZER_CLASS_NAMES
        a = authorizer_from_configs({"authorizer.class.name": f" {name} ", "super.users": "User:admin",
                                     "allow.everyone.if.no.acl.found": "true"})
        assert isinstance(a, Authorizer) and a.super_users == {"User:admin"} and a.allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="com.example.Custom"):
        authorizer_from_configs({"authorizer.class.name": "com.example.Custom"})


# ------------------------------------------------------------------ cost with 10,000 ACLs


def _ten_thousand() -> tuple[Authorizer, list[AclBinding]]:
    bindings = []
    for i in range(10_000):
        kind = i % 4
        if kind == 0:
            bindings.append(acl(T.TOPIC, f"topic-{i}", LITERAL, f"User:u{i % 97}", Op.READ))
        elif kind == 1:
            bindings.append(acl(T.TOPIC, f"team{i % 500}-", PREFIXED, f"User:u{i}", Op.WRITE))
        elif kind == 2:
            bindings.append(acl(T.GROUP, f"g-{i}", LITERAL, "User:*", Op.READ, host=f"10.1.{i % 250}.{i % 200}"))
        else:
            bindings.append(acl(T.TOPIC, "*", LITERAL, f"User:w{i}", Op.DESCRIBE))
    a = Authorizer()
    assert a.create_acls(bindings) == [None] * len(bindings)
    return a, bindings


def test_a_check_does_not_scan_ten_thousand_acls():
    """The index visits the literal name, ``*`` and one prefix per distinct PREFIXED length,
    then only the caller's entries: a bounded number of probes out of 10,000 ACLs."""
    a, _ = _ten_thousand()
    assert len(a) == 10_000
    name = "team42-orders"
    a.probes = 0
    assert check(a, "u4", Op.READ, T.TOPIC, "topic-4")
    assert a.probes <= 2 + len(a._prefix_lengths[T.TOPIC]) + 1      # 2 literal probes, the prefixes, u4's entry
    a.probes = 0
    assert not check(a, "nobody", Op.WRITE, T.TOPIC, name)
    assert a.probes <= 2 + len(name)
    a.probes = 0
    a.authorized_operations("User:w3", H, T.TOPIC, name)
    assert a.probes <= 2 + len(name) + 1
