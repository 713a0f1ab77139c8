"""The decoded table modes' schema lookup (:class:`tables.decoded.SchemaSource`) over this
broker's own Schema Registry replica (:mod:`broker.schema_registry.service`): no HTTP, no
forwarding; every broker replays ``_schemas`` itself.

Replaying reads the ``_schemas`` log, which only the event loop may touch (storage is not
thread-safe), while decoding runs on a worker thread. So the driver calls :meth:`prepare`
on the event loop before each commit (catch up to the high watermark, look up the latest
ids the commit may need), and the worker thread's lookups only read the replayed state's
dicts by key (single dict reads, safe beside the event loop's appends under the GIL). A
schema registered after ``prepare`` is seen by the next commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from schema_registry.state import RegistryState
from tables.decoded import RegistrySchema

from ..schema_registry.service import SchemaRegistryService

__all__ = ["RegistrySource"]


class RegistrySource:
    def __init__(self, service: SchemaRegistryService) -> None:
        self.service = service
        self._latest: dict[str, int | None] = {}

    def prepare(self, subjects: Iterable[str]) -> None:
        """On the event loop: apply the new ``_schemas`` records, note the subjects' latest ids."""
        self.service.catch_up()
        state = self.service.core.state
        self._latest = {}
        for s in subjects:
            live = state.versions(s)
            self._latest[s] = live[-1].id if live else None

    def latest_id(self, subject: str) -> int | None:
        return self._latest.get(subject)

    def max_id(self) -> int:
        return self.service.core.state.max_id

    def schema_by_id(self, schema_id: int) -> RegistrySchema | None:
        state = self.service.core.state
        content = state.by_id.get(schema_id)
        if content is None:
            return None
        schema_type, text, refs = content
        resolved: list[tuple[str, str]] = []
        _resolve(state, refs, resolved, set())
        return RegistrySchema(schema_type, text, tuple(resolved))


def _resolve(state: RegistryState, refs: Iterable, out: list[tuple[str, str]], seen: set[tuple[str, int]]) -> None:
    """The references' texts, each after the ones it references itself (fastavro needs a
    named type defined before a schema uses it). A reference that is gone is left out: the
    schema then fails to parse and its records go to the DLQ with that error."""
    for ref in refs:
        versions = state.subjects.get(ref.subject, {})
        rec = versions.get(ref.version)
        if ref.version == -1 and versions:
            rec = versions[max(versions)]
        if rec is None or (rec.subject, rec.version) in seen:
            continue
        seen.add((rec.subject, rec.version))
        _resolve(state, rec.references, out, seen)
        out.append((ref.name, rec.schema))
