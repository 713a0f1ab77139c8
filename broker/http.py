"""The HTTP listener (``krait.http.listener``, default ``127.0.0.1:9644``, empty disables it):
``GET /metrics`` in Prometheus' text format (broker.metrics), ``GET /healthz`` (200 while the
process serves) and ``GET /readyz`` (200 once logs and coordinators are loaded and, in
cluster mode, the broker is registered in ZooKeeper; else 503 with the reason).

Served by aiohttp on the broker's own event loop, so a scrape reads the broker's state on
the thread that changes it. aiohttp and prometheus_client are imported only when the
listener is enabled.
"""

from __future__ import annotations

import errno
import logging
import ssl
from typing import TYPE_CHECKING

from .config import ConfigError
from .metrics import KafkaCollector, readiness

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("krait.http")

KEY = "krait.http.listener"


def parse_http_listener(value: str) -> tuple[str, int] | None:
    """krait.http.listener: ``HOST:PORT`` (``[v6]:PORT``; an empty host binds every
    interface) -> (host, port); None for an empty value (the listener is disabled)."""
    value = (value or "").strip()
    if not value:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"Invalid value {value!r} for configuration krait.http.listener: expected HOST:PORT")
    return host.strip("[]"), int(port)


async def serve_app(app, host: str, port: int, key: str, ssl_context: ssl.SSLContext | None = None):
    """Serve an aiohttp ``app`` on host:port: (its runner, the bound port, which 0 leaves to
    the kernel). A port that cannot be bound is an OSError naming the config ``key``, which
    stops start-up."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host or None, port, reuse_address=True, ssl_context=ssl_context)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        why = "the address is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise OSError(exc.errno, f"{key}={host}:{port}: cannot listen: {why} "
                                 f"(set {key} to another HOST:PORT, or empty to disable it)") from None
    return runner, runner.addresses[0][1] if runner.addresses else port


class HttpListener:
    """The running HTTP server of one broker."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self._runner = None

    async def start(self) -> None:
        from aiohttp import web
        from prometheus_client import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
        registry.register(KafkaCollector(self.broker))
        self._registry = registry
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner, self.port = await serve_app(app, self.host, self.port, KEY)
        log.info("HTTP listener on %s:%d (/metrics, /healthz, /readyz)", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _metrics(self, request):
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request):
        from aiohttp import web

        return web.Response(text="ok\n")

    async def _readyz(self, request):
        from aiohttp import web

        why = readiness(self.broker)
        if why is None:
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {why}\n")


async def start_http(broker: Broker) -> HttpListener | None:
    """Open the HTTP listener the config asks for (None when disabled); a bad value is a
    ConfigError (``krait serve`` exits 2 naming the key)."""
    addr = parse_http_listener(broker.config[KEY])
    if addr is None:
        return None
    listener = HttpListener(broker, *addr)
    await listener.start()
    return listener
