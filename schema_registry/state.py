"""The registry's state, as replayed from ``_schemas`` (Confluent's InMemoryCache over
KafkaStore): each subject's versions, the schemas by global id, the configs and modes. Every
broker applies the topic's records in offset order, so all hold the same state up to the
offset they have read. Pure."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from . import records
from .records import Decoded, SchemaRecord
from .schema_types import Reference

log = logging.getLogger("krait.schema_registry")

#: (schema type, canonical schema, references): what makes two registrations one id
Content = tuple[str, str, tuple[Reference, ...]]


@dataclass
class RegistryState:
    #: subject -> version -> the version (soft-deleted ones included)
    subjects: dict[str, dict[int, SchemaRecord]] = field(default_factory=dict)
    #: global id -> the schema (type, text, references)
    by_id: dict[int, Content] = field(default_factory=dict)
    #: the reverse: a schema's id
    ids: dict[Content, int] = field(default_factory=dict)
    #: (subject, version) of every version using each id
    users: dict[int, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    #: subject (None: global) -> its ConfigValue
    configs: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    #: subject (None: global) -> its mode
    modes: dict[str | None, str] = field(default_factory=dict)
    #: the highest id ever seen (never lowered, so a deleted id is not handed out again)
    max_id: int = 0
    #: the offset after the last record applied
    next_offset: int = 0

    # --- applying records -------------------------------------------------------------------
    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """One record of ``_schemas``; a record that is not the registry's is skipped."""
        self.next_offset = offset + 1
        try:
            d = records.decode(key, value)
            self._apply(d)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("_schemas offset %d: skipping a record the registry cannot read: %s", offset, exc)

    def _apply(self, d: Decoded) -> None:
        if d.keytype == records.SCHEMA:
            if d.value is None:
                if d.subject is not None and d.version is not None:
                    self._remove(d.subject, d.version)
                return
            self._put(records.schema_record(d))
        elif d.keytype == records.CONFIG:
            if d.value is None:
                self.configs.pop(d.subject, None)
            else:
                self.configs[d.subject] = d.value
        elif d.keytype == records.MODE:
            if d.value is None or not isinstance(d.value.get("mode"), str):
                self.modes.pop(d.subject, None)
            else:
                self.modes[d.subject] = d.value["mode"]
        elif d.keytype == records.DELETE_SUBJECT and d.value is not None:
            subject = str(d.value.get("subject", d.subject))
            upto = int(d.value.get("version", 2**31 - 1))
            for v, rec in list(self.subjects.get(subject, {}).items()):
                if v <= upto and not rec.deleted:
                    self.subjects[subject][v] = replace(rec, deleted=True)
        elif d.keytype == records.CLEAR_SUBJECT and d.value is not None:
            # Confluent's CLEAR_SUBJECT drops the soft-deleted versions of a subject
            subject = str(d.value.get("subject", d.subject))
            for v, rec in list(self.subjects.get(subject, {}).items()):
                if rec.deleted:
                    self._remove(subject, v)
        # NOOP and key types of newer registries (contexts, associations): nothing to apply

    def _put(self, rec: SchemaRecord) -> None:
        old = self.subjects.get(rec.subject, {}).get(rec.version)
        if old is not None and old.id != rec.id:
            self._unuse(old)
        self.subjects.setdefault(rec.subject, {})[rec.version] = rec
        content = (rec.schema_type, rec.schema, rec.references)
        if rec.id not in self.by_id:
            self.by_id[rec.id] = content
        self.ids.setdefault(content, rec.id)
        self.users[rec.id].add((rec.subject, rec.version))
        self.max_id = max(self.max_id, rec.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if not versions or version not in versions:
            return
        rec = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        self._unuse(rec)

    def _unuse(self, rec: SchemaRecord) -> None:
        users = self.users.get(rec.id)
        if users is None:
            return
        users.discard((rec.subject, rec.version))
        if not users:
            del self.users[rec.id]
            content = self.by_id.pop(rec.id, None)
            if content is not None and self.ids.get(content) == rec.id:
                del self.ids[content]

    # --- reading ----------------------------------------------------------------------------
    def versions(self, subject: str, deleted: bool = False) -> list[SchemaRecord]:
        """A subject's versions, oldest first (soft-deleted ones only with ``deleted``)."""
        return [r for _, r in sorted(self.subjects.get(subject, {}).items()) if deleted or not r.deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas that reference ``subject`` version ``version``."""
        out = set()
        for versions in self.subjects.values():
            for rec in versions.values():
                if not rec.deleted and any(r.subject == subject and r.version == version for r in rec.references):
                    out.add(rec.id)
        return sorted(out)
