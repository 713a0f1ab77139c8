"""TLS for SSL and SASL_SSL listeners: the server's ssl.SSLContext from Kafka's ``ssl.*``
keys (PEM or PKCS12 keystores, PEM truststores, client authentication, protocol versions)
and the principal a client certificate names.

Keys are looked up as Kafka's broker looks them up: ``listener.name.<listener>.<key>`` first,
then ``<key>``. The standard library's ``ssl`` does the TLS; ``cryptography`` reads PKCS12
keystores and prints certificate subjects as RFC 2253 names, as Java's X500Principal does.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from pathlib import Path

from ..config import ConfigError
from .pem import load_pkcs12, private_pem

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
              "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

Lookup = Callable[[str], "str | None"]


def listener_lookup(props: Mapping[str, str], listener: str) -> Lookup:
    """Kafka's listener-prefixed key resolution for one listener."""
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> str | None:
        v = props.get(prefix + key)
        if v is None:
            v = props.get(key)
        return None if v is None else str(v)

    return get


def _key_name(listener: str, key: str, props: Mapping[str, str]) -> str:
    prefixed = f"listener.name.{listener.lower()}.{key}"
    return prefixed if prefixed in props else key


def _load_keystore(ctx: ssl.SSLContext, get: Lookup, bad: Callable[[str, str], ConfigError]) -> None:
    kind = (get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    key_password = get("ssl.key.password")
    if chain or key:
        if kind != "PEM":
            raise bad("ssl.keystore.type", "inline keystores (ssl.keystore.certificate.chain, ssl.keystore.key) need PEM")
        if not (chain and key):
            raise bad("ssl.keystore.key" if chain else "ssl.keystore.certificate.chain",
                      "both ssl.keystore.certificate.chain and ssl.keystore.key are needed")
        with private_pem((key.strip() + "\n" + chain.strip() + "\n").encode()) as path:
            _load_chain(ctx, path, key_password, bad)
        return
    if not location:
        raise bad("ssl.keystore.location", "an SSL listener needs a keystore (ssl.keystore.location, or "
                  "ssl.keystore.certificate.chain with ssl.keystore.key)")
    if not Path(location).is_file():
        raise bad("ssl.keystore.location", f"no such file {location}")
    if kind == "PEM":
        _load_chain(ctx, location, key_password, bad)
    elif kind == "PKCS12":
        try:
            store = load_pkcs12(Path(location).read_bytes(), get("ssl.keystore.password"))
        except ValueError as exc:
            raise bad("ssl.keystore.password", f"cannot open the PKCS12 keystore {location}: {exc}") from None
        if not store.key or not store.cert:
            raise bad("ssl.keystore.location", f"the PKCS12 keystore {location} holds no private key and certificate")
        with private_pem(store.key + store.chain) as path:
            _load_chain(ctx, path, None, bad)
    else:
        raise bad("ssl.keystore.type", f"{kind} keystores are not supported; use PEM or PKCS12")


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None, bad) -> None:
    try:
        ctx.load_cert_chain(path, password=password.encode() if password else None)
    except ssl.SSLError as exc:
        raise bad("ssl.key.password" if password else "ssl.keystore.location",
                  f"cannot load the key and certificate chain: {exc.reason or exc}") from None


def _load_truststore(ctx: ssl.SSLContext, get: Lookup, bad) -> bool:
    kind = (get("ssl.truststore.type") or "JKS").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if not (location or inline):
        return False
    if kind != "PEM":
        raise bad("ssl.truststore.type", f"{kind} truststores are not supported; use PEM")
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline)
        else:
            ctx.load_verify_locations(cafile=location)
    except (ssl.SSLError, OSError) as exc:
        raise bad("ssl.truststore.location", f"cannot load trusted certificates: {exc}") from None
    return True


def server_context(props: Mapping[str, str], listener: str, sasl: bool = False) -> ssl.SSLContext:
    """The SSLContext of one SSL / SASL_SSL (``sasl``) listener; ConfigError naming the key on
    bad input."""
    get = listener_lookup(props, listener)

    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"Invalid value for configuration {_key_name(listener, key, props)}: {why}")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_COMPRESSION
    _load_keystore(ctx, get, bad)
    has_trust = _load_truststore(ctx, get, bad)
    # KIP-684: on a SASL_SSL listener only the listener-prefixed ssl.client.auth counts
    raw_auth = props.get(f"listener.name.{listener.lower()}.ssl.client.auth") if sasl else get("ssl.client.auth")
    auth = (raw_auth or "none").strip().lower()
    if auth not in _CLIENT_AUTH:
        raise bad("ssl.client.auth", f"{auth!r} is not one of none, requested, required")
    if auth != "none" and not has_trust:
        raise bad("ssl.truststore.location", f"ssl.client.auth={auth} needs a truststore to verify client certificates")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    protocols = [p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if unknown or not protocols:
        raise bad("ssl.enabled.protocols", f"unknown protocol(s) {unknown}; use TLSv1.2 and/or TLSv1.3")
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError:
            raise bad("ssl.cipher.suites", "no cipher suite in the list is known to OpenSSL") from None
    return ctx


def certificate_principal(der: bytes | None) -> str | None:
    """Kafka's DefaultKafkaPrincipalBuilder for SSL with the DEFAULT mapping rule:
    ``User:`` + the peer certificate's subject as an RFC 2253 name (``CN=a,OU=b,O=c``);
    None without a certificate (the principal stays ANONYMOUS)."""
    if not der:
        return None
    from cryptography import x509

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
