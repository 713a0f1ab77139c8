"""TLS for a listener's connections, over the plain TCP transport, with the standard
library's ``ssl.SSLObject`` on memory BIOs (what asyncio's own SSL transport does).

Why not ``loop.create_server(ssl=...)``: when a handshake fails (no client certificate under
``ssl.client.auth=required``, an untrusted certificate), both asyncio's and uvloop's SSL
transports close the socket without sending the alert OpenSSL wrote, so clients see a bare
disconnect (the Java client retries until a metadata timeout) where Kafka's SslTransportLayer
sends the alert and clients report an SSL authentication failure. Here the alert is flushed
before closing, and the failure is logged as Kafka logs it.

``TlsProtocol`` is the protocol the event loop sees; the broker's Connection sees a
``TlsTransport`` that encrypts what it writes and hands it decrypted bytes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

log = logging.getLogger("krait.tls")

_RECORD = 16 * 1024  # a TLS record's largest plaintext
#: Kafka's SslTransportLayer has no handshake timeout of its own (connections.max.idle.ms
#: closes idle ones); asyncio's default is 60 s
HANDSHAKE_TIMEOUT_S = 60.0


class TlsTransport(asyncio.Transport):
    """The application's view of a TLS connection (what Connection calls ``transport``)."""

    def __init__(self, proto: TlsProtocol) -> None:
        super().__init__()
        self._proto = proto

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._proto.sslobj
        if name == "peercert":
            return self._proto.sslobj.getpeercert()
        return self._proto.raw.get_extra_info(name, default)

    def write(self, data: Any) -> None:
        self._proto.send(data)

    def writelines(self, chunks: Any) -> None:
        self._proto.send_many(chunks)

    def pause_reading(self) -> None:
        self._proto.raw.pause_reading()

    def resume_reading(self) -> None:
        self._proto.raw.resume_reading()

    def is_reading(self) -> bool:
        return self._proto.raw.is_reading()

    def is_closing(self) -> bool:
        return self._proto.closing or self._proto.raw.is_closing()

    def close(self) -> None:
        self._proto.shutdown()

    def abort(self) -> None:
        self._proto.raw.abort()

    def get_write_buffer_size(self) -> int:
        return self._proto.raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._proto.raw.set_write_buffer_limits(high, low)


class TlsProtocol(asyncio.Protocol):
    """Server-side TLS under ``app`` (an asyncio.BufferedProtocol: the broker's Connection)."""

    def __init__(self, context: ssl.SSLContext, app: asyncio.BufferedProtocol, listener: str = "") -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.sslobj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.app = app
        self.listener = listener
        self.raw: asyncio.Transport = None  # type: ignore[assignment]
        self.handshaking = True
        self.closing = False
        self._app_connected = False
        self._timeout: asyncio.TimerHandle | None = None

    # --- the raw side ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        admit = getattr(self.app, "admit", None)
        if admit is not None:
            self.app.gate = self  # type: ignore[attr-defined]
            if not admit(transport):
                return  # refused at accept time, before any handshake (connection limits)
        self._timeout = asyncio.get_running_loop().call_later(HANDSHAKE_TIMEOUT_S, self._handshake_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
        # also before the handshake completed: the connection's slot is released there
        self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._app_connected:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self._app_connected:
            self.app.resume_writing()

    def eof_received(self) -> bool | None:
        return False  # close: a TLS peer that half-closes is gone

    def data_received(self, data: bytes) -> None:
        self.incoming.write(data)
        if getattr(self.app, "waiting_slot", False):
            self.raw.pause_reading()  # over max.connections: no handshake until a slot frees
            return
        if self.handshaking and not self._handshake():
            return
        # decrypt straight into the connection's receive buffers (BufferedProtocol): no bytes
        # object per TLS record and no join
        app = self.app
        while not self.closing:
            buf = app.get_buffer(-1)
            try:
                n = self.sslobj.read(len(buf), buf)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # close_notify (some OpenSSL builds raise it)
                self.shutdown()
                return
            except ssl.SSLError as exc:
                log.info("closing TLS connection from %s on %s: %s", self._peer(), self.listener, exc)
                self._flush()
                self.raw.close()
                return
            if not n:
                if not len(buf):
                    break
                # no data left reads as SSLWantReadError: 0 into a non-empty buffer is the
                # client's close_notify. Answer with ours before closing, as a TLS peer must:
                # asyncio's client waits for it (30 s, its ssl_shutdown_timeout)
                self.shutdown()
                return
            app.buffer_updated(n)
        self._flush()  # session tickets, key updates

    # --- the handshake -------------------------------------------------------------------
    def _handshake(self) -> bool:
        try:
            self.sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except (ssl.SSLError, ssl.CertificateError) as exc:
            # Kafka: "Failed authentication with /ip (channelId=...) (SSL handshake failed)"
            log.info("Failed authentication with %s on %s (SSL handshake failed): %s", self._peer(), self.listener,
                     getattr(exc, "reason", None) or exc)
            self._flush()  # the alert OpenSSL wrote: what tells the client why
            self.closing = True
            self.raw.close()
            return False
        self.handshaking = False
        if self._timeout is not None:
            self._timeout.cancel()
            self._timeout = None
        self._flush()
        self._app_connected = True
        self.app.connection_made(TlsTransport(self))
        return not self.closing

    def _handshake_timed_out(self) -> None:
        if self.handshaking and not self.raw.is_closing():
            log.info("closing TLS connection from %s on %s: no handshake in %.0fs", self._peer(), self.listener,
                     HANDSHAKE_TIMEOUT_S)
            self.raw.abort()

    # --- the application side --------------------------------------------------------------
    def send(self, data: Any) -> None:
        if self.closing or self.raw.is_closing():
            return
        self.sslobj.write(data)
        self._flush()

    def send_many(self, chunks: Any) -> None:
        if self.closing or self.raw.is_closing():
            return
        # small chunks (frame headers, per-partition headers) go into one TLS record together
        # rather than one record each; large ones (log slices) are written as they are
        write = self.sslobj.write
        small: list = []
        for c in chunks:
            if len(c) >= _RECORD:
                if small:
                    write(b"".join(small))
                    small = []
                write(c)
            elif len(c):
                small.append(c)
        if small:
            write(small[0] if len(small) == 1 else b"".join(small))
        self._flush()

    def shutdown(self) -> None:
        """close(): what was written goes out, then close_notify, then the socket closes."""
        if self.closing:
            return
        self.closing = True
        if not self.handshaking:
            try:
                self.sslobj.unwrap()
            except ssl.SSLError:
                pass  # the peer's close_notify is not awaited
        self._flush()
        self.raw.close()

    def _flush(self) -> None:
        if self.outgoing.pending:
            self.raw.write(self.outgoing.read())

    def _peer(self) -> str:
        peer = self.raw.get_extra_info("peername") if self.raw is not None else None
        return f"/{peer[0]}" if peer else "?"
