"""Listeners and connections: size-prefixed framing with socket.request.max.bytes
enforced before allocating, in-order responses for pipelined requests, and back-pressure.

A connection parses each complete frame's header and hands it to the dispatcher. A
handler may answer at once (the common case: no task is created) or return an awaitable
(long-poll fetch, acks waits, group joins); either way responses leave in request order.
A malformed frame or unsupported request closes only its own connection.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.errors import ProtocolError

from .security.authenticator import Outcome, SaslAuthenticator
from .security.quotas import REQUEST, request_throttle
from .security.tls import certificate_principal
from .security.tls_transport import TlsProtocol

if TYPE_CHECKING:
    from .broker import Broker
    from .security.listeners import ListenerSecurity

log = logging.getLogger("krait.server")

_SIZE = struct.Struct(">i")
_NO_RESPONSE = object()
#: how long a connection refused at SASL stays open after its answer, waiting for the client to
#: close first (see Connection._close_after_answer)
_LINGER_S = 1.0
#: the receive buffer the connections of one event loop share (see Connection.get_buffer)
_SCRATCH = 256 * 1024


class _Scratch(threading.local):
    """One receive buffer per thread: an event loop reads one socket at a time, and every
    frame is taken out of the buffer before the next read, so its connections share it."""

    def __init__(self) -> None:
        self.buf = bytearray(_SCRATCH)
        self.view = memoryview(self.buf)


_scratch = _Scratch()


ANONYMOUS = "User:ANONYMOUS"


class RequestContext:
    __slots__ = ("header", "conn", "client_host", "client_port", "size", "metric_name")

    def __init__(self, header: framing.RequestHeader, conn: Connection, size: int = 0):
        self.header = header
        self.conn = conn
        #: a second request-metrics name besides the API's (Kafka: FetchConsumer / FetchFollower)
        self.metric_name: str | None = None
        #: the request's size in bytes, header included (Kafka's request.sizeInBytes)
        self.size = size
        peer = conn.peer
        self.client_host = peer[0] if peer else ""
        self.client_port = peer[1] if peer else 0

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def principal(self) -> str:
        """The authenticated principal (``User:alice``; ``User:ANONYMOUS`` on PLAINTEXT)."""
        return self.conn.principal


class _Slot:
    __slots__ = ("chunks", "done")

    def __init__(self) -> None:
        self.chunks: list[Any] | None = None
        self.done = False


class Connection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, security: ListenerSecurity | None = None):
        self.broker = broker
        self.security = security
        #: the listener this connection came in on (Metadata answers with its endpoints)
        self.listener_name = security.listener.name if security is not None else None
        self.transport: asyncio.Transport | None = None
        self.peer: tuple | None = None
        self._admitted_ip: str | None = None
        self._has_slot = False
        self._raw: asyncio.BaseTransport | None = None  # the socket (under TLS: the TCP transport)
        #: the protocol the socket's bytes go to: this one, or the TLS layer under it
        self.gate: asyncio.Protocol = self
        #: the start of a frame's size prefix (under 4 bytes) left over from the last read
        self._carry: bytes | None = None
        self._carry_len = 0
        self._frame: bytearray | None = None  # a frame being read into its own buffer
        self._ffill = 0
        #: what arrived while waiting for a connection slot, or behind a throttled request
        self._held: bytearray | None = None
        self._pending: deque[_Slot] = deque()
        self._closed = False
        self._draining = False
        self._paused_reading = False
        self._write_paused = False
        #: KIP-219: a client over its quota is not read until then (time.monotonic())
        self._muted_until = 0.0
        self._max_request = int(broker.config["socket.request.max.bytes"])
        #: set by TLS client authentication or SASL
        self.principal = ANONYMOUS
        #: SASL listeners: the exchange until authenticated, then re-authentication
        self.auth: SaslAuthenticator | None = None
        self._sasl_max = int(broker.config["sasl.server.max.receive.size"])

    # --- connection limits (Kafka's ConnectionQuotas) --------------------------------------
    def admit(self, raw: asyncio.BaseTransport) -> bool:
        """At accept time (before any TLS handshake): over max.connections.per.ip the
        connection is closed; over max.connections it is not read until a slot frees."""
        limits = self.broker.connection_limits
        if limits is None or self._admitted_ip is not None:
            return True
        peer = raw.get_extra_info("peername")
        ip = peer[0] if peer else ""
        refused = limits.admit(ip)
        if refused is not None:
            log.info("closing connection from %s: %s", peer, refused)
            self._closed = True
            raw.close()
            return False
        self._admitted_ip = ip
        self._raw = raw
        if limits.has_slot():
            limits.take_slot()
            self._has_slot = True
        else:
            limits.waiting.append(self)  # what arrives meanwhile is kept, not read (data_received)
        return True

    @property
    def waiting_slot(self) -> bool:
        """Accepted over max.connections: nothing is read until a slot frees."""
        return self._admitted_ip is not None and not self._has_slot

    def _slot_granted(self) -> None:
        self._has_slot = True
        raw = self._raw
        if raw is not None and not raw.is_closing():
            raw.resume_reading()  # type: ignore[attr-defined]
            self.gate.data_received(b"")  # what arrived while waiting

    def _release_slot(self) -> None:
        limits = self.broker.connection_limits
        if self._admitted_ip is None or limits is None:
            return
        if not self._has_slot:
            try:
                limits.waiting.remove(self)
            except ValueError:
                pass
        limits.release(self._admitted_ip, self._has_slot)
        self._admitted_ip = None
        while limits.waiting and limits.has_slot():
            limits.take_slot()
            limits.waiting.popleft()._slot_granted()

    # --- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer = transport.get_extra_info("peername")
        if not self.admit(transport):
            return
        self.broker.connections.add(self)
        sec = self.security
        if sec is None:
            return
        if sec.ssl is not None:
            sslobj = transport.get_extra_info("ssl_object")
            der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
            self.principal = certificate_principal(der) or ANONYMOUS
        if sec.sasl is not None:
            broker = self.broker
            self.auth = SaslAuthenticator(sec.sasl, broker.scram_credential, time.monotonic,
                                          f"{self.peer[0]}:{self.peer[1]}" if self.peer else "")

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        if self.broker.share is not None:
            # its share sessions end: their members' records go back to the group
            self.broker.share.connection_closed(self)
        self._pending.clear()
        self._release_slot()

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop reading its requests too.
        self._write_paused = True
        if self.transport is not None and not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if (self.transport is not None and self._paused_reading and len(self._pending) < 64
                and not self._muted_until):
            self.transport.resume_reading()
            self._paused_reading = False

    # --- receiving (asyncio.BufferedProtocol) ---------------------------------------------
    # The socket reads into buffers, not into a new bytes object per read. Reads land in a
    # receive buffer that the connections of this thread share (an idle connection holds no
    # buffer at all); whole frames are taken out of it as bytearrays of their own. A frame
    # that is not complete gets a bytearray of its size, and the kernel reads the rest of it
    # straight there. That bytearray becomes the request's frame: a produce request's records
    # stay views into it, offsets are patched there and it is written to the log as it is
    # (no copy in user space between the socket and the segment file).
    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._ffill:]
        view = _scratch.view
        carry = self._carry
        if carry:
            n = self._carry_len = len(carry)
            view[:n] = carry
            return view[n:]
        self._carry_len = 0
        return view

    def buffer_updated(self, nbytes: int) -> None:
        if self._draining:
            self._carry = None
            return  # refused: what the client still sends is not read
        frame = self._frame
        if frame is not None:
            self._ffill += nbytes
            if self._ffill < len(frame):
                return
            self._frame = None
            self._handle_frame(frame)
            if not self._closed:
                self._backpressure()
            return
        end = self._carry_len + nbytes
        self._carry = None
        if self.waiting_slot:
            # over max.connections: kept, not read, until a slot frees (_slot_granted)
            self._hold(_scratch.view[:end])
            if self._raw is not None:
                self._raw.pause_reading()  # type: ignore[attr-defined]
            return
        self._frames(end)

    def data_received(self, data: bytes) -> None:
        """Bytes from elsewhere than the socket (the TLS layer), or b"" to go on with what
        arrived while waiting for a connection slot or behind a throttled request."""
        if not data:
            if self.waiting_slot or not self._held:
                return
            data, self._held = self._held, None
        view = memoryview(data)
        while view and not self._closed:
            if self._muted_until or self._held is not None:
                self._hold(view)  # after what is held already: kept in order
                return
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def _frames(self, end: int) -> None:
        """Handle the whole frames in the shared buffer's first ``end`` bytes; give a
        partial one a buffer of its own."""
        buf = _scratch.buf
        pos = 0
        while end - pos >= 4 and not self._muted_until:
            (size,) = _SIZE.unpack_from(buf, pos)
            auth = self.auth
            if auth is not None and not auth.authenticated and (size < 0 or size > self._sasl_max):
                # Kafka: "Failing SASL authentication due to invalid receive size"
                log.warning("closing connection from %s: %d-byte frame during SASL authentication exceeds "
                            "sasl.server.max.receive.size (%d)", self.peer, size, self._sasl_max)
                self.close()
                return
            if size < 0 or size > self._max_request:
                log.warning("closing connection from %s: request size %d outside 0..socket.request.max.bytes (%d)",
                            self.peer, size, self._max_request)
                self.close()
                return
            have = end - pos - 4
            if have < size:
                # the rest is read straight into the frame's own buffer (get_buffer)
                frame = self._frame = bytearray(size)
                frame[:have] = _scratch.view[pos + 4 : end]
                self._ffill = have
                pos = end
                break
            pos += 4 + size
            self._handle_frame(buf[pos - size : pos])  # a bytearray of its own
            if self._closed:
                return
        if pos < end:
            if self._muted_until:
                # KIP-219: a throttled client's pipelined requests wait for the mute to end,
                # as in Kafka, which reads one request at a time: dispatched now, every request
                # in this read would get past the quota before the throttle took effect
                self._hold(buf[pos:end])
            else:
                self._carry = bytes(buf[pos:end])  # part of a size prefix
        self._backpressure()

    def _hold(self, data: Any) -> None:
        """Keep ``data`` after what is held already, to be handled later (data_received(b""))."""
        if self._held is None:
            self._held = bytearray(data)
        else:
            self._held += data

    def _backpressure(self) -> None:
        if len(self._pending) >= 256 and not self._paused_reading and self.transport is not None:
            # Too many requests in flight on one connection: let TCP push back.
            self.transport.pause_reading()
            self._paused_reading = True

    # --- request handling -----------------------------------------------------------------
    def _handle_frame(self, frame: bytes) -> None:
        try:
            header = framing.parse_request_header(frame)
        except ProtocolError as exc:
            log.warning("closing connection from %s: malformed request header: %s", self.peer, exc)
            self.close()
            return
        auth = self.auth
        if auth is not None and (auth.in_exchange() or header.api_key == ApiKey.SASL_HANDSHAKE or auth.expired()):
            if auth.authenticated and auth.expired() and header.api_key != ApiKey.SASL_HANDSHAKE:
                log.info("closing connection from %s (%s): SASL session expired without re-authentication",
                         self.peer, self.principal)
                self.close()
                return
            try:
                outcome = auth.handle(header, frame)
            except ProtocolError as exc:
                log.warning("closing connection from %s: malformed SASL request: %s", self.peer, exc)
                self.close()
                return
            if not outcome.dispatch:
                self._auth_outcome(header, outcome)
                return
        slot = _Slot()
        self._pending.append(slot)
        request_quota = self.broker.quotas.quotas[REQUEST].enabled
        started = time.perf_counter() if request_quota else 0.0
        ctx = RequestContext(header, self, len(frame))
        try:
            result = self.broker.dispatch(ctx, frame)
        except ProtocolError as exc:
            log.warning("closing connection from %s (client %r): %s %s", self.peer, header.client_id,
                        apis.api_name(header.api_key), exc)
            self.close()
            return
        except Exception:
            log.exception("error handling %s v%d from %s; closing the connection",
                          apis.api_name(header.api_key), header.api_version, self.peer)
            self.close()
            return
        if request_quota:
            # request_percentage: the event loop's time on this request (its synchronous part)
            self.mute(request_throttle(self.broker, ctx, (time.perf_counter() - started) * 1000))
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            task.add_done_callback(lambda t, s=slot, h=header: self._task_done(t, s, h))
            if not isinstance(result, asyncio.Future):
                # Handler coroutines are in-flight work a graceful stop waits for; bare
                # futures (a JoinGroup waiting for its rebalance) are not.
                self.broker.track(task)
        else:
            self._complete(slot, header, result)

    def _auth_outcome(self, header: framing.RequestHeader, outcome: Outcome) -> None:
        auth = self.auth
        if auth is not None and auth.authenticated:
            self.principal = auth.principal or ANONYMOUS
        if outcome.response is None:
            if outcome.close:
                self.close()
            return
        slot = _Slot()
        self._pending.append(slot)
        delay = self.broker.config["connection.failed.authentication.delay.ms"] / 1000 if outcome.failed else 0
        if delay > 0:
            # Kafka delays the failure answer so that a client cannot guess passwords fast;
            # nothing more is read from this connection meanwhile
            if self.transport is not None and not self._paused_reading:
                self.transport.pause_reading()
                self._paused_reading = True
            asyncio.get_running_loop().call_later(delay, self._finish_auth, slot, header, outcome)
        else:
            self._finish_auth(slot, header, outcome)

    def _finish_auth(self, slot: _Slot, header: framing.RequestHeader, outcome: Outcome) -> None:
        if self._closed:
            return
        self._complete(slot, header, outcome.response)
        if outcome.close:
            self._close_after_answer()

    def _close_after_answer(self) -> None:
        """Close a refused connection once its client has read the answer.

        The client closes when it reads the failure, so the connection waits for that (up to
        _LINGER_S). Closing right after the write lets the answer and the FIN (or TLS
        close_notify) arrive together, and kafka-python 3.0 drops the bytes it read in the
        same receive loop as the disconnect: it then reports a bare "socket disconnected"
        and retries instead of SaslAuthenticationFailed."""
        self._draining = True
        if self.transport is None:
            return
        if self._paused_reading:
            self.transport.resume_reading()  # to see the client's close
            self._paused_reading = False
        asyncio.get_running_loop().call_later(_LINGER_S, self.close)

    def _task_done(self, task: asyncio.Task, slot: _Slot, header: framing.RequestHeader) -> None:
        if self._closed:
            return
        if task.cancelled():
            self.close()
            return
        exc = task.exception()
        if exc is not None:
            log.error("error handling %s v%d from %s; closing the connection", apis.api_name(header.api_key),
                      header.api_version, self.peer, exc_info=exc)
            self.close()
            return
        self._complete(slot, header, task.result())

    def _complete(self, slot: _Slot, header: framing.RequestHeader, result: Any) -> None:
        if result is None:
            slot.chunks = None
        elif isinstance(result, list):
            slot.chunks = result  # already-framed chunks (fast paths)
        elif isinstance(result, bytes | bytearray):
            slot.chunks = [result]
        else:
            try:
                slot.chunks = [framing.encode_response(header.api_key, header.api_version, header.correlation_id, result)]
            except Exception:
                log.exception("cannot encode %s v%d response", apis.api_name(header.api_key), header.api_version)
                self.close()
                return
        slot.done = True
        self._flush()

    def _flush(self) -> None:
        pending = self._pending
        transport = self.transport
        if transport is None or self._closed:
            return
        out: list[Any] = []
        while pending and pending[0].done:
            chunks = pending.popleft().chunks
            if chunks:
                out.extend(chunks)
        if out:
            transport.writelines(out)
        if self._paused_reading and not self._write_paused and len(pending) < 64 and not self._muted_until:
            transport.resume_reading()
            self._paused_reading = False

    def mute(self, throttle_ms: int) -> None:
        """KIP-219: the client went over a quota; its answer goes out at once (carrying
        throttle_time_ms) and nothing more is read from it for ``throttle_ms``."""
        if throttle_ms <= 0 or self._closed or self.transport is None:
            return
        until = time.monotonic() + throttle_ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        if not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True
        asyncio.get_running_loop().call_later(throttle_ms / 1000, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if self._muted_until != until:
            return  # muted again for longer meanwhile: that timer unmutes
        self._muted_until = 0.0
        if self._closed or self.transport is None:
            return
        self.data_received(b"")  # the requests that waited behind the throttled one, if any
        if self._muted_until or self._closed:
            return  # throttled again by one of them
        if self._paused_reading and not self._write_paused and len(self._pending) < 64:
            self.transport.resume_reading()
            self._paused_reading = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()


async def start_listeners(broker: Broker) -> list[asyncio.base_events.Server]:
    loop = asyncio.get_running_loop()
    servers = []
    for name, sec in broker.listener_security.items():
        lst = sec.listener
        host = None if lst.host in ("", "0.0.0.0") else lst.host
        if sec.ssl is None:
            def factory(s=sec) -> asyncio.Protocol:
                return Connection(broker, s)
        else:
            def factory(s=sec) -> asyncio.Protocol:
                return TlsProtocol(s.ssl, Connection(broker, s), s.listener.name)
        server = await loop.create_server(factory, host, lst.port, reuse_address=True, backlog=1024)
        log.debug("listening on %s (%s)", name, lst.security_protocol)
        servers.append(server)
    return servers
