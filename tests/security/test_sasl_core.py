"""The SASL pure core: JAAS parsing, SCRAM credentials in Kafka's stored form, the PLAIN and
SCRAM server exchanges against scramp's client, and the connection's authentication state
machine (Kafka's SaslServerAuthenticator rules) driven frame by frame."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

import pytest
from scramp import ScramClient

from broker.config import BrokerConfig, ConfigError
from broker.security import authenticator as A
from broker.security.sasl import (
    ListenerSasl,
    PlainServer,
    SaslAuthenticationError,
    ScramCredential,
    ScramServer,
    listener_sasl,
    parse_jaas,
)
from protocol import framing
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";')


def test_parse_jaas_reads_quoted_and_bare_options():
    module, opts = parse_jaas(PLAIN_JAAS)
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert opts == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                    "user_alice": 'al"ice'}
    assert parse_jaas("x.ScramLoginModule required username=bob password=pw;")[1] == {"username": "bob", "password": "pw"}
    with pytest.raises(ValueError):
        parse_jaas("PlainLoginModule username=x;")


def test_scram_credential_matches_rfc5802_and_kafka_string_form():
    salt = b"0123456789abcdef"
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", salt, 4096)
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    assert cred.stored_key == hashlib.sha256(client_key).digest()
    assert cred.server_key == hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    text = cred.to_string()
    assert text.startswith(f"salt={base64.b64encode(salt).decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_string(text) == cred
    assert "pencil" not in text
    with pytest.raises(ValueError):
        ScramCredential.from_string("salt=AA==,iterations=4096")


def test_plain_exchange_and_kafka_messages():
    users = {"alice": "secret"}
    s = PlainServer(users)
    assert s.step(b"\x00alice\x00secret") == b"" and s.complete and s.username == "alice"
    for token, message in [(b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
                           (b"\x00nobody\x00secret", "Authentication failed: Invalid username or password"),
                           (b"\x00\x00secret", "Authentication failed: username not specified"),
                           (b"\x00alice\x00", "Authentication failed: password not specified"),
                           (b"alice\x00secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
                           (b"bob\x00alice\x00secret",
                            "Authentication failed: Client requested an authorization id that is different from username")]:
        with pytest.raises(SaslAuthenticationError) as e:
            PlainServer(users).step(token)
        assert str(e.value) == message


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_scramp_client(mechanism):
    cred = ScramCredential.from_password(mechanism, "pw", b"salt-salt-salt", 4096)
    store = {"alice": cred}
    server = ScramServer(mechanism, store.get)
    client = ScramClient([mechanism], "alice", "pw")
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())  # verifies the server
    assert server.complete and server.username == "alice"
    failed = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    for user, password in [("alice", "wrong"), ("nobody", "pw")]:
        server = ScramServer(mechanism, store.get)
        client = ScramClient([mechanism], user, password)
        with pytest.raises(SaslAuthenticationError) as e:
            client.set_server_first(server.step(client.get_client_first().encode()).decode())
            server.step(client.get_client_final().encode())
        assert str(e.value) == failed  # the same answer whether or not the user exists
        assert not server.complete


@pytest.mark.parametrize("password,ok", [("pw", True), ("wrong", False)])
def test_scram_accepts_librdkafka_2_0_doubled_client_nonce_as_kafka_does(password, ok):
    """librdkafka 2.0 (Debian's kcat) sends r=<client nonce><client nonce + server nonce>;
    Kafka checks only that the final nonce ends with the server's, so must we."""
    import base64 as b64

    mech, h = "SCRAM-SHA-512", hashlib.sha512
    cred = ScramCredential.from_password(mech, "pw", b"salt-salt-salt", 4096)
    server = ScramServer(mech, {"alice": cred}.get)
    c_nonce = "clientnonce123"
    first_bare = f"n=alice,r={c_nonce}"
    server_first = server.step(f"n,,{first_bare}".encode()).decode()
    fields = dict(f.split("=", 1) for f in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), b64.b64decode(fields["s"]), int(fields["i"]))
    without_proof = f"c=biws,r={c_nonce}{fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", h).digest()
    signature = hmac.new(h(client_key).digest(), auth, h).digest()
    proof = b64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    final = f"{without_proof},p={proof}".encode()
    if ok:
        expected = hmac.new(hmac.new(salted, b"Server Key", h).digest(), auth, h).digest()
        assert server.step(final) == b"v=" + b64.b64encode(expected)
        assert server.complete and server.username == "alice"
    else:
        with pytest.raises(SaslAuthenticationError):
            server.step(final)
        assert not server.complete


def test_scram_refuses_credentials_below_the_minimum_iterations():
    weak = ScramCredential.from_password("SCRAM-SHA-256", "pw", b"s" * 16, 1024)
    server = ScramServer("SCRAM-SHA-256", {"alice": weak}.get)
    with pytest.raises(SaslAuthenticationError):
        server.step(ScramClient(["SCRAM-SHA-256"], "alice", "pw").get_client_first().encode())


# --- listener settings ------------------------------------------------------------------------
def test_listener_sasl_settings_and_errors_name_the_key():
    props = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
             "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "60000"}
    s = listener_sasl(props, "SASL_SSL")
    assert s.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert s.plain_users == {"admin": "admin-secret", "alice": 'al"ice'}
    assert s.reauth_ms == {"SCRAM-SHA-512": 60000}
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        listener_sasl({}, "SASL_SSL")  # Kafka's default GSSAPI is not offered
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        listener_sasl({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "SASL_SSL")
    with pytest.raises(ConfigError, match="listener.name.sasl_ssl.plain.sasl.jaas.config"):
        listener_sasl({"sasl.enabled.mechanisms": "PLAIN"}, "SASL_SSL")


def test_listener_config_errors_name_the_key():
    def cfg(**props):
        return BrokerConfig.from_props({k.replace("_", "."): v for k, v in props.items()})

    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        cfg(listeners="INTERNAL://127.0.0.1:9093")
    c = BrokerConfig.from_props({"listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094",
                                 "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SSL",
                                 "inter.broker.listener.name": "INTERNAL"})
    assert [(lst.name, lst.security_protocol) for lst in c.listeners] == [("INTERNAL", "SASL_PLAINTEXT"), ("EXTERNAL", "SSL")]
    assert c.inter_broker_listener().name == "INTERNAL"
    assert c.advertised_listeners[1].host == "127.0.0.1"
    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        BrokerConfig.from_props({"listener.security.protocol.map": "A:TLS"})
    with pytest.raises(ConfigError, match="different name"):
        BrokerConfig.from_props({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"})
    with pytest.raises(ConfigError, match="inter.broker.listener.name"):
        BrokerConfig.from_props({"inter.broker.listener.name": "NOPE"}).inter_broker_listener()


# --- the authenticator state machine ----------------------------------------------------------
def _frame(api_key: int, version: int, body: bytes, correlation: int = 1) -> tuple[framing.RequestHeader, bytes]:
    flexible = (api_key == ApiKey.SASL_AUTHENTICATE and version >= 2) or (api_key == ApiKey.API_VERSIONS and version >= 3)
    client_id = b"test"
    raw = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    if flexible:
        raw += b"\x00"
    raw += body
    return framing.parse_request_header(raw), raw


def _handshake(mechanism: str) -> tuple[framing.RequestHeader, bytes]:
    m = mechanism.encode()
    return _frame(ApiKey.SASL_HANDSHAKE, 1, struct.pack(">h", len(m)) + m)


def _authenticate(token: bytes, version: int = 1) -> tuple[framing.RequestHeader, bytes]:
    if version >= 2:  # compact bytes: unsigned varint of length + 1
        body = _uvarint(len(token) + 1) + token + b"\x00"
    else:
        body = struct.pack(">i", len(token)) + token
    return _frame(ApiKey.SASL_AUTHENTICATE, version, body)


def _uvarint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _auth(reauth_ms: int = 0, clock: Clock | None = None) -> A.SaslAuthenticator:
    settings = ListenerSasl(["PLAIN", "SCRAM-SHA-256"], {"alice": "pw", "bob": "pw2"},
                            {"PLAIN": reauth_ms} if reauth_ms else {})
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", b"saltsaltsalt", 4096)
    return A.SaslAuthenticator(settings, lambda mech, user: cred if user == "alice" else None, clock or Clock())


def test_only_apiversions_and_handshake_before_authentication():
    a = _auth()
    assert a.handle(*_frame(ApiKey.API_VERSIONS, 0, b"")).dispatch
    out = a.handle(*_frame(ApiKey.METADATA, 1, struct.pack(">i", -1)))
    assert out.close and out.response is None and not out.dispatch  # Kafka: no answer, the connection closes


def test_sasl_authenticate_before_handshake_closes():
    a = _auth()
    out = a.handle(*_authenticate(b"\x00alice\x00pw"))
    assert out.close and not a.authenticated


def test_plain_flow_sets_the_principal():
    a = _auth()
    out = a.handle(*_handshake("PLAIN"))
    assert out.response.error_code == ErrorCode.none and list(out.response.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    out = a.handle(*_authenticate(b"\x00alice\x00pw"))
    assert out.response.error_code == ErrorCode.none and not out.close
    assert a.authenticated and a.principal == "User:alice"
    assert a.handle(*_frame(ApiKey.METADATA, 1, struct.pack(">i", -1))).dispatch


def test_unsupported_mechanism_and_wrong_password_are_answered_then_closed():
    a = _auth()
    out = a.handle(*_handshake("GSSAPI"))
    assert out.response.error_code == ErrorCode.unsupported_sasl_mechanism and out.close and out.failed
    a = _auth()
    a.handle(*_handshake("PLAIN"))
    out = a.handle(*_authenticate(b"\x00alice\x00nope", version=2))
    assert out.response.error_code == ErrorCode.sasl_authentication_failed
    assert out.response.error_message == "Authentication failed: Invalid username or password"
    assert out.close and out.failed and not a.authenticated


def test_other_request_during_the_exchange_is_illegal_sasl_state():
    a = _auth()
    a.handle(*_handshake("SCRAM-SHA-256"))
    out = a.handle(*_frame(ApiKey.API_VERSIONS, 0, b""))
    assert out.close and out.response.error_code == ErrorCode.illegal_sasl_state


def test_scram_flow_through_the_authenticator():
    a = _auth()
    a.handle(*_handshake("SCRAM-SHA-256"))
    c = ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    out = a.handle(*_authenticate(c.get_client_first().encode()))
    c.set_server_first(bytes(out.response.auth_bytes).decode())
    out = a.handle(*_authenticate(c.get_client_final().encode()))
    c.set_server_final(bytes(out.response.auth_bytes).decode())
    assert a.authenticated and a.principal == "User:alice"


def test_reauthentication_session_lifetime_expiry_and_principal_change():
    clock = Clock()
    a = _auth(reauth_ms=5000, clock=clock)
    a.handle(*_handshake("PLAIN"))
    out = a.handle(*_authenticate(b"\x00alice\x00pw", version=1))
    assert out.response.session_lifetime.total_seconds() == 5.0
    assert not a.expired()
    clock.now += 5.0
    assert a.expired()
    # re-authentication on the same connection renews the session
    assert not a.handle(*_handshake("PLAIN")).close
    out = a.handle(*_authenticate(b"\x00alice\x00pw", version=1))
    assert out.response.error_code == ErrorCode.none and a.authenticated and not a.expired()
    # the principal may not change
    clock.now += 1
    a.handle(*_handshake("PLAIN"))
    out = a.handle(*_authenticate(b"\x00bob\x00pw2", version=1))
    assert out.response.error_code == ErrorCode.sasl_authentication_failed and out.close
    assert "Cannot change principals during re-authentication from User.alice: User.bob" in out.response.error_message


def test_reauthentication_with_another_mechanism_fails_on_the_next_token():
    a = _auth(reauth_ms=5000)
    a.handle(*_handshake("PLAIN"))
    a.handle(*_authenticate(b"\x00alice\x00pw", version=1))
    out = a.handle(*_handshake("SCRAM-SHA-256"))
    assert out.response.error_code == ErrorCode.none
    out = a.handle(*_authenticate(b"n,,n=alice,r=abc", version=1))
    assert out.response.error_code == ErrorCode.sasl_authentication_failed and out.close
    assert "not supported for re-authentication of mechanism 'PLAIN'" in out.response.error_message
