"""A small client of a Confluent-compatible Schema Registry (REST API v1): the two reads a
typed kafka-segments read needs, with the standard library only (``urllib.request``), so
that Spark's Python workers need nothing more than what the source already imports.

* :meth:`RegistryClient.version` -- ``GET /subjects/{subject}/versions/{version}``
  (``latest`` or a number): the reader schema, fetched once on the driver.
* :meth:`RegistryClient.by_id` -- ``GET /schemas/ids/{id}``: a record's writer schema,
  fetched by the executors once per id and process (ids name immutable schemas, so the
  cache never goes stale).

Both return a :class:`RegisteredSchema` whose references (Confluent's ``references``:
named types or ``$ref`` documents held by other subjects) are resolved transitively.

``schema.registry.url`` may list several URLs, comma-separated, as Confluent's clients
take them: each request goes to the first one that answers, starting with the last that
did. ``schema.registry.basic.auth.user.info`` (``user:password``) is sent as HTTP Basic
authentication. A 4xx answer is the registry's word (raised as :class:`RegistryError`
with Confluent's ``error_code``, :class:`SchemaNotFound` for 40403 and 404s); a URL that
cannot be reached is retried a few times and then raises :class:`RegistryUnavailable`.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

__all__ = ["RegisteredSchema", "RegistryClient", "RegistryError", "RegistryUnavailable", "SchemaNotFound"]

#: Confluent's error codes for "no such subject / version / schema id"
NOT_FOUND_CODES = (40401, 40402, 40403)
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"


class RegistryError(RuntimeError):
    """The registry refused a request: HTTP status, Confluent's ``error_code`` and message."""

    def __init__(self, status: int, error_code: int | None, message: str, url: str) -> None:
        self.status, self.error_code, self.message, self.url = status, error_code, message, url
        code = f" (error {error_code})" if error_code is not None else ""
        super().__init__(f"schema registry: {message}{code}: HTTP {status} from {url}")


class SchemaNotFound(RegistryError):
    """No such subject, version or schema id (40401, 40402, 40403 or a bare 404)."""


class RegistryUnavailable(RuntimeError):
    """None of the registry URLs answered."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry gives it, with its references' texts resolved.

    ``references`` maps each reference name to its schema text, ordered so that every
    referenced schema comes after the ones it references itself (the order in which
    Avro named types must be defined)."""

    schema: str
    schema_type: str = "AVRO"  # Confluent omits schemaType for Avro
    id: int | None = None
    subject: str | None = None
    version: int | None = None
    references: tuple[tuple[str, str], ...] = field(default=())


_CACHE: dict[tuple[tuple[str, ...], int], RegisteredSchema] = {}
_CACHE_LOCK = threading.Lock()


class RegistryClient:
    """Reads of one registry (picklable: URLs and credentials only)."""

    def __init__(self, urls: str | list[str], user_info: str | None = None, *, timeout: float = 10.0,
                 attempts: int = 3) -> None:
        parts = urls.split(",") if isinstance(urls, str) else list(urls)
        self.urls = tuple(u.strip().rstrip("/") for u in parts if u.strip())
        if not self.urls:
            raise ValueError("schema.registry.url is empty")
        for u in self.urls:
            if urllib.parse.urlsplit(u).scheme not in ("http", "https"):
                raise ValueError(f"schema.registry.url {u!r} is not an http:// or https:// URL")
        self.user_info = user_info or None
        if self.user_info is not None and ":" not in self.user_info:
            raise ValueError("schema.registry.basic.auth.user.info must be user:password")
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self._first = 0

    # --- the API --------------------------------------------------------------------
    def version(self, subject: str, version: str | int = "latest") -> RegisteredSchema:
        """The schema of a subject's version (``latest`` by default), references resolved."""
        body = self._get(f"/subjects/{_quote(subject)}/versions/{_quote(str(version))}")
        return self._registered(body, id=body.get("id"), subject=body.get("subject", subject),
                                version=body.get("version"))

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under a global id (cached per process)."""
        key = (self.urls, int(schema_id))
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        body = self._get(f"/schemas/ids/{int(schema_id)}")
        got = self._registered(body, id=int(schema_id))
        with _CACHE_LOCK:
            _CACHE[key] = got
        return got

    # --- internals -----------------------------------------------------------------
    def _registered(self, body: dict, **kw) -> RegisteredSchema:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(200, None, f"unexpected answer {str(body)[:200]!r}", self.urls[self._first])
        refs = self._resolve(body.get("references") or [], [])
        return RegisteredSchema(body["schema"], (body.get("schemaType") or "AVRO").upper(), references=tuple(refs),
                                **kw)

    def _resolve(self, refs: list[dict], chain: list[tuple[str, int]]) -> list[tuple[str, str]]:
        """Referenced schemas, depth first: each after those it references itself."""
        out: list[tuple[str, str]] = []
        for ref in refs:
            where = (ref["subject"], int(ref["version"]))
            if where in chain:
                raise RegistryError(200, None, f"schema references form a cycle through {where}",
                                    self.urls[self._first])
            body = self._get(f"/subjects/{_quote(where[0])}/versions/{where[1]}")
            for name, text in self._resolve(body.get("references") or [], [*chain, where]):
                if name not in dict(out):
                    out.append((name, text))
            if ref["name"] not in dict(out):
                out.append((ref["name"], body["schema"]))
        return out

    def _headers(self) -> dict[str, str]:
        h = {"Accept": ACCEPT}
        if self.user_info:
            h["Authorization"] = "Basic " + base64.b64encode(self.user_info.encode()).decode()
        return h

    def _get(self, path: str) -> dict:
        last: Exception | None = None
        for attempt in range(self.attempts):
            for k in range(len(self.urls)):
                i = (self._first + k) % len(self.urls)
                url = self.urls[i] + path
                try:
                    req = urllib.request.Request(url, headers=self._headers())
                    with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                        data = resp.read()
                    self._first = i
                    return json.loads(data)
                except urllib.error.HTTPError as exc:
                    if exc.code >= 500:
                        last = exc
                        continue
                    self._first = i
                    raise _http_error(exc, url) from None
                except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                    last = exc
            if attempt + 1 < self.attempts:
                time.sleep(0.2 * 2**attempt)
        raise RegistryUnavailable(f"schema registry: no answer from {', '.join(self.urls)} ({last})")


def _quote(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _http_error(exc: urllib.error.HTTPError, url: str) -> RegistryError:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        # an answer that is no registry's (an HTML 404 page): the URL is wrong, not the id
        return RegistryError(exc.code, None, f"not a schema registry's answer (HTTP {exc.code} {exc.reason}): "
                                             f"is schema.registry.url right?", url)
    code = body.get("error_code") if isinstance(body, dict) else None
    message = (body.get("message") if isinstance(body, dict) else None) or exc.reason or "error"
    cls = SchemaNotFound if exc.code == 404 or code in NOT_FOUND_CODES else RegistryError
    return cls(exc.code, code, str(message), url)
