"""The Schema Registry's REST API v1 (Confluent's), on ``krait.schema.registry.listener``
(``HOST:PORT``, ``http://HOST:PORT`` or ``https://HOST:PORT`` with the broker's keystore;
default ``127.0.0.1:8081``, Confluent's port; empty disables it). Served by aiohttp on the
broker's event loop, answering from :class:`SchemaRegistryService`. Confluent's content
type (``application/vnd.schemaregistry.v1+json``) and error bodies (``{"error_code": 40401,
"message": "..."}``), never a traceback. A write that reaches a broker other than the
leader of ``_schemas``-0 is forwarded to the leader's registry (its URL is in its broker
registration), as Confluent's followers forward to their leader.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from schema_registry import errors
from schema_registry.errors import RegistryError
from schema_registry.registry import SchemaRegistry

from ..config import ConfigError
from ..http import serve_app
from ..security.client_security import build_ssl_context
from ..security.tls import server_context
from .auth import RegistryAuth
from .service import NotWriter, SchemaRegistryService

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger("krait.schema_registry")

KEY = "krait.schema.registry.listener"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: what Confluent's server accepts as a request body's type
ACCEPTED_TYPES = frozenset({"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                            "application/json", "application/octet-stream", ""})
#: requests larger than this are refused (413) before being read
MAX_BODY = 16 << 20
FORWARDED = "X-Krait-Forwarded"


def parse_listener(value: str) -> tuple[str, str, int] | None:
    """``[http://|https://]HOST:PORT`` -> (scheme, host, port); None when empty."""
    value = (value or "").strip()
    if not value:
        return None
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "http", value
    host, sep, port = rest.rstrip("/").rpartition(":")
    if scheme not in ("http", "https") or not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"Invalid value {value!r} for configuration {KEY}: expected [http://|https://]HOST:PORT")
    return scheme, host.strip("[]"), int(port)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=CONTENT_TYPE)


def _error(err: RegistryError) -> web.Response:
    return _json(err.body(), err.status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


_HTTP_REASONS = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                 413: "Payload Too Large", 415: "Unsupported Media Type"}


class RegistryListener:
    """The running REST server of one broker."""

    def __init__(self, broker: Broker, scheme: str, host: str, port: int) -> None:
        self.broker = broker
        self.scheme, self.host, self.port = scheme, host, port
        self.service = SchemaRegistryService(broker)
        self.auth = RegistryAuth(broker)
        self._runner: web.AppRunner | None = None
        #: requests answered, by (method, HTTP status), for /metrics
        self.requests: dict[tuple[str, int], int] = {}
        self._client: ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None
        #: how a forwarded request verifies the leader's registry: the broker's truststore
        self._client_ssl: ssl.SSLContext | None = None
        if scheme == "https":
            self._ssl = server_context(broker.config.originals, "schema.registry")
            try:
                self._client_ssl = build_ssl_context(broker.config.originals)
            except Exception as exc:  # a bad truststore: name the key, as the listeners do
                raise ConfigError(f"Invalid value for configuration ssl.truststore.location (the Schema Registry "
                                  f"forwards writes over https with it): {exc}") from None

    # --- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors])
        self._routes(app.router)
        self._runner, self.port = await serve_app(app, self.host, self.port, KEY, self._ssl)
        log.info("Schema Registry on %s", self.url(self.host or "0.0.0.0"))

    async def stop(self) -> None:
        # the server first: its cleanup lets requests in flight finish, forwarded ones too,
        # before the forwarding client closes under them
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._client is not None:
            await self._client.close()
            self._client = None

    def url(self, host: str) -> str:
        return f"{self.scheme}://{host}:{self.port}"

    def advertised_url(self) -> str:
        """The URL other brokers forward to: the listener's host, or the broker's advertised
        host when it listens on every interface."""
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = self.broker.config.advertised_listeners[0].host
        return self.url(f"[{host}]" if ":" in host else host)

    # --- middleware -----------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        resp = await self._answer(request, handler)
        key = (request.method, resp.status)
        self.requests[key] = self.requests.get(key, 0) + 1
        return resp

    async def _answer(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        try:
            if request.method in ("POST", "PUT") and request.content_type not in ACCEPTED_TYPES:
                return _json({"error_code": 415, "message": "HTTP 415 Unsupported Media Type"}, 415)
            if self.auth.enabled:
                user = self.auth.authenticate(request.headers.get("Authorization"))
                if user is None:
                    resp = _json({"error_code": 401, "message": "Unauthorized"}, 401)
                    resp.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
                    return resp
                request["user"] = user
            return await handler(request)
        except RegistryError as err:
            return _error(err)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            reason = _HTTP_REASONS.get(exc.status, exc.reason)
            return _json({"error_code": exc.status, "message": f"HTTP {exc.status} {reason}"}, exc.status)
        except Exception:
            log.exception("schema registry request %s %s failed", request.method, request.path)
            return _json({"error_code": 50001, "message": "Error in the backend data store"}, 500)

    # --- plumbing -------------------------------------------------------------------------------
    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        try:
            return json.loads(raw) if raw.strip() else None
        except (ValueError, UnicodeDecodeError) as exc:
            raise RegistryError(400, f"Unrecognized JSON body: {exc}", status=400) from None

    async def _read(self, request: web.Request, op: Callable[[SchemaRegistry], Any],
                    text: bool = False) -> web.StreamResponse:
        """A read answered here (as JSON, or ``text`` as it is: a bare schema), or by the
        writer when this broker holds no replica of the registry's topic."""
        if not self.service.holds_replica():
            return await self._forward(request, self.service.leader())
        answer = self.service.read(op)
        return web.Response(text=answer, content_type=CONTENT_TYPE) if text else _json(answer)

    async def _write(self, request: web.Request, op: Callable[[SchemaRegistry], Any]) -> web.StreamResponse:
        if not self.auth.may_write(request.get("user")):
            raise RegistryError(40301, f"User {request.get('user')} is denied operation Write on the Schema "
                                       f"Registry (only super.users may write)", status=403)
        try:
            return _json(await self.service.write(op))
        except NotWriter as nw:
            return await self._forward(request, nw.leader)

    async def _forward(self, request: web.Request, leader: int) -> web.StreamResponse:
        """Send the request to the writer's registry and relay its answer."""
        url = self.broker.cluster.membership.schema_registry_url(leader) if leader >= 0 else None
        if url is None or request.headers.get(FORWARDED) or leader == self.broker.node_id:
            raise errors.forwarding_failed(f"Error while forwarding the request to the primary: no leader of "
                                           f"{self.service.topic} with a schema registry (leader {leader})")
        if self._client is None:
            self._client = ClientSession(timeout=ClientTimeout(total=self.service.timeout_s + 5))
        headers = {FORWARDED: str(self.broker.node_id), "Content-Type": request.headers.get("Content-Type", CONTENT_TYPE)}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._client.request(request.method, url + request.rel_url.raw_path_qs, headers=headers,
                                            data=await request.read(),
                                            ssl=self._client_ssl if url.startswith("https") else None) as resp:
                body = await resp.read()
                return web.Response(body=body, status=resp.status, content_type=CONTENT_TYPE)
        except (ClientError, OSError, TimeoutError) as exc:
            raise errors.forwarding_failed(f"Error while forwarding the request to the primary: {exc}") from None

    # --- routes ---------------------------------------------------------------------------------
    def _routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/", self._root)
        r.add_get("/subjects", self._subjects)
        r.add_get("/subjects/{subject}/versions", self._versions)
        r.add_post("/subjects/{subject}/versions", self._register)
        r.add_get("/subjects/{subject}/versions/{version}", self._version)
        r.add_delete("/subjects/{subject}/versions/{version}", self._delete_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self._version_schema)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self._referenced_by)
        r.add_post("/subjects/{subject}", self._lookup)
        r.add_delete("/subjects/{subject}", self._delete_subject)
        r.add_get("/schemas/types", self._types)
        r.add_get("/schemas/ids/{id}", self._schema)
        r.add_get("/schemas/ids/{id}/schema", self._schema_text)
        r.add_get("/schemas/ids/{id}/subjects", self._id_subjects)
        r.add_get("/schemas/ids/{id}/versions", self._id_versions)
        r.add_get("/config", self._get_config)
        r.add_put("/config", self._put_config)
        r.add_delete("/config", self._delete_config)
        r.add_get("/config/{subject}", self._get_config)
        r.add_put("/config/{subject}", self._put_config)
        r.add_delete("/config/{subject}", self._delete_config)
        r.add_get("/mode", self._get_mode)
        r.add_put("/mode", self._put_mode)
        r.add_get("/mode/{subject}", self._get_mode)
        r.add_put("/mode/{subject}", self._put_mode)
        r.add_delete("/mode/{subject}", self._delete_mode)
        r.add_post("/compatibility/subjects/{subject}/versions", self._compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self._compatibility)
        r.add_get("/contexts", self._contexts)

    async def _root(self, request: web.Request) -> web.StreamResponse:
        return _json({})

    async def _contexts(self, request: web.Request) -> web.StreamResponse:
        return _json(["."])

    async def _subjects(self, request: web.Request) -> web.StreamResponse:
        deleted, prefix = _flag(request, "deleted"), request.query.get("subjectPrefix")
        return await self._read(request, lambda c: c.subjects(deleted, prefix))

    async def _versions(self, request: web.Request) -> web.StreamResponse:
        subject, deleted = request.match_info["subject"], _flag(request, "deleted")
        return await self._read(request, lambda c: c.versions(subject, deleted))

    async def _version(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        deleted, fmt = _flag(request, "deleted"), request.query.get("format")
        return await self._read(request, lambda c: c.version(subject, version, deleted, fmt))

    async def _version_schema(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        deleted = _flag(request, "deleted")
        return await self._read(request, lambda c: c.version_schema(subject, version, deleted), text=True)

    async def _referenced_by(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        return await self._read(request, lambda c: c.referenced_by(subject, version))

    async def _register(self, request: web.Request) -> web.StreamResponse:
        subject, body, normalize = request.match_info["subject"], await self._body(request), _flag(request, "normalize")
        return await self._write(request, lambda c: c.register(subject, body, normalize))

    async def _lookup(self, request: web.Request) -> web.StreamResponse:
        subject, body = request.match_info["subject"], await self._body(request)
        normalize, deleted = _flag(request, "normalize"), _flag(request, "deleted")
        return await self._read(request, lambda c: c.lookup(subject, body, normalize, deleted))

    async def _delete_subject(self, request: web.Request) -> web.StreamResponse:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        return await self._write(request, lambda c: c.delete_subject(subject, permanent))

    async def _delete_version(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info["version"]
        permanent = _flag(request, "permanent")
        return await self._write(request, lambda c: c.delete_version(subject, version, permanent))

    async def _types(self, request: web.Request) -> web.StreamResponse:
        return _json(SchemaRegistry.schema_types())

    @staticmethod
    def _id(request: web.Request) -> int:
        raw = request.match_info["id"]
        try:
            return int(raw)
        except ValueError:
            raise errors.schema_not_found(raw) from None

    async def _schema(self, request: web.Request) -> web.StreamResponse:
        schema_id, fmt = self._id(request), request.query.get("format")
        return await self._read(request, lambda c: c.schema_by_id(schema_id, fmt))

    async def _schema_text(self, request: web.Request) -> web.StreamResponse:
        schema_id = self._id(request)
        return await self._read(request, lambda c: c.schema_by_id(schema_id)["schema"], text=True)

    async def _id_subjects(self, request: web.Request) -> web.StreamResponse:
        schema_id, deleted = self._id(request), _flag(request, "deleted")
        return await self._read(request, lambda c: c.id_subjects(schema_id, deleted))

    async def _id_versions(self, request: web.Request) -> web.StreamResponse:
        schema_id, deleted = self._id(request), _flag(request, "deleted")
        return await self._read(request, lambda c: c.id_versions(schema_id, deleted))

    async def _get_config(self, request: web.Request) -> web.StreamResponse:
        subject, to_global = request.match_info.get("subject"), _flag(request, "defaultToGlobal")
        return await self._read(request, lambda c: c.get_config(subject, to_global))

    async def _put_config(self, request: web.Request) -> web.StreamResponse:
        subject, body = request.match_info.get("subject"), await self._body(request)
        return await self._write(request, lambda c: c.set_config(subject, body))

    async def _delete_config(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info.get("subject")
        return await self._write(request, lambda c: c.delete_config(subject))

    async def _get_mode(self, request: web.Request) -> web.StreamResponse:
        subject, to_global = request.match_info.get("subject"), _flag(request, "defaultToGlobal")
        return await self._read(request, lambda c: {"mode": c.mode(subject, to_global)})

    async def _put_mode(self, request: web.Request) -> web.StreamResponse:
        subject, body, force = request.match_info.get("subject"), await self._body(request), _flag(request, "force")
        return await self._write(request, lambda c: c.set_mode(subject, body, force))

    async def _delete_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        return await self._write(request, lambda c: c.delete_mode(subject))

    async def _compatibility(self, request: web.Request) -> web.StreamResponse:
        subject, version = request.match_info["subject"], request.match_info.get("version")
        body, normalize, verbose = await self._body(request), _flag(request, "normalize"), _flag(request, "verbose")
        return await self._read(request, lambda c: c.test_compatibility(subject, version, body, normalize, verbose))


async def start_registry(broker: Broker) -> RegistryListener | None:
    """Open the registry's listener the config asks for (None when disabled); a bad value
    is a ConfigError, a taken port an OSError naming the key (start-up stops on either)."""
    addr = parse_listener(broker.config[KEY])
    if addr is None:
        return None
    listener = RegistryListener(broker, *addr)
    await listener.start()
    return listener
