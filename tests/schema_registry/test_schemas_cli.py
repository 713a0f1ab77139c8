"""``krait schemas`` against a real broker serving its Schema Registry: what each
subcommand prints (exact lines; ``show`` as JSON), its exit code, and the one-line
``Error: <code>: <message>`` it prints for what the registry refuses or cannot answer.

The commands run in this process through broker.tools.schemas_cli.main with StringIO for
stdout and stderr (a test sees every byte and an escaped exception would fail it); one test
runs ``python -m broker.cli schemas`` as a process, as a user does."""

from __future__ import annotations

import http.server
import io
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from broker import cli
from broker.tools import schemas_cli
from tests.krait_harness import REPO, BrokerProcess, free_port

from .registry_http import call


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(str(tmp_path_factory.mktemp("schemas-cli")), {"krait.schema.registry.listener": f"127.0.0.1:{port}"})
    b.start()
    yield f"http://127.0.0.1:{port}"
    b.stop()


def krait(url: str, *argv: str) -> tuple[int, str, str]:
    """``krait schemas --registry URL ARGV...``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    rc = schemas_cli.main(["--registry", url, *argv], out, err)
    return rc, out.getvalue(), err.getvalue()


def _prefix() -> str:
    """A subject prefix of the test's own, 9 characters (so the list columns are known)."""
    return f"c{uuid.uuid4().hex[:8]}"


def _user(namespace: str, *extra: dict) -> dict:
    """A record schema in a namespace of the test's own (equal schemas share an id across
    subjects, and the module's tests share one registry)."""
    return {"type": "record", "name": "User", "namespace": namespace,
            "fields": [{"name": "name", "type": "string"}, *extra]}


def _compact(schema: dict) -> str:
    """The canonical text the registry stores (Avro's Schema.toString: no spaces)."""
    return json.dumps(schema, separators=(",", ":"))


AGE = {"name": "age", "type": "int", "default": 0}
CITY = {"name": "city", "type": "string"}  # no default: old data cannot be read with it


def _write(tmp_path: Path, name: str, schema: dict, indent: int | None = 2) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(schema, indent=indent))
    return str(path)


def test_register_list_show(registry, tmp_path):
    p = _prefix()
    users, orders = f"{p}-users", f"{p}-orders"
    v1, v2 = _user(p), _user(p, AGE)
    f1, f2 = _write(tmp_path, "v1.avsc", v1), _write(tmp_path, "v2.avsc", v2)
    rc, out, err = krait(registry, "register", users, f1)
    assert (rc, err) == (0, "")
    id1 = call(f"{registry}/subjects/{users}/versions/1")[1]["id"]
    assert out == f"Registered {users} version 1 with id {id1}\n"
    # the same schema again (the file indented, the registry's text compact): no new version
    assert krait(registry, "register", users, f1) == (0, f"Registered {users} version 1 with id {id1}\n", "")
    rc, out, _ = krait(registry, "register", users, f2)
    id2 = call(f"{registry}/subjects/{users}/versions/2")[1]["id"]
    assert id2 > id1 and (rc, out) == (0, f"Registered {users} version 2 with id {id2}\n")
    # a .json file is a JSON Schema
    order_schema = {"type": "object", "title": p, "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    rc, out, _ = krait(registry, "register", orders, _write(tmp_path, "order.json", order_schema))
    order_id = call(f"{registry}/subjects/{orders}/versions/1")[1]["id"]
    assert (rc, out) == (0, f"Registered {orders} version 1 with id {order_id}\n")

    rc, out, err = krait(registry, "list", "--prefix", p)
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        "SUBJECT           VERSIONS",
        f"{orders}  1",
        f"{users}   1,2",
    ]
    # without --prefix: every subject, each line "SUBJECT VERSIONS" in the same columns
    rc, out, _ = krait(registry, "list")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["SUBJECT", "VERSIONS"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows[users] == "1,2" and rows[orders] == "1"
    assert {line.index(line.split()[1], len(line.split()[0])) for line in lines} == {lines[0].index("VERSIONS")}
    # an empty list is the header alone
    assert krait(registry, "list", "--prefix", "nothing-has-this-") == (0, "SUBJECT  VERSIONS\n", "")

    rc, out, err = krait(registry, "show", users)
    assert (rc, err) == (0, "")
    assert json.loads(out) == {"subject": users, "version": 2, "id": id2, "schema": _compact(v2)}
    assert out.startswith('{\n  "subject": ')  # indented for a person
    rc, out, _ = krait(registry, "show", users, "--version", "1")
    assert json.loads(out) == {"subject": users, "version": 1, "id": id1, "schema": _compact(v1)}
    rc, out, _ = krait(registry, "show", "--id", str(id1))
    assert (rc, json.loads(out)) == (0, {"schema": _compact(v1)})
    rc, out, _ = krait(registry, "show", orders)
    shown = json.loads(out)
    assert (rc, shown["schemaType"], json.loads(shown["schema"])) == (0, "JSON", order_schema)


def test_register_with_a_reference(registry, tmp_path):
    p = _prefix()
    address = {"type": "record", "name": "Address", "namespace": p, "fields": [{"name": "street", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": p, "fields": [{"name": "to", "type": f"{p}.Address"}]}
    assert krait(registry, "register", f"{p}-address", _write(tmp_path, "a.avsc", address))[0] == 0
    fo = _write(tmp_path, "o.avsc", order, indent=None)
    rc, _, err = krait(registry, "register", f"{p}-order", fo)
    assert rc == 1 and err.startswith("Error: 42201: Invalid schema ") and err.endswith(
        f"details: Undefined schema: {p}.Address\n") and err.count("\n") == 1
    rc, out, err = krait(registry, "register", f"{p}-order", fo, "--reference", f"{p}.Address={p}-address:1")
    assert (rc, err) == (0, "") and out.startswith(f"Registered {p}-order version 1 with id ")
    shown = json.loads(krait(registry, "show", f"{p}-order")[1])
    assert shown["references"] == [{"name": f"{p}.Address", "subject": f"{p}-address", "version": 1}]
    # a referenced version cannot be deleted
    rc, out, err = krait(registry, "delete", f"{p}-address")
    assert (rc, out) == (1, "")
    assert err == f"Error: 42206: One or more references exist to the schema " \
                  f"{{magic=1,keytype=SCHEMA,subject={p}-address,version=1}}.\n"


def test_check(registry, tmp_path):
    p = _prefix()
    s = f"{p}-users"
    v1 = _user(p)
    krait(registry, "register", s, _write(tmp_path, "v1.avsc", v1))
    good, bad = _write(tmp_path, "good.avsc", _user(p, AGE)), _write(tmp_path, "bad.avsc", _user(p, CITY))
    assert krait(registry, "check", s, good) == (0, f"Compatible with {s}\n", "")
    assert krait(registry, "check", s, good, "--version", "1") == (0, f"Compatible with {s}\n", "")
    incompatible = [
        f"Incompatible with {s}:",
        "  {errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'city' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema', additionalInfo:'city'}",
        "  {oldSchemaVersion: 1}",
        f"  {{oldSchema: '{_compact(v1)}'}}",
        "  {validateFields: 'false', compatibility: 'BACKWARD'}",
    ]
    for extra in ([], ["--version", "1"], ["--version", "latest"]):
        rc, out, err = krait(registry, "check", s, bad, *extra)
        assert (rc, out.splitlines(), err) == (1, incompatible, "")
    # a check registers nothing
    assert call(f"{registry}/subjects/{s}/versions")[1] == [1]
    # the subject's level decides: NONE takes anything
    krait(registry, "config", s, "--set", "NONE")
    assert krait(registry, "check", s, bad) == (0, f"Compatible with {s}\n", "")
    rc, out, err = krait(registry, "check", f"{p}-none", bad, "--version", "latest")
    assert (rc, out, err) == (1, "", f"Error: 40401: Subject '{p}-none' not found.\n")


def test_delete_soft_then_permanent(registry, tmp_path):
    p = _prefix()
    s = f"{p}-users"
    for i, schema in enumerate((_user(p), _user(p, AGE))):
        assert krait(registry, "register", s, _write(tmp_path, f"v{i}.avsc", schema))[0] == 0

    def listed(*flags: str) -> list[str]:
        rc, out, err = krait(registry, "list", "--prefix", p, *flags)
        assert (rc, err) == (0, "")
        return out.splitlines()[1:]

    assert krait(registry, "delete", s, "--version", "1") == (0, f"Deleted {s} version 1\n", "")
    assert listed() == [f"{s}  2"]
    assert listed("--deleted") == [f"{s}  1,2"]
    assert krait(registry, "delete", s, "--version", "2", "--permanent") == (
        1, "", f"Error: 40407: Subject '{s}' Version 2 was not deleted first before being permanently deleted\n")
    assert krait(registry, "delete", s, "--version", "1", "--permanent") == (
        0, f"Deleted {s} version 1 permanently\n", "")
    assert listed("--deleted") == [f"{s}  2"]
    # the whole subject: soft, then permanent
    assert krait(registry, "delete", s, "--permanent") == (
        1, "", f"Error: 40405: Subject '{s}' was not deleted first before being permanently deleted\n")
    assert krait(registry, "delete", s) == (0, f"Deleted {s} versions 2\n", "")
    assert listed() == []
    assert listed("--deleted") == [f"{s}  2"]
    assert krait(registry, "show", s) == (1, "", f"Error: 40401: Subject '{s}' not found.\n")
    assert krait(registry, "delete", s, "--permanent") == (0, f"Deleted {s} versions 2 permanently\n", "")
    assert listed("--deleted") == []


def test_config(registry):
    p = _prefix()
    s, other = f"{p}-users", f"{p}-other"
    assert krait(registry, "config") == (0, "(global): BACKWARD\n", "")
    # a subject without a level of its own shows the global one
    assert krait(registry, "config", s) == (0, f"{s}: BACKWARD\n", "")
    assert krait(registry, "config", s, "--set", "none") == (0, f"{s}: NONE\n", "")
    assert call(f"{registry}/config/{s}")[1] == {"compatibilityLevel": "NONE"}
    assert krait(registry, "config", s) == (0, f"{s}: NONE\n", "")
    try:
        assert krait(registry, "config", "--set", "FULL_TRANSITIVE") == (0, "(global): FULL_TRANSITIVE\n", "")
        assert krait(registry, "config") == (0, "(global): FULL_TRANSITIVE\n", "")
        assert krait(registry, "config", other) == (0, f"{other}: FULL_TRANSITIVE\n", "")
        assert krait(registry, "config", s) == (0, f"{s}: NONE\n", "")
    finally:
        call(f"{registry}/config", "PUT", {"compatibility": "BACKWARD"})
    assert krait(registry, "config", s, "--set", "sideways") == (
        1, "", "Error: 42203: Invalid compatibility level. Valid values are none, backward, forward, full, "
               "backward_transitive, forward_transitive, and full_transitive\n")
    assert krait(registry, "config", s) == (0, f"{s}: NONE\n", "")


def test_errors(registry, tmp_path):
    assert krait(registry, "show", "x") == (1, "", "Error: 40401: Subject 'x' not found.\n")
    assert krait(registry, "delete", "x") == (1, "", "Error: 40401: Subject 'x' not found.\n")
    assert krait(registry, "show", "x", "--version", "1") == (1, "", "Error: 40401: Subject 'x' not found.\n")
    p = _prefix()
    s = f"{p}-users"
    krait(registry, "register", s, _write(tmp_path, "v1.avsc", _user(p)))
    assert krait(registry, "show", s, "--version", "9") == (1, "", "Error: 40402: Version 9 not found.\n")
    assert krait(registry, "show", "--id", "999999") == (1, "", "Error: 40403: Schema 999999 not found\n")
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "strin"}]}')
    rc, out, err = krait(registry, "register", s, str(bad))
    assert (rc, out, err.count("\n")) == (1, "", 1)
    assert err.startswith("Error: 42201: Invalid schema ") and err.endswith("details: Undefined schema: strin\n")
    assert call(f"{registry}/subjects/{s}/versions")[1] == [1]
    # the command's own refusals
    missing = tmp_path / "missing.avsc"
    assert krait(registry, "register", s, str(missing)) == (
        1, "", f"Error: cannot read {missing}: No such file or directory\n")
    assert krait(registry, "register", s, str(bad), "--reference", "Address") == (
        1, "", "Error: bad --reference 'Address': expected NAME=SUBJECT:VERSION\n")
    assert krait(registry, "show") == (1, "", "Error: show needs a SUBJECT or --id\n")
    rc, out, err = krait(registry, "rename", s)
    assert (rc, out) == (1, "") and err.splitlines()[-1] == "(run krait schemas --help for usage)"


def test_unreachable_registry():
    port = free_port()  # nothing listens there
    rc, out, err = krait(f"http://127.0.0.1:{port}", "list")
    assert (rc, out) == (1, "")
    assert err.startswith(f"Error: cannot reach the schema registry at http://127.0.0.1:{port}: ")
    assert err.count("\n") == 1 and "Connection refused" in err
    # as a process: exit 1, that one line on stderr, no traceback
    res = subprocess.run([sys.executable, "-m", "broker.cli", "schemas", "--registry", f"http://127.0.0.1:{port}/",
                          "show", "x"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith(f"Error: cannot reach the schema registry at http://127.0.0.1:{port}: ")
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_as_a_process_with_the_url_from_the_environment(registry, tmp_path):
    """``python -m broker.cli schemas`` (what ``krait schemas`` runs), the registry taken
    from $SCHEMA_REGISTRY_URL; and broker.cli.main dispatching to it."""
    p = _prefix()
    s = f"{p}-users"
    path = _write(tmp_path, "v1.avsc", _user(p))
    env = {**os.environ, "SCHEMA_REGISTRY_URL": registry}
    res = subprocess.run([sys.executable, "-m", "broker.cli", "schemas", "register", s, path],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    schema_id = call(f"{registry}/subjects/{s}/versions/1")[1]["id"]
    assert (res.returncode, res.stdout, res.stderr) == (0, f"Registered {s} version 1 with id {schema_id}\n", "")
    res = subprocess.run([sys.executable, "-m", "broker.cli", "schemas", "list", "--prefix", p],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert (res.returncode, res.stdout.splitlines()) == (0, ["SUBJECT          VERSIONS", f"{s}  1"])


def test_through_the_krait_command(registry, capsys):
    assert cli.main(["schemas", "--registry", registry, "show", "x"]) == 1
    assert capsys.readouterr() == ("", "Error: 40401: Subject 'x' not found.\n")
    assert cli.main(["schemas", "--registry", registry, "config"]) == 0
    assert capsys.readouterr() == ("(global): BACKWARD\n", "")


@pytest.fixture
def html_404():
    """An HTTP server that is no registry: every GET answers 404 with an HTML page."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html>\n<body>Not Found</body>\n</html>\n"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_a_url_that_is_no_registry_is_one_line(html_404):
    rc, out, err = krait(html_404, "list")
    assert (rc, out) == (1, "")
    assert err.startswith("Error: HTTP 404: ") and err.count("\n") == 1


def test_an_invalid_indented_schema_is_one_line(registry, tmp_path):
    bad = _write(tmp_path, "bad.avsc", {"type": "record", "name": "X", "fields": [{"name": "a", "type": "strin"}]})
    rc, out, err = krait(registry, "register", f"{_prefix()}-bad", bad)
    assert (rc, out) == (1, "")
    assert err.startswith("Error: 42201: Invalid schema ") and err.count("\n") == 1
