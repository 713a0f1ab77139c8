"""The one Kafka wire client: the admin client, ``krait perf``, the benchmarks and the
tests all talk to brokers through it.

A :class:`WireClient` is a blocking connection to one broker. On connecting it sends
ApiVersions and from then on uses, for every API in :data:`CLIENT_VERSIONS`, the highest
version both sides support (or the version a caller names). Requests are built from plain, version-agnostic
values with :func:`protocol.build.make` and framed and decoded with
:mod:`protocol.framing`, so any request of any version is one call::

    with WireClient("127.0.0.1", 9092) as c:
        md = c.request(ApiKey.METADATA, topics=None)          # negotiated version
        r = c.request(ApiKey.FETCH, 4, replica_id=-1, ...)    # a chosen version

Against a secured listener pass a :class:`~broker.security.client_security.ClientSecurity`
(built from Kafka client properties): the connection is then wrapped in TLS (certificate
checked) and, after ApiVersions, authenticated with SaslHandshake + SaslAuthenticate, as
Kafka's clients do; when the broker gives the session a lifetime the client
re-authenticates before it ends (between requests, as Kafka's clients do)::

    sec = ClientSecurity.from_file("client.properties")
    with WireClient("broker1", 9093, security=sec) as c: ...

Requests can be pipelined: :meth:`WireClient.send` several, then :meth:`WireClient.receive`
the answers in order. Callers that do their own I/O (an asyncio load generator) build
frames with :func:`encode_request`. Error codes in responses are left to the caller;
trouble on the client's side (connect, timeout, undecodable answer) raises
:class:`~protocol.client_errors.ClientError`.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections import deque
from typing import Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make
from protocol.client_errors import ClientError, check
from protocol.errors import ErrorCode, KafkaError, ProtocolError

from ..security.client_security import ClientSecurity
from ..security.sasl_client import reauth_delay_ms, run_requests, sasl_requests

__all__ = ["CLIENT_VERSIONS", "WireClient", "connect", "encode_request", "parse_bootstrap"]

_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
#: answers larger than this are a broken stream, not a response
MAX_RESPONSE = 1 << 30

#: The versions this client speaks when it negotiates, per API: (lowest, highest). The
#: client's own declaration, as every Kafka client has one, and not what Krait serves:
#: the callers (the admin client above all) were written for these request and response
#: shapes, and a newer broker must not lead them into a version they do not know. Other
#: APIs, and other versions, can still be sent by naming the version.
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    # v0 has no pattern type (literal only): the ACL commands need v1
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None = "krait",
                   **fields: Any) -> bytes:
    """A whole request frame (size prefix included) built from plain values."""
    return framing.encode_request(api_key, version, correlation_id, make(apis.request_type(api_key, version), **fields),
                                  client_id=client_id)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (``PLAINTEXT://`` prefixes allowed) -> [(host, port)]."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ClientError(f"invalid bootstrap server {item!r} (expected host:port)")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ClientError("no bootstrap servers given")
    return out


class WireClient:
    """A blocking connection to one broker, with negotiated API versions.

    ``negotiate=False`` skips ApiVersions (every request then names its version): the
    benchmarks use it to send exactly the same bytes to every broker they compare.
    """

    def __init__(self, host: str, port: int, timeout: float = 30.0, client_id: str = "krait",
                 negotiate: bool = True, security: ClientSecurity | None = None) -> None:
        self.host, self.port, self.timeout, self.client_id = host, port, timeout, client_id
        self.security = security
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock: socket.socket = sock
        if security is not None and security.uses_ssl:
            try:
                self.sock = security.wrap(sock, host, port)
            except BaseException:
                sock.close()
                raise
        self._cid = 0
        self._in_flight: deque[tuple[int, int, int]] = deque()  # (correlation id, api key, version)
        self._buf = bytearray(1 << 16)
        #: api key -> (lowest, highest) version both sides support
        self.versions: dict[int, tuple[int, int]] = {}
        #: the broker's own ranges, every API it listed (the SASL exchange reads them)
        self.broker_versions: dict[int, tuple[int, int]] = {}
        #: monotonic time at which to re-authenticate (None: the session does not expire)
        self._reauth_at: float | None = None
        try:
            if negotiate:
                self._negotiate()
            if security is not None and security.uses_sasl:
                self._authenticate()
        except ClientError as exc:
            self.close()
            if "closed by the broker" in exc.message and not (security and security.uses_ssl):
                # what a TLS listener does to a plaintext hello: say so
                raise ClientError(f"{exc.message} (if it is an SSL or SASL_SSL listener, set security.protocol "
                                  "in the client properties)") from None
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"WireClient({self.host}:{self.port})"

    # versions

    def version(self, api_key: int) -> int:
        """The version used for ``api_key``: the highest both sides support (an API outside
        :data:`CLIENT_VERSIONS` has none: name its version)."""
        if api_key in self.versions:
            return self.versions[api_key][1]
        if api_key not in CLIENT_VERSIONS or not self.versions:  # or negotiate=False
            raise ClientError(f"no negotiated version of {apis.api_name(api_key)}: name the version")
        raise KafkaError(ErrorCode.unsupported_version, f"the broker at {self.host}:{self.port} does not "
                         f"support {apis.api_name(api_key)}")

    def _negotiate(self) -> None:
        ours = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        version = ours
        for _ in range(2):
            resp = self.request(ApiKey.API_VERSIONS, version, client_software_name="krait",
                                client_software_version="0.1.0")
            theirs = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
            if resp.error_code == ErrorCode.unsupported_version and version != 0:
                # the broker answered in v0 format with its own range: retry with a version it knows
                lo, hi = theirs.get(ApiKey.API_VERSIONS, (0, 0))
                version = max(lo, min(hi, ours))
                continue
            check(resp.error_code, context="ApiVersions")
            self.broker_versions = theirs
            for key, (lo, hi) in theirs.items():
                mine = CLIENT_VERSIONS.get(key)
                if mine is not None and max(lo, mine[0]) <= min(hi, mine[1]):
                    self.versions[key] = (max(lo, mine[0]), min(hi, mine[1]))
            return
        raise ClientError(f"{self.host}:{self.port} does not accept any ApiVersions version we know")

    def _authenticate(self) -> None:
        """SaslHandshake + SaslAuthenticate (Kafka's SaslClientAuthenticator); also the
        re-authentication of a session the broker gave a lifetime."""
        assert self.security is not None
        steps = sasl_requests(self.security, self.broker_versions, f"{self.host}:{self.port}")
        lifetime = run_requests(steps, lambda key, version, fields: self.request(key, version, **fields))
        self._reauth_at = None
        if lifetime > 0:
            self._reauth_at = time.monotonic() + reauth_delay_ms(lifetime, random.random()) / 1000

    # requests

    def send(self, api_key: int, version: int | None = None, /, **fields: Any) -> int:
        """Send one request built from ``fields`` without waiting; returns its correlation id.
        Answers come back in order through :meth:`receive`."""
        if (self._reauth_at is not None and not self._in_flight and time.monotonic() >= self._reauth_at
                and api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)):
            self._authenticate()
        v = self.version(api_key) if version is None else version
        self._cid = (self._cid + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, v, self._cid, self.client_id, **fields)
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise ClientError(f"cannot send to {self.host}:{self.port}: {exc}") from None
        self._in_flight.append((self._cid, api_key, v))
        return self._cid

    def send_together(self, api_key: int, version: int, requests: list[dict[str, Any]]) -> list[int]:
        """Send several requests in one write, so that the broker reads them at once, as it
        does a pipelining client's backlog; returns their correlation ids."""
        frames, cids = [], []
        for fields in requests:
            self._cid = (self._cid + 1) & 0x7FFFFFFF
            frames.append(encode_request(api_key, version, self._cid, self.client_id, **fields))
            cids.append(self._cid)
        try:
            self.sock.sendall(b"".join(frames))
        except OSError as exc:
            raise ClientError(f"cannot send to {self.host}:{self.port}: {exc}") from None
        self._in_flight.extend((cid, api_key, version) for cid in cids)
        return cids

    def send_frame(self, frame: bytes, api_key: int, version: int, correlation_id: int) -> None:
        """Send a request frame encoded beforehand (size prefix included) whose header
        carries ``api_key``, ``version`` and ``correlation_id``; answered through
        :meth:`receive` like any other. For clients that send the same bytes many times."""
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise ClientError(f"cannot send to {self.host}:{self.port}: {exc}") from None
        self._in_flight.append((correlation_id, api_key, version))

    def receive(self) -> Any:
        """The decoded answer to the oldest request sent and not yet received."""
        cid, api_key, version = self._in_flight[0]
        frame = self._next_frame()
        decode_version = version
        if (api_key == ApiKey.API_VERSIONS and len(frame) >= 6
                and _I16.unpack_from(frame, 4)[0] == ErrorCode.unsupported_version):
            # a broker that does not know this ApiVersions version answers in the v0 format
            decode_version = 0
        try:
            got, obj = framing.decode_response(api_key, decode_version, frame)
        except ProtocolError as exc:
            raise ClientError(f"cannot decode {apis.api_name(api_key)} v{version} response: {exc}") from None
        if got != cid:
            raise ClientError(f"correlation id mismatch: sent {cid}, got {got}")
        return obj

    def receive_frame(self) -> memoryview:
        """The answer to the oldest request as it came (response header included, size
        prefix not), undecoded and uncopied: valid until the next receive. For callers
        that time the broker rather than the decoding, or that must not copy what they
        read (kio copies every record byte it decodes)."""
        return self._next_frame()

    def request(self, api_key: int, version: int | None = None, /, **fields: Any) -> Any:
        """Send one request built from ``fields`` and return the decoded response."""
        self.send(api_key, version, **fields)
        return self.receive()

    # framing

    def _next_frame(self) -> memoryview:
        """The next response frame, in a buffer reused by the next call."""
        if not self._in_flight:
            raise ClientError("no request is waiting for an answer")
        _, api_key, version = self._in_flight[0]
        try:
            (size,) = _SIZE.unpack(self._read(4))
            if size < 4 or size > MAX_RESPONSE:
                raise ClientError(f"bad response size {size} from {self.host}:{self.port}")
            frame = self._read(size)
        except ClientError as exc:
            raise ClientError(f"{exc.message} (request: {apis.api_name(api_key)} v{version})") from None
        self._in_flight.popleft()
        return frame

    def _read(self, n: int) -> memoryview:
        if n > len(self._buf):
            self._buf = bytearray(n)
        view = memoryview(self._buf)[:n]
        got = 0
        while got < n:
            try:
                k = self.sock.recv_into(view[got:], n - got)
            except TimeoutError:
                raise ClientError(f"timed out after {self.timeout:g}s waiting for {self.host}:{self.port}") from None
            except OSError as exc:
                raise ClientError(f"connection to {self.host}:{self.port} failed: {exc}") from None
            if not k:
                raise ClientError(f"connection to {self.host}:{self.port} closed by the broker")
            got += k
        return view


def connect(bootstrap: str, timeout: float = 30.0, client_id: str = "krait", negotiate: bool = True,
            security: ClientSecurity | None = None) -> WireClient:
    """A connection to the first reachable broker of ``bootstrap`` (``host:port,...``).
    A refused authentication is not retried on the next broker: it is an answer."""
    errors = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            return WireClient(host, port, timeout, client_id, negotiate, security)
        except ClientError as exc:
            errors.append(exc.message)
    raise ClientError("; ".join(errors))
