"""Requests from this broker to another one (Kafka's inter-broker send threads, e.g. the
transaction marker channel): one connection per peer broker, requests on it strictly one
at a time, reconnected on the next request after any failure.

The replica fetchers keep their own connections (a fetch long-polls; it must not hold up
a marker), but speak through the same :class:`Peer`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

from protocol import apis, framing
from protocol.build import make
from protocol.errors import ProtocolError

from ..security.client_security import ClientSecurity
from ..security.inter_broker import open_broker_connection

log = logging.getLogger("krait.broker_channel")

_SIZE = struct.Struct(">i")



#: what a request over a broker channel may fail with (the peer unreachable, gone mid-answer,
#: too slow, or answering garbage): the caller retries or answers a retriable error
CHANNEL_FAILURES = (OSError, ConnectionError, TimeoutError, EOFError, ProtocolError)

class Peer:
    """One connection to another broker (requests strictly one at a time)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    async def request(self, api_key: int, version: int, client_id: str, **fields: Any) -> Any:
        self.correlation_id += 1
        body = make(apis.request_type(api_key, version), **fields)
        self.writer.write(framing.encode_request(api_key, version, self.correlation_id, body, client_id=client_id))
        await self.writer.drain()
        size = _SIZE.unpack(await self.reader.readexactly(4))[0]
        frame = await self.reader.readexactly(size)
        cid, resp = framing.decode_response(api_key, version, frame)
        if cid != self.correlation_id:
            raise ConnectionError(f"correlation id {cid} does not match {self.correlation_id}")
        return resp

    def close(self) -> None:
        self.writer.close()


class BrokerChannel:
    """Sends requests to peer brokers by id; ``endpoint_of(broker_id)`` says where they are."""

    def __init__(self, broker_id: int, endpoint_of: Callable[[int], tuple[str, int] | None],
                 timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.security = security
        self.endpoint_of = endpoint_of
        self.timeout_s = timeout_s
        self._peers: dict[int, Peer] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def request(self, broker_id: int, api_key: int, version: int, *, client_id: str | None = None,
                      **fields: Any) -> Any:
        """Send one request to ``broker_id`` and return its decoded response. Raises one of
        CHANNEL_FAILURES (unknown or unreachable broker, a connection closed mid-answer, a
        timeout, an unreadable answer); the connection is dropped then, and the next request opens a new one. ``client_id``
        replaces the header's ``broker-<id>`` (Kafka's admin client id, to write an
        internal topic)."""
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            peer = self._peers.get(broker_id)
            try:
                if peer is None:
                    endpoint = self.endpoint_of(broker_id)
                    if endpoint is None:
                        raise ConnectionError(f"broker {broker_id} is not registered")
                    reader, writer = await open_broker_connection(endpoint, self.security, self.timeout_s)
                    peer = self._peers[broker_id] = Peer(reader, writer)
                return await asyncio.wait_for(
                    peer.request(api_key, version, client_id or f"broker-{self.broker_id}", **fields), self.timeout_s)
            except BaseException:
                dropped = self._peers.pop(broker_id, None)
                if dropped is not None:
                    dropped.close()
                raise

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
