"""Secured brokers and client configurations for the real-client security tests.

It owns:
- the broker overrides for SSL, SASL_PLAINTEXT and SASL_SSL listeners with Kafka's keys
  (PEM keystore and truststore from tests/security/tls_ca.py, PLAIN users through the JAAS
  `user_NAME="password"` entries, SCRAM through ScramLoginModule, StandardAuthorizer with a
  super user), and :class:`SecureBroker`, a BrokerProcess with one port per listener;
- :class:`Credentials` and the translation of one set of credentials into each client
  library's configuration: librdkafka (confluent-kafka, kcat), kafka-python, aiokafka and
  the Java client;
- SCRAM users created the way an operator creates them: AlterUserScramCredentials sent by
  the super user (confluent-kafka's AdminClient);
- raw-socket helpers for the fault tests (a frame, a TLS-wrapped socket, "is this
  connection closed").
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from dataclasses import dataclass, replace
from typing import Any

from tests.krait_harness import BrokerProcess, free_port
from tests.security.tls_ca import CertFiles

#: PLAIN users of every secured broker here; admin is the super user
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
PLAIN_USERS = dict([ADMIN, ALICE])
#: SCRAM users the tests create through AlterUserScramCredentials (one per mechanism)
SCRAM_USERS = {"SCRAM-SHA-256": ("scram256", "scram256-secret"), "SCRAM-SHA-512": ("scram512", "scram512-secret")}
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def plain_jaas(users: dict[str, str], login: tuple[str, str] = ADMIN) -> str:
    """Kafka's PlainLoginModule line: the broker's own login plus one user_NAME per user."""
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{login[0]}" password="{login[1]}" {entries};')


def scram_jaas(login: tuple[str, str] = ADMIN) -> str:
    """Kafka's ScramLoginModule line (the inter-broker login; Kafka ignores user_ entries
    for SCRAM, users come from AlterUserScramCredentials)."""
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{login[0]}" password="{login[1]}";')


def secure_overrides(certs: CertFiles, ports: dict[str, int], *, client_auth: str | None = None,
                     encrypted_key: bool = False, users: dict[str, str] | None = None,
                     authorizer: bool = True) -> dict[str, str]:
    """Broker overrides for listeners named after their security protocol (``ports`` maps
    PLAINTEXT / SSL / SASL_PLAINTEXT / SASL_SSL to a port). ``client_auth`` is the broker-wide
    ``ssl.client.auth``: Kafka applies it to SSL listeners only, a SASL_SSL listener needs the
    listener-prefixed key (KIP-684)."""
    users = PLAIN_USERS if users is None else users
    o: dict[str, str] = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs.server_keystore_encrypted if encrypted_key else certs.server_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs.ca_cert,
        "sasl.enabled.mechanisms": MECHANISMS,
    }
    if encrypted_key:
        o["ssl.key.password"] = certs.key_password
    if client_auth is not None:
        o["ssl.client.auth"] = client_auth
    for name in ports:
        if name.startswith("SASL_"):
            prefix = f"listener.name.{name.lower()}"
            o[f"{prefix}.plain.sasl.jaas.config"] = plain_jaas(users)
            o[f"{prefix}.scram-sha-256.sasl.jaas.config"] = scram_jaas()
            o[f"{prefix}.scram-sha-512.sasl.jaas.config"] = scram_jaas()
    if authorizer:
        # the super user administers; everyone authenticated may use topics while no ACL exists
        o.update({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:{ADMIN[0]}",
                  "allow.everyone.if.no.acl.found": "true"})
    return o


class SecureBroker:
    """A BrokerProcess whose listeners are the given security protocols, each on its own
    port (the first one is the harness's port, which start() probes)."""

    def __init__(self, certs: CertFiles, log_dir: str, protocols: tuple[str, ...] = ("SASL_SSL",),
                 extra: dict[str, str] | None = None, **kw: Any) -> None:
        self.certs = certs
        self.broker = BrokerProcess(log_dir)
        self.ports = {p: (self.broker.port if i == 0 else free_port()) for i, p in enumerate(protocols)}
        self.broker.overrides.update(secure_overrides(certs, self.ports, **kw))
        self.broker.overrides.update(extra or {})

    def bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"

    def start(self) -> SecureBroker:
        self.broker.start()
        return self

    def restart(self) -> SecureBroker:
        self.broker.restart()
        return self

    def stop(self) -> None:
        self.broker.stop()

    def kill(self) -> None:
        self.broker.kill()

    def log_text(self) -> str:
        return self.broker.log_text()


# ---------------------------------------------------------------- client configurations


@dataclass(frozen=True)
class Credentials:
    """How a client connects: protocol, SASL mechanism and user (SASL_*), the CA it trusts
    (SSL / SASL_SSL; None = the system's), and a client keystore for mutual TLS."""

    bootstrap: str
    protocol: str
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca: str | None = None
    cert: str | None = None        # client certificate PEM
    key: str | None = None         # client private key PEM (unencrypted PKCS#8)
    keystore: str | None = None    # key + chain in one PEM (Java's ssl.keystore.type=PEM)

    def with_password(self, password: str) -> Credentials:
        return replace(self, password=password)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")


def sasl_credentials(sb: SecureBroker, protocol: str, mechanism: str, user: tuple[str, str]) -> Credentials:
    return Credentials(sb.bootstrap(protocol), protocol, mechanism, user[0], user[1],
                       ca=sb.certs.ca_cert if protocol.endswith("SSL") else None)


def librdkafka_config(c: Credentials, **extra: Any) -> dict[str, Any]:
    """confluent-kafka's (librdkafka's) keys; kcat takes the same as -X key=value."""
    conf: dict[str, Any] = {"bootstrap.servers": c.bootstrap, "security.protocol": c.protocol}
    if c.sasl:
        conf.update({"sasl.mechanisms": c.mechanism, "sasl.username": c.username, "sasl.password": c.password})
    if c.tls:
        # hostname verification is librdkafka 2's default: say it, the SAN holds 127.0.0.1
        conf["ssl.endpoint.identification.algorithm"] = "https"
        if c.ca:
            conf["ssl.ca.location"] = c.ca
        if c.cert:
            conf.update({"ssl.certificate.location": c.cert, "ssl.key.location": c.key})
    conf.update(extra)
    return conf


def kcat_args(c: Credentials) -> list[str]:
    args = ["-b", c.bootstrap]
    for k, v in librdkafka_config(c).items():
        if k != "bootstrap.servers":
            args += ["-X", f"{k}={v}"]
    return args


def kafka_python_config(c: Credentials) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": c.bootstrap, "security_protocol": c.protocol}
    if c.sasl:
        conf.update({"sasl_mechanism": c.mechanism, "sasl_plain_username": c.username,
                     "sasl_plain_password": c.password})
    if c.tls:
        conf.update({"ssl_check_hostname": True, "ssl_cafile": c.ca})
        if c.cert:
            conf.update({"ssl_certfile": c.cert, "ssl_keyfile": c.key})
    return conf


def aiokafka_config(c: Credentials) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    conf: dict[str, Any] = {"bootstrap_servers": c.bootstrap, "security_protocol": c.protocol}
    if c.sasl:
        conf.update({"sasl_mechanism": c.mechanism, "sasl_plain_username": c.username,
                     "sasl_plain_password": c.password})
    if c.tls:
        conf["ssl_context"] = create_ssl_context(cafile=c.ca, certfile=c.cert, keyfile=c.key)
    return conf


def java_properties(c: Credentials) -> dict[str, str]:
    """The Java client's keys, PEM truststore and keystore (Kafka 2.7+, KIP-651)."""
    props = {"bootstrap.servers": c.bootstrap, "security.protocol": c.protocol}
    if c.sasl:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if c.mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        props.update({"sasl.mechanism": c.mechanism,
                      "sasl.jaas.config": f'{module} required username="{c.username}" password="{c.password}";'})
    if c.tls:
        if c.ca:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": c.ca})
        if c.keystore:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": c.keystore})
    return props


def write_properties(props: dict[str, str], path: str | os.PathLike[str]) -> str:
    """A client .properties file (values escaped as java.util.Properties reads them)."""
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n")
    with open(path, "w") as f:
        for k, v in props.items():
            f.write(f"{k}={esc(v)}\n")
    return str(path)


# ---------------------------------------------------------------- SCRAM users


def create_scram_users(admin: Credentials, users: dict[str, tuple[str, str]] | None = None,
                       iterations: int = 4096) -> None:
    """AlterUserScramCredentials (upserts) sent by ``admin``; raises on any per-user error."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    users = SCRAM_USERS if users is None else users
    client = AdminClient(librdkafka_config(admin))
    alterations = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, mech.replace("-", "_")),
                                                               iterations), password.encode())
        for mech, (user, password) in users.items()]
    for fut in client.alter_user_scram_credentials(alterations, request_timeout=30).values():
        fut.result(timeout=30)


# ---------------------------------------------------------------- raw sockets


def client_tls_context(certs: CertFiles, with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=certs.ca_cert)
    if with_cert:
        ctx.load_cert_chain(certs.client_cert, certs.client_key)
    return ctx


def raw_connect(port: int, tls: ssl.SSLContext | None = None, source: str | None = None,
                timeout: float = 10.0) -> socket.socket:
    """A socket to 127.0.0.1:port, TLS-wrapped when ``tls`` is given, from ``source`` (a
    loopback address other than 127.0.0.1 stands for another client host)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source, 0) if source else None)
    if tls is None:
        return sock
    return tls.wrap_socket(sock, server_hostname="127.0.0.1")


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, or None when the peer closed (EOF or reset) first."""
    def read(n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = sock.recv(n - len(buf))
            except (ConnectionResetError, ssl.SSLError, ssl.SSLEOFError, BrokenPipeError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf
    head = read(4)
    if head is None:
        return None
    return read(struct.unpack(">i", head)[0])


def wait_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Read until the peer closes; returns what it sent before closing. Fails (TimeoutError)
    when the connection stays open for ``timeout`` seconds."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
            return got
        except ssl.SSLError as exc:  # an alert or a torn TLS record: closed all the same
            if "TIMED OUT" in str(exc).upper():
                raise TimeoutError("connection still open") from None
            return got
        except TimeoutError:
            raise TimeoutError(f"the connection is still open after {timeout}s") from None
        if not chunk:
            return got
        got += chunk
        if time.monotonic() > deadline:
            raise TimeoutError(f"the connection is still open after {timeout}s")


_CID = [0]


def frame(api_key: int, version: int, **fields: Any) -> bytes:
    """One request frame (size prefix included) built from plain values."""
    from broker.tools.wire import encode_request

    _CID[0] += 1
    return encode_request(api_key, version, _CID[0], "krait-security-test", **fields)


def call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any | None:
    """Send one request and decode its answer; None when the broker closed the connection
    instead of answering."""
    from protocol import framing

    try:
        sock.sendall(frame(api_key, version, **fields))
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        return None
    body = read_frame(sock)
    if body is None:
        return None
    return framing.decode_response(api_key, version, body)[1]


def api_versions_ok(sock: socket.socket) -> bool:
    """ApiVersions v3 answered without error on this connection."""
    from protocol.apis import ApiKey

    r = call(sock, ApiKey.API_VERSIONS, 3, client_software_name="krait-test", client_software_version="1")
    return r is not None and r.error_code == 0 and len(r.api_keys) > 0


def sasl_plain_login(sock: socket.socket, user: tuple[str, str]) -> int:
    """SaslHandshake v1 (PLAIN) then SaslAuthenticate v2; the SaslAuthenticate error code
    (-1 when the connection was closed instead)."""
    from protocol.apis import ApiKey

    hs = call(sock, ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
    if hs is None or hs.error_code != 0:
        return -1 if hs is None else hs.error_code
    auth = call(sock, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user[0]}\0{user[1]}".encode())
    return -1 if auth is None else auth.error_code
