"""The records of the ``_schemas`` topic, in Confluent Schema Registry's JSON
(``io.confluent.kafka.schemaregistry.storage``: SchemaKey/SchemaValue, ConfigKey/ConfigValue,
ModeKey/ModeValue, DeleteSubjectKey/DeleteSubjectValue, ClearSubjectKey/Value, NoopKey), so
that a Confluent registry, or a tool that reads its topic, reads Krait's and the other way
round. Keys: ``{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}``; the other key
types carry ``magic`` 0 and no version. A null value is a tombstone: a permanently deleted
version, a deleted config or mode. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .schema_types import Reference

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
NOOP = "NOOP"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"


@dataclass(frozen=True)
class SchemaRecord:
    """A SchemaValue: one version of a subject."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def value(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":  # Confluent leaves out the default type
            doc["schemaType"] = self.schema_type
        if self.references:
            doc["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                                 for r in self.references]
        doc["schema"] = self.schema
        doc["deleted"] = self.deleted
        return doc


def _dump(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def encode_schema(rec: SchemaRecord) -> tuple[bytes, bytes]:
    return schema_key(rec.subject, rec.version), _dump(rec.value())


def schema_tombstone(subject: str, version: int) -> tuple[bytes, None]:
    return schema_key(subject, version), None


def _subject_key(keytype: str, subject: str | None) -> bytes:
    return _dump({"keytype": keytype, "subject": subject, "magic": 0})


def encode_config(subject: str | None, config: dict[str, Any] | None) -> tuple[bytes, bytes | None]:
    """A ConfigValue (``{"compatibilityLevel": "FULL"}``...) for a subject, or the global one
    (subject None); None: the config is deleted."""
    return _subject_key(CONFIG, subject), None if config is None else _dump(config)


def encode_mode(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    return _subject_key(MODE, subject), None if mode is None else _dump({"mode": mode})


def encode_delete_subject(subject: str, version: int) -> tuple[bytes, bytes]:
    """A soft delete of every version of ``subject`` up to ``version``."""
    return _subject_key(DELETE_SUBJECT, subject), _dump({"subject": subject, "version": version})


def encode_noop() -> tuple[bytes, None]:
    return _dump({"keytype": NOOP, "magic": 0}), None


@dataclass(frozen=True)
class Decoded:
    keytype: str
    subject: str | None
    version: int | None
    #: the value's JSON (None: a tombstone)
    value: dict[str, Any] | None


def decode(key: bytes | None, value: bytes | None) -> Decoded:
    """One ``_schemas`` record; ValueError for one that is not the registry's (which the
    loader skips: the topic is a plain topic, anybody may have written to it)."""
    if key is None:
        raise ValueError("a record without a key")
    k = json.loads(key)
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        raise ValueError(f"not a schema registry key: {key[:200]!r}")
    v = None if value is None else json.loads(value)
    if v is not None and not isinstance(v, dict):
        raise ValueError(f"not a schema registry value: {value[:200]!r}")
    version = k.get("version")
    return Decoded(k["keytype"], k.get("subject"), version if isinstance(version, int) else None, v)


def schema_record(d: Decoded) -> SchemaRecord:
    """The SchemaRecord of a SCHEMA record's value."""
    v = d.value or {}
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in v.get("references") or ())
    return SchemaRecord(subject=str(v.get("subject", d.subject)), version=int(v.get("version", d.version or 0)),
                        id=int(v["id"]), schema_type=str(v.get("schemaType") or "AVRO"), schema=str(v["schema"]),
                        references=refs, deleted=bool(v.get("deleted", False)))
