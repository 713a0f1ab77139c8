"""DescribeClientQuotas / AlterClientQuotas over real sockets: the repo's wire client
against a broker process (validation and error messages as Kafka's
ClientQuotaControlManager and ClientQuotasImage, validate_only, match types and strict,
authorization on the cluster, persistence across a restart) and Kafka's own Java Admin
client (alterClientQuotas / describeClientQuotas)."""

from __future__ import annotations

import pytest

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.krait_harness import BrokerProcess, JavaProgram

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("quotas") / "logs")).start()
    yield b
    b.stop()


def _client(b: BrokerProcess) -> WireClient:
    return WireClient("127.0.0.1", b.port)


def _ent(**names):
    """entity data from user= / client_id= (None: the default)."""
    return [{"entity_type": "client-id" if k == "client_id" else k, "entity_name": v} for k, v in names.items()]


def alter(c: WireClient, entries: list[tuple[list, list]], validate_only: bool = False, version: int = 1):
    """entries: (entity data, ops as (key, value) or (key, None) to remove) -> [(code, message)]."""
    r = c.request(ApiKey.ALTER_CLIENT_QUOTAS, version, validate_only=validate_only, entries=[
        {"entity": ent, "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                                for k, v in ops]} for ent, ops in entries])
    assert len(r.entries) == len(entries)
    return [(e.error_code, e.error_message) for e in r.entries]


def describe(c: WireClient, components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1):
    """-> (error code, message, {((type, name), ...): {key: value}}) with sorted entity tuples."""
    r = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, strict=strict, components=[
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components])
    if r.entries is None:
        return r.error_code, r.error_message, None
    out = {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
           {v.key: v.value for v in entry.values} for entry in r.entries}
    return r.error_code, r.error_message, out


OK = (ErrorCode.none, None)


def test_alter_then_describe_every_level(broker):
    with _client(broker) as c:
        res = alter(c, [
            (_ent(user="alice"), [("producer_byte_rate", 1024), ("request_percentage", 12.5)]),
            (_ent(user="alice", client_id="app"), [("consumer_byte_rate", 4096)]),
            (_ent(user=None), [("producer_byte_rate", 100)]),
            (_ent(client_id=None), [("consumer_byte_rate", 200)]),
            (_ent(user=None, client_id=None), [("controller_mutation_rate", 5)]),
            (_ent(client_id="a b*c"), [("producer_byte_rate", 300)]),
        ])
        assert res == [OK] * 6
        code, msg, got = describe(c, [])
        assert (code, msg) == OK
        assert got == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
            (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 4096.0},
            (("user", None),): {"producer_byte_rate": 100.0},
            (("client-id", None),): {"consumer_byte_rate": 200.0},
            (("client-id", None), ("user", None)): {"controller_mutation_rate": 5.0},
            (("client-id", "a b*c"),): {"producer_byte_rate": 300.0},
        }
        # exact user: alice alone and alice's pairs (not strict)
        _, _, got = describe(c, [("user", EXACT, "alice")])
        assert set(got) == {(("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
        # strict: only the entity with exactly that shape
        _, _, got = describe(c, [("user", EXACT, "alice")], strict=True)
        assert set(got) == {(("user", "alice"),)}
        # the default user, with or without a client part
        _, _, got = describe(c, [("user", DEFAULT, None)])
        assert set(got) == {(("user", None),), (("client-id", None), ("user", None))}
        # "specified" matches any name, the default included (ClientQuotasImage.matches)
        _, _, got = describe(c, [("client-id", SPECIFIED, None), ("user", SPECIFIED, None)], strict=True)
        assert set(got) == {(("client-id", "app"), ("user", "alice")), (("client-id", None), ("user", None))}
        # client-id entities only, the sanitized name coming back as given
        _, _, got = describe(c, [("client-id", SPECIFIED, None)], strict=True)
        assert set(got) == {(("client-id", None),), (("client-id", "a b*c"),)}
        # no IP quotas here
        assert describe(c, [("ip", SPECIFIED, None)])[2] == {}
        # v0 too
        assert describe(c, [("user", EXACT, "alice")], strict=True, version=0)[2] == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}

        # remove one key, then the other: the entity goes
        assert alter(c, [(_ent(user="alice"), [("request_percentage", None)])]) == [OK]
        assert describe(c, [("user", EXACT, "alice")], strict=True)[2] == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0}}
        assert alter(c, [(_ent(user="alice"), [("producer_byte_rate", None), ("consumer_byte_rate", None)])],
                     version=0) == [OK]
        assert describe(c, [("user", EXACT, "alice")], strict=True)[2] == {}


def test_alter_validation_as_kafka(broker):
    inv = ErrorCode.invalid_request
    with _client(broker) as c:
        res = alter(c, [
            (_ent(user="v1"), [("producer_byte_rate", 10.5)]),
            (_ent(user="v2"), [("consumer_byte_rate", 0)]),
            (_ent(user="v3"), [("request_percentage", -1)]),
            (_ent(user="v4"), [("no_such_quota", 1)]),
            (_ent(user=""), [("producer_byte_rate", 1)]),
            ([{"entity_type": "group", "entity_name": "g"}], [("producer_byte_rate", 1)]),
            ([], [("producer_byte_rate", 1)]),
            (_ent(user="v5"), [("producer_byte_rate", 1), ("producer_byte_rate", 2)]),
            (_ent(ip="10.0.0.1", user="v6"), [("connection_creation_rate", 1)]),
            (_ent(user="v7"), [("producer_byte_rate", 1e19)]),
            (_ent(user="v8"), [("producer_byte_rate", 7)]),  # the one valid entry
            (_ent(user="v8"), [("producer_byte_rate", 8)]),
        ])
        assert res == [
            (inv, "producer_byte_rate cannot be a fractional value."),
            (inv, "Quota consumer_byte_rate must be greater than 0"),
            (inv, "Quota request_percentage must be greater than 0"),
            (inv, "Invalid configuration key no_such_quota"),
            (inv, "Empty user not supported"),
            (inv, "Unhandled client quota entity type: group"),
            (inv, "Invalid empty client quota entity"),
            (inv, "Duplicate quota key producer_byte_rate not updating quota for this entity "
                  "ClientQuotaEntity(entries={user=v5})"),
            (inv, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
            (inv, "Proposed value for producer_byte_rate is too large for a LONG."),
            OK,
            (inv, "Ignoring duplicate entity ClientQuotaEntity(entries={user=v8})"),
        ]
        _, _, got = describe(c, [("user", SPECIFIED, None)], strict=True)
        assert {k: v for k, v in got.items() if (k[0][1] or "").startswith("v")} == {
            (("user", "v8"),): {"producer_byte_rate": 7.0}}


def test_validate_only_writes_nothing(broker):
    with _client(broker) as c:
        assert alter(c, [(_ent(client_id="dry"), [("producer_byte_rate", 5)])], validate_only=True) == [OK]
        assert describe(c, [("client-id", EXACT, "dry")])[2] == {}
        res = alter(c, [(_ent(client_id="dry"), [("producer_byte_rate", 0.5)])], validate_only=True)
        assert res == [(ErrorCode.invalid_request, "producer_byte_rate cannot be a fractional value.")]


def test_describe_filter_errors(broker):
    inv = ErrorCode.invalid_request
    with _client(broker) as c:
        assert describe(c, [("user", EXACT, None)]) == (
            inv, "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)
        assert describe(c, [("user", DEFAULT, "x")]) == (
            inv, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.", None)
        assert describe(c, [("user", SPECIFIED, "x")]) == (
            inv, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.", None)
        assert describe(c, [("user", 7, None)]) == (inv, "Unknown match type 7", None)
        assert describe(c, [("user", SPECIFIED, None), ("user", DEFAULT, None)]) == (
            inv, "Entity type user cannot appear more than once in the filter.", None)
        assert describe(c, [("", SPECIFIED, None)]) == (inv, "Invalid empty entity type.", None)
        assert describe(c, [("group", SPECIFIED, None)]) == (
            ErrorCode.unsupported_version, "Unsupported entity type group", None)
        assert describe(c, [("ip", SPECIFIED, None), ("user", SPECIFIED, None)]) == (
            inv, "Invalid entity filter component combination. IP filter component should not be used "
                 "with user or clientId filter component.", None)


def test_authorization_and_persistence_across_restart(tmp_path):
    auth = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    denied = BrokerProcess(str(tmp_path / "denied"), overrides=auth).start()
    try:
        with _client(denied) as c:
            # no ACLs, not a super user: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster refused
            assert describe(c, []) == (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.", None)
            assert alter(c, [(_ent(user="x"), [("producer_byte_rate", 1)]), (_ent(client_id="y"), [])]) == [
                (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")] * 2
    finally:
        denied.stop()

    b = BrokerProcess(str(tmp_path / "logs"), overrides={**auth, "super.users": "User:ANONYMOUS"}).start()
    try:
        with _client(b) as c:
            assert alter(c, [(_ent(user="CN=a,O=b", client_id="app-1"), [("producer_byte_rate", 2048)]),
                             (_ent(client_id=None), [("request_percentage", 50)])]) == [OK, OK]
        b.restart()
        with _client(b) as c:
            assert describe(c, [])[2] == {
                (("client-id", "app-1"), ("user", "CN=a,O=b")): {"producer_byte_rate": 2048.0},
                (("client-id", None),): {"request_percentage": 50.0},
            }
    finally:
        b.stop()
    # the store keeps Kafka's ZooKeeper entity paths with sanitized names
    doc = (tmp_path / "logs" / "krait-security.json").read_text()
    assert "users/CN%3Da%2CO%3Db/clients/app-1" in doc and "clients/<default>" in doc


JAVA_SRC = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.quota.*;

public class KraitQuotas {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(p)) {
            Map<String, String> alice = new HashMap<>();
            alice.put(ClientQuotaEntity.USER, "alice");
            alice.put(ClientQuotaEntity.CLIENT_ID, "app");
            ClientQuotaEntity pair = new ClientQuotaEntity(alice);
            ClientQuotaEntity defaultClient = new ClientQuotaEntity(Collections.singletonMap(ClientQuotaEntity.CLIENT_ID, null));
            admin.alterClientQuotas(Arrays.asList(
                new ClientQuotaAlteration(pair, Arrays.asList(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                    new ClientQuotaAlteration.Op("request_percentage", 25.0))),
                new ClientQuotaAlteration(defaultClient, Arrays.asList(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 65536.0))))).all().get();
            try {
                admin.alterClientQuotas(Collections.singletonList(new ClientQuotaAlteration(pair,
                    Collections.singletonList(new ClientQuotaAlteration.Op("producer_byte_rate", 1.5))))).all().get();
                System.out.println("ALTER-BAD accepted");
            } catch (Exception e) {
                System.out.println("ALTER-BAD " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            Map<ClientQuotaEntity, Map<String, Double>> all = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
            System.out.println("ALL " + new TreeMap<>(all.get(pair)) + " " + all.get(defaultClient) + " " + all.size());
            Map<ClientQuotaEntity, Map<String, Double>> strict = admin.describeClientQuotas(ClientQuotaFilter.containsOnly(
                Collections.singletonList(ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID)))).entities().get();
            System.out.println("DEFAULT " + strict);
        }
    }
}
"""


def test_java_admin_client(broker, tmp_path):
    java = JavaProgram(JAVA_SRC, "KraitQuotas", tmp_path)
    with _client(broker) as c:  # start from no quotas (other tests share the broker)
        _, _, got = describe(c, [])
        alter(c, [([{"entity_type": t, "entity_name": n} for t, n in ent], [(k, None) for k in vals])
                  for ent, vals in got.items()])
        assert describe(c, [])[2] == {}
    p = java.run(broker.bootstrap)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines == [
        "ALTER-BAD InvalidRequestException: producer_byte_rate cannot be a fractional value.",
        "ALL {producer_byte_rate=1048576.0, request_percentage=25.0} {consumer_byte_rate=65536.0} 2",
        "DEFAULT {ClientQuotaEntity(entries={client-id=null})={consumer_byte_rate=65536.0}}",
    ], p.stdout + p.stderr[-3000:]
