"""A plain HTTP client for the Schema Registry tests: the request exactly as given (content
type, body bytes), the answer's status, content type and JSON, so tests see what a client
sees on the wire."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

CT = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: Any = None, *, raw: bytes | None = None, content_type: str = CT,
         user: str | None = None, timeout: float = 30.0, context=None) -> tuple[int, Any, str]:
    """(status, JSON answer or text, content type)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    if user is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(user.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            status, payload, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        status, payload, ctype = err.code, err.read(), err.headers.get("Content-Type", "")
    try:
        return status, json.loads(payload), ctype
    except ValueError:
        return status, payload.decode(errors="replace"), ctype
