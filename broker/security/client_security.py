"""The client side of Kafka's security settings: Kafka client properties (the
``--command-config`` file of kafka-acls.sh / kafka-configs.sh, or a producer's properties)
turned into a TLS context and the SASL credentials to use.

Owns:

- :func:`read_client_properties`: a client properties file, read by
  :mod:`broker.properties` (Java's ``Properties.load``, the same reader as server.properties),
  so that inline PEM certificates and JAAS lines read as Kafka reads them;
- :func:`parse_jaas_config`: Kafka's ``sasl.jaas.config`` grammar;
- :func:`build_ssl_context`: the ``ssl.*`` keys (PEM trust and key stores, from files or
  inline; PKCS12 when the ``cryptography`` package is there, through
  :mod:`broker.security.pem`), ``ssl.endpoint.identification.algorithm`` (``https``,
  Kafka's default, checks the host name; empty turns the check off);
- :class:`ClientSecurity`: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT,
  SASL_SSL), the TLS context, and ``sasl.mechanism`` with ``sasl.jaas.config`` (PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512).

The SASL exchange itself, and the asyncio connections that use all this, are in
:mod:`broker.security.sasl_client`.

Errors name the problem: a certificate the client does not trust or a bad property is a
:class:`~protocol.client_errors.ClientError`. Passwords never appear in a message or a repr.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from protocol.client_errors import ClientError

from ..properties import parse_properties, read_properties
from .jaas import JaasEntry, JaasError
from .jaas import parse_jaas_config as _parse_jaas
from .pem import Pkcs12Pem, load_pkcs12, private_pem

__all__ = [
    "SASL_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "ClientSecurity",
    "JaasEntry",
    "build_ssl_context",
    "normalize_pem",
    "parse_jaas_config",
    "parse_properties",
    "read_client_properties",
    "ssl_error",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


# --- properties --------------------------------------------------------------------------


def read_client_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A client properties file (``--command-config``) -> dict."""
    try:
        return read_properties(path)
    except OSError as exc:
        raise ClientError(f"cannot read client properties {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # Java's Properties.load fails on the same
        raise ClientError(f"cannot read client properties {path}: {exc}") from None


# --- JAAS ----------------------------------------------------------------------------------

def parse_jaas_config(value: str) -> list[JaasEntry]:
    """Kafka's JaasConfig grammar (:mod:`broker.security.jaas`, the broker's parser too);
    a value that does not parse is a ClientError naming ``sasl.jaas.config``."""
    try:
        return _parse_jaas(value)
    except JaasError as exc:
        raise ClientError(f"sasl.jaas.config: {exc}") from None


# --- TLS -------------------------------------------------------------------------------------

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """PEM blocks re-wrapped: Kafka's inline ``ssl.*`` values are often one line (a
    ``\\``-continued property), which OpenSSL does not read; as Kafka's PemStore, take the
    base64 between the markers and ignore the blanks."""
    blocks = []
    for m in _PEM_BLOCK.finditer(text):
        label, body = m.group(1), re.sub(r"\s+", "", m.group(2))
        if "Proc-Type" in m.group(2):  # a legacy encrypted key has headers: keep its lines
            blocks.append(m.group(0).strip())
            continue
        lines = [body[k:k + 64] for k in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise ClientError("no PEM block (-----BEGIN ...-----) found")
    return "\n".join(blocks) + "\n"


def _read_file(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ClientError(f"cannot read {key} {path}: {exc.strerror or exc}") from None


def _store_type(props: Mapping[str, str], key: str, location: str | None) -> str:
    """The store's type: as set, else PEM when the file is PEM (Kafka's default JKS is a
    Java format no one points a Python client at), else JKS (refused below)."""
    kind = (props.get(key) or "").strip().upper()
    if kind:
        return kind
    if location and b"-----BEGIN" in _read_file(location, key.replace(".type", ".location"))[:65536]:
        return "PEM"
    return "JKS" if location else "PEM"


def _pkcs12(data: bytes, password: str | None, key: str) -> Pkcs12Pem:
    """A PKCS12 store as PEM, through the ``cryptography`` package when it is installed."""
    try:
        return load_pkcs12(data, password)
    except ImportError:
        raise ClientError(f"{key}=PKCS12 needs the 'cryptography' package; or use PEM") from None
    except ValueError as exc:
        raise ClientError(f"cannot read the PKCS12 store of {key}: {exc}") from None


def _load_cert_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None, what: str) -> None:
    """load_cert_chain reads files only: the PEM goes through a private temporary file."""
    try:
        with private_pem(pem) as path:
            ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ClientError(f"cannot load the client key and certificate ({what}): {exc.reason or exc}") from None


_TLS_VERSIONS = {"TLSV1": ssl.TLSVersion.TLSv1, "TLSV1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}


def build_ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The client's TLS context from Kafka's ``ssl.*`` client properties."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = (props.get("ssl.endpoint.identification.algorithm", "https") or "").strip()
    if algorithm.lower() not in ("https", ""):
        raise ClientError(f"ssl.endpoint.identification.algorithm={algorithm!r}: only 'https' or empty are known")
    ctx.check_hostname = algorithm.lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED

    protocols = [p.strip().upper() for p in (props.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
                 if p.strip()]
    unknown = [p for p in protocols if p not in _TLS_VERSIONS]
    if unknown or not protocols:
        raise ClientError(f"ssl.enabled.protocols: unknown protocol(s) {', '.join(unknown) or '(none)'}")
    ctx.minimum_version = min((_TLS_VERSIONS[p] for p in protocols), key=lambda v: v.value)
    ctx.maximum_version = max((_TLS_VERSIONS[p] for p in protocols), key=lambda v: v.value)

    # trust: the PEM file or inline certificates, else the system's CAs (as the JVM's default store)
    location = (props.get("ssl.truststore.location") or "").strip() or None
    inline = (props.get("ssl.truststore.certificates") or "").strip() or None
    kind = _store_type(props, "ssl.truststore.type", location)
    try:
        if inline:
            if kind != "PEM":
                raise ClientError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
            ctx.load_verify_locations(cadata=normalize_pem(inline))
        elif location and kind == "PEM":
            ctx.load_verify_locations(cadata=normalize_pem(_read_file(location, "ssl.truststore.location")
                                                           .decode("ascii", "replace")))
        elif location and kind == "PKCS12":
            store = _pkcs12(_read_file(location, "ssl.truststore.location"),
                            props.get("ssl.truststore.password"), "ssl.truststore.type")
            ctx.load_verify_locations(cadata=store.chain.decode())
        elif location:
            raise ClientError(f"ssl.truststore.type={kind} is not supported: use PEM (or PKCS12)")
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except ssl.SSLError as exc:
        raise ClientError(f"cannot load the trusted certificates: {exc.reason or exc}") from None

    # the client's own certificate (for ssl.client.auth on the broker)
    key_password = props.get("ssl.key.password") or None
    location = (props.get("ssl.keystore.location") or "").strip() or None
    chain = (props.get("ssl.keystore.certificate.chain") or "").strip() or None
    key = (props.get("ssl.keystore.key") or "").strip() or None
    kind = _store_type(props, "ssl.keystore.type", location)
    if chain or key:
        if not (chain and key):
            raise ClientError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        if kind != "PEM":
            raise ClientError("ssl.keystore.certificate.chain / ssl.keystore.key need ssl.keystore.type=PEM")
        _load_cert_chain(ctx, (normalize_pem(key) + normalize_pem(chain)).encode(), key_password,
                         "ssl.keystore.key")
    elif location and kind == "PEM":
        pem = normalize_pem(_read_file(location, "ssl.keystore.location").decode("ascii", "replace"))
        _load_cert_chain(ctx, pem.encode(), key_password, location)
    elif location and kind == "PKCS12":
        store_password = props.get("ssl.keystore.password")
        store = _pkcs12(_read_file(location, "ssl.keystore.location"), store_password, "ssl.keystore.type")
        _load_cert_chain(ctx, store.key + store.chain, None, location)
    elif location:
        raise ClientError(f"ssl.keystore.type={kind} is not supported: use PEM (or PKCS12)")
    return ctx


def ssl_error(exc: ssl.SSLError, where: str) -> ClientError:
    """A failed handshake, named: ``certificate verify failed: <why>`` when the broker's
    certificate is not trusted (or not for this host)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        return ClientError(f"SSL handshake with {where} failed: certificate verify failed: {why}")
    return ClientError(f"SSL handshake with {where} failed: {exc.reason or exc}")


# --- the client's security settings ---------------------------------------------------------


@dataclass
class ClientSecurity:
    """What a client needs to reach a secured listener: the protocol, the TLS context and
    the SASL mechanism with its credentials."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def check_hostname(self) -> bool:
        return bool(self.ssl_context and self.ssl_context.check_hostname)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ClientSecurity:
        """Parse Kafka client properties; keys that are not about security are ignored."""
        protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ClientError(f"security.protocol={protocol}: expected one of {', '.join(SECURITY_PROTOCOLS)}")
        out = cls(protocol)
        if out.uses_ssl:
            out.ssl_context = build_ssl_context(props)
        if out.uses_sasl:
            mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip().upper()
            if mechanism not in SASL_MECHANISMS:
                raise ClientError(f"sasl.mechanism={mechanism} is not supported: use one of "
                                  f"{', '.join(SASL_MECHANISMS)}")
            jaas = (props.get("sasl.jaas.config") or "").strip()
            if not jaas:
                raise ClientError(f"security.protocol={protocol} needs sasl.jaas.config with the username and "
                                  "password (e.g. org.apache.kafka.common.security.scram.ScramLoginModule "
                                  "required username=\"alice\" password=\"...\";)")
            entry = parse_jaas_config(jaas)[0]
            username, password = entry.options.get("username"), entry.options.get("password")
            if username is None or password is None:
                raise ClientError(f"sasl.jaas.config: {entry.short_name} needs username=\"...\" and password=\"...\"")
            out.sasl_mechanism, out.username, out.password = mechanism, username, password
        return out

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ClientSecurity:
        return cls.from_props(read_client_properties(path))

    def wrap(self, sock: socket.socket, host: str, port: int) -> ssl.SSLSocket:
        """TLS over a connected blocking socket, the handshake done; trouble is a ClientError."""
        assert self.ssl_context is not None
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            raise ssl_error(exc, f"{host}:{port}") from None
        except OSError as exc:  # the broker closed the connection during the handshake
            raise ClientError(f"SSL handshake with {host}:{port} failed: {exc.strerror or exc}") from None
