"""TLS faults at the socket level against SSL and SASL_SSL listeners: a plaintext Kafka
request on a TLS port and garbage in place of a ClientHello close that connection only (a
connection opened before, and new ones, are still served); a broker whose certificate comes
from another CA is refused by a client trusting the test CA; the broker's key encrypted
with ssl.key.password, and a wrong ssl.key.password stopping start-up as Kafka does. Also
checks the test CA itself (tls_ca.py) with `openssl verify`."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess

import pytest

from tests.krait_harness import BrokerProcess
from tests.security.secure_broker import (
    ALICE,
    SecureBroker,
    api_versions_ok,
    client_tls_context,
    frame,
    raw_connect,
    sasl_plain_login,
    wait_closed,
)
from tests.security.tls_ca import CLIENT_DN, CertFiles, make_cert_files

TLS_LISTENERS = ["SSL", "SASL_SSL"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def sb(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory):
    """SSL and SASL_SSL listeners; the broker's key is encrypted (ssl.key.password)."""
    b = SecureBroker(certs, str(tmp_path_factory.mktemp("logs") / "logs"), protocols=("SSL", "SASL_SSL"),
                     encrypted_key=True).start()
    yield b
    b.stop()


def _verify(ca: str, cert: str) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", "verify", "-CAfile", ca, cert], capture_output=True, text=True, timeout=30)


def test_test_ca_files(certs: CertFiles) -> None:
    assert _verify(certs.ca_cert, certs.server_cert).returncode == 0
    assert _verify(certs.ca_cert, certs.client_cert).returncode == 0
    assert _verify(certs.ca_cert, certs.other_server_keystore).returncode != 0
    subject = subprocess.run(["openssl", "x509", "-in", certs.client_cert, "-noout", "-subject", "-nameopt", "RFC2253"],
                             capture_output=True, text=True, timeout=30).stdout
    assert subject.strip() == f"subject={CLIENT_DN}"
    with open(certs.server_keystore) as f:
        pem = f.read()
    # Kafka's PEM keystore: one PKCS#8 key, then the chain from the leaf
    assert pem.startswith("-----BEGIN PRIVATE KEY-----") and pem.count("BEGIN CERTIFICATE") == 2
    with open(certs.server_keystore_encrypted) as f:
        assert f.read().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certs.server_keystore_encrypted,
                                                             password=certs.key_password)


@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_broker_certificate_verified_with_hostname(sb: SecureBroker, certs: CertFiles, listener: str) -> None:
    """The broker presents the test CA's certificate for 127.0.0.1, loaded from the PEM
    keystore with its encrypted key; a client checking the name accepts it."""
    with raw_connect(sb.ports[listener], client_tls_context(certs)) as s:
        cert = s.getpeercert()
        assert ("IP Address", "127.0.0.1") in cert["subjectAltName"]
        assert s.version() in ("TLSv1.2", "TLSv1.3")
    ctx = client_tls_context(certs)
    with socket.create_connection(("127.0.0.1", sb.ports[listener]), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.getpeercert()


def _served(sb: SecureBroker, certs: CertFiles) -> None:
    with raw_connect(sb.ports["SSL"], client_tls_context(certs)) as s:
        assert api_versions_ok(s), sb.log_text()


def _no_kafka_answer(got: bytes) -> None:
    """What a TLS port sends to a client that does not speak TLS: nothing, or a TLS alert
    record (content type 21), never a Kafka response."""
    assert got == b"" or got[0] == 21, got[:32]


@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_plaintext_request_on_tls_port_closes_only_that_connection(sb: SecureBroker, certs: CertFiles,
                                                                   listener: str) -> None:
    from protocol.apis import ApiKey

    with raw_connect(sb.ports["SSL"], client_tls_context(certs)) as before:
        assert api_versions_ok(before)
        with raw_connect(sb.ports[listener]) as bad:
            bad.sendall(frame(ApiKey.API_VERSIONS, 3, client_software_name="plain", client_software_version="1"))
            _no_kafka_answer(wait_closed(bad))
        assert api_versions_ok(before), sb.log_text()
    _served(sb, certs)


GARBAGE = {
    "random": os.urandom(2048),
    # a handshake record header announcing a ClientHello, then noise
    "bad-client-hello": bytes([0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3C]) + os.urandom(60),
    # an SSLv2-style header
    "sslv2": bytes([0x80, 0x2E, 0x01, 0x00, 0x02]) + os.urandom(43),
    "http": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


@pytest.mark.parametrize("kind", list(GARBAGE))
@pytest.mark.parametrize("listener", TLS_LISTENERS)
def test_garbage_client_hello_closes_only_that_connection(sb: SecureBroker, certs: CertFiles, listener: str,
                                                          kind: str) -> None:
    with raw_connect(sb.ports["SSL"], client_tls_context(certs)) as before:
        with raw_connect(sb.ports[listener]) as bad:
            bad.sendall(GARBAGE[kind])
            _no_kafka_answer(wait_closed(bad))
        assert api_versions_ok(before), sb.log_text()
    _served(sb, certs)


def test_close_notify_is_answered(sb: SecureBroker, certs: CertFiles) -> None:
    """A client that closes cleanly (close_notify) gets the broker's close_notify back, as a
    TLS peer must: SSLSocket.unwrap() waits for it (asyncio's clients wait up to their
    ssl_shutdown_timeout, 30 s, and report "SSL shutdown timed out" without it)."""
    s = raw_connect(sb.ports["SSL"], client_tls_context(certs))
    assert api_versions_ok(s), sb.log_text()
    s.settimeout(10)
    plain = s.unwrap()  # raises (timeout, or a bare EOF) unless the broker answers
    assert plain.recv(1) == b""  # then the broker closes the connection
    plain.close()
    _served(sb, certs)


def test_tls_handshake_then_close_mid_request(sb: SecureBroker, certs: CertFiles) -> None:
    """A client that completes the handshake and drops the connection halfway through a
    request leaves the broker serving others."""
    from protocol.apis import ApiKey

    s = raw_connect(sb.ports["SASL_SSL"], client_tls_context(certs))
    s.sendall(frame(ApiKey.API_VERSIONS, 3, client_software_name="x", client_software_version="1")[:7])
    s.close()
    _served(sb, certs)


def test_broker_wide_client_auth_applies_to_ssl_listeners_only(certs: CertFiles, tmp_path) -> None:
    """Kafka (KIP-684, ChannelBuilders): the broker-wide ssl.client.auth=required makes SSL
    listeners ask for a certificate; a SASL_SSL listener authenticates with SASL and asks
    for one only when listener.name.<listener>.ssl.client.auth says so."""
    b = SecureBroker(certs, str(tmp_path / "logs"), protocols=("SASL_SSL", "SSL"), client_auth="required").start()
    try:
        with raw_connect(b.ports["SASL_SSL"], client_tls_context(certs)) as s:
            assert api_versions_ok(s), "SASL_SSL listener refused a client without a certificate:\n" + b.log_text()
            assert sasl_plain_login(s, ALICE) == 0
        with raw_connect(b.ports["SSL"], client_tls_context(certs, with_cert=True)) as s:
            assert api_versions_ok(s)
        with pytest.raises((ssl.SSLError, OSError)):
            with raw_connect(b.ports["SSL"], client_tls_context(certs)) as s:
                # TLS 1.3: the server's refusal arrives with the first read
                if not api_versions_ok(s):
                    raise ssl.SSLError("closed")
    finally:
        b.kill()


@pytest.mark.parametrize("tls_version", ["TLSv1_2", "TLSv1_3"])
def test_missing_client_certificate_answered_with_a_tls_alert(certs: CertFiles, tmp_path, tls_version: str) -> None:
    """ssl.client.auth=required and no client certificate: Kafka's SSLEngine ends the
    handshake with an alert (TLS 1.3: certificate_required, TLS 1.2: handshake_failure),
    which clients report as an SSL authentication failure (the Java client's
    SslAuthenticationException) instead of a bare disconnect they retry forever."""
    b = SecureBroker(certs, str(tmp_path / "logs"), protocols=("SSL",),
                     extra={"listener.name.ssl.ssl.client.auth": "required"}).start()
    try:
        ctx = client_tls_context(certs)
        ctx.minimum_version = ctx.maximum_version = getattr(ssl.TLSVersion, tls_version)
        with pytest.raises(ssl.SSLError) as info:
            with raw_connect(b.ports["SSL"], ctx) as s:
                s.sendall(frame(18, 3, client_software_name="x", client_software_version="1"))
                s.recv(100)  # TLS 1.3: the client learns of the refusal here
                raise AssertionError("the broker closed without a TLS alert")
        assert "ALERT" in str(info.value).upper(), info.value
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{b.log_text()}") from None
    finally:
        b.kill()


def test_listener_prefixed_client_auth_on_sasl_ssl(certs: CertFiles, tmp_path) -> None:
    b = SecureBroker(certs, str(tmp_path / "logs"), protocols=("SASL_SSL",),
                     extra={"listener.name.sasl_ssl.ssl.client.auth": "required"}).start()
    try:
        with raw_connect(b.ports["SASL_SSL"], client_tls_context(certs, with_cert=True)) as s:
            assert api_versions_ok(s) and sasl_plain_login(s, ALICE) == 0
        with pytest.raises((ssl.SSLError, OSError)):
            with raw_connect(b.ports["SASL_SSL"], client_tls_context(certs)) as s:
                if not api_versions_ok(s):
                    raise ssl.SSLError("closed")
    finally:
        b.kill()


def test_untrusted_broker_certificate_refused(certs: CertFiles, tmp_path) -> None:
    """A broker whose certificate the second CA signed: a client trusting only the test CA
    refuses it (Python's ssl and librdkafka)."""
    from confluent_kafka import KafkaError, Producer

    b = BrokerProcess(str(tmp_path / "logs"))
    b.overrides.update({"listeners": f"SSL://127.0.0.1:{b.port}", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": certs.other_server_keystore})
    b.start()
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            raw_connect(b.port, client_tls_context(certs))
        # trusting the second CA, the same broker is fine: the refusal is about trust
        ctx = ssl.create_default_context(cafile=certs.other_ca_cert)
        with raw_connect(b.port, ctx) as s:
            assert api_versions_ok(s)
        errors: list[KafkaError] = []
        p = Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SSL",
                      "ssl.ca.location": certs.ca_cert, "error_cb": errors.append})
        with pytest.raises(Exception):  # noqa: B017 - the metadata request cannot be sent
            p.list_topics(timeout=5)
        p.poll(1)
        assert any("certificate verify failed" in e.str() for e in errors), errors
    finally:
        b.kill()


def test_wrong_key_password_stops_startup(certs: CertFiles, tmp_path) -> None:
    b = BrokerProcess(str(tmp_path / "logs"))
    b.overrides.update({"listeners": f"SSL://127.0.0.1:{b.port}", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": certs.server_keystore_encrypted,
                        "ssl.key.password": "not-the-password"})
    try:
        with pytest.raises(RuntimeError, match="broker exited") as info:
            b.start(timeout=30)
        assert "ssl.key.password" in str(info.value)
        assert "not-the-password" not in str(info.value)
    finally:
        b.kill()


def test_pem_keystore_inline(certs: CertFiles, tmp_path) -> None:
    """ssl.keystore.certificate.chain / ssl.keystore.key (Kafka's inline PEM keystore)."""
    key, chain = open(certs.server_key).read(), open(certs.server_cert).read() + open(certs.ca_cert).read()
    b = BrokerProcess(str(tmp_path / "logs"))
    b.overrides.update({"listeners": f"SSL://127.0.0.1:{b.port}", "ssl.keystore.type": "PEM",
                        "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key})
    b.start()
    try:
        with raw_connect(b.port, client_tls_context(certs)) as s:
            assert api_versions_ok(s)
    finally:
        b.kill()
