"""The security metadata store: ACL bindings and entity configs (SCRAM credentials and client
quotas of users and client ids), persisted where the rest of the metadata lives.

Entities are named as Kafka's ZooKeeper mode names their config znodes, so one store serves
both backends and an operator recognises the paths: ``users/alice``, ``clients/app-1``,
``users/alice/clients/app-1``, ``users/<default>``, ``clients/<default>``. Names are
sanitized with Kafka's Sanitizer (URL-encoding), so a principal such as ``CN=a,O=b`` is one
path element.

Single-node mode keeps one JSON document beside the topic registry, written atomically
(tmp + fsync + rename). Cluster mode subclasses this with ZooKeeper's layout
(``/config/users``, ``/config/clients``, ``/kafka-acl``) and calls ``changed()`` when
another broker writes.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

SECURITY_FILE = "krait-security.json"
DEFAULT_ENTITY = "<default>"
#: Kafka's ClientQuotaEntity types, in the order an entity path nests them
USER = "user"
CLIENT_ID = "client-id"
#: a GROUP config resource's configs (share and consumer group settings), kept as an entity
#: config so that a cluster shares them as it shares quotas (/config/groups/<group>)
GROUP = "group"
_PATH_SEGMENT = {USER: "users", CLIENT_ID: "clients", GROUP: "groups"}
_SEGMENT_TYPE = {v: k for k, v in _PATH_SEGMENT.items()}


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (Java's URLEncoder): URL-encode, with '*' as %2A and '~' as %7E."""
    return quote(name, safe="").replace("*", "%2A").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def entity_path(entity: Mapping[str, str | None]) -> str:
    """``{"user": "alice", "client-id": None}`` -> ``users/alice/clients/<default>``: a None
    name is the type's default entity. User comes before client id, as in Kafka's znodes."""
    parts = []
    for etype in (USER, CLIENT_ID):
        if etype in entity:
            name = entity[etype]
            parts += [_PATH_SEGMENT[etype], DEFAULT_ENTITY if name is None else sanitize(name)]
    unknown = set(entity) - {USER, CLIENT_ID}
    if unknown or not parts:
        raise ValueError(f"unknown entity type(s) {sorted(unknown)}" if unknown else "empty entity")
    return "/".join(parts)


def group_entity_path(group_id: str) -> str:
    """The entity path of a group's configs: ``groups/<sanitized group id>``."""
    return f"groups/{sanitize(group_id)}"


def parse_entity_path(path: str) -> dict[str, str | None]:
    """The inverse of entity_path."""
    elems = path.split("/")
    if len(elems) % 2 or not elems:
        raise ValueError(f"bad entity path {path!r}")
    out: dict[str, str | None] = {}
    for seg, name in zip(elems[::2], elems[1::2], strict=True):
        etype = _SEGMENT_TYPE.get(seg)
        if etype is None or etype in out:
            raise ValueError(f"bad entity path {path!r}")
        out[etype] = None if name == DEFAULT_ENTITY else desanitize(name)
    return out


class SecurityStore:
    """ACLs as Authorizer.to_dicts() rows and entity configs by entity path. Reads are plain
    attribute reads on the event loop; every write persists before it returns."""

    def __init__(self, log_dir: str | Path | None):
        self.path = Path(log_dir) / SECURITY_FILE if log_dir is not None else None
        self.acls: list[dict[str, str]] = []
        self.entities: dict[str, dict[str, str]] = {}
        #: called (on the event loop) after any change, local or, in cluster mode, remote
        self.listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    # --- reading --------------------------------------------------------------------------
    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        self.acls = [dict(a) for a in doc.get("acls", [])]
        self.entities = {p: dict(c) for p, c in doc.get("entities", {}).items() if c}

    def entity_config(self, path: str) -> dict[str, str]:
        return dict(self.entities.get(path, {}))

    def stop(self) -> None:
        """Nothing to let go of (the ZooKeeper store ends its watches here)."""

    # --- writing --------------------------------------------------------------------------
    async def set_acls(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Replace the whole ACL set (the authorizer's rows after a Create/DeleteAcls).
        Writes are coroutines because the ZooKeeper store's wait on ZooKeeper."""
        self.acls = [dict(r) for r in rows]
        self._persist_acls()
        self.changed()

    async def alter_entity(self, path: str, updates: Mapping[str, str | None]) -> None:
        """Set (str) or remove (None) keys of one entity's config; an emptied entity goes."""
        parse_entity_path(path)  # refuse malformed paths before writing anything
        cfg = dict(self.entities.get(path, {}))
        for k, v in updates.items():
            if v is None:
                cfg.pop(k, None)
            else:
                cfg[k] = str(v)
        if cfg:
            self.entities[path] = cfg
        else:
            self.entities.pop(path, None)
        self._persist_entity(path, cfg)
        self.changed()

    def changed(self) -> None:
        for fn in list(self.listeners):
            fn()

    # --- persistence (overridden by the ZooKeeper store) -----------------------------------
    def _persist_acls(self) -> None:
        self._save()

    def _persist_entity(self, path: str, config: Mapping[str, str]) -> None:
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"version": 1, "acls": self.acls, "entities": self.entities}
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            # the file holds salted SCRAM hashes: readable by the broker's user only
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
