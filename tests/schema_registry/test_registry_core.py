"""The registry's pure core (schema_registry/: records, state, operations, compatibility
levels) with the real Avro type: what each write appends to ``_schemas`` (Confluent's JSON,
byte for byte), what replaying those records yields, id allocation (global, one id per
schema, never reused), versions across soft and permanent deletes, and the seven
compatibility levels, transitive or not."""

from __future__ import annotations

import json

import pytest

from schema_registry import errors, providers, records  # noqa: F401  (providers: the schema types)
from schema_registry.errors import RegistryError
from schema_registry.registry import SchemaRegistry
from schema_registry.state import RegistryState


def record(fields: list[tuple[str, str, object]], name: str = "R") -> str:
    out = []
    for fname, ftype, default in fields:
        f = {"name": fname, "type": ftype}
        if default is not ...:
            f["default"] = default
        out.append(f)
    return json.dumps({"type": "record", "name": name, "fields": out})


class Log:
    """The registry over an in-memory list of (key, value) records, replayed as the broker
    replays _schemas: each write's records applied in order, then the answer."""

    def __init__(self, level: str = "BACKWARD") -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.reg = SchemaRegistry(RegistryState(), default_compatibility=level)

    def write(self, op):
        outcome = op(self.reg)
        for key, value in outcome.writes:
            self.reg.state.apply(len(self.records), key, value)
            self.records.append((key, value))
        return outcome.body

    def register(self, subject: str, schema: str, **kw):
        return self.write(lambda r: r.register(subject, {"schema": schema, **kw}))["id"]

    def replayed(self) -> SchemaRegistry:
        state = RegistryState()
        for offset, (key, value) in enumerate(self.records):
            state.apply(offset, key, value)
        return SchemaRegistry(state)


def code(fn) -> int:
    with pytest.raises(RegistryError) as err:
        fn()
    return err.value.error_code


def test_records_are_confluents_json():
    log = Log()
    log.register("orders-value", '"string"')
    key, value = log.records[0]
    assert key == b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}'
    assert value == b'{"subject":"orders-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'
    log.write(lambda r: r.set_config("orders-value", {"compatibility": "full"}))
    assert log.records[-1] == (b'{"keytype":"CONFIG","subject":"orders-value","magic":0}',
                               b'{"compatibilityLevel":"FULL"}')
    log.write(lambda r: r.set_mode(None, {"mode": "READONLY"}))
    assert log.records[-1] == (b'{"keytype":"MODE","subject":null,"magic":0}', b'{"mode":"READONLY"}')
    # a JSON schema names its type; AVRO is left out as Confluent leaves it
    doc = records.SchemaRecord("s", 2, 7, "JSON", "{}").value()
    assert doc == {"subject": "s", "version": 2, "id": 7, "schemaType": "JSON", "schema": "{}", "deleted": False}


def test_ids_are_global_and_one_per_schema():
    log = Log(level="NONE")
    a = log.register("a", '"string"')
    b = log.register("b", '"string"')  # the same schema elsewhere: the same id
    c = log.register("b", '"long"')
    assert (a, b, c) == (1, 1, 2)
    assert log.register("a", ' "string" ') == a  # already there: no new version, nothing written
    assert log.reg.versions("a") == [1]
    assert log.reg.id_subjects(1) == ["a", "b"]
    # replaying the records gives the same state
    again = log.replayed()
    assert again.state.subjects == log.reg.state.subjects and again.state.by_id == log.reg.state.by_id


def test_versions_and_deletes():
    log = Log(level="NONE")
    for t in ('"string"', '"int"', '"long"'):
        log.register("s", t)
    assert log.write(lambda r: r.delete_version("s", "2")) == 2
    assert log.reg.versions("s") == [1, 3] and log.reg.versions("s", deleted=True) == [1, 2, 3]
    assert code(lambda: log.write(lambda r: r.delete_version("s", 2))) == 40406
    assert code(lambda: log.write(lambda r: r.delete_version("s", 3, permanent=True))) == 40407
    assert log.write(lambda r: r.delete_version("s", 2, permanent=True)) == 2
    assert log.reg.versions("s", deleted=True) == [1, 3]
    # a new version after a delete continues the numbering
    log.register("s", '"bytes"')
    assert log.reg.versions("s") == [1, 3, 4]
    assert log.write(lambda r: r.delete_subject("s")) == [1, 3, 4]
    assert code(lambda: log.reg.versions("s")) == 40401
    assert code(lambda: log.write(lambda r: r.delete_subject("s"))) == 40404
    # registering again after a soft delete: versions go on (Confluent keeps the deleted ones)
    log.register("s", '"float"')
    assert log.reg.versions("s") == [5]
    log.write(lambda r: r.delete_subject("s"))
    assert log.write(lambda r: r.delete_subject("s", permanent=True)) == [1, 3, 4, 5]
    assert log.reg.subjects(deleted=True) == []
    # a permanently deleted schema's id is not handed out again
    top = log.reg.state.max_id
    assert code(lambda: log.reg.schema_by_id(top)) == 40403
    assert log.register("t", '"double"') == top + 1
    assert log.replayed().state.max_id == top + 1


def test_lookup_and_version_parsing():
    log = Log()
    log.register("s", record([("a", "int", ...)]))
    found = log.reg.lookup("s", {"schema": record([("a", "int", ...)])})
    assert (found["version"], found["id"]) == (1, 1)
    assert code(lambda: log.reg.lookup("s", {"schema": '"int"'})) == 40403
    assert code(lambda: log.reg.lookup("nope", {"schema": '"int"'})) == 40401
    assert log.reg.version("s", "latest")["version"] == 1 == log.reg.version("s", -1)["version"]
    for bad in ("0", "-2", "x", str(2**31)):
        assert code(lambda b=bad: log.reg.version("s", b)) == 42202
    assert code(lambda: log.reg.version("s", "2")) == 40402


V1 = record([("a", "int", ...)])
V2_ADD_DEFAULT = record([("a", "int", ...), ("b", "int", 0)])
V2_ADD_NO_DEFAULT = record([("a", "int", ...), ("b", "int", ...)])
V3_DROP_A = record([("b", "int", 0)])
V2_A_DEFAULT = record([("a", "int", 0)])
V3_EMPTYISH = record([("c", "string", "")])


@pytest.mark.parametrize("level,history,new,ok", [
    # BACKWARD: the new schema reads the old data
    ("BACKWARD", [V1], V2_ADD_DEFAULT, True),
    ("BACKWARD", [V1], V2_ADD_NO_DEFAULT, False),
    ("BACKWARD", [V1], record([("a", "long", ...)]), True),   # int -> long promotes
    ("BACKWARD", [record([("a", "long", ...)])], V1, False),  # long -> int does not
    # FORWARD: the old schema reads the new data
    ("FORWARD", [V1], V2_ADD_NO_DEFAULT, True),
    ("FORWARD", [V2_ADD_DEFAULT], V3_DROP_A, False),  # the old reader needs a, which has no default
    # FULL: both
    ("FULL", [V1], V2_ADD_DEFAULT, True),
    ("FULL", [V1], V2_ADD_NO_DEFAULT, False),
    # transitive levels check every version, the others the latest only
    ("FORWARD", [V1, V2_A_DEFAULT], V3_EMPTYISH, True),
    ("FORWARD_TRANSITIVE", [V1, V2_A_DEFAULT], V3_EMPTYISH, False),
    ("BACKWARD", [record([("x", "string", ...)]), V1], V2_ADD_DEFAULT, True),
    ("BACKWARD_TRANSITIVE", [record([("x", "string", ...)]), V1], V2_ADD_DEFAULT, False),
    ("FULL_TRANSITIVE", [V1, V2_ADD_DEFAULT], record([("a", "int", ...), ("b", "int", 0), ("c", "int", 1)]), True),
    ("NONE", [V1], '"string"', True),
])
def test_compatibility_levels(level, history, new, ok):
    log = Log(level="NONE")
    for schema in history:
        log.register("s", schema)
    log.write(lambda r: r.set_config("s", {"compatibility": level}))
    assert log.reg.test_compatibility("s", None, {"schema": new})["is_compatible"] is ok
    if ok:
        log.register("s", new)
    else:
        with pytest.raises(RegistryError) as err:
            log.register("s", new)
        assert err.value.status == 409
        assert err.value.message.startswith('Schema being registered is incompatible with an earlier schema for '
                                            'subject "s", details: [{errorType:')
        assert f"compatibility: '{level}'" in err.value.message


def test_forward_messages_name_the_old_schema_as_reader():
    log = Log(level="FORWARD")
    log.register("s", V2_ADD_DEFAULT)
    messages = log.reg.test_compatibility("s", None, {"schema": V3_DROP_A}, verbose=True)["messages"]
    assert "in the old schema has no default value and is missing in the new schema" in messages[0]


def test_modes_and_import():
    log = Log()
    log.write(lambda r: r.set_mode("s", {"mode": "READONLY"}))
    assert code(lambda: log.register("s", '"int"')) == 42205
    assert code(lambda: log.write(lambda r: r.set_mode("s", {"mode": "nope"}))) == 42204
    log.write(lambda r: r.delete_mode("s"))
    log.register("s", '"int"')
    # IMPORT keeps the ids and versions given (a migration from another registry)
    assert code(lambda: log.write(lambda r: r.set_mode(None, {"mode": "IMPORT"}))) == 42205
    log.write(lambda r: r.set_mode(None, {"mode": "IMPORT"}, force=True))
    assert log.register("imported", '"long"', id=100, version=7) == 100
    assert log.reg.version("imported", 7)["id"] == 100
    assert code(lambda: log.register("other", '"bytes"', id=100)) == 42207
    log.write(lambda r: r.set_mode(None, {"mode": "READWRITE"}))
    assert log.register("next", '"double"') == 101


def test_unreadable_records_are_skipped():
    state = RegistryState()
    state.apply(0, b"not json", b"{}")
    state.apply(1, None, b"{}")
    state.apply(2, b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"broken": true}')
    state.apply(3, *records.encode_schema(records.SchemaRecord("s", 1, 5, "AVRO", '"int"')))
    assert state.next_offset == 4 and state.by_id == {5: ("AVRO", '"int"', ())}
