"""The layering rules of docs/architecture.md, checked on the source of Krait's packages,
of spark_jobs/ (the PySpark data source and jobs) and of bench/:

- no import cycle among all these modules, counting the imports inside functions too (a
  lazy import may save start-up time, as spark_jobs/ does for numba and the compression
  libraries, but never close a cycle); imports under ``if TYPE_CHECKING:`` do not run and
  are not counted. Every module imports alone in a fresh interpreter;
- no import inside a function in the broker's core (a lazy import is how a cycle hides);
- modules are split by subject, not by length: one over 800 lines gets a warning (is it two
  subjects?), one over 1200 fails;
- protocol/, storage/, coordinator/ and txn_coordinator/ import nothing from broker/ (pure
  cores), spark_jobs/ or bench/;
- the daemon imports nothing from broker/tools/ (client-side code; only the CLI does),
  spark_jobs/ or bench/;
- spark_jobs/ reads the files itself: never through storage/ (which opens a log to write
  it) nor the broker; it shares only codecs, protocol/'s and coordinator/'s (the
  ``__consumer_offsets`` records). Nothing imports bench/;
- one handler module per Kafka API, named for it, and ApiVersions lists exactly the
  versions the handler modules declare; docs/architecture.md's API table lists them all.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from kio.schema.index import api_key_map

from broker.handlers import HANDLERS, load_all
from broker.tools.wire import WireClient
from protocol import apis
from protocol.apis import ApiKey

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "storage", "protocol", "coordinator", "txn_coordinator", "share_coordinator", "schema_registry",
            "tables")
CORES = ("protocol", "storage", "coordinator", "txn_coordinator", "share_coordinator", "schema_registry", "tables")
SPARK = "spark_jobs"
# bench/ is a directory of scripts, run with bench/ first on sys.path: its modules import
# each other by bare name (``from peers import ROOT``) or as ``bench.<name>``. Here they are
# all ``bench.<name>``.
BENCH = REPO / "bench"
BENCH_NAMES = {p.stem for p in BENCH.glob("*.py")}
# A module is split where its subject splits, not at a line count (a mixin made only to stay
# under a cap is worse than a long module): past WARN_LINES the test warns, past MAX_LINES it fails.
WARN_LINES = 800
MAX_LINES = 1200
# Imports inside functions that exist for start-up speed or optional dependencies, not to
# break a cycle: the CLI loads a tool only when it runs it.
#: broker/tables/driver.py imports the table code (pyiceberg, pyarrow, the decoders: ~0.8 s)
#: when the first table topic needs it, not at every broker start
LAZY_OK = {"broker/cli.py", "broker/tables/driver.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in (*PACKAGES, SPARK):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    for path in sorted(BENCH.glob("*.py")):
        out[f"bench.{path.stem}"] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _absolute(module: str, name: str) -> str:
    """A bench script's bare import of a sibling (``peers``) is ``bench.peers``."""
    if module.startswith("bench.") and name.split(".")[0] in BENCH_NAMES:
        return f"bench.{name}"
    return name


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = _absolute(module, node.module or "")
    names = [f"{target}.{a.name}" for a in node.names]
    # a module's own parent packages are being imported already: not an edge
    return [n for n in [target, *names] if n in MODULES and not module.startswith(n + ".")]


def _imports(module: str, path: Path, *, in_functions: bool = False) -> set[str]:
    """Modules of ours that ``module`` imports when it is imported (not under
    TYPE_CHECKING), and with ``in_functions`` also those its functions import."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.update(n for a in node.names if (n := _absolute(module, a.name)) in MODULES)
        elif isinstance(node, ast.ImportFrom):
            out.update(_resolve(module, path, node))
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and not in_functions:
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out.discard(module)
    return out


def _runtime_imports(module: str, path: Path) -> set[str]:
    """Modules of ours imported at module level (not under TYPE_CHECKING)."""
    return _imports(module, path)


def test_no_import_cycles():
    graph = {m: _imports(m, p, in_functions=True) for m, p in MODULES.items()}
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


def _package(module: str) -> str:
    return module.split(".")[0]


def test_pure_cores_import_neither_the_broker_nor_the_spark_jobs_nor_bench():
    for m, p in MODULES.items():
        if _package(m) in CORES:
            bad = {n for n in _imports(m, p, in_functions=True) if _package(n) in ("broker", SPARK, "bench")}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_the_daemon_does_not_import_the_tools():
    """broker/tools/ is client-side code (docs/architecture.md): the daemon's modules use
    broker/security/ and protocol/ for what its own outgoing connections need. The Spark
    jobs and the benchmarks are client-side too (``krait spark`` runs the jobs from
    broker/tools/)."""
    for m, p in MODULES.items():
        rel = p.relative_to(REPO).as_posix()
        if not rel.startswith("broker/") or rel.startswith("broker/tools/") or rel in LAZY_OK:
            continue
        bad = {n for n in _imports(m, p, in_functions=True)
               if n.startswith("broker.tools") or _package(n) in (SPARK, "bench")}
        assert not bad, f"{m} imports {sorted(bad)}"


def test_spark_jobs_read_the_files_themselves():
    """spark_jobs/ reads log dirs a broker may be writing, read-only (spark_jobs.logdir):
    never through storage/, which opens a log to write it, nor through the broker. Of
    Krait's packages it shares codecs only: protocol/'s (record batches, compression) and
    coordinator/'s (the ``__consumer_offsets`` records the group jobs decode)."""
    for m, p in MODULES.items():
        if _package(m) == SPARK:
            bad = {n for n in _imports(m, p, in_functions=True)
                   if _package(n) not in (SPARK, "protocol", "coordinator")}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_nothing_imports_bench():
    for m, p in MODULES.items():
        if _package(m) != "bench":
            bad = {n for n in _imports(m, p, in_functions=True) if _package(n) == "bench"}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_no_lazy_imports_in_the_core():
    """The daemon's and its cores' modules only: spark_jobs/ and bench/ import numba, the
    compression libraries, pyspark and plotting inside functions on purpose (a Spark worker
    is a fresh process per task; a narrow read must not pay for them), and
    test_no_import_cycles sees those imports too."""
    offenders = []
    for m, p in MODULES.items():
        rel = str(p.relative_to(REPO))
        if _package(m) not in PACKAGES or rel in LAZY_OK or rel.startswith("broker/tools/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        names = [a.name for a in inner.names]
                        mod = getattr(inner, "module", None) or ""
                        ours = inner.level > 0 if isinstance(inner, ast.ImportFrom) else False
                        ours = ours or _package(mod) in (*PACKAGES, SPARK) or any(
                            _package(n) in (*PACKAGES, SPARK) for n in names)
                        if ours:
                            offenders.append(f"{rel}:{inner.lineno} in {node.name}()")
    assert not offenders, "imports inside functions: " + ", ".join(offenders)


#: Run by test_every_module_imports_alone in a fresh interpreter: imports the third-party
#: packages named on stdin, then forks once per module of ours, so that each child imports
#: that module with none of ours loaded. The interpreter and pyiceberg/pyarrow/pyspark start
#: once instead of ~370 times (over 300 s on a loaded 2-core CI machine, ~25 s this way);
#: a hidden import order among our own modules fails exactly as in a fresh process.
_FORK_IMPORTER = """
import importlib, json, os, sys, traceback
third, modules = json.load(sys.stdin)
for name in third:
    try:
        importlib.import_module(name)
    except BaseException:
        pass  # not a module, or an optional dependency: the child's own import reports what it needs
ours = [m for m in sys.modules if m.split('.')[0] in set(json.loads(sys.argv[1]))]
assert not ours, ours
failed = 0
for kind, name in modules:
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if kind == 'bench':
                sys.path.insert(0, 'bench')
            importlib.import_module(name)
        except BaseException:
            print('import %s alone failed:\\n%s' % (name, traceback.format_exc()[-2000:]), flush=True)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed += 1
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 1:
            print('import %s alone died (status %d)' % (name, status), flush=True)
sys.exit(1 if failed else 0)
"""


def _third_party() -> list[str]:
    """Modules other than ours and the standard library's that our modules import (``from a
    import b`` names both ``a`` and ``a.b``, which may be a submodule)."""
    skip = {*PACKAGES, SPARK, "bench", *BENCH_NAMES, *sys.stdlib_module_names, "__future__"}
    names: set[str] = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.update([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
    # the repository's own directories (tests/, which bench scripts use) are not third-party
    local = {p.stem for p in REPO.iterdir()}
    return sorted(n for n in names if n.split(".")[0] not in skip | local)


IMPORT_SHARDS = 4


@pytest.mark.parametrize("shard", range(IMPORT_SHARDS))
def test_every_module_imports_alone(shard: int):
    """Each module with none of ours imported before it: an import order that only works
    because another module happened to be imported first fails here. A bench module is
    imported as its script imports it: by bare name, with bench/ first on sys.path.

    In shards, so that a loaded CI machine (177 s for all of it beside a chaos run) keeps
    each test item well inside its timeout and xdist can spread them."""
    mods = [("bench", m.removeprefix("bench.")) if _package(m) == "bench" else ("-", m)
            for m in MODULES if not m.endswith("__main__")]  # __main__ runs the program when imported
    ours = json.dumps(sorted({*PACKAGES, SPARK, *BENCH_NAMES}))
    proc = subprocess.Popen([sys.executable, "-c", _FORK_IMPORTER, ours], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.communicate(json.dumps([_third_party(), mods[shard::IMPORT_SHARDS]]), timeout=240)[0]
    assert proc.returncode == 0, out[-6000:]


def test_module_length():
    lengths = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in MODULES.values()}
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
    declared = {k: (r.min_version, r.max_version) for k, r in apis.SUPPORTED.items() if r.advertised}
    hidden = {k for k, r in apis.SUPPORTED.items() if not r.advertised}
    assert advertised == declared and set(advertised) | hidden == set(HANDLERS)
    # share groups are served but kept out of ApiVersions until ShareFetch exists (issue 25)
    assert hidden <= {ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE}


@pytest.mark.parametrize("key", sorted(apis.SUPPORTED))
def test_every_served_version_has_kio_schemas(key):
    r = apis.SUPPORTED[key]
    for v in range(r.served_from, r.max_version + 1):
        assert apis.has_schema(key, v) and apis.has_schema(key, v, "response"), f"{api_key_map[key]} v{v}"


def _api_table() -> list[tuple[list[int], list[str], list[str]]]:
    """The rows of docs/architecture.md's "Where each API lives" table: (keys, Kafka's API
    names, handler modules); keys may be ranges ("24-28")."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("\n## Where each API lives\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or not cells[0][:1].isdigit():
            continue  # not a row, or the header
        keys: list[int] = []
        for part in cells[0].split(","):
            lo, _, hi = part.strip().partition("-")
            keys += range(int(lo), int(hi or lo) + 1)
        rows.append((keys, [n.strip() for n in cells[1].split(",")], re.findall(r"`([a-z_]+\.py)`", cells[2])))
    return rows


def test_the_api_table_lists_every_handler():
    """docs/architecture.md's API table and the registered handlers agree: every served API
    is in it once, with Kafka's name for its key and its handler module."""
    load_all()
    rows = _api_table()
    assert rows, "no API table under '## Where each API lives' in docs/architecture.md"
    listed: list[int] = []
    for keys, names, modules in rows:
        assert len(keys) == len(names) == len(modules), \
            f"table row {keys}: {len(keys)} keys, {len(names)} names, {len(modules)} modules"
        for key, name, module in zip(keys, names, modules, strict=True):
            snake = api_key_map.get(key, "?")
            assert name == "".join(w.capitalize() for w in snake.split("_")), f"key {key} is {snake}, not {name}"
            assert module == f"{snake}.py", f"{name} (key {key}) is handled in {snake}.py, not {module}"
            listed.append(key)
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(k for k in set(listed) if listed.count(k) > 1)}"
    missing = {k: api_key_map[k] for k in sorted(set(HANDLERS) - set(listed))}
    unserved = {k: api_key_map.get(k) for k in sorted(set(listed) - set(HANDLERS))}
    assert not missing and not unserved, f"not in the table: {missing}; in the table but not served: {unserved}"
