"""The layering rules of docs/architecture.md, checked on the source:

- no import cycle among Krait's modules (imports under ``if TYPE_CHECKING:`` do not run
  and are not counted), and every module imports alone in a fresh interpreter;
- no import inside a function in the broker's core (a lazy import is how a cycle hides);
- modules are split by subject, not by length: one over 800 lines gets a warning (is it two
  subjects?), one over 1200 fails (bench/ and spark_jobs/ included);
- protocol/, storage/, coordinator/ and txn_coordinator/ import nothing from broker/ (pure cores);
- the daemon imports nothing from broker/tools/ (client-side code; only the CLI does);
- one handler module per Kafka API, named for it, and ApiVersions lists exactly the
  versions the handler modules declare.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from kio.schema.index import api_key_map

from broker.handlers import HANDLERS
from broker.tools.wire import WireClient
from protocol import apis
from protocol.apis import ApiKey

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "storage", "protocol", "coordinator", "txn_coordinator")
# A module is split where its subject splits, not at a line count (a mixin made only to stay
# under a cap is worse than a long module): past WARN_LINES the test warns, past MAX_LINES it fails.
WARN_LINES = 800
MAX_LINES = 1200
# Imports inside functions that exist for start-up speed or optional dependencies, not to
# break a cycle: the CLI loads a tool only when it runs it.
LAZY_OK = {"broker/cli.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    names = [f"{target}.{a.name}" for a in node.names]
    # a module's own parent packages are being imported already: not an edge
    return [n for n in [target, *names] if n in MODULES and not module.startswith(n + ".")]


def _runtime_imports(module: str, path: Path) -> set[str]:
    """Modules of ours imported at module level (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if not _is_type_checking(node):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in MODULES)
            elif isinstance(node, ast.ImportFrom):
                out.update(_resolve(module, path, node))

    visit(tree.body)
    out.discard(module)
    return out


def test_no_import_cycles():
    graph = {m: _runtime_imports(m, p) for m, p in MODULES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if n not in state:
                dfs(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m)


def test_pure_cores_do_not_import_the_broker():
    for m, p in MODULES.items():
        if m.split(".")[0] in ("protocol", "storage", "coordinator", "txn_coordinator"):
            bad = {n for n in _runtime_imports(m, p) if n.split(".")[0] == "broker"}
            assert not bad, f"{m} imports {bad}"


def test_the_daemon_does_not_import_the_tools():
    """broker/tools/ is client-side code (docs/architecture.md): the daemon's modules use
    broker/security/ and protocol/ for what its own outgoing connections need."""
    for m, p in MODULES.items():
        rel = p.relative_to(REPO).as_posix()
        if not rel.startswith("broker/") or rel.startswith("broker/tools/") or rel in LAZY_OK:
            continue
        bad = {n for n in _runtime_imports(m, p) if n.startswith("broker.tools")}
        assert not bad, f"{m} imports {sorted(bad)}"


def test_no_lazy_imports_in_the_core():
    offenders = []
    for p in MODULES.values():
        rel = str(p.relative_to(REPO))
        if rel in LAZY_OK or rel.startswith("broker/tools/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        names = [a.name for a in inner.names]
                        mod = getattr(inner, "module", None) or ""
                        ours = inner.level > 0 if isinstance(inner, ast.ImportFrom) else False
                        ours = ours or mod.split(".")[0] in PACKAGES or any(n.split(".")[0] in PACKAGES for n in names)
                        if ours:
                            offenders.append(f"{rel}:{inner.lineno} in {node.name}()")
    assert not offenders, "imports inside functions: " + ", ".join(offenders)


def test_every_module_imports_alone():
    """Each module in a fresh interpreter: an import order that only works because another
    module happened to be imported first fails here."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    for m in MODULES:
        if m.endswith("__main__"):
            continue  # runs the program when imported
        r = subprocess.run([sys.executable, "-c", code, m], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"import {m} alone failed:\n{r.stderr[-2000:]}"


def test_module_length():
    # the benchmarks and Spark jobs too, though they are not part of the import rules above
    paths = [*MODULES.values(), *sorted((REPO / "bench").glob("*.py")), *sorted((REPO / "spark_jobs").glob("*.py"))]
    lengths = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in paths}
    long = {m: n for m, n in lengths.items() if WARN_LINES < n <= MAX_LINES}
    if long:
        warnings.warn(f"modules over {WARN_LINES} lines (split them if they hold more than one subject): {long}",
                      stacklevel=1)
    too_long = {m: n for m, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"


def test_one_handler_module_per_api_named_for_it():
    assert HANDLERS, "no handlers registered"
    for key, fn in HANDLERS.items():
        module = fn.__module__.rpartition(".")[2]
        assert module == api_key_map[key], f"{api_key_map[key]} (key {key}) is handled in {fn.__module__}"
    assert set(HANDLERS) == set(apis.SUPPORTED), "every served API has a handler and a declared range"
    handler_files = {p.stem for p in (REPO / "broker" / "handlers").glob("*.py")} - {"__init__"}
    assert handler_files == {api_key_map[k] for k in HANDLERS}, "a handler module that serves no API"


def test_api_versions_is_derived_from_the_handlers(broker):
    with WireClient("127.0.0.1", broker.port, timeout=10, negotiate=False) as c:
        resp = c.request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    declared = {k: (r.min_version, r.max_version) for k, r in apis.SUPPORTED.items()}
    assert advertised == declared and set(advertised) == set(HANDLERS)


@pytest.mark.parametrize("key", sorted(apis.SUPPORTED))
def test_every_served_version_has_kio_schemas(key):
    r = apis.SUPPORTED[key]
    for v in range(r.served_from, r.max_version + 1):
        assert apis.has_schema(key, v) and apis.has_schema(key, v, "response"), f"{api_key_map[key]} v{v}"
