"""broker.tables.registry_source over the pure registry core (no broker, no sockets): ids,
references resolved transitively and in order, the subject's latest version as of the last
prepare, the highest id; and a value whose schema references another decodes into columns."""

from __future__ import annotations

import io
import json
import struct

from fastavro import parse_schema, schemaless_writer

from broker.tables.registry_source import RegistrySource
from schema_registry import providers  # noqa: F401  (fills the schema types)
from schema_registry.registry import SchemaRegistry
from tables.catalog import open_catalog
from tables.modes import VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST
from tables.topic_table import TopicTable
from tests.tables.test_decoded import region, rows_of

ADDRESS = {"type": "record", "name": "Address", "namespace": "krait", "fields": [
    {"name": "city", "type": "string"}, {"name": "geo", "type": "krait.Geo"}]}
GEO = {"type": "record", "name": "Geo", "namespace": "krait", "fields": [{"name": "lat", "type": "double"}]}
USER = {"type": "record", "name": "User", "namespace": "krait", "fields": [
    {"name": "name", "type": "string"}, {"name": "home", "type": "krait.Address"}]}


class Service:
    """What RegistrySource uses of the broker's registry service."""

    def __init__(self) -> None:
        self.core = SchemaRegistry()
        self.offset = 0
        self.catch_ups = 0

    def catch_up(self) -> None:
        self.catch_ups += 1

    def holds_replica(self) -> bool:
        return True

    def register(self, subject: str, body: dict) -> int:
        out = self.core.register(subject, body)
        for key, value in out.writes:  # what replaying _schemas would apply
            self.core.state.apply(self.offset, key, value)
            self.offset += 1
        return out.body["id"]


def test_lookups_and_references(tmp_path):
    svc = Service()
    geo = svc.register("geo", {"schema": json.dumps(GEO)})
    addr = svc.register("address", {"schema": json.dumps(ADDRESS),
                                    "references": [{"name": "krait.Geo", "subject": "geo", "version": 1}]})
    user = svc.register("people-value", {"schema": json.dumps(USER),
                                         "references": [{"name": "krait.Address", "subject": "address",
                                                         "version": 1}]})
    src = RegistrySource(svc)
    src.prepare(["people-value", "nobody-value"])
    assert svc.catch_ups == 1
    assert (src.latest_id("people-value"), src.latest_id("nobody-value")) == (user, None)
    assert src.max_id() == max(geo, addr, user)
    s = src.schema_by_id(user)
    assert s.schema_type == "AVRO"
    assert [name for name, _ in s.references] == ["krait.Geo", "krait.Address"]  # Geo first: Address uses it
    assert src.schema_by_id(999) is None

    # a value of the referencing schema decodes into nested columns
    buf = io.BytesIO()
    named: dict = {}
    parse_schema(GEO, named_schemas=named)
    parse_schema(ADDRESS, named_schemas=named)
    schemaless_writer(buf, parse_schema(USER, named_schemas=named),
                      {"name": "ann", "home": {"city": "Oslo", "geo": {"lat": 59.9}}})
    t = TopicTable(open_catalog(str(tmp_path / "logs")), "people", src, mode=VALUE_SCHEMA_ID_PREFIX)
    r = region(0, [b"\x00" + struct.pack(">I", user) + buf.getvalue()])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX)
    assert [(g["name"], g["home"]) for g in rows_of(t.main)] == [("ann", {"city": "Oslo", "geo": {"lat": 59.9}})]
    r = region(0, [buf.getvalue()], start=1)  # value_schema_latest: the bare payload
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_LATEST)
    assert len(rows_of(t.main)) == 2
