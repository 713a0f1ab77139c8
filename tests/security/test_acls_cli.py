"""``krait acls`` (kafka-acls.sh): the expansion of the options into ACLs and Kafka's
argument checks as pure functions, then the command against a real broker with
StandardAuthorizer behind a SASL_SSL listener, driven through ``--command-config`` like
kafka-acls.sh: Kafka's output, listing by resource and by principal, removal with and
without the prompt, an unauthorized principal refused, ACLs that take effect for the
principal they name, and SECURITY_DISABLED from a broker without an authorizer.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from broker.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from broker.security.client_security import ClientSecurity
from broker.tools import acls_cli
from broker.tools.acls_cli import format_pattern, parse_operation, resource_filter_to_acls
from broker.tools.admin_client import AdminClient
from broker.tools.command import UsageError
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.krait_harness import REPO, BrokerProcess
from tests.security.secure_broker import ADMIN, ALICE, SecureBroker, write_properties
from tests.security.tls_ca import CertFiles, make_cert_files

Op, P = AclOperation, AclPermissionType
TOPIC_T = ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.LITERAL)
GROUP_G = ResourcePatternFilter(ResourceType.GROUP, "g", PatternType.LITERAL)
CLUSTER = ResourcePatternFilter(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return acls_cli._parser().parse_args(["--bootstrap-server", "127.0.0.1:1", *argv])


def _expand(*argv: str) -> dict[ResourcePatternFilter, set[tuple[str, str, AclOperation, AclPermissionType]]]:
    args = _args(*argv)
    acls_cli.check_args(args)
    return {f: {(e.principal, e.host, e.operation, e.permission_type) for e in entries}
            for f, entries in resource_filter_to_acls(args).items()}


# --- the expansion (AclCommand.getResourceFilterToAcls) --------------------------------------


def test_operations_principals_and_hosts_multiply() -> None:
    got = _expand("--add", "--topic", "t", "--allow-principal", "User:a", "--allow-principal", "User:b",
                  "--operation", "Read", "--operation", "Write", "--allow-host", "10.0.0.1")
    assert got == {TOPIC_T: {(p, "10.0.0.1", op, P.ALLOW) for p in ("User:a", "User:b") for op in (Op.READ, Op.WRITE)}}


def test_defaults_all_operations_and_every_host() -> None:
    got = _expand("--add", "--group", "g", "--allow-principal", "User:a", "--deny-principal", "User:b",
                  "--deny-host", "10.0.0.9")
    assert got == {GROUP_G: {("User:a", "*", Op.ALL, P.ALLOW), ("User:b", "10.0.0.9", Op.ALL, P.DENY)}}


def test_producer_expands_as_kafka_acls_does() -> None:
    got = _expand("--add", "--producer", "--topic", "t", "--transactional-id", "tx", "--idempotent",
                  "--allow-principal", "User:p")
    tx = ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    assert got == {TOPIC_T: {("User:p", "*", op, P.ALLOW) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)},
                   tx: {("User:p", "*", op, P.ALLOW) for op in (Op.WRITE, Op.DESCRIBE)},
                   CLUSTER: {("User:p", "*", Op.IDEMPOTENT_WRITE, P.ALLOW)}}


def test_consumer_expands_and_merges_with_producer() -> None:
    got = _expand("--add", "--consumer", "--topic", "t", "--group", "g", "--allow-principal", "User:c")
    assert got == {TOPIC_T: {("User:c", "*", op, P.ALLOW) for op in (Op.READ, Op.DESCRIBE)},
                   GROUP_G: {("User:c", "*", Op.READ, P.ALLOW)}}
    both = _expand("--add", "--producer", "--consumer", "--topic", "t", "--group", "g", "--allow-principal", "User:c")
    assert {op for _, _, op, _ in both[TOPIC_T]} == {Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ}
    assert both[GROUP_G] == {("User:c", "*", Op.READ, P.ALLOW)}


def test_prefixed_pattern_and_the_cluster_quirk() -> None:
    got = _expand("--add", "--topic", "orders-", "--resource-pattern-type", "prefixed", "--allow-principal", "User:a",
                  "--operation", "Describe")
    assert list(got) == [ResourcePatternFilter(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)]
    # Kafka adds the cluster resource for the literal pattern type only
    with pytest.raises(UsageError, match="You must provide at least one resource"):
        _expand("--add", "--cluster", "--resource-pattern-type", "prefixed", "--allow-principal", "User:a")


def test_operation_names() -> None:
    assert parse_operation("Read") == Op.READ
    assert parse_operation("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation("IDEMPOTENTWRITE") == Op.IDEMPOTENT_WRITE
    assert parse_operation("describe_configs") == Op.DESCRIBE_CONFIGS
    assert parse_operation("Frobnicate") == Op.UNKNOWN


@pytest.mark.parametrize("argv, message", [
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "ClusterAction"],
     "ResourceType TOPIC only supports operations All, Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, "
     "AlterConfigs"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Frobnicate"],
     "ResourceType TOPIC only supports operations"),
    (["--topic", "t"], "Command must include exactly one action: --list, --add, --remove. "),
    (["--add", "--list", "--topic", "t"], "Command must include exactly one action"),
    (["--list", "--allow-principal", "User:a"], 'Option "[list]" can\'t be used with option "[allow-principal]"'),
    (["--add", "--producer", "--topic", "t", "--operation", "Read", "--allow-principal", "User:a"],
     'Option "[producer]" can\'t be used with option "[operation]"'),
    (["--add", "--producer", "--allow-principal", "User:a"], "With --producer you must specify a --topic"),
    (["--add", "--idempotent", "--topic", "t"], "The --idempotent option is only available if --producer is set"),
    (["--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"],
     "With --consumer you must specify a --topic and a --group"),
    (["--add", "--principal", "User:a", "--topic", "t"], "The --principal option is only available if --list is set"),
    (["--add", "--topic", "t", "--allow-principal", "alice"],
     "expected a string in format principalType:principalName but got alice"),
])
def test_kafka_argument_checks(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        _expand(*argv)
    assert message in str(info.value)


def test_add_refuses_filter_pattern_types_and_missing_principals(capsys: pytest.CaptureFixture[str]) -> None:
    # refused before any connection (the bootstrap address is not even tried)
    assert acls_cli.main(["--bootstrap-server", "127.0.0.1:1", "--add", "--topic", "t", "--allow-principal", "User:a",
                          "--resource-pattern-type", "match"]) == 1
    assert "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls." in capsys.readouterr().err
    assert acls_cli.main(["--bootstrap-server", "127.0.0.1:1", "--add", "--topic", "t"]) == 1
    assert "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs." in \
        capsys.readouterr().err
    assert acls_cli.main(["--bootstrap-server", "127.0.0.1:1", "--list", "--resource-pattern-type", "weird"]) == 1
    assert "Unknown resource-pattern-type: weird" in capsys.readouterr().err


def test_kafka_strings() -> None:
    assert format_pattern(ResourceType.TOPIC, "t", PatternType.LITERAL) == \
        "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert format_pattern(ResourceType.GROUP, None, PatternType.ANY) == \
        "ResourcePattern(resourceType=GROUP, name=<any>, patternType=ANY)"
    assert acls_cli.format_entry(AccessControlEntry("User:a", "*", Op.READ, P.ALLOW)) == \
        "(principal=User:a, host=*, operation=READ, permissionType=ALLOW)"


# --- against a secured broker -----------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secure(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> SecureBroker:
    # nothing is allowed without an ACL: only the super user (admin) may manage ACLs
    sb = SecureBroker(certs, str(tmp_path_factory.mktemp("log")), protocols=("SASL_SSL",),
                      extra={"allow.everyone.if.no.acl.found": "false"}).start()
    yield sb
    sb.stop()


def _props(certs: CertFiles, user: tuple[str, str], mechanism: str = "PLAIN") -> dict[str, str]:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certs.ca_cert,
            "sasl.jaas.config": f'{module} required username="{user[0]}" password="{user[1]}";'}


@pytest.fixture(scope="module")
def admin_config(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_properties(_props(certs, ADMIN), tmp_path_factory.mktemp("cfg") / "admin.properties")


@pytest.fixture(scope="module")
def alice_config(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_properties(_props(certs, ALICE), tmp_path_factory.mktemp("cfg") / "alice.properties")


def krait_acls(capsys: pytest.CaptureFixture[str], sb: SecureBroker, config: str, *argv: str) -> tuple[int, str, str]:
    rc = acls_cli.main(["--bootstrap-server", sb.bootstrap("SASL_SSL"), "--command-config", config, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _block(pattern: str, *entries: str) -> str:
    return f"Current ACLs for resource `{pattern}`: \n " + "\n".join("\t" + e for e in entries) + " \n\n"


def test_add_list_remove_with_kafka_output(secure: SecureBroker, admin_config: str,
                                           capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, err = krait_acls(capsys, secure, admin_config, "--add", "--allow-principal", "User:bob",
                              "--operation", "Read", "--operation", "Write", "--topic", "orders")
    assert (rc, err) == (0, "")
    topic = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    read = "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)"
    write = "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)"
    assert out == f"Adding ACLs for resource `{topic}`: \n \t{read}\n\t{write} \n\n"

    rc, out, _ = krait_acls(capsys, secure, admin_config, "--add", "--consumer", "--topic", "orders", "--group",
                            "billing", "--allow-principal", "User:carol")
    assert rc == 0
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--add", "--deny-principal", "User:bob", "--topic", "pay-",
                            "--resource-pattern-type", "prefixed", "--operation", "Describe", "--deny-host", "10.1.1.1")
    assert rc == 0

    carol_read = "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)"
    carol_describe = "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--topic", "orders")
    assert out == _block(topic, read, write, carol_read, carol_describe)

    prefixed = "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)"
    deny = "(principal=User:bob, host=10.1.1.1, operation=DESCRIBE, permissionType=DENY)"
    group = "ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)"
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list")
    for block in (_block(topic, read, write, carol_read, carol_describe), _block(prefixed, deny),
                  _block(group, carol_read)):
        assert block in out

    # 'match': every ACL that applies to topic pay-in (the prefixed one), none of orders'
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--topic", "pay-in",
                            "--resource-pattern-type", "match")
    assert out == _block(prefixed, deny)

    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--principal", "User:carol")
    assert out.startswith("ACLs for principal `User:carol`\n")
    assert _block(topic, carol_read, carol_describe) in out and _block(group, carol_read) in out and "User:bob" not in out

    # remove one ACL: answering the prompt with "n" keeps it, --force removes it
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--remove", "--topic", "orders", "--allow-principal",
                            "User:bob", "--operation", "Write")
    assert rc == 0
    assert out == (f"Are you sure you want to remove ACLs: \n \t{write} \n from resource filter `{topic}`? (y/n)\n")
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--topic", "orders")
    assert write in out
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--remove", "--force", "--topic", "orders",
                            "--allow-principal", "User:bob", "--operation", "Write")
    assert (rc, out) == (0, "")
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--topic", "orders")
    assert out == _block(topic, read, carol_read, carol_describe)

    # every ACL of a resource
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--remove", "--force", "--topic", "orders")
    assert rc == 0
    rc, out, _ = krait_acls(capsys, secure, admin_config, "--list", "--topic", "orders")
    assert out == ""
    for argv in (["--group", "billing"], ["--topic", "pay-", "--resource-pattern-type", "prefixed"]):
        assert krait_acls(capsys, secure, admin_config, "--remove", "--force", *argv)[0] == 0


def test_only_an_authorized_principal_manages_acls(secure: SecureBroker, alice_config: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = krait_acls(capsys, secure, alice_config, "--add", "--allow-principal", "User:alice",
                              "--operation", "All", "--topic", "mine")
    assert rc == 1
    assert err.startswith("Error while executing ACL command: CLUSTER_AUTHORIZATION_FAILED")


def test_acls_from_the_command_take_effect(secure: SecureBroker, certs: CertFiles, admin_config: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    admin_sec = ClientSecurity.from_props(_props(certs, ADMIN))
    with AdminClient(secure.bootstrap("SASL_SSL"), security=admin_sec) as admin:
        admin.create_topic("effect", 1, 1)

    def alice_sees() -> bool:
        host, port = secure.bootstrap("SASL_SSL").rsplit(":", 1)
        with WireClient(host, int(port), security=ClientSecurity.from_props(_props(certs, ALICE))) as conn:
            md = conn.request(ApiKey.METADATA, topics=None, allow_auto_topic_creation=False)
            return "effect" in {str(t.name) for t in md.topics}

    assert not alice_sees()  # no ACL and allow.everyone.if.no.acl.found=false: hidden
    assert krait_acls(capsys, secure, admin_config, "--add", "--allow-principal", "User:alice", "--operation",
                      "Describe", "--topic", "eff", "--resource-pattern-type", "prefixed")[0] == 0
    assert alice_sees()
    assert krait_acls(capsys, secure, admin_config, "--add", "--deny-principal", "User:alice", "--operation",
                      "Describe", "--topic", "effect")[0] == 0
    assert not alice_sees()  # deny wins over allow
    assert krait_acls(capsys, secure, admin_config, "--remove", "--force", "--topic", "effect")[0] == 0
    assert alice_sees()
    assert krait_acls(capsys, secure, admin_config, "--remove", "--force", "--topic", "eff",
                      "--resource-pattern-type", "prefixed")[0] == 0


def test_the_krait_command_prompts_on_stdin(secure: SecureBroker, admin_config: str) -> None:
    """The installed entry point (broker.cli) with a real stdin answering the prompt."""
    base = [sys.executable, "-m", "broker.cli", "acls", "--bootstrap-server", secure.bootstrap("SASL_SSL"),
            "--command-config", admin_config]
    added = subprocess.run([*base, "--add", "--allow-principal", "User:dan", "--group", "g-dan"],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    assert added.returncode == 0, added.stderr
    removed = subprocess.run([*base, "--remove", "--group", "g-dan"], input="y\n", capture_output=True, text=True,
                             cwd=REPO, timeout=60)
    assert removed.returncode == 0, removed.stderr
    assert "Are you sure you want to delete all ACLs for resource filter " \
           "`ResourcePattern(resourceType=GROUP, name=g-dan, patternType=LITERAL)`? (y/n)" in removed.stdout
    listed = subprocess.run([*base, "--list", "--group", "g-dan"], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert (listed.returncode, listed.stdout) == (0, "")


def test_broker_without_authorizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broker = BrokerProcess(str(tmp_path / "log")).start()
    try:
        rc = acls_cli.main(["--bootstrap-server", broker.bootstrap, "--list"])
        _, err = capsys.readouterr()
        assert rc == 1
        assert err.startswith("Error while executing ACL command: SECURITY_DISABLED: No Authorizer is configured")
    finally:
        broker.stop()
