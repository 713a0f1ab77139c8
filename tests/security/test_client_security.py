"""The client side of security (broker/security/client_security.py, sasl_client.py and the wire client):
Kafka client properties -> TLS context and SASL exchange.

Pure parts are tested directly: Java properties as java.util.Properties reads them, JAAS
lines, the TLS context from PEM files and inline PEM, the SASL mechanisms' tokens (SCRAM
against scramp's server, the other side of the same RFC). Then real connections to a real
broker with SSL, SASL_SSL, SASL_PLAINTEXT and PLAINTEXT listeners, through the blocking
wire client and the asyncio helper: PLAIN and SCRAM logins, refused passwords (with the
broker's message), an untrusted certificate, a plaintext client on a TLS port, and a
session re-authenticated before its lifetime ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
from pathlib import Path

import pytest

from broker.security.client_security import (
    ClientSecurity,
    build_ssl_context,
    normalize_pem,
    parse_jaas_config,
    parse_properties,
    read_client_properties,
)
from broker.security.sasl_client import (
    SaslMechanismClient,
    open_secure_connection,
    open_secure_session,
    reauth_delay_ms,
    sasl_authenticate_async,
)
from broker.tools.admin_client import AdminClient
from broker.tools.security_admin import salted_password, scram_salt
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.client_errors import ClientError
from protocol.errors import ErrorCode, KafkaError
from tests.security.secure_broker import ADMIN, SecureBroker
from tests.security.tls_ca import CertFiles, make_cert_files

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(module: str, user: str, password: str) -> str:
    return f'{module} required username="{user}" password="{password}";'


# --- properties ----------------------------------------------------------------------------


def test_properties_as_java_reads_them() -> None:
    text = "\n".join([
        "# a comment",
        "! another comment",
        "security.protocol=SASL_SSL",
        "sasl.mechanism : SCRAM-SHA-512",
        "key\\ with\\ spaces = v",
        "spaced value",
        "continued=one \\",
        "    two \\",
        "    three",
        "escaped=a\\tb\\u0041\\\\",
        "empty=",
        "   indented.key=x",
        "",
        "double.backslash.ends=v\\\\",
        "next=n",
    ])
    props = parse_properties(text)
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "key with spaces": "v",
        "spaced": "value",
        "continued": "one two three",
        "escaped": "a\tbA\\",
        "empty": "",
        "indented.key": "x",
        "double.backslash.ends": "v\\",
        "next": "n",
    }


def test_jaas_line_in_a_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f"sasl.jaas.config={PLAIN_MODULE} required \\\n"
                    '    username="alice" \\\n    password="alice-secret";\n')
    sec = ClientSecurity.from_props(read_client_properties(path))
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == \
        ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret")
    assert sec.uses_sasl and not sec.uses_ssl and sec.ssl_context is None
    assert "alice-secret" not in repr(sec)


def test_missing_properties_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="cannot read client properties .*nope.properties"):
        read_client_properties(tmp_path / "nope.properties")


# --- JAAS ----------------------------------------------------------------------------------


def test_jaas_options_quoted_bare_and_escaped() -> None:
    [entry] = parse_jaas_config(f'{SCRAM_MODULE} required username="al ice" password="p\\"w;=x" '
                                'tokenauth=true;')
    assert entry.login_module == SCRAM_MODULE and entry.short_name == "ScramLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {"username": "al ice", "password": 'p"w;=x', "tokenauth": "true"}
    assert "p\\\"w" not in repr(entry) and "p\"w" not in repr(entry)  # options (the password) stay out of repr


@pytest.mark.parametrize("value, message", [
    (f'{PLAIN_MODULE} required username="a" password="b"', "must end with ';'"),
    (f'{PLAIN_MODULE} mandatory username="a";', "invalid control flag"),
    (f'{PLAIN_MODULE} required username;', "expected name=value"),
    ("", "is empty"),
])
def test_jaas_errors(value: str, message: str) -> None:
    with pytest.raises(ClientError, match=message):
        parse_jaas_config(value)


def test_jaas_error_never_shows_the_password() -> None:
    with pytest.raises(ClientError) as info:
        parse_jaas_config(f'{PLAIN_MODULE} required username="a" password="s3cret" = ;')
    assert "s3cret" not in str(info.value)


# --- security settings ---------------------------------------------------------------------


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "SASL_TLS"}, "security.protocol=SASL_TLS: expected one of"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas(PLAIN_MODULE, "a", "b")},
     "sasl.mechanism=GSSAPI is not supported"),  # Kafka's default mechanism
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN_MODULE} required username="a";'}, "needs username=.* and password="),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "only 'https' or empty"),
    ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "unknown protocol"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": __file__},
     "ssl.truststore.type=JKS is not supported"),
])
def test_bad_security_properties(props: dict[str, str], message: str) -> None:
    with pytest.raises(ClientError, match=message):
        ClientSecurity.from_props(props)


def test_plaintext_is_the_default() -> None:
    sec = ClientSecurity.from_props({"bootstrap.servers": "x:1", "sasl.mechanism": "PLAIN"})
    assert sec.protocol == "PLAINTEXT" and not sec.uses_ssl and not sec.uses_sasl


# --- TLS context -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


def _one_line(pem_path: str) -> str:
    """A PEM file as Kafka's docs write it inline: one logical line (blank-separated)."""
    return " ".join(Path(pem_path).read_text().split("\n")).strip()


def test_normalize_pem_rewraps_one_line_blocks(certs: CertFiles) -> None:
    original = Path(certs.ca_cert).read_text()
    assert normalize_pem(_one_line(certs.ca_cert)).split() == original.split()
    with pytest.raises(ClientError, match="no PEM block"):
        normalize_pem("not a certificate")


def test_ssl_context_hostname_check_follows_endpoint_identification(certs: CertFiles) -> None:
    base = {"ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert}
    ctx = build_ssl_context(base)
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED  # https: Kafka's default
    ctx = build_ssl_context({**base, "ssl.endpoint.identification.algorithm": ""})
    assert not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    ctx = build_ssl_context({**base, "ssl.enabled.protocols": "TLSv1.3"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_ssl_context_inline_pem_and_keystores(certs: CertFiles) -> None:
    # truststore inline (no type: PEM is the only inline form), keystore inline chain + key
    ctx = build_ssl_context({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": _one_line(certs.ca_cert),
                             "ssl.keystore.type": "PEM",
                             "ssl.keystore.certificate.chain": _one_line(certs.client_cert),
                             "ssl.keystore.key": _one_line(certs.client_key)})
    assert ctx.cert_store_stats()["x509_ca"] == 1
    # a keystore file holding key + chain; an encrypted key with its password
    build_ssl_context({"ssl.truststore.location": certs.ca_cert, "ssl.keystore.location": certs.client_keystore})
    build_ssl_context({"ssl.truststore.location": certs.ca_cert, "ssl.keystore.type": "PEM",
                       "ssl.keystore.location": certs.server_keystore_encrypted,
                       "ssl.key.password": certs.key_password})
    with pytest.raises(ClientError, match="cannot load the client key and certificate"):
        build_ssl_context({"ssl.truststore.location": certs.ca_cert,
                           "ssl.keystore.location": certs.server_keystore_encrypted,
                           "ssl.key.password": "wrong"})
    with pytest.raises(ClientError, match="go together"):
        build_ssl_context({"ssl.keystore.certificate.chain": _one_line(certs.client_cert)})


# --- SASL mechanisms (pure) ---------------------------------------------------------------


def test_plain_token_is_rfc4616_without_authzid() -> None:
    client = SaslMechanismClient("PLAIN", "alice", "alice-secret")
    assert client.initial() == b"\0alice\0alice-secret"
    assert client.evaluate(b"") is None and client.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_scramp_server(mechanism: str) -> None:
    import scramp

    # the server stores what Kafka stores: a credential derived from salt + iterations
    salt = scram_salt()
    auth = scramp.ScramMechanism(mechanism).make_auth_info("alice-secret", iteration_count=4096, salt=salt)
    server = scramp.ScramMechanism(mechanism).make_server(lambda username: auth)
    client = SaslMechanismClient(mechanism, "alice", "alice-secret")
    server.set_client_first(client.initial().decode())
    final = client.evaluate(server.get_server_first().encode())
    assert final is not None and not client.complete
    server.set_client_final(final.decode())
    assert client.evaluate(server.get_server_final().encode()) is None and client.complete


def test_scram_refuses_a_forged_server_signature() -> None:
    import scramp

    auth = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("other", iteration_count=4096, salt=scram_salt())
    server = scramp.ScramMechanism("SCRAM-SHA-256").make_server(lambda username: auth)
    client = SaslMechanismClient("SCRAM-SHA-256", "alice", "alice-secret")
    server.set_client_first(client.initial().decode())
    client.evaluate(server.get_server_first().encode())
    with pytest.raises(KafkaError) as info:
        # a server that does not know the password cannot sign: the client must refuse it
        client.evaluate(b"v=" + b"A" * 44)
    assert info.value.error_code == ErrorCode.sasl_authentication_failed


def test_salted_password_is_rfc5802_hi() -> None:
    import scramp.utils

    salt = scram_salt()
    assert salt.isascii() and salt.isalnum() and 20 <= len(salt) <= 26  # 130 random bits in base 36
    for mech, digest in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
        assert salted_password(mech, "pencil", salt, 4096) == scramp.utils.hi(
            getattr(hashlib, digest), b"pencil", salt, 4096)


def test_reauth_point_is_between_85_and_95_percent() -> None:
    assert reauth_delay_ms(10_000, 0.0) == pytest.approx(8_500)
    assert reauth_delay_ms(10_000, 1.0) == pytest.approx(9_500)


# --- real connections ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def secure(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> SecureBroker:
    sb = SecureBroker(certs, str(tmp_path_factory.mktemp("log")),
                      protocols=("SASL_SSL", "SSL", "SASL_PLAINTEXT", "PLAINTEXT")).start()
    yield sb
    sb.stop()


def _address(sb: SecureBroker, protocol: str) -> tuple[str, int]:
    host, port = sb.bootstrap(protocol).rsplit(":", 1)
    return host, int(port)


def _sasl(certs: CertFiles, protocol: str, mechanism: str, user: str, password: str, **extra: str) -> ClientSecurity:
    props = {"security.protocol": protocol, "sasl.mechanism": mechanism,
             "sasl.jaas.config": jaas(PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE, user, password),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert, **extra}
    return ClientSecurity.from_props(props)


def _topics(conn: WireClient) -> int:
    return len(conn.request(ApiKey.METADATA, topics=None).brokers)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_plain_login(secure: SecureBroker, certs: CertFiles, protocol: str) -> None:
    with WireClient(*_address(secure, protocol), security=_sasl(certs, protocol, "PLAIN", *ADMIN)) as conn:
        assert _topics(conn) == 1


def test_wrong_password_names_the_failure(secure: SecureBroker, certs: CertFiles) -> None:
    with pytest.raises(KafkaError) as info:
        WireClient(*_address(secure, "SASL_SSL"), security=_sasl(certs, "SASL_SSL", "PLAIN", "admin", "nope"))
    assert info.value.error_code == ErrorCode.sasl_authentication_failed
    text = str(info.value)
    assert "authentication of 'admin' (PLAIN)" in text and "failed" in text and "nope" not in text


def test_scram_users_made_by_the_admin_client(secure: SecureBroker, certs: CertFiles) -> None:
    admin_sec = _sasl(certs, "SASL_SSL", "PLAIN", *ADMIN)
    with AdminClient(secure.bootstrap("SASL_SSL"), security=admin_sec) as admin:
        # both mechanisms for one user in one call (Kafka's documented kafka-configs example)
        errors = admin.security_admin.alter_user_scram_credentials([("sam", "SCRAM-SHA-256", 8192, "sam-256"),
                                                                    ("sam", "SCRAM-SHA-512", 4096, "sam-512")])
        assert errors == {"sam": None}
        described = admin.security_admin.describe_user_scram_credentials(["sam"])
        assert sorted((c.mechanism, c.iterations) for c in described["sam"]) == \
            [("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)]
    for protocol in ("SASL_SSL", "SASL_PLAINTEXT"):
        for mech, password in (("SCRAM-SHA-256", "sam-256"), ("SCRAM-SHA-512", "sam-512")):
            with WireClient(*_address(secure, protocol), security=_sasl(certs, protocol, mech, "sam", password)) as c:
                assert _topics(c) == 1
    with pytest.raises(KafkaError) as info:
        WireClient(*_address(secure, "SASL_SSL"), security=_sasl(certs, "SASL_SSL", "SCRAM-SHA-512", "sam", "sam-256"))
    assert info.value.error_code == ErrorCode.sasl_authentication_failed


def test_mechanism_not_enabled_lists_the_enabled_ones(secure: SecureBroker, certs: CertFiles,
                                                      tmp_path: Path) -> None:
    # the broker enables PLAIN and SCRAM; ask for a mechanism it does not offer by
    # sending the handshake ourselves through the same generator the client uses
    from broker.security.sasl_client import run_requests, sasl_requests

    sec = _sasl(certs, "SASL_PLAINTEXT", "PLAIN", *ADMIN)
    sec.sasl_mechanism = "SCRAM-SHA-1"
    conn = WireClient(*_address(secure, "SASL_PLAINTEXT"))
    try:
        with pytest.raises(KafkaError) as info:
            run_requests(sasl_requests(sec, conn.broker_versions, "broker"),
                         lambda key, version, fields: conn.request(key, version, **fields))
    finally:
        conn.close()
    assert info.value.error_code == ErrorCode.unsupported_sasl_mechanism
    assert "Client SASL mechanism 'SCRAM-SHA-1' not enabled in the server" in str(info.value)
    assert "PLAIN" in str(info.value)


def test_ssl_listener_with_hostname_check(secure: SecureBroker, certs: CertFiles) -> None:
    sec = ClientSecurity.from_props({"security.protocol": "SSL", "ssl.truststore.location": certs.ca_cert})
    host, port = _address(secure, "SSL")
    for name in (host, "localhost"):  # the certificate's SANs: IP 127.0.0.1 and DNS localhost
        with WireClient(name, port, security=sec) as conn:
            assert _topics(conn) == 1
            assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")


def test_untrusted_certificate_is_refused(secure: SecureBroker, certs: CertFiles) -> None:
    sec = ClientSecurity.from_props({"security.protocol": "SSL", "ssl.truststore.location": certs.other_ca_cert})
    with pytest.raises(ClientError, match=r"SSL handshake with 127\.0\.0\.1:\d+ failed: certificate verify failed"):
        WireClient(*_address(secure, "SSL"), security=sec)


def test_plaintext_client_on_a_tls_port_gets_a_hint(secure: SecureBroker) -> None:
    with pytest.raises(ClientError, match="set security.protocol"):
        WireClient(*_address(secure, "SSL"), timeout=10)


def test_sasl_client_on_a_plaintext_listener(secure: SecureBroker, certs: CertFiles) -> None:
    with pytest.raises(KafkaError, match="is it a SASL listener"):
        WireClient(*_address(secure, "PLAINTEXT"), security=_sasl(certs, "SASL_PLAINTEXT", "PLAIN", *ADMIN))


def test_asyncio_connection_tls_and_sasl(secure: SecureBroker, certs: CertFiles) -> None:
    from broker.tools.wire import encode_request
    from protocol import framing

    async def metadata_brokers(protocol: str, security: ClientSecurity) -> int:
        host, port = _address(secure, protocol)
        reader, writer = await open_secure_connection(host, port, security)
        try:
            writer.write(encode_request(ApiKey.METADATA, 12, 100, "krait-test", topics=None,
                                        allow_auto_topic_creation=False))
            await writer.drain()
            size = int.from_bytes(await reader.readexactly(4), "big")
            _, resp = framing.decode_response(ApiKey.METADATA, 12, await reader.readexactly(size))
            return len(resp.brokers)
        finally:
            writer.close()

    assert asyncio.run(metadata_brokers("SASL_SSL", _sasl(certs, "SASL_SSL", "PLAIN", *ADMIN))) == 1
    assert asyncio.run(metadata_brokers("SSL", ClientSecurity.from_props(
        {"security.protocol": "SSL", "ssl.truststore.location": certs.ca_cert}))) == 1
    with pytest.raises(KafkaError) as info:
        asyncio.run(metadata_brokers("SASL_PLAINTEXT", _sasl(certs, "SASL_PLAINTEXT", "PLAIN", "admin", "bad")))
    assert info.value.error_code == ErrorCode.sasl_authentication_failed
    with pytest.raises(ClientError, match="certificate verify failed"):
        asyncio.run(metadata_brokers("SSL", ClientSecurity.from_props(
            {"security.protocol": "SSL", "ssl.truststore.location": certs.other_ca_cert})))


def test_session_is_reauthenticated_before_it_expires(certs: CertFiles, tmp_path: Path) -> None:
    """With connections.max.reauth.ms the broker closes a connection whose session expired
    (Kafka's KIP-368); the client re-authenticates between requests before that."""
    sb = SecureBroker(certs, str(tmp_path / "log"), protocols=("SASL_PLAINTEXT",),
                      extra={"connections.max.reauth.ms": "1500"}).start()
    try:
        conn = WireClient(*_address(sb, "SASL_PLAINTEXT"), security=_sasl(certs, "SASL_PLAINTEXT", "PLAIN", *ADMIN))
        with conn:
            assert conn._reauth_at is not None  # the broker gave the session a lifetime
            first = conn._reauth_at
            for _ in range(4):  # past two lifetimes, one request each ~0.8 s
                time.sleep(0.8)
                assert _topics(conn) == 1
            assert conn._reauth_at > first  # re-authenticated at least once
        asyncio.run(_async_reauth(sb, certs))
    finally:
        sb.stop()


async def _async_reauth(sb: SecureBroker, certs: CertFiles) -> None:
    """The asyncio path: the session's lifetime comes back with the connection, and
    sasl_authenticate_async on the same streams renews it."""
    from broker.tools.wire import encode_request
    from protocol import framing

    host, port = _address(sb, "SASL_PLAINTEXT")
    security = _sasl(certs, "SASL_PLAINTEXT", "PLAIN", *ADMIN)
    reader, writer, session = await open_secure_session(host, port, security)
    try:
        assert session.lifetime_ms == 1500 and ApiKey.METADATA in session.versions
        for cid in range(1, 4):
            await asyncio.sleep(0.8)
            renewed = await sasl_authenticate_async(reader, writer, security, f"{host}:{port}",
                                                    versions=session.versions)
            assert renewed.lifetime_ms == 1500
            writer.write(encode_request(ApiKey.METADATA, 12, 1000 + cid, "krait-test", topics=None))
            await writer.drain()
            size = int.from_bytes(await reader.readexactly(4), "big")
            got, resp = framing.decode_response(ApiKey.METADATA, 12, await reader.readexactly(size))
            assert got == 1000 + cid and len(resp.brokers) == 1
    finally:
        writer.close()
