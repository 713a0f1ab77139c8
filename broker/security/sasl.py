"""SASL on the broker: the PLAIN and SCRAM-SHA-256/512 server exchanges, SCRAM credentials in
Kafka's stored form, and the JAAS options Kafka's brokers read users from.

PLAIN checks ``user_NAME="password"`` entries of the listener's PlainLoginModule JAAS config.
SCRAM runs through ``scramp`` against credentials stored salted and hashed (salt, StoredKey,
ServerKey, iterations: never the password), as Kafka's ScramCredentialUtils writes them.
Failure messages are Kafka's, and none carries a secret or says whether the user exists.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scramp import ScramException, ScramMechanism

from ..config import ConfigError
from .jaas import parse_jaas_config

SCRAM_MECHANISMS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: Kafka's ScramMechanism.minIterations / the AlterUserScramCredentials maximum
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
#: Kafka's ScramMechanism codes in Describe/AlterUserScramCredentials
SCRAM_MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

log = logging.getLogger("krait.sasl")



class SaslAuthenticationError(Exception):
    """A failed exchange; the message is what the client is told (Kafka's wording)."""


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule> required key="value" ...;`` -> (login module class, options) of its
    first line; raises JaasError (a ValueError)."""
    entry = parse_jaas_config(text)[0]
    return entry.login_module, entry.options


# --- SCRAM credentials (Kafka's ScramFormatter / ScramCredentialUtils) -------------------------
@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_string(cls, s: str) -> ScramCredential:
        props = dict(tok.split("=", 1) for tok in s.split(",") if "=" in tok)
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("Credentials not valid")
        b64 = base64.b64decode
        return cls(b64(props["salt"]), b64(props["stored_key"]), b64(props["server_key"]), int(props["iterations"]))

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
        """What AlterUserScramCredentials carries (the client salts and hashes the password)."""
        h = SCRAM_MECHANISMS[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", h).digest()
        return cls(salt, h(client_key).digest(), hmac.new(salted_password, b"Server Key", h).digest(), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
        salted = hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism]().name, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)


# --- the exchanges --------------------------------------------------------------------------------
class PlainServer:
    """RFC 4616: one token ``authzid NUL authcid NUL passwd`` (Kafka's PlainSaslServer)."""

    def __init__(self, users: Mapping[str, str]):
        self.users = users
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare even for unknown users so that timing does not say whether the user exists
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\x00" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""


class ScramServer:
    """RFC 5802 server side through scramp, two round trips. ``lookup(username)`` returns the
    stored credential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]):
        self.mechanism = mechanism
        self.lookup = lookup
        self.complete = False
        self.username: str | None = None
        self._server = None
        self._cred: ScramCredential | None = None
        self._client_first = ""
        self._server_first = ""
        self._failed_message = (f"Authentication failed during authentication due to invalid credentials with "
                                f"SASL mechanism {mechanism}")

    def _auth_info(self, username: str):
        cred = self.lookup(username)
        if cred is None:
            raise ScramException("Authentication failed: Invalid user credentials")
        if cred.iterations < SCRAM_MIN_ITERATIONS:
            raise ScramException("iterations below the minimum")
        self.username = username
        self._cred = cred
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def step(self, token: bytes) -> bytes:
        try:
            if self._server is None:
                text = token.decode("utf-8")
                # the GS2 header: "n,," or "n,a=<authzid>,"
                authzid = text.split(",", 2)[1] if text.count(",") >= 2 else ""
                self._server = ScramMechanism(self.mechanism).make_server(self._auth_info, s_nonce=secure_random_string())
                self._server.set_client_first(text)
                if authzid.startswith("a=") and _unescape(authzid[2:]) != self.username:
                    raise SaslAuthenticationError(
                        "Authentication failed: Client requested an authorization id that is different from username")
                self._client_first = text
                self._server_first = self._server.get_server_first()
                return self._server_first.encode()
            text = token.decode("utf-8")
            nonce = self._server_first.split(",", 1)[0][2:]
            sent = next((f[2:] for f in text.split(",") if f.startswith("r=")), "")
            if sent != nonce and sent.endswith(nonce):
                final = _verify_final(self, text)
            else:
                self._server.set_client_final(text)
                final = self._server.get_server_final().encode()
            self.complete = True
            return final
        except SaslAuthenticationError:
            raise
        except (ScramException, UnicodeDecodeError, ValueError, IndexError, KeyError) as exc:
            # never the cause to the client: it could say whether the user exists
            log.debug("SCRAM exchange failed: %s: %s", type(exc).__name__, exc)
            raise SaslAuthenticationError(self._failed_message) from None


def _verify_final(server: ScramServer, text: str) -> bytes:
    """RFC 5802's final check for a client-final nonce that only *ends* with the server's.
    Kafka's ScramSaslServer accepts those (``nonce().endsWith(...)``) and librdkafka 2.0
    sends them (the client nonce twice); scramp insists on equality, so this one case is
    verified here with the RFC's formulas."""
    h = SCRAM_MECHANISMS[server.mechanism]
    cred = server._cred
    without_proof, sep, proof_b64 = text.rpartition(",p=")
    gs2 = server._client_first.split(",", 2)
    if not sep or f"c={base64.b64encode((gs2[0] + ',' + gs2[1] + ',').encode()).decode()}" not in without_proof.split(","):
        raise ValueError("bad client final message")
    auth = f"{gs2[2]},{server._server_first},{without_proof}".encode()
    proof = base64.b64decode(proof_b64, validate=True)
    signature = hmac.new(cred.stored_key, auth, h).digest()
    if len(proof) != len(signature):
        raise ValueError("bad proof")
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    if not hmac.compare_digest(h(client_key).digest(), cred.stored_key):
        raise ValueError("Invalid client credentials")
    return b"v=" + base64.b64encode(hmac.new(cred.server_key, auth, h).digest())


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36 (server nonces,
    and the salts Kafka's admin client makes)."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


# --- per-listener SASL settings -------------------------------------------------------------------
@dataclass
class ListenerSasl:
    """What one SASL listener accepts: mechanisms, PLAIN users, re-authentication."""

    mechanisms: list[str]
    plain_users: dict[str, str]
    reauth_ms: dict[str, int]

    def server(self, mechanism: str, scram_lookup: Callable[[str, str], ScramCredential | None]):
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(mechanism, lambda user: scram_lookup(mechanism, user))


def listener_sasl(props: Mapping[str, str], listener: str) -> ListenerSasl:
    """Kafka's per-listener SASL keys: ``listener.name.<l>.sasl.enabled.mechanisms`` (else
    ``sasl.enabled.mechanisms``, whose Kafka default GSSAPI Krait does not offer), the JAAS
    config ``listener.name.<l>.<mechanism lower-cased>.sasl.jaas.config`` (else
    ``sasl.jaas.config``), ``[listener.name.<l>.<mechanism>.]connections.max.reauth.ms``."""
    lname = listener.lower()
    key = f"listener.name.{lname}.sasl.enabled.mechanisms"
    if key not in props:
        key = "sasl.enabled.mechanisms"
    raw = props.get(key, "GSSAPI")
    mechanisms = [m.strip().upper() for m in str(raw).split(",") if m.strip()]
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(f"Invalid value {raw} for configuration {key}: Krait supports the SASL mechanisms "
                          f"{', '.join(SUPPORTED_MECHANISMS)} (not {', '.join(unsupported) or 'none'}); "
                          f"set {key} on SASL listener {listener}")
    plain_users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jkey = f"listener.name.{lname}.plain.sasl.jaas.config"
        if jkey not in props:
            jkey = "sasl.jaas.config"
        text = props.get(jkey)
        if not text:
            raise ConfigError(f"Invalid value for configuration listener.name.{lname}.plain.sasl.jaas.config: "
                              "PLAIN needs a PlainLoginModule JAAS config with user_<name>=\"<password>\" entries")
        try:
            module, options = parse_jaas(str(text))
        except ValueError as exc:
            raise ConfigError(f"Invalid value for configuration {jkey}: {exc}") from None
        if not module.endswith("PlainLoginModule"):
            raise ConfigError(f"Invalid value for configuration {jkey}: PLAIN needs "
                              "org.apache.kafka.common.security.plain.PlainLoginModule, not " + module)
        plain_users = {k[5:]: v for k, v in options.items() if k.startswith("user_")}
    reauth: dict[str, int] = {}
    for mech in mechanisms:
        for k in (f"listener.name.{lname}.{mech.lower()}.connections.max.reauth.ms",
                  f"listener.name.{lname}.connections.max.reauth.ms", "connections.max.reauth.ms"):
            if k in props:
                try:
                    reauth[mech] = int(str(props[k]).strip())
                except ValueError:
                    raise ConfigError(f"Invalid value {props[k]} for configuration {k}: Not a number of type LONG") from None
                break
    return ListenerSasl(mechanisms, plain_users, reauth)
