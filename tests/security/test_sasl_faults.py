"""SASL faults at the wire level, asserting what Kafka's SaslServerAuthenticator does, and
connection limits (max.connections.per.ip, max.connections) as Kafka's ConnectionQuotas
applies them. Every fault is followed by a check that an authenticated connection opened
before it, and a new one, are still served.

Kafka, before authentication (SaslServerAuthenticator):
- a request other than ApiVersions / SaslHandshake first: IllegalSaslStateException thrown
  before any response is built, so the connection is closed without an answer;
- SaslAuthenticate before SaslHandshake: the same;
- after the handshake (v1), any request but SaslAuthenticate: the request's error response
  with ILLEGAL_SASL_STATE, then the connection is closed;
- a mechanism not enabled: SaslHandshake answered UNSUPPORTED_SASL_MECHANISM with the
  enabled mechanisms, then closed;
- a frame larger than sasl.server.max.receive.size (524288) or with a negative size:
  InvalidReceiveException -> closed without an answer (the size prefix alone decides);
- bad credentials: SaslAuthenticate answered SASL_AUTHENTICATION_FAILED, then closed.
Connection limits (SocketServer.ConnectionQuotas): beyond max.connections.per.ip the
acceptor closes the new connection at once; max.connections.per.ip.overrides gives a host
its own limit; at max.connections the acceptor waits for a free slot (not a refusal)."""

from __future__ import annotations

import socket
import struct

import pytest

from tests.krait_harness import BrokerProcess
from tests.security.secure_broker import (
    ADMIN,
    ALICE,
    SecureBroker,
    api_versions_ok,
    call,
    client_tls_context,
    frame,
    raw_connect,
    read_frame,
    sasl_plain_login,
    wait_closed,
)
from tests.security.tls_ca import CertFiles, make_cert_files

# Kafka's error codes (protocol/errors.py names them too; the numbers are the contract)
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
MAX_RECEIVE = 524288  # sasl.server.max.receive.size default


def _key(name: str) -> int:
    from protocol.apis import ApiKey

    return int(getattr(ApiKey, name))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def sb(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory):
    b = SecureBroker(certs, str(tmp_path_factory.mktemp("logs") / "logs"),
                     protocols=("SASL_PLAINTEXT", "SASL_SSL")).start()
    yield b
    b.stop()


@pytest.fixture
def good(sb: SecureBroker):
    """An authenticated connection opened before the fault; checked again after it."""
    s = raw_connect(sb.ports["SASL_PLAINTEXT"])
    assert api_versions_ok(s)
    assert sasl_plain_login(s, ALICE) == 0, sb.log_text()
    assert _metadata_ok(s)
    yield s
    assert _metadata_ok(s), "the authenticated connection opened before the fault was dropped:\n" + sb.log_text()
    s.close()
    # and a new one is served
    with raw_connect(sb.ports["SASL_PLAINTEXT"]) as fresh:
        assert sasl_plain_login(fresh, ADMIN) == 0 and _metadata_ok(fresh), sb.log_text()


def _metadata_ok(s: socket.socket) -> bool:
    r = call(s, _key("METADATA"), 12, topics=None)
    return r is not None and len(r.brokers) == 1


def _plain(port: int) -> socket.socket:
    return raw_connect(port)


def test_plain_login_on_both_listeners(sb: SecureBroker, certs: CertFiles, good: socket.socket) -> None:
    with raw_connect(sb.ports["SASL_SSL"], client_tls_context(certs)) as s:
        assert sasl_plain_login(s, ALICE) == 0
        assert _metadata_ok(s)


@pytest.mark.parametrize("first", ["METADATA", "FIND_COORDINATOR"])
def test_request_before_handshake_closes_without_answer(sb: SecureBroker, good: socket.socket, first: str) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    if first == "METADATA":
        s.sendall(frame(_key("METADATA"), 12, topics=None))
    else:
        s.sendall(frame(_key("FIND_COORDINATOR"), 4, key_type=0, coordinator_keys=["g"]))
    assert wait_closed(s) == b""


def test_request_after_api_versions_before_handshake_closes(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    assert api_versions_ok(s)
    s.sendall(frame(_key("METADATA"), 12, topics=None))
    assert wait_closed(s) == b""


def test_sasl_authenticate_before_handshake_closes(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    s.sendall(frame(_key("SASL_AUTHENTICATE"), 2, auth_bytes=b"\0alice\0alice-secret"))
    assert wait_closed(s) == b""


def test_second_handshake_gets_illegal_sasl_state(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    hs = call(s, _key("SASL_HANDSHAKE"), 1, mechanism="PLAIN")
    assert hs is not None and hs.error_code == 0
    again = call(s, _key("SASL_HANDSHAKE"), 1, mechanism="PLAIN")
    assert again is not None and again.error_code == ILLEGAL_SASL_STATE, again
    assert wait_closed(s) == b""


def test_unsupported_mechanism(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    hs = call(s, _key("SASL_HANDSHAKE"), 1, mechanism="GSSAPI")
    assert hs is not None and hs.error_code == UNSUPPORTED_SASL_MECHANISM, hs
    assert sorted(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert wait_closed(s) == b""


def test_wrong_plain_password(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    assert call(s, _key("SASL_HANDSHAKE"), 1, mechanism="PLAIN").error_code == 0
    secret = "guess-2f8a9c"
    r = call(s, _key("SASL_AUTHENTICATE"), 2, auth_bytes=f"\0alice\0{secret}".encode())
    assert r is not None and r.error_code == SASL_AUTHENTICATION_FAILED, r
    assert secret not in (r.error_message or "")
    assert wait_closed(s) == b""
    assert secret not in sb.broker.log_path.read_text(errors="replace")


def test_unknown_plain_user(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    assert sasl_plain_login(s, ("mallory", "x")) == SASL_AUTHENTICATION_FAILED
    assert wait_closed(s) == b""


def test_malformed_plain_token_under_the_limit_is_an_auth_failure(sb: SecureBroker, good: socket.socket) -> None:
    """A big (but allowed) token that is no PLAIN message: answered, not dropped."""
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    assert call(s, _key("SASL_HANDSHAKE"), 1, mechanism="PLAIN").error_code == 0
    r = call(s, _key("SASL_AUTHENTICATE"), 2, auth_bytes=b"x" * (MAX_RECEIVE - 1024))
    assert r is not None and r.error_code == SASL_AUTHENTICATION_FAILED, r
    assert wait_closed(s) == b""


@pytest.mark.parametrize("when", ["before-handshake", "after-handshake"])
def test_oversize_sasl_frame_closes_without_answer(sb: SecureBroker, good: socket.socket, when: str) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    if when == "after-handshake":
        assert call(s, _key("SASL_HANDSHAKE"), 1, mechanism="PLAIN").error_code == 0
    # a SaslAuthenticate frame one byte over the limit; the size prefix alone is refused
    token = frame(_key("SASL_AUTHENTICATE"), 2, auth_bytes=b"\0alice\0" + b"y" * MAX_RECEIVE)
    assert struct.unpack(">i", token[:4])[0] > MAX_RECEIVE
    try:
        s.sendall(token)
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while we were still sending: what we check below
    assert wait_closed(s) == b""


def test_oversize_frame_over_tls(sb: SecureBroker, certs: CertFiles, good: socket.socket) -> None:
    s = raw_connect(sb.ports["SASL_SSL"], client_tls_context(certs))
    s.sendall(struct.pack(">i", MAX_RECEIVE + 1) + b"z" * 1024)
    assert wait_closed(s) == b""


def test_negative_frame_size_closes(sb: SecureBroker, good: socket.socket) -> None:
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    s.sendall(struct.pack(">i", -5) + b"abcd")
    assert wait_closed(s) == b""


def test_unauthenticated_then_authenticated_is_served(sb: SecureBroker) -> None:
    """The whole happy path on the raw wire, and a read of what the broker sends first: a
    SASL listener does not speak before the client."""
    s = _plain(sb.ports["SASL_PLAINTEXT"])
    s.settimeout(0.3)
    with pytest.raises(TimeoutError):
        s.recv(1)
    s.settimeout(10)
    assert sasl_plain_login(s, ADMIN) == 0
    assert _metadata_ok(s)
    s.close()


# ---------------------------------------------------------------- connection limits


PER_IP = 5


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory):
    """max.connections.per.ip=5; 127.0.0.2 stands for another host with its own limit."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("limited")), overrides={
        "max.connections.per.ip": str(PER_IP), "max.connections.per.ip.overrides": "127.0.0.2:50"}).start()
    yield b
    b.stop()


def _served_from(port: int, source: str | None = None) -> bool:
    try:
        with raw_connect(port, source=source) as s:
            return api_versions_ok(s)
    except OSError:
        return False


def _open_until_served(port: int, attempts: int = 100) -> socket.socket:
    """A new connection from 127.0.0.1 once the broker has counted a closed one out."""
    import time

    for _ in range(attempts):
        s = raw_connect(port)
        if api_versions_ok(s):
            return s
        s.close()
        time.sleep(0.1)
    raise AssertionError("no connection slot came back")


def test_thousands_of_connections_from_one_ip(limited: BrokerProcess) -> None:
    held = [raw_connect(limited.port) for _ in range(PER_IP)]
    try:
        for s in held:
            assert api_versions_ok(s)
        refused = 0
        for _batch in range(10):
            extra = []
            for _ in range(200):
                try:
                    extra.append(raw_connect(limited.port))
                except (ConnectionResetError, ConnectionRefusedError):
                    refused += 1  # reset before the handshake finished: refused all the same
            for s in extra:
                assert wait_closed(s) == b"", "a connection over max.connections.per.ip was served"
                s.close()
                refused += 1
        assert refused == 2000
        # another host is served, and so are the connections within the limit
        assert _served_from(limited.port, source="127.0.0.2")
        for s in held:
            assert api_versions_ok(s), limited.log_text()
        # a closed connection gives its slot back
        held.pop().close()
        held.append(_open_until_served(limited.port))
    finally:
        for s in held:
            s.close()


def test_per_ip_override(limited: BrokerProcess) -> None:
    others = [raw_connect(limited.port, source="127.0.0.2") for _ in range(PER_IP * 3)]
    try:
        assert all(api_versions_ok(s) for s in others), limited.log_text()
    finally:
        for s in others:
            s.close()


def test_max_connections_waits_for_a_slot(tmp_path) -> None:
    """At max.connections Kafka's acceptor blocks until a connection closes: the extra client
    is not refused, it is answered once a slot frees."""
    b = BrokerProcess(str(tmp_path / "logs"), overrides={"max.connections": "3"}).start()
    held = [_open_until_served(b.port) for _ in range(3)]
    try:
        waiting = raw_connect(b.port)
        waiting.sendall(frame(_key("API_VERSIONS"), 3, client_software_name="w", client_software_version="1"))
        waiting.settimeout(1.0)
        with pytest.raises(TimeoutError):
            waiting.recv(1)  # neither answered nor closed while the broker is full
        held.pop().close()
        waiting.settimeout(15)
        body = read_frame(waiting)
        assert body is not None, b.log_text()
        waiting.close()
    finally:
        for s in held:
            s.close()
        b.kill()
