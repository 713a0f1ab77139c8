"""The client half of Kafka's SASL (SaslClientAuthenticator) and the asyncio
connections that use it.

Owns:

- :class:`SaslMechanismClient`: one mechanism's tokens (PLAIN; SCRAM-SHA-256/512 through
  ``scramp``);
- :func:`sasl_requests`: the exchange, SaslHandshake v1 then SaslAuthenticate frames
  (v0-2), written once as a generator of requests, driven by the blocking wire client
  (:class:`broker.tools.wire.WireClient`, with :func:`run_requests`) and by
  :func:`sasl_authenticate_async`; :func:`reauth_delay_ms`, when a client re-authenticates;
- :func:`open_secure_connection` / :func:`open_secure_session`: the asyncio path for the
  broker's own outgoing connections: TLS, ApiVersions and the SASL exchange as the
  :class:`~broker.security.client_security.ClientSecurity` says.

Errors name the problem: a refused login is a ``SASL_AUTHENTICATION_FAILED``
:class:`~protocol.errors.KafkaError` carrying the broker's message; a certificate the
client does not trust or an unreachable broker is a
:class:`~protocol.client_errors.ClientError`. Passwords never appear in a message or a repr.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import struct
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.client_errors import ClientError, kafka_error
from protocol.errors import ErrorCode, ProtocolError

from .client_security import ClientSecurity, ssl_error

__all__ = [
    "Request",
    "SaslMechanismClient",
    "SecureSession",
    "open_secure_connection",
    "open_secure_session",
    "reauth_delay_ms",
    "run_requests",
    "sasl_authenticate_async",
    "sasl_requests",
]

_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")


# --- the exchange ------------------------------------------------------------------------


class SaslMechanismClient:
    """The client half of one mechanism: :meth:`initial` is the first token,
    :meth:`evaluate` answers each server token, :attr:`complete` says the client is done
    (Kafka's SaslClient.evaluateChallenge / isComplete)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.complete = False
        self._username = username
        self._password = password
        self._scram: Any = None
        self._step = 0

    def initial(self) -> bytes:
        if self.mechanism == "PLAIN":
            # RFC 4616: authzid NUL authcid NUL passwd; Kafka's clients leave authzid empty
            return b"\0" + self._username.encode() + b"\0" + self._password.encode()
        import scramp

        try:
            self._scram = scramp.ScramClient([self.mechanism], self._username, self._password)
            return self._scram.get_client_first().encode()
        except scramp.ScramException as exc:
            raise ClientError(f"{self.mechanism}: {exc}") from None

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to the server's token, or None once the exchange is complete."""
        if self.mechanism == "PLAIN":
            self.complete = True
            return None
        import scramp

        try:
            text = challenge.decode()
            if self._step == 0:
                self._step = 1
                self._scram.set_server_first(text)
                return self._scram.get_client_final().encode()
            self._scram.set_server_final(text)  # checks the server's signature
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise kafka_error(ErrorCode.sasl_authentication_failed,
                              f"{self.mechanism} exchange failed: {exc}") from None
        self.complete = True
        return None


#: a request the driver must send: (api key, version, fields)
Request = tuple[int, int, dict[str, Any]]


def sasl_requests(security: ClientSecurity, versions: Mapping[int, tuple[int, int]], where: str,
                  ) -> Generator[Request, Any, int]:
    """Kafka's SaslClientAuthenticator as a generator: yields each request, is sent each
    decoded response, returns the session lifetime in ms (0: none). ``versions`` are the
    broker's ApiVersions ranges (empty: assume SaslHandshake v1 and SaslAuthenticate v1)."""
    assert security.sasl_mechanism and security.username is not None and security.password is not None
    mechanism = security.sasl_mechanism
    if versions and ApiKey.SASL_HANDSHAKE not in versions:
        raise ClientError(f"{where} does not offer SASL (no SaslHandshake in its ApiVersions)")
    handshake_v = min(1, versions.get(ApiKey.SASL_HANDSHAKE, (0, 1))[1])
    if handshake_v < 1:
        raise ClientError(f"{where} only knows SaslHandshake v0 (raw SASL tokens), which this client does not speak")
    resp = yield (ApiKey.SASL_HANDSHAKE, handshake_v, {"mechanism": mechanism})
    code = int(resp.error_code)
    if code == ErrorCode.unsupported_sasl_mechanism:
        enabled = ", ".join(str(m) for m in resp.mechanisms)
        raise kafka_error(code, f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled "
                                f"mechanisms are [{enabled}]", context=where)
    if code == ErrorCode.illegal_sasl_state:
        raise kafka_error(code, context=f"SaslHandshake at {where} (is it a SASL listener?)")
    if code:
        raise kafka_error(code, context=f"SaslHandshake at {where}")
    if ApiKey.SASL_AUTHENTICATE not in versions and versions:
        raise ClientError(f"{where} does not support SaslAuthenticate")
    auth_v = min(2, versions.get(ApiKey.SASL_AUTHENTICATE, (0, 1))[1])
    client = SaslMechanismClient(mechanism, security.username, security.password)
    token: bytes | None = client.initial()
    lifetime = 0
    while token is not None:
        resp = yield (ApiKey.SASL_AUTHENTICATE, auth_v, {"auth_bytes": token})
        code = int(resp.error_code)
        if code:
            raise kafka_error(code, resp.error_message, context=f"authentication of {security.username!r} "
                                                                f"({mechanism}) at {where} failed")
        lifetime = _millis(getattr(resp, "session_lifetime", 0))
        token = client.evaluate(bytes(resp.auth_bytes or b""))
    return lifetime


def _millis(value: Any) -> int:
    """kio gives int64 millisecond fields as timedelta."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value or 0)


def run_requests(steps: Generator[Request, Any, Any], request: Callable[[int, int, dict[str, Any]], Any]) -> Any:
    """Drive a request generator with a blocking ``request(api_key, version, fields)``."""
    try:
        req = next(steps)
        while True:
            req = steps.send(request(*req))
    except StopIteration as stop:
        return stop.value


def reauth_delay_ms(lifetime_ms: int, fraction: float) -> float:
    """When to re-authenticate: Kafka's client picks a random point between 85 % and 95 %
    of the session lifetime (``fraction`` in [0, 1] chooses it)."""
    return lifetime_ms * (0.85 + 0.10 * fraction)


# --- asyncio -----------------------------------------------------------------------------


class _AsyncChannel:
    """Request/response over asyncio streams for the connection set-up only."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
                 timeout: float, where: str) -> None:
        self.reader, self.writer, self.client_id, self.timeout, self.where = reader, writer, client_id, timeout, where
        self._cid = 0

    async def request(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        self._cid += 1
        frame = framing.encode_request(api_key, version, self._cid, make(apis.request_type(api_key, version), **fields),
                                       client_id=self.client_id)
        try:
            self.writer.write(frame)
            await self.writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(self.reader.readexactly(4), self.timeout))
            if size < 4 or size > 1 << 24:
                raise ClientError(f"bad response size {size} from {self.where}")
            body = await asyncio.wait_for(self.reader.readexactly(size), self.timeout)
        except asyncio.IncompleteReadError:
            raise ClientError(f"connection to {self.where} closed by the broker "
                              f"({apis.api_name(api_key)} v{version})") from None
        except TimeoutError:
            raise ClientError(f"timed out after {self.timeout:g}s waiting for {self.where}") from None
        except (OSError, ssl.SSLError) as exc:
            raise ClientError(f"connection to {self.where} failed: {exc}") from None
        decode_version = version
        if api_key == ApiKey.API_VERSIONS and len(body) >= 6 and \
                _I16.unpack_from(body, 4)[0] == ErrorCode.unsupported_version:
            decode_version = 0  # the broker answers an unknown ApiVersions version in v0
        try:
            cid, obj = framing.decode_response(api_key, decode_version, body)
        except ProtocolError as exc:
            raise ClientError(f"cannot decode {apis.api_name(api_key)} v{version} from {self.where}: {exc}") from None
        if cid != self._cid:
            raise ClientError(f"correlation id mismatch from {self.where}: sent {self._cid}, got {cid}")
        return obj

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        resp = await self.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "krait",
                                                           "client_software_version": "0.1.0"})
        if int(resp.error_code) == ErrorCode.unsupported_version:
            resp = await self.request(ApiKey.API_VERSIONS, 0, {})
        if int(resp.error_code):
            raise kafka_error(resp.error_code, context=f"ApiVersions at {self.where}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}


@dataclass(frozen=True)
class SecureSession:
    """What the set-up of a connection learnt: the broker's ApiVersions ranges (empty
    without SASL: none were asked) and the SASL session lifetime in ms (0: the session
    does not expire; else re-authenticate with :func:`sasl_authenticate_async` before
    :func:`reauth_delay_ms` of it has passed, as Kafka's clients do)."""

    versions: Mapping[int, tuple[int, int]]
    lifetime_ms: int = 0


async def sasl_authenticate_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                  security: ClientSecurity, where: str,
                                  versions: Mapping[int, tuple[int, int]] | None = None,
                                  client_id: str = "krait", timeout: float = 30.0) -> SecureSession:
    """The SASL exchange on an open asyncio connection (also a re-authentication: pass the
    ``versions`` already known, no ApiVersions is sent then)."""
    channel = _AsyncChannel(reader, writer, client_id, timeout, where)
    if versions is None:
        versions = await channel.api_versions()
    steps = sasl_requests(security, versions, where)
    try:
        req = next(steps)
        while True:
            req = steps.send(await channel.request(*req))
    except StopIteration as stop:
        return SecureSession(versions, int(stop.value))


async def open_secure_session(host: str, port: int, props: Mapping[str, str] | ClientSecurity, *,
                              client_id: str = "krait", timeout: float = 30.0,
                              ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, SecureSession]:
    """:func:`open_secure_connection` that also returns the :class:`SecureSession` (for a
    long-lived connection that must re-authenticate)."""
    security = props if isinstance(props, ClientSecurity) else ClientSecurity.from_props(props)
    where = f"{host}:{port}"
    ctx = security.ssl_context if security.uses_ssl else None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None), timeout)
    except ssl.SSLError as exc:
        raise ssl_error(exc, where) from None
    except TimeoutError:
        raise ClientError(f"timed out after {timeout:g}s connecting to {where}") from None
    except OSError as exc:
        raise ClientError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    session = SecureSession({})
    if security.uses_sasl:
        try:
            session = await sasl_authenticate_async(reader, writer, security, where, client_id=client_id,
                                                    timeout=timeout)
        except BaseException:
            writer.close()
            raise
    return reader, writer, session


async def open_secure_connection(host: str, port: int, props: Mapping[str, str] | ClientSecurity, *,
                                 client_id: str = "krait", timeout: float = 30.0,
                                 ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An asyncio connection to ``host:port`` ready for Kafka requests: TLS when the
    protocol says so (the certificate checked), then ApiVersions and the SASL exchange when
    it says SASL. Errors close the connection and raise ClientError / KafkaError."""
    reader, writer, _ = await open_secure_session(host, port, props, client_id=client_id, timeout=timeout)
    return reader, writer
