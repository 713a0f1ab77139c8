"""The Schema Registry's operations (Confluent's KafkaSchemaRegistry, REST API v1), pure:
each read answers from the :class:`RegistryState`; each write checks the request against it
and returns the ``_schemas`` records that carry it out (:class:`Outcome`), which the shell
appends (one writer per cluster) and every broker then applies. Errors are
:class:`RegistryError` with Confluent's codes and messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import compatibility, errors, records
from .errors import RegistryError
from .records import SchemaRecord
from .schema_types import PARSERS, InvalidSchemaError, ParsedSchema, Reference
from .state import RegistryState

MAX_VERSION = 2**31 - 1
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"

Write = tuple[bytes, bytes | None]


@dataclass
class Outcome:
    """A write's answer (JSON) and the records to append before it is given."""

    body: Any
    writes: list[Write] = field(default_factory=list)


class SchemaRegistry:
    def __init__(self, state: RegistryState | None = None, default_compatibility: str = compatibility.DEFAULT_LEVEL,
                 default_mode: str = DEFAULT_MODE) -> None:
        self.state = state if state is not None else RegistryState()
        self.default_compatibility = default_compatibility.upper()
        self.default_mode = default_mode.upper()
        #: parsed schemas by (type, text, references): a stored schema is parsed once
        self._parsed: dict[tuple[str, str, tuple[Reference, ...]], ParsedSchema] = {}

    # --- parsing ----------------------------------------------------------------------------
    @staticmethod
    def schema_types() -> list[str]:
        return sorted(PARSERS)

    def _resolve(self, refs: tuple[Reference, ...], out: dict[str, str], seen: set[tuple[str, int]]) -> None:
        """The texts of ``refs`` and of what they reference, each after its own references."""
        for ref in refs:
            rec = self._version(ref.subject, ref.version, deleted=True, for_reference=True)
            if (rec.subject, rec.version) in seen:
                continue
            seen.add((rec.subject, rec.version))
            self._resolve(rec.references, out, seen)
            out[ref.name] = rec.schema

    def parse(self, schema_type: str, schema: str, refs: tuple[Reference, ...]) -> ParsedSchema:
        key = (schema_type, schema, refs)
        parsed = self._parsed.get(key)
        if parsed is not None:
            return parsed
        parser = PARSERS.get(schema_type)
        if parser is None:
            raise errors.invalid_schema(f"Invalid schema type {schema_type}")
        resolved: dict[str, str] = {}
        self._resolve(refs, resolved, set())
        try:
            parsed = parser(schema, resolved)
        except InvalidSchemaError as exc:
            raise errors.invalid_schema(f"Invalid schema {schema} with refs {list(map(_ref_str, refs))} of type "
                                        f"{schema_type}, details: {exc}") from None
        except RecursionError:
            raise errors.invalid_schema(f"Invalid schema of type {schema_type}, details: nested too deeply") from None
        if len(self._parsed) > 10_000:
            self._parsed.clear()
        self._parsed[key] = parsed
        return parsed

    def _request(self, body: object, normalize: bool) -> tuple[str, ParsedSchema, tuple[Reference, ...], dict]:
        """(type, parsed, references, body) of a RegisterSchemaRequest."""
        if not isinstance(body, dict):
            raise errors.RegistryError(422, "Unrecognized request: expected a JSON object", status=422)
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str):
            raise errors.invalid_schema(f"Invalid schema type {schema_type}")
        schema_type = schema_type.upper()
        refs = _references(body.get("references"))
        parsed = self.parse(schema_type, schema, refs)
        if normalize:
            parsed = parsed.normalize()
        return schema_type, parsed, refs, body

    # --- lookups ----------------------------------------------------------------------------
    def _versions(self, subject: str, deleted: bool = False) -> list[SchemaRecord]:
        versions = self.state.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def _version(self, subject: str, version: int | str, deleted: bool = False,
                 for_reference: bool = False) -> SchemaRecord:
        v = parse_version(version)
        versions = self.state.versions(subject, deleted=True)
        if not versions:
            if for_reference:
                raise errors.invalid_schema(f"Invalid schema: the reference to subject '{subject}' version "
                                            f"{version} does not exist")
            raise errors.subject_not_found(subject)
        if v == -1:
            live = [r for r in versions if deleted or not r.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        rec = self.state.subjects[subject].get(v)
        if rec is None or (rec.deleted and not deleted):
            if for_reference:
                raise errors.invalid_schema(f"Invalid schema: the reference to subject '{subject}' version "
                                            f"{version} does not exist")
            raise errors.version_not_found(v)
        return rec

    def subjects(self, deleted: bool = False, prefix: str | None = None) -> list[str]:
        names = self.state.subject_names(deleted)
        return [s for s in names if prefix is None or s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return [r.version for r in self._versions(subject, deleted)]

    def version(self, subject: str, version: int | str, deleted: bool = False, fmt: str | None = None) -> dict:
        rec = self._version(subject, version, deleted)
        return version_body(rec, self._formatted(rec.schema_type, rec.schema, rec.references, fmt))

    def _formatted(self, schema_type: str, schema: str, refs: tuple[Reference, ...], fmt: str | None) -> str:
        """The stored schema in the ``format`` a client asks for (Confluent's
        ``formattedString``: Protobuf's ``serialized`` is the base64 FileDescriptorProto its
        deserializer reads); the stored text when the type has no such format."""
        if not fmt:
            return schema
        formatted = getattr(self.parse(schema_type, schema, refs), "formatted_string", None)
        return formatted(fmt) if formatted is not None else schema

    def version_schema(self, subject: str, version: int | str, deleted: bool = False) -> str:
        return self._version(subject, version, deleted).schema

    def referenced_by(self, subject: str, version: int | str) -> list[int]:
        rec = self._version(subject, version, deleted=True)
        return self.state.referenced_by(rec.subject, rec.version)

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> dict:
        content = self.state.by_id.get(schema_id)
        if content is None:
            raise errors.schema_not_found(schema_id)
        schema_type, schema, refs = content
        schema = self._formatted(schema_type, schema, refs, fmt)
        body: dict[str, Any] = {}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if refs:
            body["references"] = [_ref_doc(r) for r in refs]
        body["schema"] = schema
        return body

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict]:
        if schema_id not in self.state.by_id:
            raise errors.schema_not_found(schema_id)
        out = []
        for subject, version in sorted(self.state.users.get(schema_id, ())):
            rec = self.state.subjects[subject][version]
            if deleted or not rec.deleted:
                out.append({"subject": subject, "version": version})
        return out

    def id_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.id_versions(schema_id, deleted)})

    def lookup(self, subject: str, body: object, normalize: bool = False, deleted: bool = False) -> dict:
        """POST /subjects/{subject}: the version of ``subject`` holding this schema."""
        versions = self.state.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        schema_type, parsed, refs, _ = self._request(body, normalize or self._normalize(subject))
        found = self._find(versions, schema_type, parsed, refs)
        if found is None:
            raise errors.schema_not_found()
        return version_body(found)

    def _find(self, versions: list[SchemaRecord], schema_type: str, parsed: ParsedSchema,
              refs: tuple[Reference, ...]) -> SchemaRecord | None:
        canonical = parsed.canonical_string()
        for rec in reversed(versions):
            if rec.schema_type == schema_type and rec.references == refs and rec.schema == canonical:
                return rec
        return None

    # --- configs and modes --------------------------------------------------------------------
    def compatibility_level(self, subject: str | None) -> str:
        """The subject's level, else the global one, else the default."""
        for key in (subject, None) if subject is not None else (None,):
            level = self.state.configs.get(key, {}).get("compatibilityLevel")
            if compatibility.is_level(level):
                return level.upper()
        return self.default_compatibility

    def _normalize(self, subject: str | None) -> bool:
        for key in (subject, None):
            value = self.state.configs.get(key, {}).get("normalize")
            if isinstance(value, bool):
                return value
        return False

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        config = self.state.configs.get(subject)
        if subject is not None and config is None:
            if not default_to_global:
                raise errors.subject_compatibility_not_configured(subject)
            config = self.state.configs.get(None)
        out = {k: v for k, v in (config or {}).items() if k != "compatibilityLevel"}
        return {"compatibilityLevel": self.compatibility_level(None) if config is None
                else str(config.get("compatibilityLevel", self.default_compatibility)).upper(), **out}

    def set_config(self, subject: str | None, body: object) -> Outcome:
        self._check_writable(subject, config=True)
        if not isinstance(body, dict):
            raise errors.invalid_compatibility_level()
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is None and subject is not None and "normalize" not in body:
            raise errors.invalid_compatibility_level()
        if level is not None and not compatibility.is_level(level):
            raise errors.invalid_compatibility_level()
        config = dict(self.state.configs.get(subject, {}))
        if level is not None:
            config["compatibilityLevel"] = level.upper()
        if isinstance(body.get("normalize"), bool):
            config["normalize"] = body["normalize"]
        answer = {"compatibility": config.get("compatibilityLevel", self.compatibility_level(subject))}
        if "normalize" in config:
            answer["normalize"] = config["normalize"]
        return Outcome(answer, [records.encode_config(subject, config)])

    def delete_config(self, subject: str | None) -> Outcome:
        self._check_writable(subject, config=True)
        if subject is not None and subject not in self.state.configs:
            raise errors.subject_compatibility_not_configured(subject)
        previous = self.compatibility_level(subject) if subject is None else \
            str(self.state.configs[subject].get("compatibilityLevel", self.default_compatibility)).upper()
        return Outcome({"compatibilityLevel": previous}, [records.encode_config(subject, None)])

    def mode(self, subject: str | None, default_to_global: bool = False) -> str:
        """The subject's mode (with ``default_to_global``, the global one when it has none),
        or the global mode for ``subject`` None."""
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        if subject is not None and not default_to_global:
            raise errors.subject_mode_not_configured(subject)
        return self.state.modes.get(None, self.default_mode)

    def set_mode(self, subject: str | None, body: object, force: bool = False) -> Outcome:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has = self.state.versions(subject) if subject is not None else self.state.subject_names()
            if has:
                raise errors.operation_not_permitted("Cannot import since found existing subjects")
        return Outcome({"mode": mode}, [records.encode_mode(subject, mode)])

    def delete_mode(self, subject: str) -> Outcome:
        if subject not in self.state.modes:
            raise errors.subject_mode_not_configured(subject)
        previous = self.state.modes[subject]
        return Outcome({"mode": previous}, [records.encode_mode(subject, None)])

    def _check_writable(self, subject: str | None, config: bool = False) -> None:
        mode = self.mode(subject, default_to_global=True)
        if mode in ("READONLY", "READONLY_OVERRIDE") and not (config and mode == "READONLY"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode" if subject is not None
                                                 else "The registry is in read-only mode")

    # --- registration -------------------------------------------------------------------------
    def _previous(self, subject: str) -> list[tuple[int, ParsedSchema, str]]:
        return [(r.version, self.parse(r.schema_type, r.schema, r.references), r.schema)
                for r in self.state.versions(subject)]

    def register(self, subject: str, body: object, normalize: bool = False) -> Outcome:
        """POST /subjects/{subject}/versions: ``{"id": N}`` and the SCHEMA record of the new
        version; an existing identical version answers its id and writes nothing."""
        check_subject(subject)
        self._check_writable(subject)
        mode = self.mode(subject, default_to_global=True)
        schema_type, parsed, refs, req = self._request(body, normalize or self._normalize(subject))
        canonical = parsed.canonical_string()
        wanted_id, wanted_version = req.get("id"), req.get("version")
        if mode != "IMPORT" and wanted_id not in (None, -1, 0):
            raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
        live = self.state.versions(subject)
        existing = self._find(live, schema_type, parsed, refs)
        if existing is not None and (wanted_id in (None, -1, 0) or wanted_id == existing.id):
            return Outcome({"id": existing.id})
        content = (schema_type, canonical, refs)
        if mode == "IMPORT":
            if not isinstance(wanted_id, int) or wanted_id < 1:
                raise errors.invalid_schema("Invalid schema: an id is required in IMPORT mode")
            if wanted_id in self.state.by_id and self.state.by_id[wanted_id] != content:
                raise errors.id_does_not_match(f"Overwrite new schema with id {wanted_id} is not permitted.")
            schema_id = wanted_id
        else:
            messages = compatibility.check(self.compatibility_level(subject), parsed, self._previous(subject))
            if messages:
                raise errors.incompatible_schema(compatibility.incompatible_message(subject, messages))
            schema_id = self.state.ids.get(content) or self.state.max_id + 1
        every = self.state.subjects.get(subject, {})
        version = (max(every) + 1) if every else 1
        if mode == "IMPORT" and isinstance(wanted_version, int) and wanted_version > 0:
            version = wanted_version
        if version > MAX_VERSION:
            raise errors.invalid_version(version)
        rec = SchemaRecord(subject, version, schema_id, schema_type, canonical, refs)
        return Outcome({"id": schema_id}, [records.encode_schema(rec)])

    def test_compatibility(self, subject: str, version: int | str | None, body: object, normalize: bool = False,
                           verbose: bool = False) -> dict:
        """POST /compatibility/subjects/{subject}/versions[/{version}]."""
        _, parsed, _, _ = self._request(body, normalize or self._normalize(subject))
        level = self.compatibility_level(subject)
        if version is None:
            previous = self._previous(subject)
        else:
            rec = self._version(subject, version)
            previous = [(rec.version, self.parse(rec.schema_type, rec.schema, rec.references), rec.schema)]
            level = level.removesuffix("_TRANSITIVE")
        messages = compatibility.check(level, parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    # --- deletes ------------------------------------------------------------------------------
    def _check_unreferenced(self, rec: SchemaRecord) -> None:
        if self.state.referenced_by(rec.subject, rec.version):
            raise errors.reference_exists(f"One or more references exist to the schema "
                                          f"{{magic=1,keytype=SCHEMA,subject={rec.subject},version={rec.version}}}.")

    def delete_subject(self, subject: str, permanent: bool = False) -> Outcome:
        self._check_writable(subject)
        every = self.state.versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        live = [r for r in every if not r.deleted]
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            for rec in every:
                self._check_unreferenced(rec)
            writes: list[Write] = [records.schema_tombstone(subject, r.version) for r in every]
            if subject in self.state.configs:
                writes.append(records.encode_config(subject, None))
            if subject in self.state.modes:
                writes.append(records.encode_mode(subject, None))
            return Outcome([r.version for r in every], writes)
        if not live:
            raise errors.subject_soft_deleted(subject)
        for rec in live:
            self._check_unreferenced(rec)
        return Outcome([r.version for r in live], [records.encode_delete_subject(subject, live[-1].version)])

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> Outcome:
        self._check_writable(subject)
        rec = self._version(subject, version, deleted=True)
        if parse_version(version) == -1 and permanent:
            raise errors.invalid_version(version)  # Confluent: "latest" cannot be deleted permanently
        self._check_unreferenced(rec)
        if permanent:
            if not rec.deleted:
                raise errors.version_not_soft_deleted(subject, rec.version)
            return Outcome(rec.version, [records.schema_tombstone(subject, rec.version)])
        if rec.deleted:
            raise errors.version_soft_deleted(subject, rec.version)
        deleted = SchemaRecord(rec.subject, rec.version, rec.id, rec.schema_type, rec.schema, rec.references,
                               deleted=True)
        return Outcome(rec.version, [records.encode_schema(deleted)])


# --- helpers ------------------------------------------------------------------------------------
def parse_version(version: int | str) -> int:
    """A version in a path: 1..2^31-1, or ``latest`` / -1 (-1 returned for both)."""
    if isinstance(version, str):
        if version.lower() == "latest":
            return -1
        try:
            version = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
    if version == -1 or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(version)


def check_subject(subject: str) -> None:
    if not subject or any(ord(c) < 0x20 for c in subject) or subject == "__GLOBAL":
        raise errors.invalid_subject(subject)


def _references(value: object) -> tuple[Reference, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise errors.invalid_schema("Invalid schema: references must be a list")
    out = []
    for r in value:
        if not (isinstance(r, Mapping) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
                and isinstance(r.get("version"), int)):
            raise errors.invalid_schema(f"Invalid schema: bad reference {json.dumps(r)[:200]}")
        out.append(Reference(r["name"], r["subject"], r["version"]))
    return tuple(out)


def _ref_doc(r: Reference) -> dict:
    return {"name": r.name, "subject": r.subject, "version": r.version}


def _ref_str(r: Reference) -> str:
    return f"{{name='{r.name}', subject='{r.subject}', version={r.version}}}"


def version_body(rec: SchemaRecord, schema: str | None = None) -> dict:
    """A Schema entity as GET /subjects/{s}/versions/{v} answers it (``schema``: the text in
    a requested format)."""
    body: dict[str, Any] = {"subject": rec.subject, "version": rec.version, "id": rec.id}
    if rec.schema_type != "AVRO":
        body["schemaType"] = rec.schema_type
    if rec.references:
        body["references"] = [_ref_doc(r) for r in rec.references]
    body["schema"] = rec.schema if schema is None else schema
    return body


__all__ = ["Outcome", "RegistryError", "SchemaRegistry", "check_subject", "parse_version", "version_body"]
