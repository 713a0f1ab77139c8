"""``krait configs`` (kafka-configs.sh for users and clients): Kafka's --add-config syntax,
SCRAM credential values, entity ordering and argument checks as pure functions; then the
command against a real broker behind SASL_SSL (``--command-config``, the super user):
SCRAM users created and deleted with the command and then logging in (or refused),
quotas of users, clients, a user's client and the defaults with Kafka's output, and Kafka's
refusals (SCRAM for clients or the default user, quota and SCRAM together, deleting a
quota that is not set).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.security.client_security import ClientSecurity
from broker.tools import configs_cli
from broker.tools.command import UsageError
from broker.tools.configs_cli import (
    check_args,
    entity_names,
    entity_types,
    java_double,
    parse_add_config,
    parse_scram_credential,
)
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError
from tests.security.secure_broker import ADMIN, SecureBroker, write_properties
from tests.security.tls_ca import CertFiles, make_cert_files


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return configs_cli._parser().parse_args(["--bootstrap-server", "127.0.0.1:1", *argv])


# --- pure parts --------------------------------------------------------------------------


def test_add_config_brackets_group_values() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=a,b]") == {
        "SCRAM-SHA-256": "iterations=8192,password=alice-secret", "SCRAM-SHA-512": "password=a,b"}
    assert parse_add_config("producer_byte_rate = 1024, consumer_byte_rate=2048") == {
        "producer_byte_rate": "1024", "consumer_byte_rate": "2048"}
    assert parse_add_config("ssl.endpoint.identification.algorithm=") == {"ssl.endpoint.identification.algorithm": ""}
    with pytest.raises(UsageError, match='must be in the format "key=val"'):
        parse_add_config("producer_byte_rate")
    with pytest.raises(UsageError, match="Invalid character found for config key: bad key"):
        parse_add_config("bad key=1")


def test_scram_credential_values() -> None:
    assert parse_scram_credential("SCRAM-SHA-256", "iterations=8192,password=s3cret") == (8192, "s3cret")
    assert parse_scram_credential("SCRAM-SHA-512", "password=s3cret") == (4096, "s3cret")  # Kafka's default
    assert parse_scram_credential("SCRAM-SHA-512", "iterations=-1,password=p=w,x") == (4096, "p=w,x")
    with pytest.raises(UsageError, match="Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256"):
        parse_scram_credential("SCRAM-SHA-256", "iterations=1000,password=x")
    with pytest.raises(UsageError) as info:
        parse_scram_credential("SCRAM-SHA-256", "pass=s3cret")
    assert "Invalid credential property SCRAM-SHA-256=" in str(info.value) and "s3cret" not in str(info.value)


def test_entity_names_pair_with_types_in_order() -> None:
    args = _args("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                 "--entity-default")
    assert (entity_types(args), entity_names(args)) == (["users", "clients"], ["alice", ""])
    args = _args("--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
                 "--entity-name", "app")
    assert (entity_types(args), entity_names(args)) == (["users", "clients"], ["", "app"])
    args = _args("--alter", "--user", "bob", "--client-defaults", "--add-config", "request_percentage=50")
    assert (entity_types(args), entity_names(args)) == (["users", "clients"], ["bob", ""])
    check_args(args)


@pytest.mark.parametrize("argv, message", [
    (["--entity-type", "users"], "Command must include exactly one action: --describe, --alter"),
    (["--describe", "--entity-type", "users", "--add-config", "a=1"],
     'Option "[describe]" can\'t be used with option "[add-config]"'),
    (["--describe", "--entity-type", "topics"], "Invalid entity type topics, the entity type must be one of users, "
                                                "clients"),
    (["--describe", "--entity-type", "users", "--entity-type", "users"], "Duplicate entity type(s) specified: users"),
    (["--describe"], "At least one entity type must be specified"),
    (["--describe", "--entity-type", "clients", "--user", "a"],
     "--entity-{type,name,default} should not be used in conjunction with specific entity flags"),
    (["--alter", "--entity-type", "users", "--add-config", "a=1"],
     "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips"),
    (["--alter", "--entity-type", "users", "--entity-name", "a"],
     "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"),
    (["--alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "clients", "--add-config", "a=1"],
     "An entity name must be specified for every entity type"),
])
def test_kafka_argument_checks(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        check_args(_args(*argv))
    assert message in str(info.value)


def test_quota_values_print_as_java_doubles() -> None:
    assert [java_double(v) for v in (1024, 1e7, 1.5e7, 0.001, 1e-4, 50.5, 2**53)] == \
        ["1024.0", "1.0E7", "1.5E7", "0.001", "1.0E-4", "50.5", "9.007199254740992E15"]


# --- against a secured broker -----------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secure(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> SecureBroker:
    sb = SecureBroker(certs, str(tmp_path_factory.mktemp("log")), protocols=("SASL_SSL",)).start()
    yield sb
    sb.stop()


def _props(certs: CertFiles, mechanism: str, user: str, password: str) -> dict[str, str]:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certs.ca_cert,
            "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'}


@pytest.fixture(scope="module")
def admin_config(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_properties(_props(certs, "PLAIN", *ADMIN), tmp_path_factory.mktemp("cfg") / "admin.properties")


def krait_configs(capsys: pytest.CaptureFixture[str], sb: SecureBroker, config: str,
                  *argv: str) -> tuple[int, str, str]:
    rc = configs_cli.main(["--bootstrap-server", sb.bootstrap("SASL_SSL"), "--command-config", config, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _login(sb: SecureBroker, certs: CertFiles, mechanism: str, user: str, password: str) -> None:
    host, port = sb.bootstrap("SASL_SSL").rsplit(":", 1)
    with WireClient(host, int(port), security=ClientSecurity.from_props(_props(certs, mechanism, user, password))) as c:
        assert c.request(ApiKey.METADATA, topics=[]).brokers


def test_scram_users_made_with_the_command_log_in(secure: SecureBroker, certs: CertFiles, admin_config: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # Kafka's documented example: both mechanisms in one --add-config
    rc, out, err = krait_configs(capsys, secure, admin_config, "--alter", "--entity-type", "users", "--entity-name",
                                 "alice", "--add-config",
                                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                 "SCRAM-SHA-512=[password=alice-secret]")
    assert (rc, out, err) == (0, "Completed updating config for user alice.\n", "")
    rc, out, _ = krait_configs(capsys, secure, admin_config, "--describe", "--entity-type", "users",
                               "--entity-name", "alice")
    assert out == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, " \
                  "SCRAM-SHA-512=iterations=4096\n"
    _login(secure, certs, "SCRAM-SHA-256", "alice", "alice-secret")
    _login(secure, certs, "SCRAM-SHA-512", "alice", "alice-secret")

    rc, out, _ = krait_configs(capsys, secure, admin_config, "--alter", "--user", "alice", "--delete-config",
                               "SCRAM-SHA-512")
    assert (rc, out) == (0, "Completed updating config for user alice.\n")
    rc, out, _ = krait_configs(capsys, secure, admin_config, "--describe", "--user", "alice")
    assert out == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
    with pytest.raises(KafkaError) as info:
        _login(secure, certs, "SCRAM-SHA-512", "alice", "alice-secret")
    assert info.value.error_code == ErrorCode.sasl_authentication_failed
    with pytest.raises(KafkaError):
        _login(secure, certs, "SCRAM-SHA-256", "alice", "wrong")

    # a new password replaces the old one; a user without credentials is not listed
    assert krait_configs(capsys, secure, admin_config, "--alter", "--entity-type", "users", "--entity-name", "alice",
                         "--add-config", "SCRAM-SHA-256=[password=new-secret]")[0] == 0
    _login(secure, certs, "SCRAM-SHA-256", "alice", "new-secret")
    rc, out, _ = krait_configs(capsys, secure, admin_config, "--describe", "--user", "nobody")
    assert (rc, out) == (0, "")


def test_scram_refusals(secure: SecureBroker, admin_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["--alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "SCRAM-SHA-256=[password=x]"],
         "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: "
         "SCRAM-SHA-256"),
        (["--alter", "--entity-type", "users", "--entity-default", "--add-config", "SCRAM-SHA-256=[password=x]"],
         "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials"),
        (["--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=10"],
         "Cannot alter both quota and SCRAM credential configs simultaneously for 'users'"),
        (["--alter", "--user", "bob", "--add-config", "retention.ms=10"],
         "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected "
         "config names: retention.ms"),
        (["--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]"],
         "Iterations 10 is less than the minimum 4096 required for SCRAM-SHA-256"),
        (["--alter", "--user", "bob", "--delete-config", "producer_byte_rate"],
         "INVALID_CONFIG: Invalid config(s): producer_byte_rate"),
    ]
    for argv, message in cases:
        rc, out, err = krait_configs(capsys, secure, admin_config, *argv)
        assert rc == 1 and message in err, (argv, err)
    # deleting a credential the user does not have: the broker's answer
    rc, _, err = krait_configs(capsys, secure, admin_config, "--alter", "--user", "bob", "--delete-config",
                               "SCRAM-SHA-512")
    assert rc == 1 and err.startswith("RESOURCE_NOT_FOUND")


def test_quotas_of_users_clients_and_defaults(secure: SecureBroker, admin_config: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def run(*argv: str) -> str:
        rc, out, err = krait_configs(capsys, secure, admin_config, *argv)
        assert rc == 0, err
        return out

    assert run("--alter", "--entity-type", "users", "--entity-name", "quser", "--add-config",
               "producer_byte_rate=1024,consumer_byte_rate=20000000") == "Completed updating config for user quser.\n"
    assert run("--alter", "--entity-type", "clients", "--entity-name", "qapp", "--add-config",
               "request_percentage=50.5") == "Completed updating config for client qapp.\n"
    assert run("--alter", "--entity-type", "users", "--entity-name", "quser", "--entity-type", "clients",
               "--entity-name", "qapp", "--add-config", "producer_byte_rate=512") == \
        "Completed updating config for user quser.\n"
    assert run("--alter", "--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=4096") == \
        "Completed updating default config for users in the cluster.\n"
    assert run("--alter", "--client-defaults", "--add-config", "producer_byte_rate=100") == \
        "Completed updating default config for clients in the cluster.\n"

    out = run("--describe", "--entity-type", "users", "--entity-name", "quser")
    assert out.startswith("Quota configs for user-principal 'quser' are ")
    assert set(out.strip().split(" are ", 1)[1].split(", ")) == {"producer_byte_rate=1024.0",
                                                                "consumer_byte_rate=2.0E7"}
    assert run("--describe", "--entity-type", "clients", "--entity-name", "qapp") == \
        "Quota configs for client-id 'qapp' are request_percentage=50.5\n"
    assert run("--describe", "--user", "quser", "--client", "qapp") == \
        "Quota configs for user-principal 'quser', client-id 'qapp' are producer_byte_rate=512.0\n"
    assert run("--describe", "--entity-type", "users", "--entity-default") == \
        "Quota configs for the default user-principal are consumer_byte_rate=4096.0\n"
    assert run("--describe", "--entity-type", "clients", "--entity-default") == \
        "Quota configs for the default client-id are producer_byte_rate=100.0\n"
    # every user with a quota of its own (not the default, not user+client pairs)
    assert "Quota configs for user-principal 'quser' are" in run("--describe", "--entity-type", "users")

    assert run("--alter", "--entity-type", "users", "--entity-name", "quser", "--delete-config",
               "producer_byte_rate") == "Completed updating config for user quser.\n"
    assert run("--describe", "--entity-type", "users", "--entity-name", "quser") == \
        "Quota configs for user-principal 'quser' are consumer_byte_rate=2.0E7\n"
    rc, _, err = krait_configs(capsys, secure, admin_config, "--alter", "--client", "qapp", "--add-config",
                               "request_percentage=lots")
    assert rc == 1 and "Cannot parse quota configuration value for request_percentage: lots" in err


def test_add_config_file(secure: SecureBroker, admin_config: str, capsys: pytest.CaptureFixture[str],
                         tmp_path: Path) -> None:
    path = tmp_path / "quota.properties"
    path.write_text("producer_byte_rate=2048\n")
    rc, out, _ = krait_configs(capsys, secure, admin_config, "--alter", "--client", "fileapp", "--add-config-file",
                               str(path))
    assert (rc, out) == (0, "Completed updating config for client fileapp.\n")
    rc, out, _ = krait_configs(capsys, secure, admin_config, "--describe", "--client", "fileapp")
    assert out == "Quota configs for client-id 'fileapp' are producer_byte_rate=2048.0\n"


def test_unauthenticated_command_is_refused(secure: SecureBroker, certs: CertFiles,
                                            capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = write_properties(_props(certs, "PLAIN", "admin", "wrong"), tmp_path / "bad.properties")
    rc, _, err = krait_configs(capsys, secure, bad, "--describe", "--entity-type", "users")
    assert rc == 1 and err.startswith("SASL_AUTHENTICATION_FAILED: authentication of 'admin' (PLAIN)")
    untrusted = write_properties({**_props(certs, "PLAIN", *ADMIN), "ssl.truststore.location": certs.other_ca_cert},
                                 tmp_path / "untrusted.properties")
    rc, _, err = krait_configs(capsys, secure, untrusted, "--describe", "--entity-type", "users")
    assert rc == 1 and "certificate verify failed" in err
